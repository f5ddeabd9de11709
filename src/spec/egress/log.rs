//! The decision log: one JSON line per connection, written by the gate on
//! its stdout, read back by the host (`sbx egress log`, `sbx egress policy`).
//! The gate faces the sandbox, so the host validates every line before it
//! prints or uses one: bounded size, no control characters (a line reaches
//! the operator's terminal), known decisions, parseable addresses.

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::rule::name_problem;
use super::{AllowRule, DEFAULT_PORT};

pub const ALLOW: &str = "allow";
pub const DENY: &str = "deny";
/// The longest line the host accepts; a real one is a few hundred bytes.
pub const MAX_LINE: usize = 4096;
/// The longest text field (a host as the client sent it, a reason).
const MAX_FIELD: usize = 1024;
/// The longest logged method and path of a request.
const MAX_METHOD: usize = 32;
const MAX_PATH: usize = 512;
/// What a scrubbed line shows where a placeholder or a value was: a DNS
/// label, so an allowed host stays a valid one.
pub const REDACTED: &str = "sbx-redacted";

/// One connection through (or refused by) the gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogLine {
    /// When the connection was decided, RFC 3339 UTC.
    pub time: String,
    pub sandbox: String,
    /// The host as requested (a name or an address literal).
    pub host: String,
    pub port: u16,
    /// The address connected to (IP), None when refused before resolving.
    pub addr: Option<String>,
    /// `allow` or `deny`.
    pub decision: String,
    /// The rule that allowed it (`AllowRule` display, `observe`).
    pub rule: Option<String>,
    /// Why it was refused.
    pub reason: Option<String>,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub duration_ms: u64,
    /// A request the gate parsed on a host whose TLS it terminates: its
    /// method, its path without the query, the status it got, and the
    /// names of the secrets put in (never a value or a placeholder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

impl LogLine {
    /// One line of `docker logs GATE`, checked; the error says why it was
    /// refused (the caller reports it without echoing the line).
    pub fn parse(line: &str) -> Result<LogLine, String> {
        if line.len() > MAX_LINE {
            return Err(format!("the line is {} bytes, more than {MAX_LINE}", line.len()));
        }
        let l: LogLine = serde_json::from_str(line).map_err(|e| format!("not a decision log line: {e}"))?;
        l.validate()?;
        Ok(l)
    }

    /// The line as the gate writes it: every needle (a placeholder or a
    /// value) in a text field the sandbox chose replaced by [`REDACTED`],
    /// ASCII case ignored (a host or a server name may come in any case),
    /// then each field cut to its bound: cut after scrubbing, a cut never
    /// leaves part of a needle.
    pub fn scrubbed(&self, needles: &[&str]) -> LogLine {
        let field = |v: &str, max: usize| bounded(&scrub(v, needles), max);
        let opt = |v: &Option<String>, max: usize| v.as_deref().map(|v| field(v, max));
        LogLine {
            host: field(&self.host, MAX_FIELD),
            rule: opt(&self.rule, MAX_FIELD),
            reason: opt(&self.reason, MAX_FIELD),
            method: opt(&self.method, MAX_METHOD),
            path: opt(&self.path, MAX_PATH),
            ..self.clone()
        }
    }

    /// What the host requires of a line before it shows or uses it.
    pub fn validate(&self) -> Result<(), String> {
        let fields = [("time", Some(&self.time)), ("sandbox", Some(&self.sandbox)), ("host", Some(&self.host))];
        let optional = [
            ("addr", self.addr.as_ref()),
            ("rule", self.rule.as_ref()),
            ("reason", self.reason.as_ref()),
            ("method", self.method.as_ref()),
            ("path", self.path.as_ref()),
        ];
        let names = self.secrets.iter().map(|s| ("secrets", Some(s)));
        if self.secrets.len() > 64 {
            return Err("the secrets field names more than 64 secrets".into());
        }
        for (name, value) in fields.into_iter().chain(optional).chain(names) {
            let Some(v) = value else { continue };
            if v.len() > MAX_FIELD || v.chars().any(char::is_control) {
                return Err(format!("the {name} field is over {MAX_FIELD} bytes or holds control characters"));
            }
        }
        if self.time.is_empty() || self.sandbox.is_empty() || self.host.is_empty() {
            return Err("time, sandbox and host must not be empty".into());
        }
        if let Some(a) = &self.addr {
            a.parse::<IpAddr>().map_err(|_| format!("the addr {a:?} is not an IP address"))?;
        }
        match self.decision.as_str() {
            ALLOW => {
                if self.port == 0 {
                    return Err("an allowed connection has port 0".into());
                }
                if host_literal(&self.host).is_none() && name_problem(&self.host).is_some() {
                    return Err(format!("an allowed connection has the host {:?}, no DNS name or address", self.host));
                }
                Ok(())
            }
            DENY => Ok(()),
            other => Err(format!("the decision {other:?} is neither {ALLOW:?} nor {DENY:?}")),
        }
    }
}

/// `text` with each of `needles` (ASCII case ignored) replaced by
/// [`REDACTED`], in one pass: a replacement is never searched again.
fn scrub(text: &str, needles: &[&str]) -> String {
    let lower = text.to_ascii_lowercase();
    let needles: Vec<String> = needles.iter().filter(|n| !n.is_empty()).map(|n| n.to_ascii_lowercase()).collect();
    if !needles.iter().any(|n| lower.contains(n.as_str())) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        // ASCII lower-casing keeps every byte offset and char boundary.
        let hit = needles.iter().filter(|n| lower[i..].starts_with(n.as_str())).map(String::len).max();
        match hit {
            Some(n) => {
                out.push_str(REDACTED);
                i += n;
            }
            None => {
                let c = text[i..].chars().next().unwrap_or_default();
                out.push(c);
                i += c.len_utf8().max(1);
            }
        }
    }
    out
}

/// At most `max` bytes of `text`, cut at a char boundary, `...` marking a cut.
fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max - 3;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// The minimal `--allow` values that allow what the log shows allowed:
/// each allowed host and port once (`HOST` alone for 443, IPv6 literals in
/// brackets), plus any CIDR rule a connection needed (an allowed name that
/// resolved to a private address), sorted.
pub fn suggested_allows(lines: &[LogLine]) -> Vec<String> {
    let mut out = BTreeSet::new();
    for l in lines.iter().filter(|l| l.decision == ALLOW && l.validate().is_ok()) {
        let host = match host_literal(&l.host) {
            Some(IpAddr::V6(v)) => format!("[{v}]"),
            Some(ip) => ip.to_string(),
            None => l.host.strip_suffix('.').unwrap_or(&l.host).to_ascii_lowercase(),
        };
        out.insert(if l.port == DEFAULT_PORT { host } else { format!("{host}:{}", l.port) });
        let cidr = l.rule.as_deref().and_then(|r| AllowRule::parse(r, true).ok());
        if let Some(rule @ AllowRule::Cidr { .. }) = cidr {
            out.insert(rule.to_string());
        }
    }
    out.into_iter().collect()
}

/// The address a host field names, if it is a literal (`[v6]` too).
fn host_literal(host: &str) -> Option<IpAddr> {
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    bare.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(host: &str, port: u16, decision: &str, rule: Option<&str>) -> LogLine {
        LogLine {
            time: "2026-11-30T03:20:13.123Z".into(),
            sandbox: "0123456789abcdef".into(),
            host: host.into(),
            port,
            addr: (decision == ALLOW).then(|| "203.0.113.5".into()),
            decision: decision.into(),
            rule: rule.map(str::to_string),
            reason: (decision == DENY).then(|| "no rule allows it".into()),
            bytes_up: 517,
            bytes_down: 4_194_304,
            duration_ms: 12,
            method: None,
            path: None,
            status: None,
            secrets: Vec::new(),
        }
    }

    #[test]
    fn a_request_line_carries_method_path_status_and_secret_names() {
        let mut l = line("api.example", 443, ALLOW, Some("api.example"));
        l.method = Some("POST".into());
        l.path = Some("/v1/messages".into());
        l.status = Some(200);
        l.secrets = vec!["API_KEY".into()];
        let json = serde_json::to_string(&l).unwrap();
        assert_eq!(LogLine::parse(&json).unwrap(), l);
        let mut bad = l.clone();
        bad.path = Some("/a\u{1b}[2J".into());
        bad.secrets = vec!["A\nB".into()];
        assert!(LogLine::parse(&serde_json::to_string(&bad).unwrap()).is_err());
    }

    #[test]
    fn a_scrubbed_line_holds_no_needle_in_any_case_nor_part_of_one_at_a_cut() {
        const PH: &str = "sk-Ab12Cd34";
        let mut l = line(&format!("{}.example", PH.to_ascii_lowercase()), 443, DENY, None);
        l.method = Some(PH.into());
        l.path = Some(format!("/{}/{PH}", "x".repeat(MAX_PATH - 6)));
        l.reason = Some(format!("TLS server name \"{}\" and value v4lue{PH}v4lue", PH.to_ascii_uppercase()));
        l.rule = Some(format!("{PH} {}", "é".repeat(MAX_FIELD)));
        let s = l.scrubbed(&[PH, "v4lue", ""]);
        let text = serde_json::to_string(&s).unwrap();
        for bad in ["ab12cd34", "ab12", "v4lue"] {
            assert!(!text.to_ascii_lowercase().contains(bad), "{bad}: {text}");
        }
        assert_eq!(s.host, "sbx-redacted.example");
        assert_eq!(s.method.as_deref(), Some(REDACTED));
        assert!(s.path.as_deref().unwrap().starts_with("/xxx") && s.path.as_deref().unwrap().len() <= MAX_PATH);
        assert_eq!(
            s.reason.as_deref(),
            Some("TLS server name \"sbx-redacted\" and value sbx-redactedsbx-redactedsbx-redacted")
        );
        assert!(s.rule.as_deref().unwrap().ends_with("é..."), "{:?}", s.rule);
        assert_eq!(LogLine::parse(&text).unwrap(), s);
        assert_eq!(l.scrubbed(&[]).host, l.host);
    }

    #[test]
    fn a_line_round_trips_as_one_json_line() {
        let l = line("pypi.org", 443, ALLOW, Some("pypi.org:443"));
        let json = serde_json::to_string(&l).unwrap();
        assert!(!json.contains('\n'));
        assert_eq!(LogLine::parse(&json).unwrap(), l);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = vec![
            "time",
            "sandbox",
            "host",
            "port",
            "addr",
            "decision",
            "rule",
            "reason",
            "bytes_up",
            "bytes_down",
            "duration_ms",
        ];
        want.sort();
        assert_eq!(keys, want);
        let denied = line("evil.example", 443, DENY, None);
        assert_eq!(LogLine::parse(&serde_json::to_string(&denied).unwrap()).unwrap(), denied);
    }

    #[test]
    fn hostile_lines_are_refused() {
        let ok = serde_json::to_value(line("pypi.org", 443, ALLOW, Some("pypi.org:443"))).unwrap();
        let with = |key: &str, value: serde_json::Value| {
            let mut v = ok.clone();
            v[key] = value;
            v.to_string()
        };
        let cases = [
            ("not json".to_string(), "not a decision log line"),
            (with("decision", "maybe".into()), "neither"),
            (with("host", "pypi.org\u{1b}]0;pwned\u{7}".into()), "control"),
            (with("reason", "a\nb".into()), "control"),
            (with("host", "x".repeat(2000).into()), "over 1024"),
            (with("addr", "not-an-ip".into()), "not an IP address"),
            (with("addr", "203.0.113.5:443".into()), "not an IP address"),
            (with("host", "bad host".into()), "no DNS name"),
            (with("host", "".into()), "empty"),
            (with("port", 0.into()), "port 0"),
            (with("port", 70000.into()), "not a decision log line"),
            (with("bytes_up", (-1).into()), "not a decision log line"),
            (with("extra", 1.into()), "not a decision log line"),
            (format!("{}{}", " ".repeat(MAX_LINE), ok), "more than"),
        ];
        for (text, why) in cases {
            let err = LogLine::parse(&text).unwrap_err();
            assert!(err.contains(why), "{text:.80}: {err}");
        }
        // A refused request may carry any printable host: it is logged as sent.
        let odd = with("host", "we!rd$host".into()).replace("\"allow\"", "\"deny\"");
        assert_eq!(LogLine::parse(&odd).unwrap().host, "we!rd$host");
    }

    #[test]
    fn suggestions_are_the_minimal_allow_flags() {
        let lines = [
            line("pypi.org", 443, ALLOW, Some(crate::spec::egress::OBSERVE)),
            line("PyPI.org.", 443, ALLOW, Some(crate::spec::egress::OBSERVE)),
            line("files.pythonhosted.org", 443, ALLOW, Some("*.pythonhosted.org:443")),
            line("example.com", 8080, ALLOW, None),
            line("evil.example", 443, DENY, None),
            line("203.0.113.9", 443, ALLOW, Some("203.0.113.0/24:443")),
            line("2001:db8::1", 80, ALLOW, None),
            line("[2001:db8::2]", 443, ALLOW, None),
            line("stand-in.example", 443, ALLOW, Some("172.18.0.0/16:443")),
            line("bad host", 443, ALLOW, None),
        ];
        let got = suggested_allows(&lines);
        assert_eq!(
            got,
            [
                "172.18.0.0/16:443",
                "203.0.113.0/24:443",
                "203.0.113.9",
                "[2001:db8::1]:80",
                "[2001:db8::2]",
                "example.com:8080",
                "files.pythonhosted.org",
                "pypi.org",
                "stand-in.example",
            ]
        );
        for s in &got {
            AllowRule::parse(s, false).unwrap_or_else(|e| panic!("{s} is no valid --allow: {e}"));
        }
        assert!(suggested_allows(&[]).is_empty());
    }
}

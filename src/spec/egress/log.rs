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

    /// What the host requires of a line before it shows or uses it.
    pub fn validate(&self) -> Result<(), String> {
        let fields = [("time", Some(&self.time)), ("sandbox", Some(&self.sandbox)), ("host", Some(&self.host))];
        let optional = [("addr", self.addr.as_ref()), ("rule", self.rule.as_ref()), ("reason", self.reason.as_ref())];
        for (name, value) in fields.into_iter().chain(optional) {
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
        }
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

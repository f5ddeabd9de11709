//! Method and path rules (`--allow 'HOST[:PORT] METHOD[,METHOD...] PATH'`)
//! and the hosts whose TLS the gate terminates (a secret or such a rule
//! names them): what the gate checks on every request it parses there.

use serde::{Deserialize, Serialize};

use crate::model::invalid::Invalid;

/// One request rule of a terminated host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestRule {
    /// Upper-case HTTP methods (tokens), at least one.
    pub methods: Vec<String>,
    /// A normal path (see `normal_path`) that is a prefix, or a glob where
    /// `*` matches any run of characters but '/'... as `matches` says.
    pub path: String,
}

/// A host:port the gate terminates TLS for, with its rules (none: every
/// request) and the names of the secrets it puts in there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Terminated {
    pub host: String,
    pub port: u16,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RequestRule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

impl RequestRule {
    /// The `METHOD[,METHOD...] PATH` part of an `--allow` with spaces.
    /// Methods are HTTP tokens, upper-cased, at least one; `*` is no method
    /// (a rule names what it lets through). The path starts with '/', is
    /// in normal form (see `normal_path`), has no query, and may hold `*`.
    pub fn parse(methods: &str, path: &str) -> Result<RequestRule, Invalid> {
        let bad = |why: String| Invalid::new("--allow", format!("{methods} {path}"), why);
        let mut list = Vec::new();
        for m in methods.split(',') {
            let m = m.trim().to_ascii_uppercase();
            if m.is_empty() || m == "*" || !m.bytes().all(is_token) {
                return Err(bad(format!("{m:?} is no HTTP method (GET, POST, ... separated by commas)")));
            }
            if !list.contains(&m) {
                list.push(m);
            }
        }
        if !path.starts_with('/') {
            return Err(bad("the path must start with '/'".into()));
        }
        match normal_path(path) {
            Ok((p, None)) if p == path => {}
            Ok((_, Some(_))) => return Err(bad("a rule matches the path only: no '?query'".into())),
            Ok((p, None)) => return Err(bad(format!("the path is not in normal form; write {p}"))),
            Err(e) => return Err(bad(e)),
        }
        Ok(RequestRule { methods: list, path: path.to_string() })
    }

    /// Whether `method` on `path` (already `normal_path`) is allowed. A path
    /// without `*` is a prefix at a segment boundary: `/a/b` matches `/a/b`
    /// and `/a/b/...`, never `/a/bc` (a rule ending in '/' matches what is
    /// under it). With `*` the whole path must match, each `*` standing for
    /// any run of characters but '/'.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        if !self.methods.iter().any(|m| m == method) {
            return false;
        }
        let rule = self.path.as_str();
        if rule.contains('*') {
            return glob(rule.as_bytes(), path.as_bytes());
        }
        match path.strip_prefix(rule) {
            Some(rest) => rest.is_empty() || rule.ends_with('/') || rest.starts_with('/'),
            None => false,
        }
    }
}

impl std::fmt::Display for RequestRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.methods.join(","), self.path)
    }
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `*` matches any run of bytes but '/'; everything else itself. In
/// linear time (a path is up to 64 KiB, and a rule like `/a*a*a*b` made a
/// backtracking matcher take seconds per request): segment by segment,
/// each literal between two `*` placed leftmost, which is never worse.
fn glob(pat: &[u8], s: &[u8]) -> bool {
    let (mut pats, mut segs) = (pat.split(|&b| b == b'/'), s.split(|&b| b == b'/'));
    loop {
        match (pats.next(), segs.next()) {
            (None, None) => return true,
            (Some(p), Some(s)) if glob_segment(p, s) => {}
            _ => return false,
        }
    }
}

/// `*` matches any run of bytes (`s` holds no '/').
fn glob_segment(pat: &[u8], s: &[u8]) -> bool {
    let mut parts = pat.split(|&b| b == b'*');
    let first = parts.next().unwrap_or_default();
    let rest: Vec<&[u8]> = parts.collect();
    let Some((last, middle)) = rest.split_last() else { return pat == s };
    if s.len() < first.len() + last.len() || !s.starts_with(first) || !s.ends_with(last) {
        return false;
    }
    let mut window = &s[first.len()..s.len() - last.len()];
    for m in middle.iter().filter(|m| !m.is_empty()) {
        match memchr::memmem::find(window, m) {
            Some(at) => window = &window[at + m.len()..],
            None => return false,
        }
    }
    true
}

/// The path of a request target as rules match it and as it goes upstream,
/// and its query (kept as sent, for upstream only): dot segments resolved
/// (after decoding, so `%2e%2e` is `..`; above the root is refused),
/// percent-encoded unreserved characters decoded, other escapes upper-cased.
/// Err (the request is refused): `%2f`, `%5c`, `\`, `;` or `%3b`, NUL or
/// any control character, a bad escape, an empty segment (`//`), a fragment, a byte
/// that is no path character.
pub fn normal_path(raw: &str) -> Result<(String, Option<String>), String> {
    let (path, query) = match raw.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (raw, None),
    };
    if let Some(q) = query {
        if !q.bytes().all(|b| b.is_ascii_graphic() && b != b'#') {
            return Err("the query holds a control, space, '#' or non-ASCII byte".into());
        }
    }
    if !path.starts_with('/') {
        return Err("the path does not start with '/'".into());
    }
    let bytes = path.as_bytes();
    let mut decoded = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = |c: Option<&u8>| c.and_then(|c| (*c as char).to_digit(16));
            let (Some(h), Some(l)) = (hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) else {
                return Err("the path holds a bad percent escape".into());
            };
            let v = (h * 16 + l) as u8;
            if unreserved(v) {
                decoded.push(v as char);
            } else if v == b'/' || v == b'\\' || v == b';' || v < 0x20 || v == 0x7f {
                return Err(format!("the path holds %{v:02X} (an encoded '/', '\\', ';' or control character)"));
            } else {
                decoded.push_str(&format!("%{v:02X}"));
            }
            i += 3;
            continue;
        }
        if b == b'\\' {
            return Err("the path holds a backslash".into());
        }
        // Tomcat and Spring take `;...` in a segment for a parameter and
        // drop it: `/a/..;/b` is their `/b`, while a rule sees a segment `..;`.
        if b == b';' {
            return Err("the path holds ';' (a path parameter, which some servers drop before resolving '..')".into());
        }
        if !(unreserved(b) || b"/!$&'()*+,=:@".contains(&b)) {
            return Err(format!("the path holds {:?}, which is no path character", b as char));
        }
        decoded.push(b as char);
        i += 1;
    }
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = decoded[1..].split('/').collect();
    let last = segments.len() - 1;
    let mut trailing = false;
    for (n, seg) in segments.iter().enumerate() {
        trailing = false;
        match *seg {
            "" if n == last => trailing = true,
            "" => return Err("the path holds an empty segment ('//')".into()),
            "." => trailing = true,
            ".." => {
                if out.pop().is_none() {
                    return Err("the path climbs above the root ('..')".into());
                }
                trailing = true;
            }
            s => out.push(s),
        }
    }
    let mut normal = String::with_capacity(decoded.len());
    for s in &out {
        normal.push('/');
        normal.push_str(s);
    }
    if trailing || out.is_empty() {
        normal.push('/');
    }
    Ok((normal, query.map(str::to_string)))
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~".contains(&b)
}

#[cfg(test)]
mod tests;

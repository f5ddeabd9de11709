//! A request on a terminated connection: parsed strictly (the sandbox
//! wrote it), held to the host, its rules and its secrets' placeholders,
//! and rebuilt canonically for the upstream with the values put in.

use base64::Engine;

use super::wire::Body;
use crate::gate::head::{is_token, refusal, Refusal};
use crate::spec::egress::vault::SecretValue;
use crate::spec::egress::LogLine;
use crate::spec::egress::{normal_path, RequestRule};

/// What the request is checked against.
pub struct Host<'a> {
    pub host: &'a str,
    pub port: u16,
    /// No rules: every request.
    pub rules: &'a [RequestRule],
    pub secrets: Vec<&'a SecretValue>,
}

#[derive(Debug)]
pub struct Req {
    pub method: String,
    /// The rule that allowed it, if the host has rules.
    pub rule: Option<String>,
    /// The head for the upstream, values in.
    pub head: Vec<u8>,
    pub body: Body,
    /// The client wants the connection closed after this exchange.
    pub close: bool,
    /// The client speaks HTTP/1.0 (no chunked answers).
    pub http10: bool,
    /// The client waits for `100 Continue` before its body.
    pub expect: bool,
    /// The names of the secrets put in.
    pub secrets: Vec<String>,
    /// Each Basic token the gate produced, and what the client sent in its
    /// place: replaced back in the response (with every value of the host).
    pub produced: Vec<(Vec<u8>, Vec<u8>)>,
    /// The secrets put in from a bare or Bearer placeholder (not Basic).
    direct: Vec<String>,
}

fn bad(why: impl Into<String>) -> Refusal {
    refusal(400, why)
}

/// Parse and check one request head (ending in CRLF CRLF).
pub fn prepare(head: &[u8], h: &Host, line: &mut LogLine) -> Result<Req, Refusal> {
    let text = std::str::from_utf8(head).map_err(|_| bad("the request head is not UTF-8"))?;
    let body = text.strip_suffix("\r\n\r\n").ok_or_else(|| bad("the request head does not end in CRLF CRLF"))?;
    let mut lines = body.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("a malformed request line"));
    };
    if method.is_empty() || !method.bytes().all(is_token) || method == "CONNECT" {
        return Err(bad("a malformed method (or CONNECT inside a terminated tunnel)"));
    }
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => return Err(bad("only HTTP/1.1 and HTTP/1.0 requests")),
    };
    if !target.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad("the request target holds control, space or non-ASCII bytes"));
    }
    let origin = origin_form(target, h)?;
    let mut headers = Vec::new();
    for l in lines {
        if l.starts_with([' ', '\t']) {
            return Err(bad("a folded header line (obs-fold)"));
        }
        if l.bytes().any(|b| b == b'\r' || b == b'\n') {
            return Err(bad("a bare CR or LF in the request head"));
        }
        let (k, v) = l.split_once(':').ok_or_else(|| bad("a malformed header line"))?;
        if k.is_empty() || !k.bytes().all(is_token) {
            return Err(bad("a malformed header name"));
        }
        if v.bytes().any(|b| b.is_ascii_control() && b != b'\t' || b >= 0x80) {
            return Err(bad("a control or non-ASCII byte in a header value"));
        }
        headers.push((k, v.trim_matches([' ', '\t'])));
    }
    line.method = Some(method.to_string());
    let (path, query) = normal_path(origin).map_err(|e| refusal(400, format!("the path: {e}")))?;
    line.path = Some(path.clone());
    let rule = match h.rules {
        [] => None,
        rules => match rules.iter().find(|r| r.matches(method, &path)) {
            Some(r) => Some(r.to_string()),
            None => {
                let list: Vec<String> = rules.iter().map(|r| r.to_string()).collect();
                return Err(refusal(
                    403,
                    format!("no rule allows {method} {path} on {} (rules: {})", h.host, list.join("; ")),
                ));
            }
        },
    };
    let mut req = Req {
        method: method.to_string(),
        rule,
        head: Vec::new(),
        body: Body::Done,
        close: http10,
        http10,
        expect: false,
        secrets: Vec::new(),
        produced: Vec::new(),
        direct: Vec::new(),
    };
    let target = match &query {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    for s in &h.secrets {
        if target.contains(&s.placeholder) {
            return Err(placeholder_refusal(s, "the request target"));
        }
    }
    let kept = framing(&headers, &mut req, h)?;
    let mut out = format!("{method} {target} HTTP/1.1\r\n");
    out.push_str(&match h.port {
        443 => format!("Host: {}\r\n", bracketed(h.host)),
        p => format!("Host: {}:{p}\r\n", bracketed(h.host)),
    });
    for (k, v) in kept {
        let v = put_in(k, v, h, &mut req)?;
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("Accept-Encoding: identity\r\n");
    match req.body {
        Body::Length(n) => out.push_str(&format!("Content-Length: {n}\r\n")),
        Body::Chunked { .. } => out.push_str("Transfer-Encoding: chunked\r\n"),
        _ => {}
    }
    if req.close {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    // The last word: the raw head holds each placeholder exactly where a
    // bare or Bearer form was put in (a header name, a second copy or any
    // spot the checks above did not look at is refused).
    for s in &h.secrets {
        let raw = memchr::memmem::find_iter(head, s.placeholder.as_bytes()).count();
        let direct = req.direct.iter().filter(|n| **n == s.name).count();
        if raw != direct {
            return Err(placeholder_refusal(s, "the request head"));
        }
    }
    req.head = out.into_bytes();
    Ok(req)
}

fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

fn placeholder_refusal(s: &SecretValue, where_: &str) -> Refusal {
    refusal(
        403,
        format!(
            "the placeholder of secret {} is in {where_}: it is put in only in the {} header \
             (Bearer, bare or Basic)",
            s.name, s.header
        ),
    )
}

/// The origin-form path and query of `target`: origin form, or absolute
/// form naming exactly this host.
fn origin_form<'t>(target: &'t str, h: &Host) -> Result<&'t str, Refusal> {
    if target.starts_with('/') {
        return Ok(target);
    }
    let Some(rest) = target.strip_prefix("https://") else {
        return Err(bad("the request target is neither a path nor an https:// URL"));
    };
    let (auth, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if !path.starts_with('/') || !authority_is(auth, h) {
        return Err(refusal(403, format!("the request target names another host than {}:{}", h.host, h.port)));
    }
    Ok(path)
}

/// `auth` is HOST or HOST:PORT (the port may be left out for 443).
fn authority_is(auth: &str, h: &Host) -> bool {
    let host = bracketed(h.host);
    let bare = auth.len() == host.len() && auth.eq_ignore_ascii_case(&host);
    let with_port = auth.len() > host.len()
        && auth.is_char_boundary(host.len())
        && auth[..host.len()].eq_ignore_ascii_case(&host)
        && auth[host.len()..] == format!(":{}", h.port);
    with_port || bare && h.port == 443
}

/// Headers with which frameworks (Rails, Laravel, Symfony, Spring, ASP.NET,
/// IIS, Envoy, nginx setups) replace the method or path a rule judged.
const OVERRIDES: [&str; 14] = [
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
    "x-original-method",
    "x-original-url",
    "x-original-uri",
    "x-rewrite-url",
    "x-override-url",
    "x-forwarded-path",
    "x-forwarded-uri",
    "x-forwarded-prefix",
    "x-forwarded-method",
    "x-envoy-original-path",
    "x-original-path",
];

/// Check the framing and hop-by-hop headers; what goes on.
fn framing<'a>(headers: &[(&'a str, &'a str)], req: &mut Req, h: &Host) -> Result<Vec<(&'a str, &'a str)>, Refusal> {
    let mut hosts = 0;
    let (mut length, mut chunked) = (None, false);
    let mut dropped: Vec<String> = Vec::new();
    for (k, v) in headers {
        let lower = k.to_ascii_lowercase();
        match lower.as_str() {
            "host" => {
                hosts += 1;
                if !authority_is(v, h) {
                    return Err(refusal(403, format!("the Host header names another host than {}:{}", h.host, h.port)));
                }
            }
            "content-length" => {
                if length.is_some() {
                    return Err(bad("more than one Content-Length"));
                }
                if v.is_empty() || v.len() > 18 || !v.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad("a malformed Content-Length"));
                }
                length = Some(v.parse::<u64>().map_err(|_| bad("a malformed Content-Length"))?);
            }
            "transfer-encoding" => {
                if chunked || !v.eq_ignore_ascii_case("chunked") {
                    return Err(bad("a Transfer-Encoding other than one `chunked`"));
                }
                chunked = true;
            }
            "upgrade" | "http2-settings" => {
                return Err(refusal(403, format!("{k}: protocol upgrades (h2c, WebSocket) do not pass this gate")))
            }
            "connection" => {
                for name in v.split(',').map(|n| n.trim().to_ascii_lowercase()).filter(|n| !n.is_empty()) {
                    match name.as_str() {
                        "close" => req.close = true,
                        "keep-alive" => {}
                        "upgrade" | "http2-settings" => {
                            return Err(refusal(403, "Connection: upgrade does not pass this gate"))
                        }
                        "host" | "content-length" | "transfer-encoding" => {
                            return Err(bad(format!("Connection may not name {name}")))
                        }
                        _ => dropped.push(name),
                    }
                }
            }
            o if !h.rules.is_empty() && OVERRIDES.contains(&o) => {
                return Err(refusal(
                    403,
                    format!(
                        "{k}: a method or path override header on a host with rules (a server that \
                         honours it would do what the rules did not allow)"
                    ),
                ))
            }
            "expect" => {
                if !v.eq_ignore_ascii_case("100-continue") {
                    return Err(refusal(417, "only Expect: 100-continue"));
                }
                req.expect = true;
            }
            _ => {}
        }
    }
    if hosts != 1 && !req.http10 || hosts > 1 {
        return Err(bad("a request needs exactly one Host header"));
    }
    if chunked && length.is_some() {
        return Err(bad("Transfer-Encoding together with Content-Length"));
    }
    if chunked && req.http10 {
        return Err(bad("chunked framing in an HTTP/1.0 request"));
    }
    req.body = match (chunked, length) {
        (true, _) => Body::Chunked { left: 0, started: false },
        (false, Some(n)) => Body::Length(n),
        (false, None) => Body::Done,
    };
    const HOP: [&str; 11] = [
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "expect",
        "accept-encoding",
        "upgrade",
        "http2-settings",
    ];
    Ok(headers
        .iter()
        .filter(|(k, _)| {
            let l = k.to_ascii_lowercase();
            !HOP.contains(&l.as_str()) && !l.starts_with("proxy-") && !dropped.contains(&l)
        })
        .copied()
        .collect())
}

/// The value of header `k` as it goes upstream: a secret's value put in
/// where its header holds its placeholder in one of the three forms; any
/// other placeholder of this host is refused.
fn put_in(k: &str, v: &str, h: &Host, req: &mut Req) -> Result<String, Refusal> {
    let mut v = v.to_string();
    for s in h.secrets.iter().filter(|s| s.header.eq_ignore_ascii_case(k)) {
        if let Some(new) = substitute(&v, s, req) {
            if req.secrets.contains(&s.name) {
                return Err(refusal(403, format!("the {k} header comes twice with secret {}", s.name)));
            }
            req.secrets.push(s.name.clone());
            v = new;
        }
    }
    // Checked after substitution: a Basic token has been rewritten, and
    // nothing of what was put in is a placeholder.
    for s in &h.secrets {
        if v.contains(&s.placeholder) || basic_holds(&v, &s.placeholder) {
            return Err(placeholder_refusal(s, &format!("the {k} header")));
        }
    }
    Ok(v)
}

fn substitute(v: &str, s: &SecretValue, req: &mut Req) -> Option<String> {
    if v == s.placeholder {
        req.direct.push(s.name.clone());
        return Some(s.value.clone());
    }
    let (scheme, rest) = v.split_once(' ')?;
    if scheme.eq_ignore_ascii_case("bearer") && rest == s.placeholder {
        req.direct.push(s.name.clone());
        return Some(format!("{scheme} {}", s.value));
    }
    // Exactly `Basic` and canonical padded base64: any other spelling a
    // server may still decode is left to `basic_holds`, which refuses it.
    if scheme == "Basic" {
        let b64 = base64::engine::general_purpose::STANDARD;
        let plain = b64.decode(rest).ok().filter(|p| b64.encode(p) == rest)?;
        let plain = String::from_utf8(plain).ok()?;
        let (user, pass) = plain.split_once(':')?;
        if pass != s.placeholder || user.contains(&s.placeholder) {
            return None;
        }
        let token = b64.encode(format!("{user}:{}", s.value));
        req.produced.push((token.clone().into_bytes(), rest.as_bytes().to_vec()));
        return Some(format!("Basic {token}"));
    }
    None
}

/// Whether `v` is Basic credentials, in any spelling a server may accept
/// (any case, any spaces, either alphabet, padding or not, stray
/// characters), whose decoding by any decoder a server may use holds `ph`.
fn basic_holds(v: &str, ph: &str) -> bool {
    let v = v.trim_start();
    match v.get(..5) {
        Some(scheme) if scheme.eq_ignore_ascii_case("basic") => {
            decodings(&v.as_bytes()[5..]).iter().any(|d| memchr::memmem::find(d, ph.as_bytes()).is_some())
        }
        _ => false,
    }
}

/// What base64 decoders may make of `text`: all its characters of either
/// alphabet decoded together (a decoder that skips the others), and each
/// run between other characters on its own (one that stops or restarts at
/// one, padding included).
fn decodings(text: &[u8]) -> Vec<Vec<u8>> {
    fn sextet(b: u8) -> Option<u8> {
        match b {
            b'A'..=b'Z' => Some(b - b'A'),
            b'a'..=b'z' => Some(b - b'a' + 26),
            b'0'..=b'9' => Some(b - b'0' + 52),
            b'+' | b'-' => Some(62),
            b'/' | b'_' => Some(63),
            _ => None,
        }
    }
    fn decode(sextets: impl Iterator<Item = u8>) -> Vec<u8> {
        let (mut out, mut acc, mut bits) = (Vec::new(), 0u32, 0);
        for s in sextets {
            acc = acc << 6 | u32::from(s);
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
                acc &= (1 << bits) - 1;
            }
        }
        out
    }
    let mut all = vec![decode(text.iter().filter_map(|&b| sextet(b)))];
    all.extend(
        text.split(|&b| sextet(b).is_none())
            .filter(|r| !r.is_empty())
            .map(|r| decode(r.iter().filter_map(|&b| sextet(b)))),
    );
    all
}

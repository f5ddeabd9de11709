//! A response from a terminated host: its head parsed, every value the
//! gate put in (and every form of it the gate produced) replaced by what
//! the client sent, and rebuilt for the client with the body re-framed
//! (chunked for HTTP/1.1, close-delimited for HTTP/1.0: the replacement
//! changes lengths).

use super::replace::Replacer;
use super::wire::Body;

pub struct Resp {
    pub status: u16,
    /// The head for the client.
    pub head: Vec<u8>,
    /// How the upstream delimits the body.
    pub body: Body,
    /// The client gets a body (re-framed).
    pub has_body: bool,
    /// The connection ends after this response.
    pub close: bool,
}

/// Parse `head` (a response to `method`); `http10`: the client's version.
pub fn prepare(head: &[u8], method: &str, http10: bool, swap: &mut Replacer) -> Result<Resp, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the response head is not UTF-8".to_string())?;
    let mut lines = text.strip_suffix("\r\n\r\n").unwrap_or(text).split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.splitn(3, ' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err("a malformed status line".into());
    };
    let reason = parts.next().unwrap_or("");
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") || code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err("a malformed status line".into());
    }
    let status: u16 = code.parse().map_err(|_| "a malformed status".to_string())?;
    if !(100..600).contains(&status) || status == 101 {
        return Err(format!("status {status} (upgrades do not pass this gate)"));
    }
    let mut close = version == "HTTP/1.0" || http10;
    let (mut length, mut chunked) = (None, false);
    let mut kept = Vec::new();
    for l in lines {
        let (k, v) = l.split_once(':').ok_or_else(|| "a malformed response header".to_string())?;
        if k.is_empty() || !k.bytes().all(crate::gate::head::is_token) || l.bytes().any(|b| b == b'\r' || b == b'\n') {
            return Err("a malformed response header".into());
        }
        let v = v.trim_matches([' ', '\t']);
        match k.to_ascii_lowercase().as_str() {
            "content-length" => {
                let n = v.parse::<u64>().map_err(|_| "a malformed Content-Length".to_string())?;
                if length.is_some_and(|m| m != n) {
                    return Err("conflicting Content-Length headers".into());
                }
                length = Some(n);
            }
            "transfer-encoding" => {
                if !v.to_ascii_lowercase().trim_end().ends_with("chunked") {
                    return Err("a Transfer-Encoding not ending in chunked".into());
                }
                chunked = true;
            }
            "connection" => {
                if v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")) {
                    close = true;
                }
            }
            "keep-alive" | "upgrade" | "trailer" => {}
            _ => kept.push((k, v)),
        }
    }
    let informational = (100..200).contains(&status);
    let bodiless = method == "HEAD" || informational || status == 204 || status == 304;
    let body = match (bodiless, chunked, length) {
        (true, _, _) => Body::Done,
        (false, true, _) => Body::Chunked { left: 0, started: false },
        (false, false, Some(n)) => Body::Length(n),
        (false, false, None) => {
            close = true;
            Body::Close
        }
    };
    let has_body = body != Body::Done && body != Body::Length(0);
    // Values are taken out of the whole head, names included.
    let mut rebuilt = Vec::with_capacity(head.len() + 64);
    rebuilt.extend_from_slice(format!("HTTP/1.1 {code} {reason}\r\n").as_bytes());
    for (k, v) in kept {
        rebuilt.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    let mut out = Vec::with_capacity(rebuilt.len() + 64);
    swap.feed(&rebuilt, &mut out, true);
    if informational {
        out.extend_from_slice(b"\r\n");
        return Ok(Resp { status, head: out, body, has_body: false, close: false });
    }
    if has_body && !http10 {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    } else if !has_body && !bodiless {
        out.extend_from_slice(b"Content-Length: 0\r\n");
    } else if method == "HEAD" {
        if let Some(n) = length {
            // The length of the body a GET would get, before replacement:
            // a client may only use it for display.
            out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes());
        }
    }
    if has_body && http10 {
        close = true;
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Ok(Resp { status, head: out, body, has_body, close })
}

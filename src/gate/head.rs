//! The proxy request head a sandbox sends the gate: read with a size and a
//! time bound, parsed into a CONNECT target or a plain-HTTP absolute-URI
//! request, and the origin-form head the gate forwards for the latter.
//! Everything here is input from the sandbox: anything unexpected is a
//! [`Refusal`], never a guess.

use std::net::IpAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest request head the gate reads (request line and headers).
pub const MAX_HEAD: usize = 16 * 1024;

/// An HTTP status and the reason, for the sandbox and the decision log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub reason: String,
}

pub fn refusal(status: u16, reason: impl Into<String>) -> Refusal {
    Refusal { status, reason: reason.into() }
}

/// What the sandbox asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `CONNECT host:port`: a tunnel.
    Connect { host: String, port: u16 },
    /// `METHOD http://host[:port]/path`: one request, forwarded in origin form.
    Http(HttpRequest),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub host: String,
    pub port: u16,
    pub method: String,
    /// Origin form: path and query, at least `/`.
    pub path: String,
    pub version: String,
    /// As sent, minus the hop-by-hop and proxy headers the gate drops.
    pub headers: Vec<(String, String)>,
    /// The body the gate forwards (Content-Length; chunked bodies are refused).
    pub body_len: u64,
}

impl Request {
    pub fn target(&self) -> (&str, u16) {
        match self {
            Request::Connect { host, port } => (host, *port),
            Request::Http(r) => (&r.host, r.port),
        }
    }
}

impl HttpRequest {
    /// The head the gate sends upstream: origin form, `Host` from the URI
    /// (the name the policy judged, not one the sandbox picks), one request
    /// per connection.
    pub fn origin_head(&self) -> Vec<u8> {
        let mut h = format!("{} {} {}\r\n", self.method, self.path, self.version);
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        match self.port {
            80 => h.push_str(&format!("Host: {host}\r\n")),
            p => h.push_str(&format!("Host: {host}:{p}\r\n")),
        }
        for (k, v) in &self.headers {
            h.push_str(&format!("{k}: {v}\r\n"));
        }
        h.push_str("Connection: close\r\n\r\n");
        h.into_bytes()
    }
}

/// Read up to the blank line ending the head: (head, bytes read past it).
pub async fn read_head<R: AsyncRead + Unpin>(r: &mut R, wait: Duration) -> Result<(Vec<u8>, Vec<u8>), Refusal> {
    let mut buf = Vec::with_capacity(1024);
    let read = async {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = find_end(&buf) {
                let rest = buf.split_off(end);
                return Ok((std::mem::take(&mut buf), rest));
            }
            if buf.len() >= MAX_HEAD {
                return Err(refusal(431, format!("request head over {MAX_HEAD} bytes")));
            }
            let want = (MAX_HEAD + 4 - buf.len()).min(chunk.len());
            match r.read(&mut chunk[..want]).await {
                Ok(0) => return Err(refusal(400, "connection closed before the request head ended")),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(refusal(400, format!("reading the request head: {e}"))),
            }
        }
    };
    match tokio::time::timeout(wait, read).await {
        Ok(r) => r,
        Err(_) => Err(refusal(408, format!("no complete request head within {}s", wait.as_secs()))),
    }
}

fn find_end(buf: &[u8]) -> Option<usize> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    (end <= MAX_HEAD).then_some(end)
}

/// Parse a complete head (ending in an empty line).
pub fn parse(head: &[u8]) -> Result<Request, Refusal> {
    let text = std::str::from_utf8(head).map_err(|_| refusal(400, "request head is not UTF-8"))?;
    let mut lines = text.strip_suffix("\r\n\r\n").unwrap_or(text).split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(refusal(400, "malformed request line"));
    };
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(refusal(400, "only HTTP/1.0 and HTTP/1.1 requests"));
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(refusal(400, "malformed method"));
    }
    // Forwarded as the path: a bare CR or LF in it would end the request
    // line early for a lenient server (a second request, any Host).
    if !target.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(refusal(400, "the request target holds control, space or non-ASCII bytes"));
    }
    let headers = lines.map(header).collect::<Result<Vec<_>, _>>()?;
    if method == "CONNECT" {
        let (host, port) = authority(target, None)?;
        return Ok(Request::Connect { host, port });
    }
    let Some(rest) = target.strip_prefix("http://") else {
        return Err(refusal(400, "not a proxy request: use CONNECT, or an absolute http:// URI"));
    };
    let (auth, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') { format!("/{path}") } else { path.to_string() };
    let (host, port) = authority(auth, Some(80))?;
    let mut body_len = None;
    let mut kept = Vec::new();
    for (k, v) in headers {
        let lower = k.to_ascii_lowercase();
        match lower.as_str() {
            "transfer-encoding" => {
                return Err(refusal(411, "chunked request bodies do not pass the gate: send Content-Length"))
            }
            "content-length" => {
                // Digits only (`u64::from_str` takes "+3", which a server may
                // read otherwise: the body would become a second request).
                let n = Some(&v)
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| refusal(400, "malformed Content-Length"))?;
                match body_len {
                    Some(m) if m != n => return Err(refusal(400, "conflicting Content-Length headers")),
                    Some(_) => {} // forwarded once
                    None => {
                        body_len = Some(n);
                        kept.push((k, n.to_string()));
                    }
                }
            }
            "host" | "connection" | "keep-alive" | "te" | "trailer" | "upgrade" => {}
            l if l.starts_with("proxy-") => {}
            _ => kept.push((k, v)),
        }
    }
    Ok(Request::Http(HttpRequest {
        host,
        port,
        method: method.to_string(),
        path,
        version: version.to_string(),
        headers: kept,
        body_len: body_len.unwrap_or(0),
    }))
}

fn header(line: &str) -> Result<(String, String), Refusal> {
    let (k, v) = line.split_once(':').ok_or_else(|| refusal(400, "malformed header line"))?;
    if k.is_empty() || !k.bytes().all(is_token) {
        return Err(refusal(400, "malformed header name"));
    }
    if v.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err(refusal(400, "control character in a header value"));
    }
    Ok((k.to_string(), v.trim_matches([' ', '\t']).to_string()))
}

/// A byte of an HTTP token (a method, a header name).
pub fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `host:port` (or `[v6]:port`); the port may be omitted only where a default is given.
fn authority(s: &str, default_port: Option<u16>) -> Result<(String, u16), Refusal> {
    if s.contains('@') {
        return Err(refusal(400, "user info in the request target"));
    }
    let (host, port) = if let Some(v6) = s.strip_prefix('[') {
        let (h, rest) = v6.split_once(']').ok_or_else(|| refusal(400, "malformed IPv6 literal"))?;
        if h.parse::<std::net::Ipv6Addr>().is_err() || !(rest.is_empty() || rest.starts_with(':')) {
            return Err(refusal(400, "malformed IPv6 literal"));
        }
        (h, rest.strip_prefix(':'))
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match (port, default_port) {
        (Some(p), _) => Some(p)
            .filter(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|p| *p != 0)
            .ok_or_else(|| refusal(400, "malformed port"))?,
        (None, Some(d)) => d,
        (None, None) => return Err(refusal(400, "CONNECT needs host:port")),
    };
    Ok((normalize_host(host).ok_or_else(|| refusal(400, "malformed host"))?, port))
}

/// The canonical form the policy judges: an address literal as Rust prints
/// it, else a lower-case DNS name without a trailing dot. Names that a
/// resolver could read as an address (`127.1`, an all-digit last label) are
/// refused, so only an address literal can ever name an address.
pub fn normalize_host(host: &str) -> Option<String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(ip.to_string());
    }
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let labels: Vec<&str> = name.split('.').collect();
    let ok_label = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let last_numeric = labels.last().is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()) || l.starts_with("0x"));
    (name.len() <= 253 && labels.iter().all(ok_label) && !last_numeric).then_some(name)
}

//! One connection through the gate, start to end: read and judge the
//! request, resolve, check each address, connect, tunnel or forward, and
//! write the connection's one decision-log line when it ends. The name is
//! judged before any DNS query; the addresses after (DNS rebinding).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::dial::{connect, Failure};
use super::head::{self, refusal, Refusal, Request};
use super::{tls, Shared};
use crate::spec::egress::{LogLine, Policy, Verdict};

/// Copy buffer per direction: it starts small (1024 idle connections fit
/// the gate's 128 MiB) and doubles whenever a read fills it; at BUF_MAX the
/// connection is a bulk transfer and goes on through `splice` (no copy).
const BUF: usize = 16 * 1024;
const BUF_MAX: usize = 512 * 1024;

/// Serve `client` and log it; `admitted` is false over the connection limit.
pub async fn handle(shared: Arc<Shared>, mut client: TcpStream, admitted: bool) {
    let start = Instant::now();
    let mut line = LogLine {
        time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
        sandbox: shared.config.sandbox.clone(),
        host: String::new(),
        port: 0,
        addr: None,
        decision: "deny".into(),
        rule: None,
        reason: None,
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        method: None,
        path: None,
        status: None,
        secrets: Vec::new(),
    };
    // Relayed writes go out at once: the gate adds no Nagle delay of its own.
    let _ = client.set_nodelay(true);
    if admitted {
        serve(&shared, client, &mut line).await;
    } else {
        let busy = refusal(503, format!("the gate is at its limit of {} connections", shared.config.max_connections));
        refuse(&mut client, &busy, &mut line).await;
    }
    line.duration_ms = start.elapsed().as_millis() as u64;
    shared.log(&line);
}

/// Answer with an error status, the reason in the body, and close.
async fn refuse(client: &mut TcpStream, r: &Refusal, line: &mut LogLine) {
    line.reason = Some(r.reason.clone());
    let phrase = match r.status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        411 => "Length Required",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let body = format!("sbx egress gate: {}\n", r.reason);
    let msg = format!(
        "HTTP/1.1 {} {phrase}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        r.status,
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(5), client.write_all(msg.as_bytes())).await;
    let _ = client.shutdown().await;
}

async fn serve(shared: &Shared, mut client: TcpStream, line: &mut LogLine) {
    let (head, rest) = match head::read_head(&mut client, shared.config.head_wait).await {
        Ok(h) => h,
        Err(r) => return refuse(&mut client, &r, line).await,
    };
    let req = match head::parse(&head) {
        Ok(r) => r,
        Err(r) => return refuse(&mut client, &r, line).await,
    };
    let (host, port) = req.target();
    let (host, port) = (host.to_string(), port);
    line.host = host.clone();
    line.port = port;
    let policy = shared.policy.borrow().clone();
    match policy.decide_name(&host, port) {
        Verdict::Allow { rule } => line.rule = Some(rule),
        Verdict::Deny { reason } => return refuse(&mut client, &refusal(403, reason), line).await,
    }
    let terminated = policy.terminate.iter().any(|t| t.host == host && t.port == port);
    if terminated && matches!(req, Request::Http(_)) {
        let why = format!(
            "{host}:{port} holds a secret or request rules: the value only travels inside TLS the gate \
             terminated; use https://"
        );
        return refuse(&mut client, &refusal(403, why), line).await;
    }
    line.decision = "allow".into();
    let upstream = match connect(shared, &policy, &host, port).await {
        Ok((stream, ip)) => {
            line.addr = Some(ip.to_string());
            (stream, ip)
        }
        Err(Failure::Refused(reason, first)) => {
            // The log names the address the policy refused (a rebinding
            // name shows where it pointed).
            line.addr = Some(first.to_string());
            line.decision = "deny".into();
            return refuse(&mut client, &refusal(403, reason), line).await;
        }
        Err(Failure::Failed(reason)) => return refuse(&mut client, &refusal(502, reason), line).await,
    };
    let (mut upstream, ip) = upstream;
    let up = match req {
        Request::Connect { .. } => {
            if client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.is_err() {
                return;
            }
            if terminated {
                return super::terminate::run(shared, client, rest, upstream, (&host, port), line).await;
            }
            Up::Tunnel
        }
        Request::Http(r) => {
            let h = r.origin_head();
            if upstream.write_all(&h).await.is_err() {
                return refuse(&mut client, &refusal(502, format!("{host}:{port} closed the connection")), line).await;
            }
            line.bytes_up = h.len() as u64;
            Up::Body(r.body_len)
        }
    };
    let target = Target { host, port, ip, rx: shared.policy.clone() };
    relay(client, upstream, rest, up, target, shared.config.head_wait, line).await;
}

/// What flows from the sandbox to the upstream after the head.
enum Up {
    /// A CONNECT tunnel: anything, but a TLS hello must name the host.
    Tunnel,
    /// A plain-HTTP request: exactly its body, then nothing (one request).
    Body(u64),
}

struct Target {
    host: String,
    port: u16,
    ip: IpAddr,
    rx: watch::Receiver<Arc<Policy>>,
}

enum End {
    Io,
    Refused(String),
}

async fn relay(
    client: TcpStream,
    upstream: TcpStream,
    first: Vec<u8>,
    up: Up,
    mut t: Target,
    wait: Duration,
    line: &mut LogLine,
) {
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    let (mut bytes_up, mut bytes_down) = (0u64, 0u64);
    let host = t.host.clone();
    let end = {
        let pumps = async {
            tokio::try_join!(
                pump_up(cr, uw, first, &up, &host, wait, &mut bytes_up),
                pump(ur, cw, &mut bytes_down, u64::MAX)
            )
        };
        tokio::select! {
            r = pumps => match r {
                Ok(_) | Err(End::Io) => None,
                Err(End::Refused(reason)) => Some(reason),
            },
            reason = until_denied(&mut t) => Some(format!("cut after a policy change: {reason}")),
        }
    };
    line.bytes_up += bytes_up;
    line.bytes_down = bytes_down;
    if let Some(reason) = end {
        line.decision = "deny".into();
        line.reason = Some(reason);
    }
}

/// Resolves when a policy change no longer allows the connection's name or address.
async fn until_denied(t: &mut Target) -> String {
    loop {
        if t.rx.changed().await.is_err() {
            return std::future::pending().await;
        }
        let policy = t.rx.borrow_and_update().clone();
        for verdict in [policy.decide_name(&t.host, t.port), policy.check_addr(t.ip, t.port)] {
            if let Verdict::Deny { reason } = verdict {
                return reason;
            }
        }
    }
}

async fn pump_up(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut first: Vec<u8>,
    up: &Up,
    host: &str,
    wait: Duration,
    count: &mut u64,
) -> Result<Option<OwnedWriteHalf>, End> {
    match *up {
        Up::Body(len) => {
            first.truncate(len.min(first.len() as u64) as usize);
            to.write_all(&first).await.map_err(|_| End::Io)?;
            *count += first.len() as u64;
            pump(from, to, count, len - first.len() as u64).await
        }
        Up::Tunnel => {
            if first.is_empty() && read_more(&mut from, &mut first, None).await? == 0 {
                let _ = to.shutdown().await;
                return Ok(None);
            }
            // One deadline for the whole hello, not one per read: a hello
            // trickled a byte at a time must not hold the tunnel open.
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                match tls::parse(&first) {
                    tls::Hello::NotTls => break,
                    tls::Hello::Sni(name) => {
                        check_sni(name.as_deref(), host).map_err(End::Refused)?;
                        break;
                    }
                    tls::Hello::Malformed(why) => return Err(End::Refused(format!("TLS ClientHello: {why}"))),
                    tls::Hello::Incomplete => {
                        if read_more(&mut from, &mut first, Some(deadline)).await? == 0 {
                            return Err(End::Refused("the connection closed inside the TLS ClientHello".into()));
                        }
                    }
                }
            }
            to.write_all(&first).await.map_err(|_| End::Io)?;
            *count += first.len() as u64;
            pump(from, to, count, u64::MAX).await
        }
    }
}

async fn read_more(
    from: &mut OwnedReadHalf,
    buf: &mut Vec<u8>,
    deadline: Option<tokio::time::Instant>,
) -> Result<usize, End> {
    let mut chunk = [0u8; 4096];
    let read = from.read(&mut chunk);
    let n = match deadline {
        Some(d) => tokio::time::timeout_at(d, read)
            .await
            .map_err(|_| End::Refused("the TLS ClientHello did not arrive in time".into()))?,
        None => read.await,
    }
    .map_err(|_| End::Io)?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n)
}

/// The SNI must name the CONNECT host; only a tunnel to a literal address
/// may carry a hello without one.
fn check_sni(sni: Option<&str>, host: &str) -> Result<(), String> {
    let literal = host.parse::<IpAddr>().is_ok();
    match sni {
        None if literal => Ok(()),
        None => Err(format!("TLS ClientHello without a server name on a tunnel to {host}")),
        Some(n) if n.strip_suffix('.').unwrap_or(n).eq_ignore_ascii_case(host) => Ok(()),
        Some(n) => Err(format!("TLS server name {} is not the CONNECT host {host}", shown(n))),
    }
}

/// A name the sandbox sent, for a reason: whole up to 80 characters (the
/// log scrubs a placeholder from it), else only its length, since a cut
/// could leave part of a placeholder the scrub no longer recognizes, and
/// a 16 KiB name would make a line the host drops as over-long.
fn shown(name: &str) -> String {
    match name.chars().nth(80) {
        Some(_) => format!("<a name of {} bytes>", name.len()),
        None => format!("{name:?}"),
    }
}

/// Copy up to `limit` bytes. At the reader's end, half-close the writer, so
/// each side sees the other's EOF; at the limit (a request body forwarded),
/// hand the writer back unclosed: some servers take a client's EOF for a
/// client gone and drop the request.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    count: &mut u64,
    limit: u64,
) -> Result<Option<OwnedWriteHalf>, End> {
    let mut buf = vec![0u8; BUF];
    let mut left = limit;
    let mut bulk = true;
    while left > 0 {
        if bulk && buf.len() >= BUF_MAX {
            match super::splice::relay(from, to, count, left).await {
                Ok(to) => return Ok(to),
                Err(super::splice::Stop::Io) => return Err(End::Io),
                Err(super::splice::Stop::NoPipe(f, t)) => (from, to, bulk) = (f, t, false),
            }
        }
        let want = (buf.len() as u64).min(left) as usize;
        let n = from.read(&mut buf[..want]).await.map_err(|_| End::Io)?;
        if n == 0 {
            let _ = to.shutdown().await;
            return Ok(None);
        }
        to.write_all(&buf[..n]).await.map_err(|_| End::Io)?;
        if n == buf.len() && buf.len() < BUF_MAX {
            buf.resize(buf.len() * 2, 0);
        }
        *count += n as u64;
        left -= n as u64;
    }
    Ok(Some(to))
}

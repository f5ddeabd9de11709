//! TLS termination for a host that has secrets or request rules: the gate
//! answers the sandbox's TLS with the vault's certificate for the host
//! (the sandbox's own CA), re-originates TLS to the host verifying it with
//! the vault's roots, and passes each request on the connection through
//! `request::prepare` (checked, rebuilt, values put in) and each response
//! through `response::prepare` and a `Replacer` (values taken out). One
//! decision-log line per request.

mod replace;
mod request;
mod response;
mod wire;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, BufReader};
use tokio::net::TcpStream;
use tokio_rustls::{rustls, LazyConfigAcceptor, TlsConnector};

use super::head::{refusal, Refusal};
use super::vault::Armed;
use super::Shared;
use crate::spec::egress::{LogLine, Verdict};
use replace::{Replacer, Scanner};
use request::Host;
use wire::{Body, Wire, LAST_CHUNK};

/// A kept-alive client may idle this long between requests.
const IDLE: Duration = Duration::from_secs(120);
/// An upstream may think this long before its response head.
const THINK: Duration = Duration::from_secs(600);
/// The body bytes read before the head goes upstream.
const PREFETCH: usize = 64 * 1024;
/// Largest body piece relayed at once.
const PIECE: usize = 256 * 1024;

/// Serve a CONNECT to `host:port` the policy terminates; `rest` is what
/// the client sent after the CONNECT head, `upstream` the connected socket.
pub(super) async fn run(
    shared: &Shared,
    client: TcpStream,
    rest: Vec<u8>,
    upstream: TcpStream,
    target: (&str, u16),
    line: &mut LogLine,
) {
    let (host, port) = target;
    let armed = shared.vault.borrow().clone();
    let Some((armed, server)) = armed.and_then(|a| a.servers.get(host).cloned().map(|s| (a, s))) else {
        deny(line, format!("the gate holds no certificate or value for {host} yet (sbx has not pushed them)"));
        return;
    };
    let (cr, cw) = client.into_split();
    let io = tokio::io::join(std::io::Cursor::new(rest).chain(BufReader::with_capacity(SOCKET_READ, cr)), cw);
    let hello = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), io);
    let start = match tokio::time::timeout(shared.config.head_wait, hello).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return deny(line, format!("TLS from the sandbox: {e}")),
        Err(_) => return deny(line, "no TLS ClientHello in time".into()),
    };
    let sni = start.client_hello().server_name().map(str::to_string);
    let literal = host.parse::<std::net::IpAddr>().is_ok();
    match sni.as_deref() {
        None if literal => {}
        Some(n) if n.strip_suffix('.').unwrap_or(n).eq_ignore_ascii_case(host) => {}
        other => return deny(line, format!("TLS server name {other:?} is not {host}")),
    }
    let mut tls = match tokio::time::timeout(shared.config.head_wait, start.into_stream(server)).await {
        Ok(Ok(s)) => Wire::new(s),
        Ok(Err(e)) => return deny(line, format!("TLS from the sandbox: {e}")),
        Err(_) => return deny(line, "the TLS handshake did not finish in time".into()),
    };
    let name = match ServerName::try_from(host.to_string()) {
        Ok(n) => n,
        Err(_) => return deny(line, format!("{host} is no TLS server name")),
    };
    let connector = TlsConnector::from(armed.client.clone());
    let up = match tokio::time::timeout(shared.config.connect_wait, connector.connect(name.clone(), buffered(upstream)))
        .await
    {
        Ok(Ok(s)) => Wire::new(s),
        Ok(Err(e)) => {
            let r = refusal(502, format!("TLS to {host}:{port}: {e}"));
            let _ = answer(&mut tls, &r).await;
            return deny(line, r.reason);
        }
        Err(_) => {
            let r = refusal(502, format!("TLS to {host}:{port}: no handshake in time"));
            let _ = answer(&mut tls, &r).await;
            return deny(line, r.reason);
        }
    };
    let base = line.clone();
    Exchange { shared, host, port, client: tls, up, base, name, served: 0, produced: Vec::new() }.serve(line).await;
}

/// Resolves when a policy change no longer allows or terminates `host:port`.
async fn until_gone(
    mut rx: tokio::sync::watch::Receiver<Arc<crate::spec::egress::Policy>>,
    host: &str,
    port: u16,
) -> String {
    loop {
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
        let policy = rx.borrow_and_update().clone();
        if let Verdict::Deny { reason } = policy.decide_name(host, port) {
            return reason;
        }
        if !policy.terminate.iter().any(|t| t.host == host && t.port == port) {
            return format!("{host}:{port} is no longer terminated");
        }
    }
}

fn deny(line: &mut LogLine, reason: String) {
    line.decision = "deny".into();
    line.reason = Some(reason);
}

/// An error response with the reason, closing the connection.
async fn answer<S>(to: &mut Wire<S>, r: &Refusal) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let body = format!("sbx egress gate: {}\n", r.reason);
    let msg = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        r.status,
        phrase(r.status),
        body.len()
    );
    to.send(msg.as_bytes()).await?;
    tokio::io::AsyncWriteExt::shutdown(&mut to.io).await
}

fn phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        403 => "Forbidden",
        417 => "Expectation Failed",
        502 => "Bad Gateway",
        _ => "Error",
    }
}

type ClientTls = tokio_rustls::server::TlsStream<
    tokio::io::Join<
        tokio::io::Chain<std::io::Cursor<Vec<u8>>, BufReader<tokio::net::tcp::OwnedReadHalf>>,
        tokio::net::tcp::OwnedWriteHalf,
    >,
>;
type UpTls = tokio_rustls::client::TlsStream<BufReader<TcpStream>>;

/// rustls asks its socket for a few KiB at a time: through this buffer a
/// bulk body takes one read call per SOCKET_READ, not per 4 KiB (three
/// recvfrom per write to the other side, half a tunnel's throughput).
const SOCKET_READ: usize = 128 * 1024;

fn buffered(tcp: TcpStream) -> BufReader<TcpStream> {
    BufReader::with_capacity(SOCKET_READ, tcp)
}

struct Exchange<'a> {
    shared: &'a Shared,
    host: &'a str,
    port: u16,
    client: Wire<ClientTls>,
    up: Wire<UpTls>,
    /// The connection's line, each request's starts from.
    base: LogLine,
    /// The upstream's TLS name, to connect again.
    name: ServerName<'static>,
    /// Requests the upstream connection has served.
    served: usize,
    /// Every Basic token put in on this connection and what the client
    /// sent in its place: a host may reflect one in any later response.
    produced: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The most Basic tokens one connection may have put in (each is searched
/// for in every response after it).
const MAX_PRODUCED: usize = 64;

/// How one request ended.
enum Outcome {
    /// Go on with the next request.
    Next,
    /// The connection ends (a close asked for, or an error after the answer began).
    Close,
}

impl Exchange<'_> {
    async fn serve(mut self, conn: &mut LogLine) {
        loop {
            let mut line = self.base.clone();
            line.time = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
            let head = match tokio::time::timeout(IDLE, self.client.head()).await {
                Err(_) | Ok(Ok(None)) => break,
                Ok(Ok(Some(h))) => h,
                Ok(Err(e)) => {
                    self.refuse(&mut line, refusal(400, e)).await;
                    break;
                }
            };
            let mut rx = self.shared.policy.clone();
            rx.borrow_and_update();
            let (host, port) = (self.host, self.port);
            // A `deny` cuts a request under way (a long download), as it cuts a tunnel.
            let outcome = tokio::select! {
                o = self.one(&head, &mut line) => o,
                reason = until_gone(rx, host, port) => {
                    deny(&mut line, format!("cut after a policy change: {reason}"));
                    Outcome::Close
                }
            };
            conn.bytes_up += line.bytes_up;
            conn.bytes_down += line.bytes_down;
            self.shared.log(&line);
            if matches!(outcome, Outcome::Close) {
                break;
            }
        }
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut self.client.io).await;
    }

    async fn refuse(&mut self, line: &mut LogLine, r: Refusal) {
        line.decision = "deny".into();
        line.status = Some(r.status);
        let _ = answer(&mut self.client, &r).await;
        line.reason = Some(r.reason);
    }

    /// One request and its response.
    async fn one(&mut self, head: &[u8], line: &mut LogLine) -> Outcome {
        // The policy and the vault as they are now: a `deny` or a rotation
        // takes effect on the next request.
        let policy = self.shared.policy.borrow().clone();
        let armed: Option<Arc<Armed>> = self.shared.vault.borrow().clone();
        let term = policy.terminate.iter().find(|t| t.host == self.host && t.port == self.port);
        let allowed = matches!(policy.decide_name(self.host, self.port), Verdict::Allow { .. });
        let (Some(term), true) = (term, allowed) else {
            self.refuse(line, refusal(403, format!("the policy no longer allows {}:{} here", self.host, self.port)))
                .await;
            return Outcome::Close;
        };
        let secrets = match &armed {
            Some(a) => a
                .vault
                .secrets
                .iter()
                .filter(|s| s.host == self.host && s.port == self.port && term.secrets.contains(&s.name))
                .collect(),
            None => Vec::new(),
        };
        let h = Host { host: self.host, port: self.port, rules: &term.rules, secrets };
        let req = match request::prepare(head, &h, line) {
            Ok(r) => r,
            Err(r) => {
                self.refuse(line, r).await;
                return Outcome::Close;
            }
        };
        line.secrets = req.secrets.clone();
        if let Some(rule) = &req.rule {
            line.rule = Some(rule.clone());
        }
        if self.served > 0 && self.up.stale().await {
            if let Err(r) = self.reconnect().await {
                self.refuse(line, r).await;
                return Outcome::Close;
            }
        }
        self.served += 1;
        let placeholders: Vec<Vec<u8>> = h.secrets.iter().map(|s| s.placeholder.as_bytes().to_vec()).collect();
        for p in &req.produced {
            if !self.produced.contains(p) {
                if self.produced.len() == MAX_PRODUCED {
                    let why = format!("more than {MAX_PRODUCED} different Basic credentials on one connection");
                    self.refuse(line, refusal(403, why)).await;
                    return Outcome::Close;
                }
                self.produced.push(p.clone());
            }
        }
        // Every value of the host, whether or not this request carried it
        // (a host may reflect one it holds), and every Basic token made on
        // the connection so far.
        let mut pairs = self.produced.clone();
        pairs.extend(h.secrets.iter().map(|s| (s.value.clone().into_bytes(), s.placeholder.clone().into_bytes())));
        let mut swap = Replacer::new(pairs);
        match self.relay(&req, placeholders, &mut swap, line).await {
            Ok(close) if close || req.close => Outcome::Close,
            Ok(_) => Outcome::Next,
            Err(Stop::Refused(r)) => {
                self.refuse(line, r).await;
                Outcome::Close
            }
            Err(Stop::Cut(reason)) => {
                deny(line, reason);
                Outcome::Close
            }
        }
    }

    /// A new upstream connection (the kept-alive one has closed), with the
    /// same checks as the first: addresses judged, the certificate verified
    /// with the vault's roots as they are now.
    async fn reconnect(&mut self) -> Result<(), Refusal> {
        let policy = self.shared.policy.borrow().clone();
        let (tcp, _) = super::dial::connect(self.shared, &policy, self.host, self.port).await.map_err(|f| match f {
            super::dial::Failure::Refused(reason, _) => refusal(403, reason),
            super::dial::Failure::Failed(reason) => refusal(502, reason),
        })?;
        let armed = self.shared.vault.borrow().clone().ok_or_else(|| refusal(502, "the gate holds no vault"))?;
        let connector = TlsConnector::from(armed.client.clone());
        let wait = self.shared.config.connect_wait;
        match tokio::time::timeout(wait, connector.connect(self.name.clone(), buffered(tcp))).await {
            Ok(Ok(s)) => {
                self.up = Wire::new(s);
                self.served = 0;
                Ok(())
            }
            Ok(Err(e)) => Err(refusal(502, format!("TLS to {}:{}: {e}", self.host, self.port))),
            Err(_) => Err(refusal(502, format!("TLS to {}:{}: no handshake in time", self.host, self.port))),
        }
    }

    /// Send the request on, and its response back; Ok(true): close after.
    async fn relay(
        &mut self,
        req: &request::Req,
        placeholders: Vec<Vec<u8>>,
        swap: &mut Replacer,
        line: &mut LogLine,
    ) -> Result<bool, Stop> {
        let up_err = |e: std::io::Error| Stop::Refused(refusal(502, format!("sending to the upstream: {e}")));
        if req.expect {
            self.client.send(b"HTTP/1.1 100 Continue\r\n\r\n").await.map_err(|_| Stop::Cut("client gone".into()))?;
        }
        let mut scan = Scanner::new(placeholders);
        let mut body = req.body;
        let chunked = matches!(body, Body::Chunked { .. });
        // The head waits for the first PREFETCH bytes of the body: a small
        // body holding a placeholder is refused before the upstream sees
        // anything; a larger one is cut short (never a complete request).
        let mut out = req.head.clone();
        let mut ended = false;
        loop {
            let piece = self.client.piece(&mut body, PIECE).await.map_err(|e| Stop::Refused(refusal(400, e)))?;
            match piece {
                Some(p) => {
                    if scan.feed(&p) {
                        return Err(Stop::Refused(refusal(
                            403,
                            "the request body holds a secret's placeholder: it is put in only in its header",
                        )));
                    }
                    if chunked {
                        wire::chunk(&p, &mut out);
                    } else {
                        out.extend_from_slice(&p);
                    }
                }
                None if chunked => {
                    out.extend_from_slice(LAST_CHUNK);
                    ended = true;
                }
                None => ended = true,
            }
            if ended || out.len() >= PREFETCH || line.bytes_up > 0 {
                self.up.send(&out).await.map_err(up_err)?;
                line.bytes_up += out.len() as u64;
                out.clear();
            }
            if ended {
                break;
            }
        }
        // Interim responses are passed on; the final one follows.
        let resp = loop {
            let head = match tokio::time::timeout(THINK, self.up.head()).await {
                Ok(Ok(Some(h))) => h,
                Ok(Ok(None)) => return Err(Stop::Refused(refusal(502, "the upstream closed without answering"))),
                Ok(Err(e)) => return Err(Stop::Refused(refusal(502, format!("the upstream's answer: {e}")))),
                Err(_) => return Err(Stop::Refused(refusal(502, "the upstream did not answer in time"))),
            };
            let resp = response::prepare(&head, &req.method, req.http10, swap)
                .map_err(|e| Stop::Refused(refusal(502, format!("the upstream's answer: {e}"))))?;
            if (100..200).contains(&resp.status) {
                if !req.expect {
                    self.client.send(&resp.head).await.map_err(|_| Stop::Cut("client gone".into()))?;
                }
                continue;
            }
            break resp;
        };
        line.status = Some(resp.status);
        let gone = |_| Stop::Cut("the sandbox closed the connection inside a response".into());
        self.client.send(&resp.head).await.map_err(gone)?;
        line.bytes_down += resp.head.len() as u64;
        let mut body = resp.body;
        let mut replaced = Vec::new();
        if !resp.has_body {
            return Ok(resp.close);
        }
        let upstream = |e| Stop::Cut(format!("the upstream's body: {e}"));
        let mut piece = self.up.piece(&mut body, PIECE).await.map_err(upstream)?;
        loop {
            replaced.clear();
            out.clear();
            let last = piece.is_none();
            swap.feed(piece.as_deref().unwrap_or_default(), &mut replaced, last);
            if req.http10 {
                out.extend_from_slice(&replaced);
            } else {
                wire::chunk(&replaced, &mut out);
                if last {
                    out.extend_from_slice(LAST_CHUNK);
                }
            }
            line.bytes_down += out.len() as u64;
            if last {
                if !out.is_empty() {
                    self.client.send(&out).await.map_err(gone)?;
                }
                break;
            }
            // The next piece is read while this one is written: one after
            // the other, each side waited for the other and a 200 MiB body
            // came at half a tunnel's speed with the cores half idle.
            let (sent, next) = tokio::join!(self.client.send(&out), self.up.piece(&mut body, PIECE));
            sent.map_err(gone)?;
            piece = next.map_err(upstream)?;
        }
        Ok(resp.close)
    }
}

enum Stop {
    /// Answer the client with this and close.
    Refused(Refusal),
    /// Close without an answer (one has begun, or the client is gone).
    Cut(String),
}

#[cfg(test)]
mod tests;

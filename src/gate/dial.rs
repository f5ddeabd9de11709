//! Dialling an upstream for the gate: resolve a name (unless it is a
//! literal), judge every address again (DNS rebinding), connect to the
//! first allowed one that answers. Shared by the tunnel (`conn`) and the
//! terminated path (`terminate`), which dials again when a kept-alive
//! upstream closed.

use std::net::{IpAddr, SocketAddr};

use tokio::net::TcpStream;

use super::{dns, Shared};
use crate::spec::egress::{Policy, Verdict};

pub(super) enum Failure {
    /// The policy refuses every address (logged as deny, 403), the first
    /// of them with it.
    Refused(String, IpAddr),
    /// Resolution or connection failed (the name was allowed; 502).
    Failed(String),
}

/// Resolve `host` (unless it is a literal), check every address, connect to
/// the first allowed one that answers within the connect deadline.
pub(super) async fn connect(
    shared: &Shared,
    policy: &Policy,
    host: &str,
    port: u16,
) -> Result<(TcpStream, IpAddr), Failure> {
    let addrs = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => resolve(shared, host, port).await.map_err(|e| Failure::Failed(format!("resolving {host}: {e}")))?,
    };
    if addrs.is_empty() {
        return Err(Failure::Failed(format!("{host} has no address")));
    }
    let first = addrs[0];
    let mut refused = Vec::new();
    let allowed: Vec<IpAddr> = addrs
        .into_iter()
        .filter(|ip| match policy.check_addr(*ip, port) {
            Verdict::Allow { .. } => true,
            Verdict::Deny { reason } => {
                refused.push(reason);
                false
            }
        })
        .collect();
    if allowed.is_empty() {
        return Err(Failure::Refused(refused_reason(host, &refused), first));
    }
    let deadline = tokio::time::Instant::now() + shared.config.connect_wait;
    let mut last = String::new();
    for ip in allowed {
        match tokio::time::timeout_at(deadline, TcpStream::connect((ip, port))).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok((s, ip));
            }
            Ok(Err(e)) => last = format!("connecting to {}: {e}", SocketAddr::new(ip, port)),
            Err(_) => {
                last = format!(
                    "connecting to {}: no answer within {}s",
                    SocketAddr::new(ip, port),
                    shared.config.connect_wait.as_secs()
                );
                break;
            }
        }
    }
    Err(Failure::Failed(last))
}

/// Why every address of `host` was refused, bounded: a name with many
/// answers must not make a log line the host drops as over-long (the
/// refusal would vanish from `sbx egress log`).
pub(super) fn refused_reason(host: &str, reasons: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut s = format!("{host}: {}", reasons.iter().take(SHOWN).cloned().collect::<Vec<_>>().join("; "));
    if reasons.len() > SHOWN {
        s.push_str(&format!("; and {} more refused addresses", reasons.len() - SHOWN));
    }
    s
}

async fn resolve(shared: &Shared, host: &str, port: u16) -> std::io::Result<Vec<IpAddr>> {
    match shared.config.dns {
        Some(server) => dns::resolve(server, host, shared.config.dns_wait).await,
        None => {
            let found = tokio::time::timeout(shared.config.dns_wait * 2, tokio::net::lookup_host((host, port)))
                .await
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer from the resolver"))??;
            Ok(found.map(|a| a.ip()).collect())
        }
    }
}

//! A private route's forwarder: the program `sbx __forward` runs in the
//! forwarder container (see `model::forward`). It listens on the routes'
//! ports only, on the addresses it has at start (the sandbox's private
//! network alone: the upstream network is connected later, so nothing
//! listens there), and relays each connection as bytes to the same port of
//! the service. It reads nothing of what it relays: what the sandbox may
//! send the service is the route's business, not the forwarder's.
//!
//! The sandbox is hostile: at most [`MAX_CONNECTIONS`] at once (the next is
//! closed at once), 8 KiB buffers each way (`copy_bidirectional`), a
//! half-close passed on as one, a connection ended when either side errs.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

pub use crate::model::forward::MAX_CONNECTIONS;

/// `sbx __forward`: what a forwarder container runs.
#[derive(Debug, Clone, clap::Args)]
pub struct ForwardArgs {
    /// A port to relay, to the same port of the service (repeat for more).
    #[arg(long = "port", value_name = "PORT", required = true, value_parser = clap::value_parser!(u16).range(1..))]
    pub ports: Vec<u16>,
    /// The service's name (or address) on the upstream network.
    #[arg(long, value_name = "NAME")]
    pub upstream: String,
}

/// Docker's embedded resolver, inside every container on a user-defined network.
const RESOLVER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 11)), 53);

/// Relay until killed (`revoke`, `destroy`: the kernel closes every relayed
/// connection with the process).
pub fn run(args: ForwardArgs) -> std::io::Result<()> {
    let own = super::own_addresses()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async move {
        let mut listeners = Vec::new();
        for ip in &own {
            for port in &args.ports {
                listeners.push((TcpListener::bind((*ip, *port)).await?, *port));
            }
        }
        serve(listeners, Upstream::new(args.upstream, own), MAX_CONNECTIONS).await;
        Ok(())
    })
}

/// Where connections go; tests shorten the waits.
pub(crate) struct Upstream {
    name: String,
    resolver: SocketAddr,
    /// The forwarder's own listening addresses: never dialled (a loop).
    own: Vec<IpAddr>,
    dns_wait: Duration,
    connect_wait: Duration,
}

impl Upstream {
    pub(crate) fn new(name: String, own: Vec<IpAddr>) -> Self {
        Upstream {
            name,
            resolver: RESOLVER,
            own,
            dns_wait: Duration::from_secs(2),
            connect_wait: Duration::from_secs(10),
        }
    }
}

/// Accept on every listener (each with the port it relays to), forever.
pub(crate) async fn serve(listeners: Vec<(TcpListener, u16)>, up: Upstream, max: usize) {
    let slots = Arc::new(Semaphore::new(max));
    let up = Arc::new(up);
    for (listener, port) in listeners {
        let (slots, up) = (slots.clone(), up.clone());
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((client, _)) => {
                        // Over the limit: dropped, so closed at once.
                        let Ok(permit) = slots.clone().try_acquire_owned() else { continue };
                        let up = up.clone();
                        tokio::spawn(async move {
                            relay(&up, client, port).await;
                            drop(permit);
                        });
                    }
                    // Out of descriptors, most likely: wait for some to close.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        });
    }
    std::future::pending::<()>().await
}

async fn relay(up: &Upstream, mut client: TcpStream, port: u16) {
    let Some(mut server) = connect(up, port).await else { return };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    // At one side's EOF, the other's write side is shut: a half-close stays one.
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
}

/// The service, at each address its name has now (it may have restarted).
async fn connect(up: &Upstream, port: u16) -> Option<TcpStream> {
    let ips = match up.name.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => super::dns::resolve(up.resolver, &up.name, up.dns_wait).await.ok()?,
    };
    for ip in ips.into_iter().filter(|ip| !up.own.contains(ip)) {
        if let Ok(Ok(s)) = tokio::time::timeout(up.connect_wait, TcpStream::connect((ip, port))).await {
            return Some(s);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const FWD: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

    /// An echo service on 127.0.0.1 and a forwarder for its port on
    /// 127.0.0.2 (the same port, as in a forwarder container).
    async fn rig(max: usize) -> SocketAddr {
        let service = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = service.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = service.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let listener = TcpListener::bind((FWD, port)).await.unwrap();
        let up = Upstream::new("127.0.0.1".into(), vec![FWD]);
        tokio::spawn(serve(vec![(listener, port)], up, max));
        SocketAddr::new(FWD, port)
    }

    async fn read_all(s: &mut TcpStream) -> Vec<u8> {
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await.unwrap().unwrap();
        got
    }

    #[tokio::test]
    async fn relays_both_ways_and_passes_a_half_close_on() {
        let fwd = rig(4).await;
        let mut c = TcpStream::connect(fwd).await.unwrap();
        c.write_all(b"ping").await.unwrap();
        let mut four = [0u8; 4];
        c.read_exact(&mut four).await.unwrap();
        assert_eq!(&four, b"ping");
        // Half-closed: the service sees EOF, its echo of the rest still comes back.
        c.write_all(b"last").await.unwrap();
        c.shutdown().await.unwrap();
        assert_eq!(read_all(&mut c).await, b"last");
    }

    #[tokio::test]
    async fn connections_over_the_limit_are_closed_at_once() {
        let fwd = rig(2).await;
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut c = TcpStream::connect(fwd).await.unwrap();
            c.write_all(b"x").await.unwrap();
            let mut one = [0u8; 1];
            c.read_exact(&mut one).await.unwrap();
            held.push(c);
        }
        let mut over = TcpStream::connect(fwd).await.unwrap();
        assert_eq!(read_all(&mut over).await, b"", "the third connection is closed unserved");
        // A slot freed is a slot served.
        drop(held.pop());
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut again = TcpStream::connect(fwd).await.unwrap();
        again.write_all(b"y").await.unwrap();
        again.shutdown().await.unwrap();
        assert_eq!(read_all(&mut again).await, b"y");
    }

    #[tokio::test]
    async fn a_service_that_refuses_closes_the_sandboxs_connection() {
        let listener = TcpListener::bind((FWD, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Upstream::new("127.0.0.1".into(), vec![FWD]);
        tokio::spawn(serve(vec![(listener, port)], up, 4));
        let mut c = TcpStream::connect((FWD, port)).await.unwrap();
        assert_eq!(read_all(&mut c).await, b"");
    }

    #[tokio::test]
    async fn its_own_address_is_never_dialled() {
        let listener = TcpListener::bind((FWD, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        // The upstream name resolving to the forwarder itself would relay to itself forever.
        let up = Upstream::new(FWD.to_string(), vec![FWD]);
        tokio::spawn(serve(vec![(listener, port)], up, 4));
        let mut c = TcpStream::connect((FWD, port)).await.unwrap();
        assert_eq!(read_all(&mut c).await, b"");
    }
}

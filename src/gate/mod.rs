//! The egress gate: the program `sbx __gate` runs inside a
//! sandbox's gate container. An HTTP proxy (CONNECT and plain-HTTP
//! absolute-URI requests) that lets the sandbox reach exactly what its
//! policy allows: names judged before any DNS query, every resolved address
//! judged again (no loopback, link-local, private or other special-purpose
//! ranges unless a CIDR rule says so; none of the Docker host's own
//! addresses, which the policy lists, unless a rule names exactly one), a
//! TLS hello held to the CONNECT host, one decision-log line per connection
//! on stdout, and the policy file followed live. For the hosts the policy
//! lists under `terminate` (a secret or request rules name them) the gate
//! terminates TLS with a certificate from the vault sbx pushed over the
//! control channel (`vault`), checks and rebuilds every request, puts the
//! secrets' values in and takes them out of responses (`terminate`), and
//! logs a line per request.
//!
//! Resources, for the container's limits: at most [`MAX_CONNECTIONS`]
//! connections at once (beyond: 503), each holding two sockets plus two
//! UDP sockets while it resolves, so [`OPEN_FILES`] descriptors; one thread
//! for the proxy plus at most [`BLOCKING_THREADS`] for the engine's resolver
//! (`getaddrinfo`, without `--dns`), so [`PIDS`] tasks; 128 KiB of buffers
//! per connection (a terminated one: about 100 KiB idle, with rustls's,
//! up to about 1.5 MiB in a bulk transfer).

mod conn;
mod dial;
mod dns;
pub mod forward;
mod head;
mod splice;
mod terminate;
mod tls;
pub mod vault;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::spec::egress::{LogLine, Policy};

/// Connections served at once; the next one gets 503.
pub const MAX_CONNECTIONS: usize = 1024;
/// Open files the gate needs: 3 per connection at worst (client, upstream
/// or two resolver sockets), listeners, stdio and the policy file, rounded up.
pub const OPEN_FILES: u64 = 4096;
/// Threads for blocking name lookups (`getaddrinfo`) without `--dns`.
pub const BLOCKING_THREADS: usize = 8;
/// Tasks the gate runs: the proxy thread, the lookup threads, slack.
pub const PIDS: u64 = 32;
/// How often the gate looks at the policy file (the host's change takes
/// effect within one second).
pub const POLICY_POLL: Duration = Duration::from_millis(250);
/// A policy file larger than this is refused (the host writes a few KiB).
const MAX_POLICY: u64 = 1 << 20;

/// `sbx __gate`: what the gate container runs.
#[derive(Debug, Clone, clap::Args)]
pub struct GateArgs {
    /// The policy file (JSON, `spec::egress::Policy`), followed live.
    #[arg(long, value_name = "FILE")]
    pub policy: PathBuf,
    /// The sandbox this gate serves (for the log).
    #[arg(long, value_name = "ID")]
    pub sandbox: String,
    /// The proxy port.
    #[arg(long, default_value_t = 3128)]
    pub port: u16,
    /// Resolve names with this resolver (UDP port 53) instead of the engine's.
    #[arg(long, value_name = "IP")]
    pub dns: Option<IpAddr>,
}

/// Run the gate until it is killed: listen on the container's addresses at
/// start (the sandbox's internal network only: the egress network is
/// connected later and must never reach the proxy), log to stdout.
pub fn run(args: GateArgs) -> std::io::Result<()> {
    let (bytes, policy) = read_policy(&args.policy)?;
    let policy = policy.map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let addrs = own_addresses()?;
    // Before any value arrives: no core dump, no ptrace by a process of
    // the gate's uid that is not its parent.
    vault::harden()?;
    let rt =
        tokio::runtime::Builder::new_current_thread().enable_all().max_blocking_threads(BLOCKING_THREADS).build()?;
    rt.block_on(async move {
        let mut listeners = Vec::new();
        for ip in addrs {
            listeners.push(TcpListener::bind((ip, args.port)).await?);
        }
        let control = vault::bind(crate::model::gate::VAULT_SOCKET)?;
        let (vault_tx, vault_rx) = watch::channel(None);
        tokio::spawn(vault::listen(control, vault_tx));
        let config = Config::new(args.sandbox, args.dns.map(|ip| SocketAddr::new(ip, 53)));
        serve(listeners, config, Files { path: args.policy, bytes, policy, vault: vault_rx }, Box::new(log_stdout))
            .await;
        Ok(())
    })
}

/// The gate's settings; tests shorten the waits and the limit.
pub(crate) struct Config {
    pub sandbox: String,
    pub dns: Option<SocketAddr>,
    pub head_wait: Duration,
    pub connect_wait: Duration,
    pub dns_wait: Duration,
    pub max_connections: usize,
}

impl Config {
    pub fn new(sandbox: String, dns: Option<SocketAddr>) -> Self {
        Config {
            sandbox,
            dns,
            head_wait: Duration::from_secs(10),
            connect_wait: Duration::from_secs(10),
            dns_wait: Duration::from_secs(2),
            max_connections: MAX_CONNECTIONS,
        }
    }
}

type Log = Box<dyn Fn(&LogLine) + Send + Sync>;

/// What every connection shares.
pub(crate) struct Shared {
    config: Config,
    /// The current policy (the watcher replaces it).
    policy: watch::Receiver<Arc<Policy>>,
    /// The current vault (the control channel replaces it).
    vault: vault::VaultRx,
    sink: Log,
}

impl Shared {
    /// Write `line` with every placeholder and value the vault holds taken
    /// out: the sandbox chooses paths, methods, header names, hosts and
    /// server names, and the log is read where the placeholder is no one's.
    fn log(&self, line: &LogLine) {
        let armed = self.vault.borrow().clone();
        let needles: Vec<&str> = armed
            .iter()
            .flat_map(|a| a.vault.secrets.iter())
            .flat_map(|s| [s.placeholder.as_str(), s.value.as_str()])
            .collect();
        (self.sink)(&line.scrubbed(&needles));
    }
}

/// The policy file (its path, the bytes read at start, their policy) and
/// the vault channel the gate serves with.
pub(crate) struct Files {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    pub policy: Policy,
    pub vault: vault::VaultRx,
}

/// Accept on every listener and follow the policy file, forever.
pub(crate) async fn serve(listeners: Vec<TcpListener>, config: Config, files: Files, log: Log) {
    let Files { path, bytes, policy, vault } = files;
    let (tx, rx) = watch::channel(Arc::new(policy));
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let shared = Arc::new(Shared { config, policy: rx, vault, sink: log });
    for listener in listeners {
        let (shared, slots) = (shared.clone(), slots.clone());
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let permit = slots.clone().try_acquire_owned().ok();
                        let shared = shared.clone();
                        tokio::spawn(async move {
                            conn::handle(shared, stream, permit.is_some()).await;
                            drop(permit);
                        });
                    }
                    // Out of descriptors, most likely: wait for some to close.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        });
    }
    follow_policy(&path, bytes, tx).await
}

/// Poll the policy file; a changed one that parses replaces the policy (the
/// connections it no longer allows are cut, see `conn`); one that does not
/// is reported on stderr and the last good one stays.
async fn follow_policy(path: &Path, mut last: Vec<u8>, tx: watch::Sender<Arc<Policy>>) {
    let mut tick = tokio::time::interval(POLICY_POLL);
    let mut complained = None;
    loop {
        tick.tick().await;
        let (bytes, parsed) = match read_policy(path) {
            Ok(r) => r,
            Err(e) => {
                let msg = format!("reading the policy {}: {e}; keeping the last good one", path.display());
                complain(&mut complained, msg);
                continue;
            }
        };
        if bytes == last {
            continue;
        }
        match parsed {
            Ok(policy) => {
                last = bytes;
                complained = None;
                tx.send_replace(Arc::new(policy));
            }
            Err(e) => complain(
                &mut complained,
                format!("the policy {} does not parse ({e}); keeping the last good one", path.display()),
            ),
        }
    }
}

/// Say it once, not every poll.
fn complain(last: &mut Option<String>, msg: String) {
    if last.as_ref() != Some(&msg) {
        eprintln!("sbx gate: {msg}");
        *last = Some(msg);
    }
}

fn read_policy(path: &Path) -> std::io::Result<(Vec<u8>, Result<Policy, String>)> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(MAX_POLICY + 1).read_to_end(&mut bytes)?;
    let parsed = match std::str::from_utf8(&bytes) {
        _ if bytes.len() as u64 > MAX_POLICY => Err(format!("over {MAX_POLICY} bytes")),
        Ok(text) => Policy::from_json(text),
        Err(_) => Err("not UTF-8".to_string()),
    };
    Ok((bytes, parsed))
}

/// One JSON line per connection, flushed, for `docker logs` (bounded by the
/// engine's log options) and `sbx egress log`.
fn log_stdout(line: &LogLine) {
    if let Ok(mut text) = serde_json::to_string(line) {
        text.push('\n');
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    }
}

/// The container's own addresses now: every interface but loopback; IPv6
/// link-local ones are skipped (they need a scope, and Docker's names never
/// resolve to them).
pub(crate) fn own_addresses() -> std::io::Result<Vec<IpAddr>> {
    let found: Vec<IpAddr> = crate::host::host_addrs::interfaces()?
        .into_iter()
        .filter(|ip| !matches!(ip, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80))
        .collect();
    if found.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::NotFound, "the gate has no network address to listen on"));
    }
    Ok(found)
}

#[cfg(test)]
mod tests;

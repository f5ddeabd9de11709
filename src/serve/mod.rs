//! `sbx serve`: a second front end beside `commands`, speaking E2B's API
//! so the E2B SDKs drive sbx unchanged. The control plane (`/v2/sandboxes`
//! ...) and the envd API (`/process.Process/*`, `/health`) call the same
//! [`crate::sandbox::Driver`] operations and workbench code the CLI
//! commands call; nothing here shells out to sbx or builds a shell string.
//!
//! Shape: flags are checked (`config`) and the listener bound before the
//! server starts. Requests are served on one tokio thread (hyper, HTTP/1.1);
//! every driver call, which blocks on docker, runs on a thread of its own
//! ([`Shared::blocking`]), so one slow sandbox never stalls the others.
//! Per-sandbox state the labels cannot hold is in one file (`index`).
//! SIGTERM or SIGINT stops accepting and lets requests in flight end
//! (bounded); the sandboxes stay, with their TTLs.

mod answer;
mod config;
mod control;
mod envd;
mod files;
mod fs;
mod http;
mod idempotency;
mod index;
mod lifecycle;
mod query;

use std::path::Path;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::server::graceful::GracefulShutdown;

use crate::cli::ServeArgs;
use crate::error::{Error, Result};
use crate::output::Printer;
use crate::sandbox::Driver;

pub use config::{parse_template, Config, Listen};

/// Starts the TTL watchdog of a sandbox just made (`commands::watchdog::spawn`).
pub type Watchdog<'a> = &'a (dyn Fn(&str, &Path) -> Result<()> + Sync);

/// What a worker thread is handed: the driver and the watchdog starter.
pub struct Ops<'a> {
    pub driver: &'a Driver,
    pub watchdog: Watchdog<'a>,
}

impl Ops<'_> {
    /// The one handle to sandbox `id` (as the request named it) that every
    /// workbench call takes; its errors name `id`.
    pub fn open(&self, id: &str) -> crate::error::Result<crate::workbench::Target<'_>> {
        let id: crate::model::names::SandboxId = id.parse()?;
        self.driver.open(&id)
    }
}

type Job = Box<dyn for<'a> FnOnce(&Ops<'a>) + Send>;

/// What every request handler shares.
pub struct Shared {
    keys: Vec<String>,
    config: Config,
    index: index::Index,
    jobs: std::sync::mpsc::Sender<Job>,
    /// The commands running through `process.Process/Start`, by sandbox
    /// then pid: what `process.Process/List` answers (as envd, only what
    /// it started).
    idempotency: idempotency::Keys,
    procs: std::sync::Mutex<std::collections::BTreeMap<String, std::collections::BTreeMap<u32, serde_json::Value>>>,
}

impl Shared {
    /// Run `f` on a thread of its own with the driver; None when the
    /// server is shutting down.
    pub async fn blocking<T: Send + 'static>(
        &self,
        f: impl for<'a> FnOnce(&Ops<'a>) -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.spawn(move |ops| {
            let _ = tx.send(f(ops));
        });
        rx.await.ok()
    }

    /// Run `f` on a thread of its own, not waiting for it (a stream's producer).
    pub fn spawn(&self, f: impl for<'a> FnOnce(&Ops<'a>) + Send + 'static) {
        let _ = self.jobs.send(Box::new(f));
    }
}

/// `sbx serve`: check the flags, bind, serve until killed. Sandboxes
/// outlive the server (their TTL watchdogs are processes of their own).
pub fn run(args: &ServeArgs, driver: &Driver, watchdog: Watchdog<'_>, out: &Printer) -> Result<()> {
    let config = Config::from_args(args)?;
    let data = config::private_dir(&driver.state()?.state.dir)?;
    let keys = match &config.keys {
        Some(k) => k.clone(),
        None => {
            let (key, path, made) = config::own_key(driver.state()?.state.dir.as_path())?;
            let what = if made { "made the API key" } else { "the API key is" };
            out.note("api_key", &format!("{what} in {} (X-API-KEY, or E2B_API_KEY for the SDK)", path.display()));
            vec![key]
        }
    };
    let index = index::Index::open(data)?;
    let listener = bind(&config.listen)?;
    out.note("listening", &format!("listening on {}", shown(&config.listen)));
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    let shared =
        Arc::new(Shared { keys, config, index, jobs: tx, idempotency: Default::default(), procs: Default::default() });
    let ops = Ops { driver, watchdog };
    std::thread::scope(|s| {
        let ops = &ops;
        s.spawn(move || {
            for job in rx {
                s.spawn(move || job(ops));
            }
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the server's runtime", e))?;
        let served = rt.block_on(serve(listener, shared));
        drop(rt);
        // Streams still running past the drain are cut: their docker exec
        // ends with sbx, and every sandbox stays, with its TTL.
        if served.is_ok() {
            out.note("stopped", "stopped; the sandboxes keep running until their TTL");
            std::process::exit(0);
        }
        served
    })
}

/// How long requests in flight get to end after SIGTERM or SIGINT.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Accept until SIGTERM/SIGINT, then stop accepting and let what is in
/// flight end, for at most [`DRAIN`].
async fn serve(l: Bound, shared: Arc<Shared>) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let sig = |k| signal(k).map_err(|e| Error::io("watching for SIGTERM", e));
    let (mut term, mut int) = (sig(SignalKind::terminate())?, sig(SignalKind::interrupt())?);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::select! {
        r = accept(l, &shared, &graceful) => r?,
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
    Ok(())
}

fn shown(l: &Listen) -> String {
    match l {
        Listen::Tcp(a) => format!("http://{a}"),
        Listen::Unix(p) => format!("unix:{}", p.display()),
    }
}

enum Bound {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

/// Bind now, so a taken port fails before anything else happens. A unix
/// socket is made 0600 by the umask it is bound under (no window where
/// another user could connect); a stale socket of ours is replaced.
fn bind(l: &Listen) -> Result<Bound> {
    let ctx = |e| Error::io(format!("listening on {}", shown(l)), e);
    match l {
        Listen::Tcp(a) => {
            let t = std::net::TcpListener::bind(a).map_err(ctx)?;
            t.set_nonblocking(true).map_err(ctx)?;
            Ok(Bound::Tcp(t))
        }
        Listen::Unix(p) => {
            use std::os::unix::fs::FileTypeExt;
            if let Ok(m) = std::fs::symlink_metadata(p) {
                let live = std::os::unix::net::UnixStream::connect(p).is_ok();
                if m.file_type().is_socket() && !live {
                    let _ = std::fs::remove_file(p);
                }
            }
            let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
            let bound = std::os::unix::net::UnixListener::bind(p);
            nix::sys::stat::umask(old);
            let u = bound.map_err(ctx)?;
            u.set_nonblocking(true).map_err(ctx)?;
            Ok(Bound::Unix(u))
        }
    }
}

/// How long a client may take to send a request's headers (and so how
/// long a kept-alive connection may idle): one that sends them a byte at a
/// time (slowloris) is cut off, not held forever. hyper's own default; the
/// E2B SDK pools idle connections for longer and reconnects when one is closed.
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The most connections served at once; past it, new ones wait in the
/// listen backlog. Each holds a file descriptor, and a command streaming
/// on it holds a few more: the cap keeps them well under the usual limit.
const MAX_CONNECTIONS: usize = 256;

async fn accept(l: Bound, shared: &Arc<Shared>, graceful: &GracefulShutdown) -> Result<()> {
    let io = |e| Error::io("accepting a connection", e);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    match l {
        Bound::Tcp(t) => {
            let t = tokio::net::TcpListener::from_std(t).map_err(io)?;
            loop {
                let slot = slots.clone().acquire_owned().await.expect("the semaphore is never closed");
                if let Some((stream, _)) = accepted(t.accept().await).await {
                    let _ = stream.set_nodelay(true);
                    connection(stream, shared, graceful, HEADER_TIMEOUT, slot);
                }
            }
        }
        Bound::Unix(u) => {
            let u = tokio::net::UnixListener::from_std(u).map_err(io)?;
            loop {
                let slot = slots.clone().acquire_owned().await.expect("the semaphore is never closed");
                if let Some((stream, _)) = accepted(u.accept().await).await {
                    connection(stream, shared, graceful, HEADER_TIMEOUT, slot);
                }
            }
        }
    }
}

/// A failed accept (out of file descriptors, a connection reset before it
/// was taken) ends that connection, never the server: it is logged, and
/// the next accept waits a little so a full descriptor table can drain.
async fn accepted<T>(r: std::io::Result<T>) -> Option<T> {
    match r {
        Ok(x) => Some(x),
        Err(e) => {
            tracing::warn!(error = %e, "accepting a connection failed");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            None
        }
    }
}

/// Serve one connection: headers within `header_timeout`, its slot of
/// [`MAX_CONNECTIONS`] given back when it ends.
fn connection<S>(
    stream: S,
    shared: &Arc<Shared>,
    graceful: &GracefulShutdown,
    header_timeout: std::time::Duration,
    slot: tokio::sync::OwnedSemaphorePermit,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let shared = shared.clone();
    let service = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, std::convert::Infallible>(route(req, shared).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    let conn = graceful.watch(conn);
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "connection ended");
        }
        drop(slot);
    });
}

/// Whether `path` is envd's (a sandbox's access token), not the control plane's (an API key).
fn is_envd(path: &str) -> bool {
    path == "/health"
        || path == "/files"
        || path.starts_with("/process.Process/")
        || path.starts_with("/filesystem.Filesystem/")
}

async fn route(req: Request<Incoming>, shared: Arc<Shared>) -> Response<http::Body> {
    if is_envd(req.uri().path()) {
        return envd::handle(req, shared).await;
    }
    let key_ok =
        http::api_key(req.headers()).is_some_and(|k| http::matches_any(k, shared.keys.iter().map(|k| k.as_str())));
    if !key_ok {
        return http::unauthorized();
    }
    control::handle(req, shared).await
}

#[cfg(test)]
mod tests;

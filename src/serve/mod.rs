//! `sbx serve`: a second front end beside `commands`, speaking E2B's API
//! so the E2B SDKs drive sbx unchanged. The control plane (`/v2/sandboxes`
//! ...) and the envd API (`/process.Process/*`, `/health`) call the same
//! [`crate::sandbox::Driver`] operations and workbench code the CLI
//! commands call; nothing here shells out to sbx or builds a shell string.
//!
//! Shape: flags are checked (`config`) and the listener bound before the
//! server starts. Requests are served on one tokio thread (hyper: HTTP/1.1,
//! and HTTP/2 over TLS when the client's ALPN asks for it);
//! every driver call, which blocks on docker, runs on a thread of its own
//! ([`Shared::blocking`]), so one slow sandbox never stalls the others.
//! Per-sandbox state the labels cannot hold is in one file (`index`).
//! SIGTERM or SIGINT stops accepting and lets requests in flight end
//! (bounded); the sandboxes stay, with their TTLs.

mod activity;
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
mod make;
mod metrics;
mod network;
mod process;
mod query;
mod watch;
mod watch_events;
mod watchers;

use std::path::Path;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response};
use tokio_rustls::rustls;

use crate::cli::ServeArgs;
use crate::error::{Error, Result};
use crate::output::Printer;
use crate::sandbox::Driver;
use activity::{Activity, Tracked};

pub use config::{parse_template, Config, Listen};
pub use index::shown as e2b_records;
pub use make::{make, template_for, Defaults, Made, NewSandbox, Template};
pub use network::NetworkAsk;
// `sbx mcp` creates through the same code as serve's create.
pub(crate) use control::{env_var, made as create_recorded};

/// Starts the TTL watchdog of a sandbox just made (`commands::watchdog::spawn`).
pub type Watchdog<'a> = &'a (dyn Fn(&str, &Path) -> Result<()> + Sync);

/// Starts the refiller of a pool a claim took from (`commands::pool::ensure_refiller`).
pub type Refill<'a> = &'a (dyn Fn(&crate::host::pool::Pool) + Sync);

/// What the front end hands the server to start beside a sandbox it made.
pub struct Hooks<'a> {
    pub watchdog: Watchdog<'a>,
    pub refill: Refill<'a>,
}

/// What a worker thread is handed: the driver, the watchdog starter, the refiller.
pub struct Ops<'a> {
    pub driver: &'a Driver,
    pub watchdog: Watchdog<'a>,
    pub refill: Refill<'a>,
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
    procs: process::Procs,
    /// The sync SDK's filesystem watchers (CreateWatcher), by id.
    watchers: watchers::Watchers,
}

impl Shared {
    /// What `sbx mcp` hands [`make`]: serve's checked config and an index
    /// of its own in memory (no file, no lock: it never answers E2B's API),
    /// no API keys and no worker threads.
    pub(crate) fn local(config: Config) -> Self {
        let (jobs, _) = std::sync::mpsc::channel();
        Shared {
            keys: Vec::new(),
            config,
            index: index::Index::memory(),
            jobs,
            idempotency: Default::default(),
            procs: Default::default(),
            watchers: Default::default(),
        }
    }

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
/// `docker_host` is `$DOCKER_HOST`, as `create` checks mounts against it.
pub fn run(
    args: &ServeArgs,
    docker_host: Option<&str>,
    driver: &Driver,
    hooks: Hooks<'_>,
    out: &Printer,
) -> Result<()> {
    let config = Config::from_args(args, docker_host)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(config::tls(cert, key)?),
        _ => None,
    };
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
    // The address bound, so `--listen 127.0.0.1:0` says which port it got.
    let bound = match &listener {
        Bound::Tcp(t) => t.local_addr().map(Listen::Tcp).unwrap_or_else(|_| config.listen.clone()),
        Bound::Unix(_) => config.listen.clone(),
    };
    out.note("listening", &format!("listening on {}", shown(&bound, tls.is_some())));
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    let shared = Arc::new(Shared {
        keys,
        config,
        index,
        jobs: tx,
        idempotency: Default::default(),
        procs: Default::default(),
        watchers: Default::default(),
    });
    let ops = Ops { driver, watchdog: hooks.watchdog, refill: hooks.refill };
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
        let served = rt.block_on(serve(listener, tls, shared));
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

/// Accept until SIGTERM/SIGINT, then stop accepting, ask every connection
/// to end once its requests have (HTTP/1.1: no keep-alive; HTTP/2:
/// GOAWAY), and wait for that for at most [`DRAIN`].
async fn serve(l: Bound, tls: Option<Arc<rustls::ServerConfig>>, shared: Arc<Shared>) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let sig = |k| signal(k).map_err(|e| Error::io("watching for SIGTERM", e));
    let (mut term, mut int) = (sig(SignalKind::terminate())?, sig(SignalKind::interrupt())?);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let limits = Limits { shared, stop: stopping, header_timeout: HEADER_TIMEOUT, idle_timeout: IDLE_TIMEOUT };
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    tokio::select! {
        r = accept(l, tls, &limits, &slots) => r?,
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    let _ = stop.send(true);
    // Every connection holds a slot until it ends: all slots back, all ended.
    let _ = tokio::time::timeout(DRAIN, slots.acquire_many(MAX_CONNECTIONS as u32)).await;
    Ok(())
}

fn shown(l: &Listen, tls: bool) -> String {
    match l {
        Listen::Tcp(a) if tls => format!("https://{a}"),
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
    let ctx = |e| Error::io(format!("listening on {}", shown(l, false)), e);
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

/// How long a client may take to finish its TLS handshake, or to send
/// its headers until a request of its has been let in: one that sends
/// them a byte at a time (slowloris), or sends only refused requests, is
/// cut off, not held forever. hyper's own default.
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a connection that has been served may idle between requests.
/// Longer than the E2B SDK keeps an idle connection in its pool (300 s,
/// `E2B_KEEPALIVE_EXPIRY`): a server that closes a pooled connection
/// first races the client's next request on it, which then fails with
/// "connection closed before message completed" (seen with `kill` after
/// 30 s of file transfers on another connection).
const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(330);

/// The most connections served at once; past it, new ones wait in the
/// listen backlog. Each holds a file descriptor, and a command streaming
/// on it holds a few more: the cap keeps them well under the usual limit.
const MAX_CONNECTIONS: usize = 256;

/// The most requests one HTTP/2 connection may have open at once (hyper's
/// default is 200). Each running command is one, with a thread of its
/// own here: this keeps one connection from costing more than a few
/// dozen HTTP/1.1 ones, and the SDK opens another connection past it.
const MAX_STREAMS: u32 = 64;

/// The most header bytes one HTTP/2 request may send (decoded, as
/// SETTINGS_MAX_HEADER_LIST_SIZE counts them): E2B's requests send well under 2 KiB.
const MAX_HEADER_LIST: u32 = 16 * 1024;

/// What every connection is served under: the shared state, the word
/// to stop, and the header (and TLS handshake) timeout.
#[derive(Clone)]
struct Limits {
    shared: Arc<Shared>,
    stop: tokio::sync::watch::Receiver<bool>,
    header_timeout: std::time::Duration,
    idle_timeout: std::time::Duration,
}

async fn accept(
    l: Bound,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: &Limits,
    slots: &Arc<tokio::sync::Semaphore>,
) -> Result<()> {
    let io = |e| Error::io("accepting a connection", e);
    match l {
        Bound::Tcp(t) => {
            let t = tokio::net::TcpListener::from_std(t).map_err(io)?;
            loop {
                let slot = slots.clone().acquire_owned().await.expect("the semaphore is never closed");
                if let Some((stream, _)) = accepted(t.accept().await).await {
                    let _ = stream.set_nodelay(true);
                    match &tls {
                        Some(tls) => tls_connection(stream, tls.clone(), limits.clone(), slot),
                        None => connection(stream, limits.clone(), slot),
                    }
                }
            }
        }
        Bound::Unix(u) => {
            let u = tokio::net::UnixListener::from_std(u).map_err(io)?;
            loop {
                let slot = slots.clone().acquire_owned().await.expect("the semaphore is never closed");
                if let Some((stream, _)) = accepted(u.accept().await).await {
                    connection(stream, limits.clone(), slot);
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

/// Serve one plain connection (HTTP/1.1), its slot of [`MAX_CONNECTIONS`]
/// given back when it ends.
fn connection<S>(stream: S, limits: Limits, slot: tokio::sync::OwnedSemaphorePermit)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        http1(stream, &limits).await;
        drop(slot);
    });
}

/// Serve one TLS connection: the handshake within the header timeout,
/// then HTTP/2 when ALPN chose it, else HTTP/1.1. A client that speaks
/// plain HTTP here is told so, in plain HTTP and E2B's error shape, and closed.
fn tls_connection<S>(stream: S, tls: tokio_rustls::TlsAcceptor, limits: Limits, slot: tokio::sync::OwnedSemaphorePermit)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let handshake = async {
            use tokio::io::AsyncBufReadExt;
            // A TLS connection starts with a handshake record (type 22); peeked, not taken.
            let mut stream = tokio::io::BufReader::new(stream);
            let first = stream.fill_buf().await?.first().copied();
            match first {
                Some(0x16) => tls.accept(stream).await.map(Some),
                Some(_) => plain_http_refused(stream).await.map(|()| None),
                None => Ok(None),
            }
        };
        match tokio::time::timeout(limits.header_timeout, handshake).await {
            Err(_) => tracing::debug!("TLS handshake timed out"),
            Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
            Ok(Ok(None)) => {}
            Ok(Ok(Some(stream))) => {
                let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                tracing::debug!(protocol = if h2 { "h2" } else { "http/1.1" }, "TLS connection");
                if h2 {
                    http2(stream, &limits).await
                } else {
                    http1(stream, &limits).await
                }
            }
        }
        drop(slot);
    });
}

/// The one answer to plain HTTP on the TLS port. What the client sent
/// is read (a little, briefly) after it, so the close does not reset
/// the connection before the client has read the answer.
async fn plain_http_refused<S>(mut stream: S) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = r#"{"code":400,"message":"sbx serve speaks TLS on this port: use https://"}"#;
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(answer.as_bytes()).await?;
    stream.shutdown().await?;
    let mut sink = [0u8; 4096];
    let drain = async {
        for _ in 0..16 {
            if stream.read(&mut sink).await? == 0 {
                break;
            }
        }
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drain).await;
    Ok(())
}

fn service(
    shared: &Arc<Shared>,
    activity: Arc<Activity>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<http::Body>,
    Error = std::convert::Infallible,
    Future = impl std::future::Future<Output = std::result::Result<Response<http::Body>, std::convert::Infallible>> + Send,
> + Clone {
    let shared = shared.clone();
    hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        let activity = activity.clone();
        let busy = activity.begin();
        async move {
            let r = route(req, shared).await;
            // Every request without a matching key or token is a 401.
            if r.status() != hyper::StatusCode::UNAUTHORIZED {
                activity.served();
            }
            Ok::<_, std::convert::Infallible>(
                r.map(|b| http_body_util::BodyExt::boxed(Tracked { body: b, _busy: busy })),
            )
        }
    })
}

/// HTTP/1.1: until a request has been let in, headers within the header
/// timeout; after that, the next request's headers within the idle timeout.
async fn http1<S>(stream: S, limits: &Limits)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::default());
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.idle_timeout)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service(&limits.shared, activity.clone()));
    let mut conn = std::pin::pin!(conn);
    drive(conn.as_mut(), |c| c.graceful_shutdown(), limits, &activity).await;
}

/// HTTP/2 with its abuse surface bounded: [`MAX_STREAMS`] open at once,
/// [`MAX_HEADER_LIST`] of headers, hyper's defaults against rapid reset
/// (CVE-2023-44487: streams reset before they are served count, and past
/// 20 the connection is closed) and against the streams a client makes
/// the server reset. HTTP/2 has no header timeout: a connection idle as
/// [`drive`] says is closed instead, and a peer that stops answering
/// pings while a request runs is dropped.
async fn http2<S>(stream: S, limits: &Limits)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::default());
    let conn = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .timer(hyper_util::rt::TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(MAX_HEADER_LIST)
        .keep_alive_interval(limits.header_timeout)
        .keep_alive_timeout(limits.header_timeout)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service(&limits.shared, activity.clone()));
    let mut conn = std::pin::pin!(conn);
    drive(conn.as_mut(), |c| c.graceful_shutdown(), limits, &activity).await;
}

/// Run `conn` to its end; asked to end gracefully when the server stops
/// or when it has had no request open for the header timeout (while
/// every request on it was refused) or the idle timeout (once one was let
/// in), and dropped if it has not ended [`DRAIN`] after that.
async fn drive<C, E>(
    mut conn: std::pin::Pin<&mut C>,
    shutdown: impl Fn(std::pin::Pin<&mut C>),
    limits: &Limits,
    activity: &Activity,
) where
    C: std::future::Future<Output = std::result::Result<(), E>>,
    E: std::fmt::Display,
{
    let mut stop = limits.stop.clone();
    let idle_for = activity.idle(limits.header_timeout, limits.idle_timeout);
    let ended = tokio::select! {
        r = conn.as_mut() => Some(r),
        _ = stop.wait_for(|s| *s) => None,
        _ = idle_for => None,
    };
    let ended = match ended {
        Some(r) => r,
        None => {
            shutdown(conn.as_mut());
            match tokio::time::timeout(DRAIN, conn.as_mut()).await {
                Ok(r) => r,
                Err(_) => return tracing::debug!("connection cut: still busy after its shutdown"),
            }
        }
    };
    if let Err(e) = ended {
        tracing::debug!(error = %e, "connection ended");
    }
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
#[cfg(test)]
mod tls_tests;

//! The envd API, served by sbx on the host (there is no daemon in the
//! sandbox): `/health`, and `process.Process` Start (server-streaming),
//! SendSignal and List (unary) in Connect RPC with the JSON codec over
//! HTTP/1.1, `filesystem.Filesystem`'s unary calls (`fs`); the rest
//! answers `unimplemented`. Every request names its
//! sandbox (`E2b-Sandbox-Id`) and carries that sandbox's own token
//! (`X-Access-Token`); commands run through `docker exec` as the
//! sandbox's own user, the way `sbx exec` runs them, under sbx's helper
//! (`run`), which relays the command's pid, stdout and stderr as they come.
//!
//! The version reported (`answer::ENVD_VERSION`) is 0.5.7: past 0.4.0 the
//! SDK sends no user unless asked (so the sandbox's own user is the
//! default), past 0.3.0/0.5.2 it may control and close stdin, and from
//! 0.5.7 it may upload file-like or gzipped data as a plain octet stream
//! (bytes and str still go as multipart/form-data, so `/files` needs both);
//! it stays below 0.6.2, whose file-metadata fields sbx would have to
//! invent.

use std::sync::Arc;

use base64::Engine;
use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use super::http::{self, Body};
use super::{Ops, Shared};
use crate::error::{Error, SandboxError};
use crate::workbench::{ExecOpts, RunEnd, RunEvent};

const CONNECT_JSON: &str = "application/connect+json";
/// End-of-stream flag of a Connect envelope.
const END_STREAM: u8 = 0x02;

pub async fn handle(req: Request<Incoming>, shared: Arc<Shared>) -> Response<Body> {
    let Some(id) = authorized(req.headers(), &shared) else {
        return http::unauthorized();
    };
    let path = req.uri().path().to_string();
    match (req.method().clone(), path.as_str()) {
        (Method::GET, "/health") => http::empty(StatusCode::NO_CONTENT),
        (Method::POST, "/process.Process/Start") => start(req, id, shared).await,
        (Method::POST, "/process.Process/SendSignal") => send_signal(req, id, shared).await,
        (Method::POST, "/process.Process/List") => http::json(StatusCode::OK, &list(&id, &shared)),
        (Method::GET, "/files") => {
            let q = req.uri().query().unwrap_or("").to_string();
            super::files::download(&q, id, shared).await
        }
        (Method::POST, "/files") => super::files::upload(req, id, shared).await,
        (Method::POST, p) if super::fs::Rpc::of(p).is_some() => {
            let (rpc, user) = (super::fs::Rpc::of(p).expect("matched"), check_user(req.headers()));
            super::fs::handle(req, rpc, user, id, shared).await
        }
        (_, p) => connect_error(
            StatusCode::NOT_IMPLEMENTED,
            "unimplemented",
            &format!("{p} is not supported by sbx serve yet"),
        ),
    }
}

/// The sandbox the request names, when it carries that sandbox's token.
/// A token is compared even for a sandbox that does not exist, so the
/// answer (and its timing) is the same.
fn authorized(h: &HeaderMap, shared: &Shared) -> Option<String> {
    let id = h.get("e2b-sandbox-id").and_then(|v| v.to_str().ok()).unwrap_or("");
    let token = h.get("x-access-token").and_then(|v| v.to_str().ok()).unwrap_or("");
    let known = crate::spec::parse_id(id).ok().and_then(|_| shared.index.token(id));
    let expected = known.as_deref().unwrap_or("\0no sandbox\0");
    (http::matches_any(token, [expected]) && known.is_some() && !token.is_empty()).then(|| id.to_string())
}

/// A unary (non-stream) Connect error: the HTTP status and `{"code", "message"}`.
fn connect_error(status: StatusCode, code: &str, message: &str) -> Response<Body> {
    http::json(status, &json!({ "code": code, "message": message }))
}

/// One Connect envelope: flags, a big-endian length, the JSON message.
pub fn envelope(flags: u8, msg: &Value) -> Bytes {
    let body = serde_json::to_vec(msg).expect("JSON serializes");
    let mut b = BytesMut::with_capacity(5 + body.len());
    b.put_u8(flags);
    b.put_u32(body.len() as u32);
    b.put_slice(&body);
    b.freeze()
}

/// The one message of a server-streaming request's body.
pub fn unenvelope(body: &[u8]) -> Result<Value, String> {
    if body.len() < 5 {
        return Err("the request is not a Connect envelope".into());
    }
    if body[0] & 0x01 != 0 {
        return Err("compressed messages are not supported".into());
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    if body.len() != 5 + len {
        return Err("the envelope's length does not match the body".into());
    }
    serde_json::from_slice(&body[5..]).map_err(|e| format!("the message is not JSON: {e}"))
}

/// The end of a stream: `{}`, or `{"error": {code, message}}`.
fn end_stream(error: Option<(&str, &str)>) -> Bytes {
    let v = match error {
        None => json!({}),
        Some((code, message)) => json!({ "error": { "code": code, "message": message } }),
    };
    envelope(END_STREAM, &v)
}

/// What `Authorization: Basic` names on an envd request: a user, never a
/// credential. sbx never changes the uid: root is refused, and so is any
/// other name (the sandbox's own user is the only one).
pub fn check_user(h: &HeaderMap) -> Result<(), (&'static str, String)> {
    let Some(v) = h.get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else { return Ok(()) };
    let Some(b64) = v.strip_prefix("Basic ") else { return Ok(()) };
    let raw = base64::engine::general_purpose::STANDARD.decode(b64.trim()).unwrap_or_default();
    let text = String::from_utf8_lossy(&raw);
    let user = text.split(':').next().unwrap_or("");
    match user {
        "" => Ok(()),
        "root" => Err((
            "permission_denied",
            "sbx sandboxes have no root: commands run as the sandbox's own user (drop user=\"root\")".into(),
        )),
        u => Err((
            "invalid_argument",
            format!("user {u:?}: sbx runs every command as the sandbox's own user; give no user"),
        )),
    }
}

/// What a StartRequest asks for: the argv and how to run it.
#[derive(Debug, PartialEq)]
pub struct StartSpec {
    pub cmd: Vec<String>,
    pub opts: ExecOpts,
    /// The request's `process` and `tag`, as List says them back.
    pub config: Value,
    pub tag: Option<String>,
}

pub fn parse_start(msg: &Value) -> Result<StartSpec, String> {
    let p = &msg["process"];
    let cmd = p["cmd"].as_str().filter(|c| !c.is_empty()).ok_or("process.cmd is required")?;
    let mut argv = vec![cmd.to_string()];
    if let Some(args) = p["args"].as_array() {
        for a in args {
            argv.push(a.as_str().ok_or("process.args must be strings")?.to_string());
        }
    }
    let mut env = Vec::new();
    if let Some(m) = p["envs"].as_object() {
        for (k, v) in m {
            let v = v.as_str().ok_or("process.envs must be strings")?;
            env.push(super::control::env_var(k, v).map_err(|e| e.to_string())?);
        }
    }
    let workdir = match p["cwd"].as_str().filter(|c| !c.is_empty()) {
        Some(c) if !c.starts_with('/') => return Err(format!("cwd {c:?} must be an absolute path")),
        c => c.map(str::to_string),
    };
    if !msg["pty"].is_null() {
        return Err("a PTY is not supported by sbx serve yet".into());
    }
    if msg["stdin"].as_bool() == Some(true) {
        return Err("stdin for a command is not supported by sbx serve yet".into());
    }
    let tag = msg["tag"].as_str().map(str::to_string);
    Ok(StartSpec { cmd: argv, opts: ExecOpts { env, workdir, ..Default::default() }, config: p.clone(), tag })
}

async fn start(req: Request<Incoming>, id: String, shared: Arc<Shared>) -> Response<Body> {
    let ct = req.headers().get(hyper::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !ct.starts_with(CONNECT_JSON) {
        return connect_error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unknown", "only application/connect+json is served");
    }
    let user = check_user(req.headers());
    let body = match http::read_body(req.into_body()).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let parsed =
        user.and_then(|()| unenvelope(&body).and_then(|m| parse_start(&m)).map_err(|m| ("invalid_argument", m)));
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(32);
    let cmd = Arc::new(Command::default());
    let gone = Gone { shared: shared.clone(), id: id.clone(), cmd: cmd.clone() };
    match parsed {
        Err((code, message)) => {
            let _ = tx.try_send(end_stream(Some((code, &message))));
        }
        Ok(spec) => {
            let s2 = shared.clone();
            shared.spawn(move |ops| run_process(ops, &s2, &id, spec, &cmd, tx))
        }
    }
    let mut r = Response::new(Watched { frames: http::Channel(rx), _gone: gone }.boxed());
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, CONNECT_JSON.parse().expect("a content type"));
    r
}

/// What a SendSignalRequest asks: a pid and SIGKILL or SIGTERM (the
/// protobuf JSON name or number).
pub fn parse_signal(msg: &Value) -> Result<(u32, i32), String> {
    let pid = msg["process"]["pid"].as_u64().and_then(|p| u32::try_from(p).ok()).ok_or("process.pid is required")?;
    let sig = match &msg["signal"] {
        Value::String(s) if s == "SIGNAL_SIGKILL" => 9,
        Value::String(s) if s == "SIGNAL_SIGTERM" => 15,
        Value::Number(n) if n.as_u64() == Some(9) || n.as_u64() == Some(15) => n.as_u64().unwrap_or(15) as i32,
        other => return Err(format!("signal {other} is neither SIGNAL_SIGKILL nor SIGNAL_SIGTERM")),
    };
    Ok((pid, sig))
}

/// `process.Process/SendSignal`, unary: `{}`, or not_found for a pid
/// that is not running.
async fn send_signal(req: Request<Incoming>, id: String, shared: Arc<Shared>) -> Response<Body> {
    if let Err((code, m)) = check_user(req.headers()) {
        return connect_error(StatusCode::FORBIDDEN, code, &m);
    }
    let body = match http::read_body(req.into_body()).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let asked = serde_json::from_slice::<Value>(&body).map_err(|e| e.to_string()).and_then(|m| parse_signal(&m));
    let (pid, sig) = match asked {
        Ok(x) => x,
        Err(m) => return connect_error(StatusCode::BAD_REQUEST, "invalid_argument", &m),
    };
    let done = shared
        .blocking(move |ops| {
            let target = ops.open(&id).map_err(|e| code_of(&e))?;
            crate::workbench::signal_pid(&target, pid, sig).map_err(|e| code_of(&e))
        })
        .await;
    match done {
        Some(Ok(true)) => http::json(StatusCode::OK, &json!({})),
        Some(Ok(false)) => connect_error(StatusCode::NOT_FOUND, "not_found", &format!("process {pid} not found")),
        Some(Err(("not_found", m))) => connect_error(StatusCode::NOT_FOUND, "not_found", &m),
        Some(Err((code, m))) => connect_error(StatusCode::INTERNAL_SERVER_ERROR, code, &m),
        None => connect_error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "sbx serve is shutting down"),
    }
}

fn event(e: Value) -> Bytes {
    envelope(0, &json!({ "event": e }))
}

fn data(stream: &str, bytes: &[u8]) -> Bytes {
    event(json!({ "data": { stream: base64::engine::general_purpose::STANDARD.encode(bytes) } }))
}

/// On a worker thread: start the command, stream its pid, stdout and
/// stderr as they come, then how it ended. A client gone stops it.
fn run_process(
    ops: &Ops,
    shared: &Shared,
    id: &str,
    spec: StartSpec,
    cmd: &Command,
    tx: tokio::sync::mpsc::Sender<Bytes>,
) {
    let target = match ops.open(id) {
        Ok(t) => t,
        Err(e) => {
            let (code, message) = code_of(&e);
            let _ = tx.blocking_send(end_stream(Some((code, &message))));
            return;
        }
    };
    let gone = || std::io::Error::other("the client went away");
    let running = Running { shared, id, pid: std::cell::Cell::new(None) };
    let mut relay = |ev: RunEvent<'_>| -> std::io::Result<()> {
        let frame = match ev {
            RunEvent::Started(pid) => {
                running.started(pid, &spec);
                cmd.pid.store(pid, std::sync::atomic::Ordering::SeqCst);
                event(json!({ "start": { "pid": pid } }))
            }
            RunEvent::Stdout(b) => data("stdout", b),
            RunEvent::Stderr(b) => data("stderr", b),
        };
        tx.blocking_send(frame).map_err(|_| gone())
    };
    let ran = crate::workbench::exec_streamed(&target, &spec.opts, &spec.cmd, &mut relay);
    drop(running);
    if ran.is_ok() {
        cmd.ended.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    let frames = match ran {
        // As envd (Go's ProcessState) says it: a signal is exit code -1, not exited.
        Ok(RunEnd::Code(code)) => vec![
            event(json!({ "end": { "exitCode": code, "exited": true, "status": format!("exit status {code}") } })),
            end_stream(None),
        ],
        Ok(RunEnd::Signal(sig)) => vec![
            event(json!({ "end": { "exitCode": -1, "exited": false, "status": format!("signal: {sig}") } })),
            end_stream(None),
        ],
        Err(e) => {
            let (code, message) = code_of(&e);
            vec![end_stream(Some((code, &message)))]
        }
    };
    for f in frames {
        if tx.blocking_send(f).is_err() {
            return;
        }
    }
}

/// What a Start stream's command is at: its pid in the sandbox (0 until
/// it is known), and whether its end was seen.
#[derive(Default)]
struct Command {
    pid: std::sync::atomic::AtomicU32,
    ended: std::sync::atomic::AtomicBool,
}

/// Dropped with the Start response's body: when the client went away (or
/// the relay failed) before the command's end was seen, the command is
/// killed in the sandbox. A client gone is otherwise seen only at the next
/// output, so a silent command (and its docker exec) would outlive it, and
/// a relay cut short leaves the command blocked on its output in the sandbox.
struct Gone {
    shared: Arc<Shared>,
    id: String,
    cmd: Arc<Command>,
}

impl Drop for Gone {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering::SeqCst;
        let pid = self.cmd.pid.load(SeqCst);
        if pid == 0 || self.cmd.ended.load(SeqCst) {
            return;
        }
        let id = std::mem::take(&mut self.id);
        self.shared.spawn(move |ops| {
            if let Ok(target) = ops.open(&id) {
                let _ = crate::workbench::signal_pid(&target, pid, 9);
            }
        });
    }
}

/// The Start response's body: the relayed frames, and what to do when it is dropped.
struct Watched {
    frames: http::Channel,
    _gone: Gone,
}

impl hyper::body::Body for Watched {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        std::pin::Pin::new(&mut self.frames).poll_frame(cx)
    }
}

/// A command in `Shared::procs` while it runs; out of it when dropped.
struct Running<'a> {
    shared: &'a Shared,
    id: &'a str,
    pid: std::cell::Cell<Option<u32>>,
}

impl Running<'_> {
    fn started(&self, pid: u32, spec: &StartSpec) {
        let mut info = json!({ "config": spec.config, "pid": pid });
        if let Some(t) = &spec.tag {
            info["tag"] = json!(t);
        }
        self.pid.set(Some(pid));
        let mut m = self.shared.procs.lock().unwrap_or_else(|p| p.into_inner());
        m.entry(self.id.to_string()).or_default().insert(pid, info);
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let Some(pid) = self.pid.get() else { return };
        let mut m = self.shared.procs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(by_pid) = m.get_mut(self.id) {
            by_pid.remove(&pid);
            if by_pid.is_empty() {
                m.remove(self.id);
            }
        }
    }
}

/// `process.Process/List`: the commands this server started in the sandbox that still run.
fn list(id: &str, shared: &Shared) -> Value {
    let m = shared.procs.lock().unwrap_or_else(|p| p.into_inner());
    let procs: Vec<Value> = m.get(id).map(|p| p.values().cloned().collect()).unwrap_or_default();
    json!({ "processes": procs })
}

/// The Connect code and message an sbx error becomes; the container id
/// `target` it names is said as the sandbox id.
fn code_of(e: &Error) -> (&'static str, String) {
    let code = match e {
        Error::Sandbox(SandboxError::NotFound { .. }) => "not_found",
        Error::Sandbox(SandboxError::NotRunning { .. }) => "failed_precondition",
        Error::Invalid(_) => "invalid_argument",
        _ => "internal",
    };
    (code, e.to_string())
}

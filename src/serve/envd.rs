//! The envd API, served by sbx on the host (there is no daemon in the
//! sandbox): `/health`, and `process.Process` Start and Connect
//! (server-streaming), StreamInput (client-streaming), SendSignal, List,
//! SendInput, CloseStdin and Update (unary; see `process`) in Connect RPC
//! with the JSON codec over HTTP/1.1, `filesystem.Filesystem`'s unary
//! calls (`fs`); the rest answers `unimplemented`. Every request names its
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
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use super::http::{self, Body};
use super::process::input as process;
use super::process::stream::watched_response;
pub use super::process::wire::{check_user, unenvelope};
use super::process::wire::{connect_error, end_stream, event, stream_response, CONNECT_JSON};
use super::process::Proc;
use super::{Ops, Shared};
use crate::error::{Error, SandboxError};
use crate::workbench::{ExecOpts, RunEnd, RunEvent};

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
        (Method::POST, "/process.Process/Connect") => process::connect(req, id, shared).await,
        (Method::POST, "/process.Process/SendInput") => process::send_input(req, id, shared).await,
        (Method::POST, "/process.Process/StreamInput") => process::stream_input(req, id, shared).await,
        (Method::POST, "/process.Process/CloseStdin") => process::close_stdin(req, id, shared).await,
        (Method::POST, "/process.Process/Update") => process::update(req, id, shared).await,
        (Method::GET, "/files") => {
            let q = req.uri().query().unwrap_or("").to_string();
            super::files::download(&q, id, shared).await
        }
        (Method::POST, "/files") => super::files::upload(req, id, shared).await,
        (Method::POST, p) if super::watch::Call::of(p).is_some() => {
            let user = check_user(req.headers());
            super::watch::handle(req, user, id, shared).await
        }
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

/// What a StartRequest asks for: the argv and how to run it.
#[derive(Debug, PartialEq)]
pub struct StartSpec {
    pub cmd: Vec<String>,
    pub opts: ExecOpts,
    /// The request's `process` and `tag`, as List says them back.
    pub config: Value,
    pub tag: Option<String>,
    /// `stdin: true`: its stdin stays open for SendInput and StreamInput
    /// (otherwise /dev/null).
    pub stdin: bool,
    /// `pty: {size}`: on a terminal of these columns and rows.
    pub pty: Option<(u16, u16)>,
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
    let pty = match &msg["pty"] {
        Value::Null => None,
        v => Some(process::parse_size(v)?),
    };
    let stdin = msg["stdin"].as_bool() == Some(true);
    let tag = msg["tag"].as_str().map(str::to_string);
    let opts = ExecOpts { env, workdir, ..Default::default() };
    Ok(StartSpec { cmd: argv, opts, config: p.clone(), tag, stdin, pty })
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
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(super::process::WATCHER_BUFFER);
    match parsed {
        Err((code, message)) => stream_response(vec![end_stream(Some((code, &message)))]),
        Ok(spec) => {
            let mut info = json!({ "config": spec.config, "pid": 0 });
            if let Some(t) = &spec.tag {
                info["tag"] = json!(t);
            }
            let (proc, input) = Proc::new(&id, info, spec.stdin, spec.pty.is_some(), tx);
            let (s2, p2) = (shared.clone(), proc.clone());
            shared.spawn(move |ops| run_process(ops, &s2, spec, &p2, input));
            watched_response(rx, proc, shared)
        }
    }
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

fn data(stream: &str, bytes: &[u8]) -> Bytes {
    event(json!({ "data": { stream: base64::engine::general_purpose::STANDARD.encode(bytes) } }))
}

/// On a worker thread: start the command, stream its pid, stdout and
/// stderr (or its terminal's output) to every stream watching it as they
/// come, then how it ended. With no stream left it runs on, its output
/// read and dropped, unless its sandbox has too many such already.
fn run_process(
    ops: &Ops,
    shared: &Shared,
    spec: StartSpec,
    proc: &Arc<Proc>,
    input: std::sync::mpsc::Receiver<crate::workbench::RunInput>,
) {
    let target = match ops.open(&proc.sandbox) {
        Ok(t) => t,
        Err(e) => {
            let (code, message) = code_of(&e);
            proc.finished(&shared.procs);
            proc.broadcast(&end_stream(Some((code, &message))));
            proc.close_streams();
            return;
        }
    };
    let gone = || std::io::Error::other("every client went away, and the sandbox has too many unwatched commands");
    let out = if spec.pty.is_some() { "pty" } else { "stdout" };
    let mut relay = |ev: RunEvent<'_>| -> std::io::Result<()> {
        let frame = match ev {
            RunEvent::Started(pid) => {
                if !proc.started(&shared.procs, pid) && shared.procs.too_many_unwatched(&proc.sandbox) {
                    return Err(gone());
                }
                event(json!({ "start": { "pid": pid } }))
            }
            RunEvent::Stdout(b) => data(out, b),
            RunEvent::Stderr(b) => data("stderr", b),
        };
        proc.broadcast(&frame);
        Ok(())
    };
    let io = crate::workbench::RunIo { input: Some(input), stdin: spec.stdin, pty: spec.pty };
    let ran = crate::workbench::exec_streamed(&target, &spec.opts, &spec.cmd, io, &mut relay);
    if ran.is_err() && proc.pid() != 0 {
        // Cut short (over the cap of unwatched commands, a relay that
        // failed): docker exec is gone, the command may not be.
        let _ = crate::workbench::signal_pid(&target, proc.pid(), 9);
    }
    proc.finished(&shared.procs);
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
        if !proc.broadcast(&f) {
            break;
        }
    }
    proc.close_streams();
}

/// `process.Process/List`: the commands this server started in the sandbox that still run.
fn list(id: &str, shared: &Shared) -> Value {
    json!({ "processes": shared.procs.infos(id) })
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

//! `process.Process` calls on a command already running: SendInput,
//! CloseStdin and Update (unary), StreamInput (client-streaming) and
//! Connect (server-streaming). Each names the command by pid (or tag, for
//! Connect) and finds it only among the commands this server started in
//! the sandbox the request's token is for: another sandbox's pid, a
//! command that ended, one sbx did not start are all not_found.

use std::sync::Arc;

use base64::Engine;
use bytes::{Buf, Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};

use super::stream::watched_response;
use super::wire::{check_user, connect_error, end_stream, envelope, event, stream_response, unenvelope, CONNECT_JSON};
use super::{InputError, Proc};
use crate::serve::http::{self, Body};
use crate::serve::Shared;
use crate::workbench::RunInput;

/// The most one SendInput (or one StreamInput message) carries, decoded.
pub const MAX_INPUT: usize = 256 * 1024;
/// Its body: the input in base64 and a little JSON around it.
const MAX_INPUT_BODY: usize = MAX_INPUT / 3 * 4 + 4096;
/// How long input waits for a command that does not read it.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// How a request names a command: `{"pid": N}` or `{"tag": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    Pid(u32),
    Tag(String),
}

pub fn parse_selector(v: &Value) -> Result<Selector, String> {
    if let Some(t) = v["tag"].as_str() {
        return Ok(Selector::Tag(t.to_string()));
    }
    v["pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .map(Selector::Pid)
        .ok_or_else(|| "process.pid is required".into())
}

/// A ProcessInput: `{"stdin": B64}` or `{"pty": B64}`, at most [`MAX_INPUT`] bytes.
pub fn parse_input(v: &Value) -> Result<Vec<u8>, String> {
    let b64 = v["stdin"].as_str().or(v["pty"].as_str()).ok_or("input.stdin or input.pty is required")?;
    if b64.len() > MAX_INPUT / 3 * 4 + 4 {
        return Err(format!("the input is over {} KiB; send it in smaller pieces", MAX_INPUT / 1024));
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).map_err(|_| "the input is not base64")?;
    if bytes.len() > MAX_INPUT {
        return Err(format!("the input is over {} KiB; send it in smaller pieces", MAX_INPUT / 1024));
    }
    Ok(bytes)
}

/// An UpdateRequest's PTY size: columns and rows, each 1 to 1000.
pub fn parse_size(v: &Value) -> Result<(u16, u16), String> {
    let n = |k: &str| v["size"][k].as_u64().filter(|n| (1..=1000).contains(n)).map(|n| n as u16);
    match (n("cols"), n("rows")) {
        (Some(c), Some(r)) => Ok((c, r)),
        _ => Err("pty.size needs cols and rows, each from 1 to 1000".into()),
    }
}

/// One StreamInputRequest.
#[derive(Debug, PartialEq, Eq)]
pub enum StreamMsg {
    Start(Selector),
    Data(Vec<u8>),
    Keepalive,
}

pub fn parse_stream_msg(v: &Value) -> Result<StreamMsg, String> {
    if !v["start"].is_null() {
        return parse_selector(&v["start"]["process"]).map(StreamMsg::Start);
    }
    if !v["data"].is_null() {
        return parse_input(&v["data"]["input"]).map(StreamMsg::Data);
    }
    if !v["keepalive"].is_null() {
        return Ok(StreamMsg::Keepalive);
    }
    Err("a StreamInputRequest is start, data or keepalive".into())
}

/// A refusal: its Connect code and message.
type Refused = (&'static str, String);

fn find(shared: &Shared, id: &str, s: &Selector) -> Result<Arc<Proc>, Refused> {
    let found = match s {
        Selector::Pid(pid) => shared.procs.get(id, *pid),
        Selector::Tag(t) => shared.procs.by_tag(id, t),
    };
    found.ok_or_else(|| {
        let what = match s {
            Selector::Pid(p) => format!("process {p}"),
            Selector::Tag(t) => format!("process tagged {t:?}"),
        };
        ("not_found", format!("{what} not found: it ended, or this server did not start it in this sandbox"))
    })
}

async fn deliver(p: &Proc, msg: RunInput) -> Result<(), Refused> {
    let pid = p.pid();
    p.send(msg, PATIENCE).await.map_err(|e| match e {
        InputError::NoInput => (
            "failed_precondition",
            format!("process {pid} was started without stdin; start it with stdin=True to send it input"),
        ),
        InputError::Ended => ("not_found", format!("process {pid} not found: it ended")),
        InputError::Full => (
            "resource_exhausted",
            format!("process {pid} is not reading its input; nothing was sent (try again later)"),
        ),
    })
}

fn status_of(code: &str) -> StatusCode {
    match code {
        "not_found" => StatusCode::NOT_FOUND,
        "resource_exhausted" => StatusCode::TOO_MANY_REQUESTS,
        "permission_denied" => StatusCode::FORBIDDEN,
        _ => StatusCode::BAD_REQUEST,
    }
}

fn answer(r: Result<(), Refused>) -> Response<Body> {
    match r {
        Ok(()) => http::json(StatusCode::OK, &json!({})),
        Err((code, m)) => connect_error(status_of(code), code, &m),
    }
}

/// A unary request's JSON, its body at most `max` bytes.
async fn unary(req: Request<Incoming>, max: usize) -> Result<Value, Response<Body>> {
    if let Err((code, m)) = check_user(req.headers()) {
        return Err(connect_error(StatusCode::FORBIDDEN, code, &m));
    }
    let body = http::read_body_max(req.into_body(), max).await?;
    serde_json::from_slice(&body).map_err(|e| {
        connect_error(StatusCode::BAD_REQUEST, "invalid_argument", &format!("the message is not JSON: {e}"))
    })
}

/// `process.Process/SendInput`: `{}` once the input is on its way.
pub async fn send_input(req: Request<Incoming>, id: String, shared: Arc<Shared>) -> Response<Body> {
    // Read up to the usual cap, so input over MAX_INPUT is told as such.
    let msg = match unary(req, http::MAX_BODY).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    let parsed = parse_selector(&msg["process"]).and_then(|s| Ok((s, parse_input(&msg["input"])?)));
    let (sel, bytes) = match parsed {
        Ok(x) => x,
        Err(m) => return connect_error(StatusCode::BAD_REQUEST, "invalid_argument", &m),
    };
    let found = find(&shared, &id, &sel);
    answer(match found {
        Ok(p) => deliver(&p, RunInput::Data(bytes)).await,
        Err(e) => Err(e),
    })
}

/// `process.Process/CloseStdin`: the command reads EOF after what was sent.
pub async fn close_stdin(req: Request<Incoming>, id: String, shared: Arc<Shared>) -> Response<Body> {
    let msg = match unary(req, 4096).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    let sel = match parse_selector(&msg["process"]) {
        Ok(s) => s,
        Err(m) => return connect_error(StatusCode::BAD_REQUEST, "invalid_argument", &m),
    };
    answer(match find(&shared, &id, &sel) {
        Ok(p) => deliver(&p, RunInput::Close).await,
        Err(e) => Err(e),
    })
}

/// `process.Process/Update`: a PTY's new size (the command gets SIGWINCH).
pub async fn update(req: Request<Incoming>, id: String, shared: Arc<Shared>) -> Response<Body> {
    let msg = match unary(req, 4096).await {
        Ok(m) => m,
        Err(r) => return r,
    };
    let parsed = parse_selector(&msg["process"]).and_then(|s| Ok((s, parse_size(&msg["pty"])?)));
    let (sel, (cols, rows)) = match parsed {
        Ok(x) => x,
        Err(m) => return connect_error(StatusCode::BAD_REQUEST, "invalid_argument", &m),
    };
    answer(match find(&shared, &id, &sel) {
        Ok(p) if !p.pty => Err(("failed_precondition", format!("process {} has no PTY to resize", p.pid()))),
        Ok(p) => deliver(&p, RunInput::Resize(cols, rows)).await,
        Err(e) => Err(e),
    })
}

/// The next whole envelope in `buf`: Ok(None) until one is complete.
pub fn next_envelope(buf: &mut BytesMut, max: usize) -> Result<Option<Value>, String> {
    if buf.len() < 5 {
        return Ok(None);
    }
    if buf[0] & 0x01 != 0 {
        return Err("compressed messages are not supported".into());
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if len > max {
        return Err(format!("a message over {} KiB; send the input in smaller pieces", MAX_INPUT / 1024));
    }
    if buf.len() < 5 + len {
        return Ok(None);
    }
    let end_stream = buf[0] & 0x02 != 0;
    buf.advance(5);
    let msg = buf.split_to(len);
    if end_stream {
        return Err("a client's stream carries no end-of-stream message".into());
    }
    serde_json::from_slice(&msg).map(Some).map_err(|e| format!("the message is not JSON: {e}"))
}

/// `process.Process/StreamInput`, client-streaming: a start naming the
/// command, then its input as it comes (keepalives between); answered
/// `{}` when the client's stream ends, or with the first refusal.
pub async fn stream_input(req: Request<Incoming>, id: String, shared: Arc<Shared>) -> Response<Body> {
    let ct = req.headers().get(hyper::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !ct.starts_with(CONNECT_JSON) {
        return connect_error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unknown", "only application/connect+json is served");
    }
    if let Err((code, m)) = check_user(req.headers()) {
        return stream_response(vec![end_stream(Some((code, &m)))]);
    }
    let frames = match relay_stream(req.into_body(), &id, &shared).await {
        Ok(()) => vec![envelope(0, &json!({})), end_stream(None)],
        Err((code, m)) => vec![end_stream(Some((code, &m)))],
    };
    stream_response(frames)
}

async fn relay_stream(mut body: Incoming, id: &str, shared: &Shared) -> Result<(), Refused> {
    let mut buf = BytesMut::new();
    let mut target: Option<Arc<Proc>> = None;
    loop {
        while let Some(msg) = next_envelope(&mut buf, MAX_INPUT_BODY).map_err(|m| ("invalid_argument", m))? {
            match (parse_stream_msg(&msg).map_err(|m| ("invalid_argument", m))?, &target) {
                (StreamMsg::Start(sel), None) => target = Some(find(shared, id, &sel)?),
                (StreamMsg::Start(_), Some(_)) => return Err(("invalid_argument", "a second start message".into())),
                (StreamMsg::Data(_), None) => {
                    return Err(("invalid_argument", "the first message must be start, naming the process".into()))
                }
                (StreamMsg::Data(b), Some(p)) => deliver(p, RunInput::Data(b)).await?,
                (StreamMsg::Keepalive, _) => {}
            }
        }
        match body.frame().await {
            None => break,
            Some(Ok(f)) => {
                if let Ok(data) = f.into_data() {
                    buf.extend_from_slice(&data);
                }
            }
            Some(Err(_)) => return Err(("canceled", "the request body could not be read".into())),
        }
    }
    if !buf.is_empty() {
        return Err(("invalid_argument", "the stream ends inside a message".into()));
    }
    if target.is_none() {
        return Err(("invalid_argument", "the stream named no process (no start message)".into()));
    }
    Ok(())
}

/// `process.Process/Connect`, server-streaming: the command's start (its
/// pid) and then its events from now on, to its end.
pub async fn connect(req: Request<Incoming>, id: String, shared: Arc<Shared>) -> Response<Body> {
    let ct = req.headers().get(hyper::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !ct.starts_with(CONNECT_JSON) {
        return connect_error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unknown", "only application/connect+json is served");
    }
    let body = match http::read_body_max(req.into_body(), 4096).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let sel = unenvelope(&body).and_then(|m| parse_selector(&m["process"]));
    let found = sel.map_err(|m| ("invalid_argument", m)).and_then(|s| find(&shared, &id, &s));
    let p = match found {
        Ok(p) => p,
        Err((code, m)) => return stream_response(vec![end_stream(Some((code, &m)))]),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(super::WATCHER_BUFFER);
    match p.watch(tx, event(json!({ "start": { "pid": p.pid() } }))) {
        Ok(()) => watched_response(rx, p, shared),
        Err("full") => stream_response(vec![end_stream(Some((
            "resource_exhausted",
            &format!("process {} has {} streams already; close one first", p.pid(), super::MAX_WATCHERS),
        )))]),
        Err(_) => stream_response(vec![end_stream(Some(("not_found", &format!("process {} ended", p.pid()))))]),
    }
}

//! envd's watch calls of `filesystem.Filesystem`, as SDK 2.63.0 makes them:
//! WatchDir (server-streaming, the async client's `files.watch_dir`) and
//! CreateWatcher / GetWatcherEvents / RemoveWatcher (unary, the sync
//! client's `WatchHandle`, kept in [`watchers`](super::watchers)). Both run
//! the helper's inotify `watch` through `workbench::watch_with`, the same
//! machinery as `sbx watch`, as the sandbox's own user; it never follows a
//! symlink at the path (a link to a directory is not a directory here).
//!
//! Events are envd's: `name` relative to the watched directory, `type`
//! CREATE, WRITE, REMOVE, RENAME or CHMOD. A rename within the tree is
//! RENAME of the old name then CREATE of the new, as fsnotify says it;
//! moved out of the tree is REMOVE. The directory itself deleted or moved
//! is REMOVE of "." and the end of the watch. Events lost (the kernel's
//! queue overflowed) end it with `data_loss`, the inotify watch limit with
//! `resource_exhausted`: the client knows it saw not everything.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};

use super::fs::{code_of, status_of, Refused};
use super::http::{self, Body};
use super::watch_events::{end_of, events_of, fatal, parse, Asked, STOP};
use super::{Ops, Shared};
use crate::host::interrupt::Watch;
use crate::workbench::lines::WatchLine;
use crate::workbench::WatchOpts;

const CONNECT_JSON: &str = "application/connect+json";
/// End-of-stream flag of a Connect envelope.
const END_STREAM: u8 = 0x02;
/// What a stream's keepalive interval is when the client names none
/// (the SDK names 50 seconds in `Keepalive-Ping-Interval`).
const KEEPALIVE: Duration = Duration::from_secs(50);

/// Which watch call a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    WatchDir,
    CreateWatcher,
    GetWatcherEvents,
    RemoveWatcher,
}

impl Call {
    pub fn of(path: &str) -> Option<Call> {
        Some(match path.strip_prefix("/filesystem.Filesystem/")? {
            "WatchDir" => Call::WatchDir,
            "CreateWatcher" => Call::CreateWatcher,
            "GetWatcherEvents" => Call::GetWatcherEvents,
            "RemoveWatcher" => Call::RemoveWatcher,
            _ => return None,
        })
    }
}

fn refused((code, message): Refused) -> Response<Body> {
    http::json(status_of(code), &json!({ "code": code, "message": message }))
}

/// One of the four calls (envd.rs routes them here).
/// `user` is what `envd::check_user` said of the request's user.
pub async fn handle(
    req: Request<Incoming>,
    user: Result<(), Refused>,
    id: String,
    shared: Arc<Shared>,
) -> Response<Body> {
    let Some(call) = Call::of(req.uri().path()) else {
        return refused(("unimplemented", "no such call".into()));
    };
    if call == Call::WatchDir {
        return watch_dir(req, user, id, shared).await;
    }
    if let Err(r) = user {
        return refused(r);
    }
    let body = match http::read_body(req.into_body()).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let msg = match serde_json::from_slice::<Value>(&body) {
        Ok(m) => m,
        Err(e) => return refused(("invalid_argument", format!("the message is not JSON: {e}"))),
    };
    let answered = match call {
        Call::CreateWatcher => match parse(&msg) {
            Ok(asked) => super::watchers::create(&shared, id, asked).await,
            Err(r) => Err(r),
        },
        Call::GetWatcherEvents => shared.watchers.events(&id, msg["watcherId"].as_str().unwrap_or("")),
        _ => shared.watchers.remove(&id, msg["watcherId"].as_str().unwrap_or("")).map(|()| json!({})),
    };
    match answered {
        Ok(v) => http::json(StatusCode::OK, &v),
        Err(r) => refused(r),
    }
}

/// The keepalive interval a stream's client asks for (`Keepalive-Ping-Interval`, seconds).
pub fn keepalive_of(h: &hyper::HeaderMap) -> Duration {
    h.get("keepalive-ping-interval")
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
        .map_or(KEEPALIVE, |s| Duration::from_secs(s.clamp(1, 3600)))
}

/// WatchDir: a stream of the start, the events and keepalives while idle,
/// until the client goes, the directory or the sandbox does.
async fn watch_dir(
    req: Request<Incoming>,
    user: Result<(), Refused>,
    id: String,
    shared: Arc<Shared>,
) -> Response<Body> {
    let ct = req.headers().get(hyper::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !ct.starts_with(CONNECT_JSON) {
        return http::json(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &json!({"code": "unknown", "message": "only application/connect+json is served"}),
        );
    }
    let every = keepalive_of(req.headers());
    let body = match http::read_body(req.into_body()).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let asked = user.and_then(|()| unenvelope(&body).map_err(|m| ("invalid_argument", m)).and_then(|m| parse(&m)));
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let stop = match Watch::manual() {
        Ok(w) => Arc::new(w),
        Err(e) => return refused(("internal", format!("making the watch's stopper failed: {e}"))),
    };
    let mut slot = None;
    match asked.and_then(|a| Ok((a, StreamSlot::take(&id)?))) {
        Err(r) => {
            let _ = tx.try_send(end_frame(Some(r)));
        }
        Ok((asked, taken)) => {
            slot = Some(taken);
            let stopper = stop.clone();
            shared.spawn(move |ops| stream(ops, &id, asked, &stopper, tx));
        }
    }
    let tick = Box::pin(tokio::time::sleep(every));
    let frames = Frames { rx, every, tick, started: false, ended: false, stop, _slot: slot };
    let mut r = Response::new(frames.boxed());
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, CONNECT_JSON.parse().expect("a content type"));
    r
}

/// One Connect envelope: flags, a big-endian length, the JSON message.
/// (envd.rs frames the process stream alike; this file does not name it,
/// which would make the two name each other.)
fn envelope(flags: u8, msg: &Value) -> Bytes {
    let body = serde_json::to_vec(msg).expect("JSON serializes");
    let mut b = Vec::with_capacity(5 + body.len());
    b.push(flags);
    b.extend_from_slice(&(body.len() as u32).to_be_bytes());
    b.extend_from_slice(&body);
    b.into()
}

/// The one message of a server-streaming request's body, uncompressed.
pub fn unenvelope(body: &[u8]) -> Result<Value, String> {
    let Some((head, msg)) = body.split_at_checked(5) else {
        return Err("the request is not a Connect envelope".into());
    };
    if head[0] & 0x01 != 0 {
        return Err("compressed messages are not supported".into());
    }
    if u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize != msg.len() {
        return Err("the envelope's length does not match the body".into());
    }
    serde_json::from_slice(msg).map_err(|e| format!("the message is not JSON: {e}"))
}

fn frame(msg: &Value) -> Bytes {
    envelope(0, msg)
}

/// The end of a stream: `{}`, or `{"error": {code, message}}`.
pub fn end_frame(error: Option<Refused>) -> Bytes {
    let v = match error {
        None => json!({}),
        Some((code, message)) => json!({ "error": { "code": code, "message": message } }),
    };
    envelope(END_STREAM, &v)
}

/// On a worker thread: run the watch, relaying its start and events as
/// frames; then its end. `tx` is bounded: a client that reads slowly
/// slows the helper down, and the kernel's queue overflowing then is
/// `data_loss`, never memory without end.
fn stream(ops: &Ops, id: &str, asked: Asked, stop: &Watch, tx: tokio::sync::mpsc::Sender<Bytes>) {
    let target = match ops.open(id) {
        Ok(t) => t,
        Err(e) => {
            let _ = tx.blocking_send(end_frame(Some(code_of(&e))));
            return;
        }
    };
    let gone = || std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away");
    let mut ended: Option<Refused> = None;
    let mut sink = |l: &WatchLine| -> std::io::Result<()> {
        if let Some(r) = fatal(l, &asked.path) {
            ended = Some(r);
            return Err(std::io::Error::other("the watch cannot go on"));
        }
        if let WatchLine::Ready = l {
            return tx.blocking_send(frame(&json!({ "start": {} }))).map_err(|_| gone());
        }
        for ev in events_of(l).into_iter().flatten() {
            tx.blocking_send(frame(&json!({ "filesystem": ev }))).map_err(|_| gone())?;
        }
        Ok(())
    };
    let opts = WatchOpts { recursive: asked.recursive, attrib: true };
    let end = crate::workbench::watch_with(&target, &asked.path, opts, stop, &mut sink);
    let _ = tx.blocking_send(end_frame(ended.or_else(|| end_of(id, end))));
}

/// The WatchDir response's body: the worker's frames, a keepalive after
/// each `every` without one (once started, never after the end); dropped
/// (the client went), it stops the watch.
struct Frames {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    every: Duration,
    tick: std::pin::Pin<Box<tokio::time::Sleep>>,
    started: bool,
    ended: bool,
    stop: Arc<Watch>,
    _slot: Option<StreamSlot>,
}

/// The most WatchDir streams open on one sandbox at once: each holds a
/// host thread, a `docker exec` and an inotify instance, so a client with
/// the sandbox's token could otherwise open them until the host ran out.
pub const MAX_STREAMS_PER_SANDBOX: usize = 16;

static STREAMS: std::sync::Mutex<std::collections::BTreeMap<String, usize>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// One of [`MAX_STREAMS_PER_SANDBOX`], given back when the stream's body is dropped.
struct StreamSlot(String);

impl StreamSlot {
    fn take(sandbox: &str) -> Result<Self, Refused> {
        let mut m = STREAMS.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(sandbox.to_string()).or_default();
        if *n >= MAX_STREAMS_PER_SANDBOX {
            let why = format!("sandbox {sandbox} has {MAX_STREAMS_PER_SANDBOX} watch_dir streams open already");
            return Err(("resource_exhausted", why));
        }
        *n += 1;
        Ok(StreamSlot(sandbox.to_string()))
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut m = STREAMS.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.0) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.0);
            }
        }
    }
}

impl hyper::body::Body for Frames {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        use std::future::Future;
        use std::task::Poll;
        let now = tokio::time::Instant::now();
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(b)) => {
                self.started = true;
                self.ended |= b.first().is_some_and(|f| f & END_STREAM != 0);
                let at = now + self.every;
                self.tick.as_mut().reset(at);
                return Poll::Ready(Some(Ok(hyper::body::Frame::data(b))));
            }
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        if self.started && !self.ended && self.tick.as_mut().poll(cx).is_ready() {
            let at = now + self.every;
            self.tick.as_mut().reset(at);
            // Polled once more, so the new deadline wakes this body again.
            let _ = self.tick.as_mut().poll(cx);
            return Poll::Ready(Some(Ok(hyper::body::Frame::data(frame(&json!({ "keepalive": {} }))))));
        }
        Poll::Pending
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        self.stop.raise(STOP);
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod slot_tests {
    use super::*;

    #[test]
    fn at_most_so_many_watch_dir_streams_a_sandbox() {
        let id = "sbx-5107e5t0000a";
        let held: Vec<_> = (0..MAX_STREAMS_PER_SANDBOX).map(|_| StreamSlot::take(id).unwrap()).collect();
        assert_eq!(StreamSlot::take(id).err().map(|e| e.0), Some("resource_exhausted"));
        assert!(StreamSlot::take("sbx-5107e5t0000b").is_ok(), "another sandbox's are its own");
        drop(held);
        assert!(StreamSlot::take(id).is_ok(), "given back when the streams end");
        assert!(STREAMS.lock().unwrap().get(id).is_none(), "nothing kept for a sandbox without streams");
    }
}

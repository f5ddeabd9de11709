//! The body of a stream watching a command (a Start's, a Connect's) and
//! what happens when it goes away.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Response;

use super::wire::CONNECT_JSON;
use super::{Proc, MAX_UNWATCHED};
use crate::serve::http::{self, Body};
use crate::serve::Shared;

/// A stream of `proc`'s events as they come (a Start's, a Connect's).
pub fn watched_response(
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    proc: Arc<Proc>,
    shared: Arc<Shared>,
) -> Response<Body> {
    let gone = Gone { shared, proc };
    let mut r = Response::new(Watched { frames: http::Channel(rx), _gone: gone }.boxed());
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, CONNECT_JSON.parse().expect("a content type"));
    r
}

/// Dropped with a stream's body (a Start's or a Connect's): when it was
/// the last one, the command's end was not seen and its sandbox already
/// has [`MAX_UNWATCHED`] commands nobody watches, it is killed in the
/// sandbox at once (otherwise it runs on, as envd's do, until a Connect,
/// its end or its sandbox's).
struct Gone {
    shared: Arc<Shared>,
    proc: Arc<Proc>,
}

impl Drop for Gone {
    fn drop(&mut self) {
        if !self.proc.unwatch() || !self.shared.procs.too_many_unwatched(&self.proc.sandbox) {
            return;
        }
        let (id, pid) = (self.proc.sandbox.clone(), self.proc.pid());
        tracing::info!(sandbox = %id, pid, "killed a command its clients left: over {MAX_UNWATCHED} unwatched in the sandbox");
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

//! What every route shares: the response body type, E2B's error shape,
//! bounded request bodies, and the two credentials (API key, access
//! token), compared in constant time.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Frame, Incoming};
use hyper::{HeaderMap, Response, StatusCode};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// The most a request body may hold (E2B's create bodies are a few KiB).
pub const MAX_BODY: usize = 1024 * 1024;

pub fn full(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    if !content_type.is_empty() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, content_type.parse().expect("a valid content type"));
    }
    r
}

pub fn json(status: StatusCode, v: &serde_json::Value) -> Response<Body> {
    full(status, "application/json", serde_json::to_vec(v).expect("JSON serializes"))
}

pub fn empty(status: StatusCode) -> Response<Body> {
    full(status, "", Bytes::new())
}

/// E2B's error shape: `{"code": STATUS, "message": ...}`.
pub fn error(status: StatusCode, message: &str) -> Response<Body> {
    json(status, &serde_json::json!({ "code": status.as_u16(), "message": message }))
}

/// The one answer to a missing or wrong key or token, whatever was asked.
pub fn unauthorized() -> Response<Body> {
    error(StatusCode::UNAUTHORIZED, "missing or invalid credentials")
}

/// What sbx cannot do yet, said as such, never a silent success.
pub fn unsupported(what: &str) -> Response<Body> {
    Refusal::unsupported(what).response()
}

/// A request refused: the status and message of its E2B-shaped answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub StatusCode, pub String);

impl Refusal {
    pub fn bad(message: impl Into<String>) -> Self {
        Refusal(StatusCode::BAD_REQUEST, message.into())
    }

    pub fn unsupported(what: &str) -> Self {
        Refusal(StatusCode::NOT_IMPLEMENTED, format!("{what} is not supported by sbx serve yet"))
    }

    pub fn response(&self) -> Response<Body> {
        error(self.0, &self.1)
    }
}

/// The request body, at most [`MAX_BODY`] bytes; Err is the answer to give.
pub async fn read_body(body: Incoming) -> Result<Bytes, Response<Body>> {
    read_body_max(body, MAX_BODY).await
}

/// The most request-body memory held at once, across every connection, in
/// MiB. Per connection the caps hold, but HTTP/2 multiplies them by its
/// streams: 64 uploads of 64 MiB on one connection would be 4 GiB.
const BODY_BUDGET_MIB: usize = 256;
static BODIES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(BODY_BUDGET_MIB);

/// A share of [`BODY_BUDGET_MIB`] for a body of at most `max` bytes, waited
/// for: past the budget a request waits (holding nothing) until others end.
pub async fn body_budget(max: usize) -> tokio::sync::SemaphorePermit<'static> {
    let mib = max.div_ceil(1 << 20).clamp(1, BODY_BUDGET_MIB) as u32;
    BODIES.acquire_many(mib).await.expect("the body budget is never closed")
}

/// The request body, at most `max` bytes, within the body budget while it is read.
pub async fn read_body_max(body: Incoming, max: usize) -> Result<Bytes, Response<Body>> {
    let _held = body_budget(max).await;
    read_body_within(body, max).await
}

/// [`read_body_max`] for a caller that holds its [`body_budget`] itself
/// (an upload, held while its bytes are written to the sandbox).
pub async fn read_body_within(body: Incoming, max: usize) -> Result<Bytes, Response<Body>> {
    match Limited::new(body, max).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            Err(error(StatusCode::PAYLOAD_TOO_LARGE, &format!("the request body is over {max} bytes")))
        }
        Err(_) => Err(error(StatusCode::BAD_REQUEST, "the request body could not be read")),
    }
}

/// The API key a control-plane request carries: `X-API-KEY` (what the E2B
/// SDK sends) or `Authorization: Bearer KEY`.
pub fn api_key(h: &HeaderMap) -> Option<&str> {
    if let Some(k) = h.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(k);
    }
    h.get(hyper::header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ")
}

/// Whether `given` is one of `secrets`. Digests are compared, so neither
/// the bytes nor the lengths of a secret leak through timing.
pub fn matches_any<'a>(given: &str, secrets: impl IntoIterator<Item = &'a str>) -> bool {
    let g = Sha256::digest(given.as_bytes());
    let mut found = subtle::Choice::from(0);
    for s in secrets {
        found |= Sha256::digest(s.as_bytes()).ct_eq(&g);
    }
    found.into()
}

/// A streamed response body: frames as a worker thread sends them; the
/// body ends when the sender is dropped.
pub struct Channel(pub tokio::sync::mpsc::Receiver<Bytes>);

impl hyper::body::Body for Channel {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    #[test]
    fn bodies_past_the_budget_wait_for_others_to_end() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let wait = std::time::Duration::from_millis(50);
            let held: Vec<_> = hold(4).await;
            let fifth = tokio::time::timeout(wait, body_budget(64 << 20)).await;
            assert!(fifth.is_err(), "a fifth 64 MiB upload waits while four are held");
            assert!(tokio::time::timeout(wait, body_budget(1)).await.is_err(), "and so does a small body");
            drop(held);
            assert!(tokio::time::timeout(wait, body_budget(64 << 20)).await.is_ok(), "until one ends");
        });
    }

    async fn hold(n: usize) -> Vec<tokio::sync::SemaphorePermit<'static>> {
        let mut v = Vec::new();
        for _ in 0..n {
            v.push(body_budget(64 << 20).await);
        }
        v
    }
}

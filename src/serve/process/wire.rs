//! Connect RPC's framing for envd, JSON codec over HTTP/1.1: envelopes
//! (flags, a big-endian u32 length, the message), the end of a stream,
//! unary errors; and the one check every envd call makes of the E2B user.

use base64::Engine;
use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::{HeaderMap, Response, StatusCode};
use serde_json::{json, Value};

use crate::serve::http::{self, Body};

pub const CONNECT_JSON: &str = "application/connect+json";
/// End-of-stream flag of a Connect envelope.
const END_STREAM: u8 = 0x02;

/// A unary (non-stream) Connect error: the HTTP status and `{"code", "message"}`.
pub fn connect_error(status: StatusCode, code: &str, message: &str) -> Response<Body> {
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
pub fn end_stream(error: Option<(&str, &str)>) -> Bytes {
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

/// A streaming response of `frames`, all known now.
pub fn stream_response(frames: Vec<Bytes>) -> Response<Body> {
    let body = http_body_util::Full::new(frames.concat().into()).boxed();
    let mut r = Response::new(body);
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, CONNECT_JSON.parse().expect("a content type"));
    r
}

pub fn event(e: Value) -> Bytes {
    envelope(0, &json!({ "event": e }))
}

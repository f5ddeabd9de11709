//! What the control plane's routes answer with, shared by create, info
//! and list (`control`) and by timeout, pause and connect (`lifecycle`).

use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use super::http::{self, Body, Refusal};
use super::index::Entry;
use crate::error::{Error, SandboxError};

/// The envd version sbx's envd API answers as (see `envd`).
pub const ENVD_VERSION: &str = "0.5.7";

/// What a worker's result answers: `ok`'s response, the refusal's, or 503
/// when the server is shutting down.
pub fn response_of<T>(done: Option<Result<T, Refusal>>, ok: impl FnOnce(T) -> Response<Body>) -> Response<Body> {
    match done {
        Some(Ok(v)) => ok(v),
        Some(Err(r)) => r.response(),
        None => http::error(StatusCode::SERVICE_UNAVAILABLE, "sbx serve is shutting down"),
    }
}

/// E2B's `Sandbox`, as create and connect answer it: with the access token.
pub fn sandbox_json(id: &str, e: &Entry) -> Value {
    json!({
        "templateID": e.template,
        "sandboxID": id,
        "clientID": "sbx",
        "envdVersion": ENVD_VERSION,
        "envdAccessToken": e.token,
        "domain": null,
    })
}

/// Which HTTP status an sbx error answers with.
pub fn status_of(e: &Error) -> StatusCode {
    match e {
        Error::Invalid(_) => StatusCode::BAD_REQUEST,
        Error::Sandbox(SandboxError::NotFound { .. }) => StatusCode::NOT_FOUND,
        Error::Image(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

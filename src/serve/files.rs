//! envd's `/files`: `GET /files?path=P` downloads one regular file, as it
//! arrives from the helper through sbx's checked transfer code (the same
//! record stream `sbx cp` reads), with its Content-Length known first so a
//! stream cut short is seen as such. Uploads are not offered yet.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::{Response, StatusCode};

use super::http::{self, Body};
use super::Shared;
use crate::error::{Error, SandboxError};

/// `GET /files?path=P[&username=U]`.
pub async fn download(query: &str, id: String, shared: Arc<Shared>) -> Response<Body> {
    let Some(pairs) = super::query::pairs(query) else {
        return http::error(StatusCode::BAD_REQUEST, "the query string is malformed");
    };
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    match get("username").as_deref() {
        None | Some("") => {}
        Some("root") => {
            return http::error(StatusCode::FORBIDDEN, "sbx sandboxes have no root: files are the sandbox's own user's")
        }
        Some(u) => return http::error(StatusCode::BAD_REQUEST, &format!("user {u:?}: give no user")),
    }
    let Some(path) = get("path").filter(|p| p.starts_with('/') && !p.contains('\0')) else {
        return http::error(StatusCode::BAD_REQUEST, "path must be an absolute path");
    };
    let (size_tx, size_rx) = tokio::sync::oneshot::channel::<Result<u64, (StatusCode, String)>>();
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    shared.spawn(move |ops| {
        let mut size_tx = Some(size_tx);
        let gone = || std::io::Error::other("the client went away");
        let read = ops.driver.owned(&id).and_then(|target| {
            let mut sized = |n: u64| size_tx.take().map(|t| t.send(Ok(n))).transpose().map(drop).map_err(|_| gone());
            let mut out = |b: &[u8]| tx.blocking_send(Bytes::copy_from_slice(b)).map_err(|_| gone());
            let limits = crate::workbench::transfer::Limits::default();
            crate::workbench::read_file(ops.driver.docker(), &target, &path, &limits, &mut sized, &mut out)
                .map_err(|e| crate_named(e, &target, &id))
        });
        if let (Err(e), Some(t)) = (read, size_tx) {
            let _ = t.send(Err((status_of(&e), e.to_string())));
        }
    });
    match size_rx.await {
        Ok(Ok(size)) => {
            let mut r = Response::new(http::Channel(rx).boxed());
            let h = r.headers_mut();
            h.insert(hyper::header::CONTENT_TYPE, "application/octet-stream".parse().expect("a content type"));
            h.insert(hyper::header::CONTENT_LENGTH, size.into());
            r
        }
        Ok(Err((status, message))) => http::error(status, &message),
        Err(_) => http::error(StatusCode::INTERNAL_SERVER_ERROR, "the download ended before it began"),
    }
}

fn crate_named(e: Error, target: &str, id: &str) -> Error {
    match e {
        Error::Sandbox(SandboxError::NotFound { .. }) => Error::Sandbox(SandboxError::NotFound { id: id.to_string() }),
        Error::Explained(x) => Error::Explained(x.named(target, id)),
        e => e,
    }
}

/// 404 for a path (or sandbox) that is not there, 400 for one that is not a regular file.
fn status_of(e: &Error) -> StatusCode {
    match e {
        Error::Sandbox(SandboxError::NotFound { .. }) => StatusCode::NOT_FOUND,
        Error::Explained(crate::error::Explained::NoSuchPath { .. }) => StatusCode::NOT_FOUND,
        Error::Transfer(_) | Error::Invalid(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

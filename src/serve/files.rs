//! envd's `/files`: `GET /files?path=P` downloads one regular file, as it
//! arrives from the helper through sbx's checked transfer code (the same
//! record stream `sbx cp` reads), with its Content-Length known first so a
//! stream cut short is seen as such. `POST /files?path=P` uploads, as an
//! octet stream or multipart/form-data (one part per file, its filename
//! the path), each file through the record stream `sbx cp` sends.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{HeaderMap, Response, StatusCode};

use super::http::{self, Body, Refusal};
use super::Shared;
use crate::error::{Error, SandboxError};

/// `GET /files?path=P[&username=U]`.
pub async fn download(query: &str, id: String, shared: Arc<Shared>) -> Response<Body> {
    let Some(pairs) = super::query::pairs(query) else {
        return http::error(StatusCode::BAD_REQUEST, "the query string is malformed");
    };
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if let Err(r) = user_ok(get("username").as_deref()) {
        return r.response();
    }
    let Some(path) = get("path").filter(|p| p.starts_with('/') && !p.contains('\0')) else {
        return http::error(StatusCode::BAD_REQUEST, "path must be an absolute path");
    };
    let (size_tx, size_rx) = tokio::sync::oneshot::channel::<Result<u64, (StatusCode, String)>>();
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    shared.spawn(move |ops| {
        let mut size_tx = Some(size_tx);
        let gone = || std::io::Error::other("the client went away");
        let read = ops.open(&id).map_err(refusal).and_then(|target| {
            let mut sized = |n: u64| size_tx.take().map(|t| t.send(Ok(n))).transpose().map(drop).map_err(|_| gone());
            let mut out = |b: &[u8]| tx.blocking_send(Bytes::copy_from_slice(b)).map_err(|_| gone());
            let limits = crate::workbench::transfer::Limits::default();
            crate::workbench::read_file(&target, &path, &limits, &mut sized, &mut out).map_err(refusal)
        });
        if let (Err(r), Some(t)) = (read, size_tx) {
            let _ = t.send(Err((r.0, r.1)));
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

/// 404 for a path (or sandbox) that is not there, 403 where the sandbox's
/// user may not write, 507 when its disk is full, 400 for a request its
/// file system refuses (a directory or a link where a file is asked for).
fn status_of(e: &Error) -> StatusCode {
    use crate::error::Explained as X;
    match e {
        Error::Sandbox(SandboxError::NotFound { .. }) | Error::Explained(X::NoSuchPath { .. }) => StatusCode::NOT_FOUND,
        Error::Explained(X::ReadOnly { .. } | X::Denied { .. }) => StatusCode::FORBIDDEN,
        Error::Explained(X::NoSpace { .. }) => StatusCode::INSUFFICIENT_STORAGE,
        Error::Explained(X::NotADirectory { .. } | X::Exists { .. } | X::Helper { .. }) => StatusCode::BAD_REQUEST,
        Error::Transfer(_) | Error::Invalid(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// An error's status and text.
fn refusal(e: Error) -> Refusal {
    Refusal(status_of(&e), e.to_string())
}

/// The most one upload may carry: it is held in memory on its way in.
pub const MAX_UPLOAD: usize = 64 * 1024 * 1024;

/// One part of a multipart/form-data body: its filename, if it names one, and its bytes.
pub type Part = (Option<String>, Vec<u8>);

/// The parts of a multipart/form-data body.
pub fn multipart(body: &[u8], boundary: &str) -> Result<Vec<Part>, String> {
    let find = |hay: &[u8], needle: &[u8], from: usize| {
        hay.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|i| i + from)
    };
    let delim = format!("--{boundary}").into_bytes();
    let sep = [b"\r\n".as_slice(), &delim].concat();
    let mut at = find(body, &delim, 0).ok_or("no multipart boundary in the body")? + delim.len();
    let mut parts = Vec::new();
    loop {
        if body.get(at..at + 2) == Some(b"--") {
            return Ok(parts);
        }
        let start = at + 2;
        let head_end = find(body, b"\r\n\r\n", start).ok_or("a part without its headers' end")?;
        let head = String::from_utf8_lossy(&body[start..head_end]).to_string();
        let data_start = head_end + 4;
        let end = find(body, &sep, data_start).ok_or("a part without its closing boundary")?;
        let filename =
            head.lines().find(|l| l.to_ascii_lowercase().starts_with("content-disposition:")).and_then(|l| {
                let i = l.find("filename=\"")? + "filename=\"".len();
                l[i..].split('"').next().map(str::to_string)
            });
        parts.push((filename, body[data_start..end].to_vec()));
        at = end + sep.len();
        if parts.len() > 1000 {
            return Err("more than 1000 parts".into());
        }
    }
}

/// The files an upload names: (absolute path, bytes) each.
pub fn uploads(h: &HeaderMap, query_path: Option<String>, body: &[u8]) -> Result<Vec<(String, Vec<u8>)>, Refusal> {
    if h.get(hyper::header::CONTENT_ENCODING).is_some() {
        return Err(Refusal::unsupported("a compressed upload (Content-Encoding)"));
    }
    let ct = h.get(hyper::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let files = if let Some(b) = ct.strip_prefix("multipart/form-data").and_then(|r| r.split("boundary=").nth(1)) {
        let parts = multipart(body, b.trim_matches('"')).map_err(Refusal::bad)?;
        let single = parts.len() == 1;
        parts
            .into_iter()
            .map(|(name, data)| match (single, &query_path, name) {
                (true, Some(p), _) => Ok((p.clone(), data)),
                (_, _, Some(n)) => Ok((n, data)),
                _ => Err(Refusal::bad("a part names no file (filename) and the query no path")),
            })
            .collect::<Result<Vec<_>, _>>()?
    } else {
        vec![(query_path.ok_or_else(|| Refusal::bad("path is required"))?, body.to_vec())]
    };
    if let Some((p, _)) = files.iter().find(|(p, _)| !p.starts_with('/') || p.contains('\0') || p == "/") {
        return Err(Refusal::bad(format!("path {p:?} must be an absolute path of a file")));
    }
    Ok(files)
}

/// `POST /files?path=P[&username=U]`: `[{"name", "type": "file", "path"}]` per file.
pub async fn upload(req: hyper::Request<Incoming>, id: String, shared: Arc<Shared>) -> Response<Body> {
    let pairs = super::query::pairs(req.uri().query().unwrap_or("")).unwrap_or_default();
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if let Err(r) = user_ok(get("username").as_deref()) {
        return r.response();
    }
    let headers = req.headers().clone();
    // Held until the bytes are written: they are in memory till then.
    let _held = http::body_budget(MAX_UPLOAD).await;
    let body = match http::read_body_within(req.into_body(), MAX_UPLOAD).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let files = match uploads(&headers, get("path"), &body) {
        Ok(f) => f,
        Err(r) => return r.response(),
    };
    drop(body);
    let done = shared
        .blocking(move |ops| {
            let target = ops.open(&id).map_err(refusal)?;
            let mut written = Vec::new();
            for (path, data) in files {
                crate::workbench::write_file(&target, &path, &data).map_err(refusal)?;
                let name = path.rsplit('/').next().unwrap_or("").to_string();
                written.push(serde_json::json!({ "name": name, "type": "file", "path": path }));
            }
            Ok(serde_json::Value::Array(written))
        })
        .await;
    super::answer::response_of(done, |v| http::json(StatusCode::OK, &v))
}

/// The `username` a `/files` request names: none, or refused.
fn user_ok(u: Option<&str>) -> Result<(), Refusal> {
    match u {
        None | Some("") => Ok(()),
        Some("root") => {
            Err(Refusal(StatusCode::FORBIDDEN, "sbx sandboxes have no root: files are the sandbox's own user's".into()))
        }
        Some(u) => Err(Refusal::bad(format!("user {u:?}: give no user"))),
    }
}

//! envd's `filesystem.Filesystem` unary RPCs, as SDK 2.63.0 calls them:
//! Stat (`files.exists`, `get_info`), ListDir with depth (`files.list`),
//! MakeDir, Move (`rename`) and Remove, in Connect's JSON codec. Each runs
//! through the helper (`workbench::listing`, `workbench::paths`) as the
//! sandbox's own user; none follows a symlink at the path it names.
//!
//! Names come back as bytes from the sandbox; JSON carries them lossily
//! (invalid UTF-8 becomes U+FFFD), so such an entry is listed but cannot
//! be addressed back by the path it is shown with. Owner and group are
//! empty (the helper says neither); `mode` is the permission bits and
//! `permissions` Go's `FileMode.String()` of them, as envd answers.
//! ListDir leaves out what the helper could not read (it says `W` lines
//! for those), as a listing of what could be seen.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};

use super::http::{self, Body};
use super::Shared;
use crate::error::{Error, Explained, SandboxError};
use crate::workbench::lines::{Entry, Kind};
use crate::workbench::{listing, paths, ListOpts};

/// The most entries one ListDir answers with (it is held in memory).
pub const MAX_ENTRIES: u64 = 100_000;

/// A Connect error: its code and message.
pub type Refused = (&'static str, String);

/// Which unary RPC a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rpc {
    Stat,
    ListDir,
    MakeDir,
    Move,
    Remove,
}

impl Rpc {
    pub fn of(path: &str) -> Option<Rpc> {
        Some(match path.strip_prefix("/filesystem.Filesystem/")? {
            "Stat" => Rpc::Stat,
            "ListDir" => Rpc::ListDir,
            "MakeDir" => Rpc::MakeDir,
            "Move" => Rpc::Move,
            "Remove" => Rpc::Remove,
            _ => return None,
        })
    }
}

/// What a request asks, its paths checked and made canonical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    Stat(String),
    ListDir(String, u32),
    MakeDir(String),
    Move(String, String),
    Remove(String),
}

/// A request's path field: absolute, canonical, not `/` unless `root_ok`.
fn path_of(msg: &Value, field: &'static str, root_ok: bool) -> Result<String, Refused> {
    let bad = |m: String| ("invalid_argument", m);
    let s = msg[field].as_str().ok_or_else(|| bad(format!("{field} is required")))?;
    let p = listing::sandbox_path(field, s).map_err(|e| bad(e.to_string()))?;
    if p == "/" && !root_ok {
        return Err(bad(format!("{field} may not be / itself")));
    }
    Ok(p)
}

/// The request message of `rpc`, as what it asks.
pub fn parse(rpc: Rpc, msg: &Value) -> Result<Asked, Refused> {
    Ok(match rpc {
        Rpc::Stat => Asked::Stat(path_of(msg, "path", false)?),
        Rpc::ListDir => {
            // The SDK sends 0 for "no depth", as envd takes it: 1.
            let depth = match &msg["depth"] {
                Value::Null => 1,
                v => v.as_u64().ok_or(("invalid_argument", format!("depth {v} is not a number")))?,
            };
            if depth > listing::MAX_DEPTH as u64 {
                return Err(("invalid_argument", format!("depth {depth}: at most {}", listing::MAX_DEPTH)));
            }
            Asked::ListDir(path_of(msg, "path", true)?, (depth as u32).max(1))
        }
        Rpc::MakeDir => Asked::MakeDir(path_of(msg, "path", false)?),
        Rpc::Move => Asked::Move(path_of(msg, "source", false)?, path_of(msg, "destination", false)?),
        Rpc::Remove => Asked::Remove(path_of(msg, "path", false)?),
    })
}

/// Go's `FileMode.String()` of a kind and its permission bits.
pub fn permissions(kind: Kind, mode: u32) -> String {
    let t = match kind {
        Kind::Dir => 'd',
        Kind::Symlink => 'L',
        Kind::Fifo => 'p',
        Kind::Socket => 'S',
        Kind::Block => 'D',
        Kind::Char => 'c',
        Kind::File | Kind::Other => '-',
    };
    let mut s = String::from(t);
    for (i, c) in "rwxrwxrwx".chars().enumerate() {
        s.push(if mode & (0o400 >> i) != 0 { c } else { '-' });
    }
    s
}

/// An `EntryInfo` in Connect JSON: `path` is the entry's absolute path
/// (bytes, carried lossily), int64 `size` a string, enums by name.
pub fn entry_json(path: &[u8], e: &Entry) -> Value {
    let file_type = match e.kind {
        Kind::File => "FILE_TYPE_FILE",
        Kind::Dir => "FILE_TYPE_DIRECTORY",
        Kind::Symlink => "FILE_TYPE_SYMLINK",
        _ => "FILE_TYPE_UNSPECIFIED",
    };
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(e.mtime.max(0) as u64);
    let mut v = json!({
        "name": String::from_utf8_lossy(e.path.name()),
        "type": file_type,
        "path": String::from_utf8_lossy(path),
        "size": e.size.to_string(),
        "mode": e.mode & 0o777,
        "permissions": permissions(e.kind, e.mode),
        "owner": "",
        "group": "",
        "modifiedTime": humantime::format_rfc3339_seconds(at).to_string(),
    });
    if let Some(t) = &e.target {
        v["symlinkTarget"] = json!(String::from_utf8_lossy(t));
    }
    v
}

/// The Connect code an sbx error answers with, and its message.
pub fn code_of(e: &Error) -> Refused {
    let code = match e {
        Error::Explained(Explained::NoSuchPath { .. } | Explained::NoParent { .. }) => "not_found",
        Error::Explained(Explained::Exists { .. }) => "already_exists",
        Error::Explained(Explained::ReadOnly { .. } | Explained::Denied { .. }) => "permission_denied",
        Error::Explained(Explained::NoSpace { .. } | Explained::WatchLimit { .. }) => "resource_exhausted",
        Error::Explained(Explained::NotADirectory { .. }) | Error::Invalid(_) => "invalid_argument",
        Error::Sandbox(SandboxError::NotFound { .. } | SandboxError::NotRunning { .. }) => "failed_precondition",
        _ => "internal",
    };
    (code, e.to_string())
}

/// The HTTP status of a unary Connect error code.
pub fn status_of(code: &str) -> StatusCode {
    match code {
        "invalid_argument" | "failed_precondition" => StatusCode::BAD_REQUEST,
        "not_found" => StatusCode::NOT_FOUND,
        "already_exists" => StatusCode::CONFLICT,
        "permission_denied" => StatusCode::FORBIDDEN,
        "resource_exhausted" => StatusCode::TOO_MANY_REQUESTS,
        "unavailable" => StatusCode::SERVICE_UNAVAILABLE,
        "deadline_exceeded" => StatusCode::GATEWAY_TIMEOUT,
        "unimplemented" => StatusCode::NOT_IMPLEMENTED,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn refused((code, message): Refused) -> Response<Body> {
    http::json(status_of(code), &json!({ "code": code, "message": message }))
}

/// One of the unary RPCs: `user` is what `envd::check_user` said of the
/// request's user; check the message, run it on a worker thread, answer
/// its response message or a Connect error.
pub async fn handle(
    req: Request<Incoming>,
    rpc: Rpc,
    user: Result<(), Refused>,
    id: String,
    shared: Arc<Shared>,
) -> Response<Body> {
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
    let asked = match parse(rpc, &msg) {
        Ok(a) => a,
        Err(r) => return refused(r),
    };
    let done = shared
        .blocking(move |ops| {
            let t = ops.open(&id).map_err(|e| code_of(&e))?;
            run(&t, asked)
        })
        .await;
    match done {
        Some(Ok(v)) => http::json(StatusCode::OK, &v),
        Some(Err(r)) => refused(r),
        None => refused(("unavailable", "sbx serve is shutting down".into())),
    }
}

fn stat_json(t: &crate::workbench::Target, path: &str) -> Result<Value, Refused> {
    let e = paths::stat(t, path).map_err(|e| code_of(&e))?;
    Ok(json!({ "entry": entry_json(path.as_bytes(), &e) }))
}

/// Do what was asked in the sandbox; the response message.
fn run(t: &crate::workbench::Target, asked: Asked) -> Result<Value, Refused> {
    match asked {
        Asked::Stat(p) => stat_json(t, &p),
        Asked::ListDir(p, depth) => list_dir(t, &p, depth),
        Asked::MakeDir(p) => {
            let exists = || ("already_exists", format!("{p} already exists"));
            if !listing::mkdir(t, &p, true).map_err(|e| code_of(&e))? {
                return Err(exists());
            }
            // `mkdir -p` takes a symlink to a directory for one: it is there, not made.
            let e = paths::stat(t, &p).map_err(|e| code_of(&e))?;
            match e.kind {
                Kind::Dir => Ok(json!({ "entry": entry_json(p.as_bytes(), &e) })),
                _ => Err(exists()),
            }
        }
        Asked::Move(from, to) => {
            let e = paths::rename(t, &from, &to).map_err(|e| code_of(&e))?;
            Ok(json!({ "entry": entry_json(to.as_bytes(), &e) }))
        }
        Asked::Remove(p) => paths::remove(t, &p).map(|()| json!({})).map_err(|e| code_of(&e)),
    }
}

/// ListDir: the entries below directory `path`, `depth` levels deep,
/// never through a symlink (a link is listed as one, with its target).
fn list_dir(t: &crate::workbench::Target, path: &str, depth: u32) -> Result<Value, Refused> {
    let mut entries = Vec::new();
    let opts = ListOpts { max_depth: depth, limit: MAX_ENTRIES };
    let sum = listing::list(t, path, opts, &mut |i| {
        if let listing::Item::Entry(e) = i {
            entries.push(entry_json(&e.path.under(path), e));
        }
        Ok(())
    })
    .map_err(|e| code_of(&e))?;
    if !sum.root_is_dir {
        return Err(("invalid_argument", format!("path {path} is not a directory (a symlink is never followed)")));
    }
    if sum.truncated {
        return Err((
            "resource_exhausted",
            format!("more than {MAX_ENTRIES} entries below {path}: ask for less depth"),
        ));
    }
    Ok(json!({ "entries": entries }))
}

#[cfg(test)]
mod tests;

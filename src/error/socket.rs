//! Failures of the host side of the socket channel.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("no usable socket root: {tried}")]
    NoRoot { tried: String },
    #[error("socket root {path}: {reason}")]
    BadRoot { path: PathBuf, reason: String },
    #[error("socket path {path} is {len} bytes; Linux allows at most 107")]
    PathTooLong { path: PathBuf, len: usize },
    #[error("socket {path} is hostile: {reason}")]
    Hostile { path: PathBuf, reason: String },
    /// Before `sbx start`: what the last run left at its socket's path.
    #[error("cannot start {id}: {path} is {what}; the sandbox left it there")]
    Stale { path: PathBuf, id: String, what: String },
    #[error("the sandbox's socket {path} did not accept the connection within {waited} (its backlog is full?)")]
    NotAccepting { path: PathBuf, waited: String },
    /// Direct channel: the sandbox bound its socket, but sbx's user may not
    /// write it, so `create` must not call it ready.
    #[error("socket {path} is bound, but you (uid {uid}) may not connect to it: {reason}")]
    NotYours { path: PathBuf, uid: u32, reason: String },
    /// The relayed channel (`docker exec ... helper connect`) ended badly.
    #[error("the relayed channel to {id} failed: {detail}")]
    Relay { id: String, detail: String },
    /// Nothing at the socket's path yet: the sandbox has not bound it.
    /// The text and kind are those of the made-up `Io` (NotFound) it was.
    #[error("socket {path}: the sandbox has not bound its socket")]
    NotBound { path: PathBuf },
    #[error("socket {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl SocketError {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            SocketError::Hostile { .. } | SocketError::Stale { .. } => "hostile_socket",
            SocketError::PathTooLong { .. } => "socket_path_too_long",
            _ => "socket",
        }
    }

    pub(super) fn hint(&self) -> Option<String> {
        Some(match self {
            SocketError::NoRoot { .. } => "pass --socket-dir DIR (or SBX_SOCKET_DIR) naming a writable directory".into(),
            SocketError::BadRoot { .. } => "pass --socket-dir DIR (or SBX_SOCKET_DIR) naming a directory you own".into(),
            SocketError::PathTooLong { .. } => "use a shorter --socket-dir (or SBX_SOCKET_DIR), e.g. /run/sbx".into(),
            SocketError::Hostile { .. } => {
                "the sandbox must bind a unix socket itself at /run/sandbox/sandbox.sock; sbx never follows links there".into()
            }
            SocketError::Stale { path, id, .. } => format!(
                "sbx removes only an old socket there and never follows a link: remove the entry yourself (`rm {}` removes a link, not what it names) and `sbx start {id}` again, or `sbx destroy {id}`",
                path.display()
            ),
            SocketError::Io { .. } | SocketError::NotBound { .. } => return None,
            SocketError::NotYours { .. } => {
                "create it with the relayed channel (`--channel exec`, the default when sbx is not root), or `--user` your own uid".into()
            }
            SocketError::Relay { id, .. } => {
                format!("`sbx inspect {id}` shows whether it runs; `sbx logs {id}` what its program said")
            }
            SocketError::NotAccepting { .. } => {
                "the sandbox program is not accepting connections on its socket; see `sbx logs ID`, or retry with a longer `--timeout`".into()
            }
        })
    }
}

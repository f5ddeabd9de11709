//! HostError: its failures, each with its `--json` kind and its hint.
//! Every one exits 1 (see the table in the parent module).

use std::path::PathBuf;

/// This machine: the files and directories sbx keeps, the helper it mounts.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The helper sbx would mount is not the one it embeds, or others could change it.
    #[error("the helper at {path} cannot be trusted: {reason}")]
    HelperUntrusted { path: PathBuf, reason: String },
    /// A system call on this machine failed; `context` says what sbx was doing.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// No state directory candidate could be made and written (see
    /// `host::state::StateChoice`). The text and kind are those of the
    /// `Io` error this used to be.
    #[error("no usable state directory (tried: {tried}); set SBX_DATA_DIR: no state directory")]
    NoStateDir { tried: String },
    /// The ownership key file holds something other than 32 bytes.
    #[error("{} is not a 32-byte key: invalid data", path.display())]
    BadKey { path: PathBuf },
    /// JSON sbx writes (a record, `--json` output, the probe's report) or
    /// reads (the probe's report) that does not encode or parse.
    #[error("{context}: {source}")]
    Json {
        context: String,
        #[source]
        source: serde_json::Error,
    },
    /// sbx's seccomp profile file is not what sbx just wrote there.
    #[error("verifying {}: the profile changed after it was written (is the data dir shared?)", path.display())]
    SeccompChanged { path: PathBuf },
    /// What a remote engine cannot do yet without a path of this machine in
    /// its argv; refused before any docker call.
    #[error("remote engines: not yet supported: {what}")]
    RemoteUnsupported { what: String },
    /// Every uid of sbx's range is held or refused (`host::uids`).
    #[error("no free uid left in sbx's range (table {})", table.display())]
    UidsExhausted { table: PathBuf },
    /// `sbx man DIR` could not make DIR or write a page there.
    #[error("cannot write man pages into {}: {source}", dir.display())]
    ManDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl HostError {
    pub fn kind(&self) -> &'static str {
        match self {
            HostError::HelperUntrusted { .. } => "helper_untrusted",
            // These four were `Io` errors once; scripts may match the kind.
            HostError::Io { .. }
            | HostError::NoStateDir { .. }
            | HostError::BadKey { .. }
            | HostError::Json { .. }
            | HostError::SeccompChanged { .. }
            | HostError::ManDir { .. } => "io",
            HostError::RemoteUnsupported { .. } => "remote_unsupported",
            HostError::UidsExhausted { .. } => "uids_exhausted",
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            // A helper volume on a remote engine: the reason says what to do.
            HostError::HelperUntrusted { path, .. } if path.to_string_lossy().starts_with("volume ") => None,
            HostError::HelperUntrusted { path, .. } => Some(format!(
                "make {} and its parents owned by you or root and writable by nobody else, then retry (sbx reinstalls a helper whose content differs)",
                path.display()
            )),
            HostError::ManDir { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => Some(
                "run it with sudo for a system directory, or give one of yours (`sbx man ~/.local/share/man/man1`)".into(),
            ),
            HostError::ManDir { .. } => {
                Some("give a directory (sbx creates it and its parents), e.g. `sbx man ~/.local/share/man/man1`".into())
            }
            HostError::Io { .. }
            | HostError::NoStateDir { .. }
            | HostError::BadKey { .. }
            | HostError::Json { .. }
            | HostError::SeccompChanged { .. } => None,
            HostError::UidsExhausted { .. } => {
                Some("destroy sandboxes you no longer need, then `sbx gc` (it frees the uids of sandboxes gone)".into())
            }
            HostError::RemoteUnsupported { .. } => Some(
                "run sbx on the engine's machine (or point it at a local engine: unset DOCKER_HOST, `--context default`)".into(),
            ),
        }
    }
}

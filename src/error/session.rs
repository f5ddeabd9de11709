//! SessionError: its failures, each with its `--json` kind and its hint.
//! Every one exits 1 (see the table in the parent module).

use std::path::PathBuf;

/// Persistent sessions: the `/state` volume and the cloned workspace.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("the persistent state of session {session} is in use by running sandbox {id}")]
    VolumeInUse { session: String, id: String },
    #[error("{} is {found}, not a workspace directory; --clone never clones through it", path.display())]
    WorkspaceNotDirectory { path: PathBuf, found: String },
    /// A remote session's volume of sbx's name that sbx cannot prove it made.
    #[error("volume {name} on the engine is not this sbx's ({why}); refusing to use or remove it")]
    ForeignVolume { name: String, why: String },
    /// The file system that bounds a session's /state could not be made,
    /// mounted or grown (`host::persist::image`).
    #[error("session {session}'s bounded /state: {what}: {detail}")]
    Bound { session: String, what: String, detail: String },
}

impl SessionError {
    pub fn kind(&self) -> &'static str {
        match self {
            SessionError::VolumeInUse { .. } => "volume_in_use",
            SessionError::WorkspaceNotDirectory { .. } => "workspace_not_directory",
            SessionError::ForeignVolume { .. } => "foreign_volume",
            SessionError::Bound { .. } => "persist_bound",
        }
    }

    pub fn hint(&self) -> Option<String> {
        Some(match self {
            SessionError::VolumeInUse { id, .. } => {
                format!("one writer at a time: `sbx destroy {id}` first (the volume stays)")
            }
            SessionError::ForeignVolume { name, .. } => format!("if it is yours and nothing uses it, remove it (`docker volume rm {name}`); or choose another --session"),
            SessionError::Bound { .. } => "sbx makes it with mkfs.ext4 (e2fsprogs) and mounts it with mount(8) and a loop device (util-linux), as root; check that they are installed and loop devices work (`losetup -f`)".into(),
            SessionError::WorkspaceNotDirectory { path, .. } => format!("an earlier sandbox of this session left it; remove it (`rm {}` removes a link itself, not its target) or create without --clone", path.display()),
        })
    }
}

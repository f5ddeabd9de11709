//! SnapshotError: checkpoints, hibernation and what is restored from them,
//! each with its `--json` kind and its hint. Every one exits 1.

/// A checkpoint that cannot be made, found or trusted.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// gVisor cannot restore a sandbox saved while a `docker exec` runs in
    /// it (gvisor#11439), and leaves runsc's state behind when one does.
    #[error("sandbox {id} has {count} docker exec session(s) running in it (sbx connect, exec, shell, watch, or a command of sbx serve); gVisor cannot restore a sandbox saved with one")]
    ExecLive { id: String, count: usize },
    #[error("sandbox {id} has no checkpoint {name}")]
    NotFound { id: String, name: String },
    #[error("sandbox {id} has a checkpoint {name} already")]
    Exists { id: String, name: String },
    /// The image, its record, or what it is recorded for, is not what this
    /// data dir wrote: never restored.
    #[error("checkpoint {name} of sandbox {id} is refused: {reason}")]
    Untrusted { id: String, name: String, reason: String },
    #[error("checkpoint {name} of sandbox {id} is {size} bytes, over the limit of {limit} ({which})")]
    TooBig { id: String, name: String, size: u64, limit: u64, which: &'static str },
    /// runsc or the engine failed part way; what state the sandbox is in.
    #[error("{what} sandbox {id}: {detail}")]
    Failed { id: String, what: &'static str, detail: String },
}

impl SnapshotError {
    pub fn kind(&self) -> &'static str {
        match self {
            SnapshotError::ExecLive { .. } => "exec_live",
            SnapshotError::NotFound { .. } => "no_checkpoint",
            SnapshotError::Exists { .. } => "checkpoint_exists",
            SnapshotError::Untrusted { .. } => "checkpoint_untrusted",
            SnapshotError::TooBig { .. } => "checkpoint_too_big",
            SnapshotError::Failed { .. } => "checkpoint_failed",
        }
    }

    pub fn hint(&self) -> Option<String> {
        Some(match self {
            SnapshotError::ExecLive { .. } => {
                "end them (or wait for them to end) and retry; processes started with `sbx exec -d` are \
                 not saved in a checkpoint either"
                    .into()
            }
            SnapshotError::NotFound { id, .. } => format!("`sbx checkpoints {id}` lists its checkpoints"),
            SnapshotError::Exists { id, name } => {
                format!("give another --name, or remove it first: `sbx checkpoints rm {id} {name}`")
            }
            SnapshotError::Untrusted { .. } => {
                "a checkpoint is restored only from the image this data dir wrote for this sandbox and name; \
                 make a new one"
                    .into()
            }
            SnapshotError::TooBig { .. } => {
                "raise --max-checkpoint-size, or remove old checkpoints (`sbx checkpoints rm ID NAME`)".into()
            }
            SnapshotError::Failed { .. } => return None,
        })
    }
}

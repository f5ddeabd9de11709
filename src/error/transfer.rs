//! TransferError: its failures, each with its `--json` kind and its hint.
//! Every one exits 1 (see the table in the parent module).

/// Moving files in and out of a sandbox: `cp`, `backup`, `restore`.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The tar stream on stdin is empty, truncated or not tar; `command`
    /// (`restore` or `cp`) is what read it.
    #[error("{command}: {reason}")]
    NotTar { command: &'static str, reason: String },
    /// What sbx refused while moving files: the sandbox's stream broke the
    /// format or a limit (it is hostile), or a host path would be
    /// read or written through a link. `context` says what sbx was doing.
    #[error("{context}: {reason}")]
    Refused { context: String, reason: String },
}

impl TransferError {
    pub fn kind(&self) -> &'static str {
        match self {
            // `Io` errors once; scripts may match the kind.
            TransferError::NotTar { .. } | TransferError::Refused { .. } => "io",
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            TransferError::NotTar { .. } | TransferError::Refused { .. } => None,
        }
    }
}

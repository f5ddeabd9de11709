//! The OCI runtime a sandbox asked for: one the engine does not
//! have, or has registered in a way sbx cannot run under.

use crate::model::runtime::{fragment, RELOAD};

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("the Docker engine has no runtime {name:?} (it has: {have})")]
    Missing { name: String, have: String },
    #[error("runtime {name:?} cannot run this sandbox: {}", problems.join("; "))]
    Misconfigured { name: String, path: String, problems: Vec<String> },
    #[error("could not read the engine's runtimes from `docker info`: {reason}")]
    Unreadable { reason: String },
}

impl RuntimeError {
    pub fn kind(&self) -> &'static str {
        match self {
            RuntimeError::Missing { .. } => "runtime_missing",
            RuntimeError::Misconfigured { .. } => "runtime_misconfigured",
            RuntimeError::Unreadable { .. } => "runtime_unreadable",
        }
    }

    pub fn hint(&self) -> Option<String> {
        Some(match self {
            RuntimeError::Missing { name, .. } => {
                let install = if name.contains("runsc") { " (Debian: `apt-get install runsc`)" } else { "" };
                format!(
                    "install it{install}, merge {} into /etc/docker/daemon.json (keep the keys already there) and reload the engine without stopping containers: `{RELOAD}`; `sbx doctor --runtime {name}` then checks it end to end",
                    fragment(name, None)
                )
            }
            RuntimeError::Misconfigured { name, path, .. } => format!(
                "set its entry in /etc/docker/daemon.json to {} and reload the engine: `{RELOAD}`",
                fragment(name, Some(path))
            ),
            RuntimeError::Unreadable { .. } => "check that `docker info` answers".into(),
        })
    }
}

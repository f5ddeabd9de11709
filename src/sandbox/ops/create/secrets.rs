//! Create's secrets: read before any docker call, kept (and the sandbox's
//! CA bundle written) once the create is undoable, pushed into the gate's
//! memory once it is up, before `--setup`.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::host::secrets::{self as host_secrets, Kept};
use crate::sandbox::Driver;
use crate::spec::SandboxSpec;

/// Each secret's value, read now: a SOURCE that cannot be read is exit 2
/// with nothing made. None without a terminated host.
pub(super) fn read_secrets(id: &str, spec: &SandboxSpec, warnings: &mut Vec<String>) -> Result<Option<Kept>> {
    match &spec.egress {
        Some(e) => host_secrets::prepare(id, e, warnings),
        None => Ok(None),
    }
}

/// The bundle's directory on this machine and the sandbox's variables.
pub(super) type Trust = (PathBuf, Vec<(String, String)>);

/// The kept copy and the bundle, written after the policy (the rollback
/// removes them with it, `host::egress::remove`); the bundle's directory
/// and the sandbox's variables.
pub(super) fn keep_secrets(data: &Path, id: &str, kept: Option<&Kept>) -> Result<Option<Trust>> {
    kept.map(|k| Ok((host_secrets::write(data, id, k)?, k.env()))).transpose()
}

impl Driver {
    /// The gate terminates no TLS until it has its vault.
    pub(super) fn push_kept(&self, id: &str, kept: Option<&Kept>, gate: Option<&str>) -> Result<()> {
        match (kept, gate) {
            (Some(k), Some(gate)) => self.push_vault(id, gate, k),
            _ => Ok(()),
        }
    }
}

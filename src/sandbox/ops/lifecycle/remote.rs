//! `sbx start` against a remote engine: what create's remote
//! path does before its `docker start`, for a sandbox that ran before. No
//! socket directory of this machine is mounted (the socket is in a tmpfs
//! inside the sandbox, fresh at each start), nothing is read from this
//! machine's /proc, and no path of this machine goes into an argv: where
//! the mounts land is read from the stopped container's /run through
//! `docker cp` (`check_remote_layout`), then readiness is polled through
//! the relayed channel as at create.

use std::path::PathBuf;

use crate::docker::parse::RawContainer;
use crate::error::{Error, HostError, Result};
use crate::host::channel::Kind;
use crate::model::{paths, record};
use crate::sandbox::Driver;

/// What a remote start checked and where its marker is.
pub(in crate::sandbox) struct RemoteStart {
    /// The helper volume holds the readable copy (gVisor).
    pub readable: bool,
    /// What its TTL watchdog watches (its expiry here: `Driver::watched`).
    pub watched: PathBuf,
}

impl Driver {
    /// Before `docker start` of a stopped sandbox on a remote engine: it
    /// must be one made there (relayed channel, helper volume of this sbx's
    /// helper), attributed to this engine (nothing of it is made on this
    /// machine's file system), and its /run must still be what
    /// create checked (the volumes are mounted for `docker cp` of a stopped
    /// container as at start; nothing of the sandbox runs meanwhile).
    pub(in crate::sandbox) fn prepare_remote_start(
        &self,
        id: &str,
        raw: &RawContainer,
        channel: Kind,
    ) -> Result<RemoteStart> {
        let engine = self.engine()?;
        let unsupported = |why: &str| {
            Error::Host(HostError::RemoteUnsupported {
                what: format!("start of {id}: {why} (the engine is {})", engine.endpoint),
            })
        };
        if channel != Kind::Exec || raw.labels.get(record::SOCKET).map(String::as_str) != Some(paths::SANDBOX_SOCKET) {
            return Err(unsupported(
                "it was created against a local engine, with a socket directory and helper on the engine's machine",
            ));
        }
        let readable = self.helper_volume_of(id, raw)?;
        let state = &self.state()?.state;
        state.set_engine(id, &engine.endpoint)?;
        self.check_interrupt()?;
        let image = raw.labels.get(record::IMAGE).cloned().unwrap_or_default();
        self.check_remote_layout(id, &image, readable)?;
        Ok(RemoteStart { readable, watched: state.expiry_file(id) })
    }

    /// Whether the volume at /run/sbx (docker's record of the mounts) is
    /// this sbx's readable helper copy. One of another sbx build holds that
    /// build's helper, which this one cannot verify byte for byte.
    fn helper_volume_of(&self, id: &str, raw: &RawContainer) -> Result<bool> {
        let key = crate::host::helper::key();
        let source = raw.full["HostConfig"]["Mounts"]
            .as_array()
            .and_then(|ms| ms.iter().find(|m| m["Target"] == paths::HELPER_DIR && m["Type"] == "volume"))
            .and_then(|m| m["Source"].as_str())
            .unwrap_or_default();
        let exact = format!("sbx-helper-{key}");
        match source.strip_prefix(exact.as_str()) {
            Some("") => Ok(false),
            Some("-r") => Ok(true),
            _ => Err(Error::Host(HostError::HelperUntrusted {
                path: PathBuf::from(format!("volume {source:?} of {id}")),
                reason: format!(
                    "sandbox {id} mounts another sbx build's helper volume (this build's is {exact}), whose helper this sbx cannot verify; keep its work with `sbx cp`, then destroy it and create it again"
                ),
            })),
        }
    }
}

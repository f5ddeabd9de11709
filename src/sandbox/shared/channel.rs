//! How to reach a running sandbox's program (`connect`, `doctor`, `port-forward`).

use std::path::PathBuf;

use crate::error::SandboxError;
use crate::error::{Error, Result};
use crate::host::channel::{Channel, Kind};
use crate::host::socket;
use crate::model::record;
use crate::sandbox::{container_id, Driver};

impl Driver {
    /// How to reach a running sandbox's program (`connect`, `doctor`): the
    /// channel its create chose, as its (token-covered) label records it.
    pub fn channel(&self, id: &str) -> Result<crate::host::channel::Channel> {
        if let Some(ch) = self.recorded_remote_channel(id)? {
            return Ok(ch);
        }
        let raw = self.inspect_one(id)?;
        let kind = Kind::from_label(raw.labels.get(record::CHANNEL).map(String::as_str));
        if kind == Kind::Direct {
            // Its socket is a file on the engine's machine.
            self.local_only("a direct channel dials the sandbox's socket on this machine")?;
        }
        if raw.state == "paused" {
            // `docker exec` refuses a frozen container; on the host the
            // kernel still queues a connection, and nothing answers until it is thawed.
            if kind == Kind::Exec {
                return Err(crate::error::Explained::Paused { id: id.to_string() }.into());
            }
            self.warn("paused", &format!("sandbox {id} is paused: nothing answers until `sbx resume {id}`"));
        } else if raw.state != "running" {
            return Err(Error::Sandbox(SandboxError::NotRunning { id: id.to_string(), state: raw.state }));
        }
        let rec = self.record(&raw, crate::sandbox::started_at(&raw));
        Ok(match kind {
            Kind::Direct => {
                let uid = rec.user.split(':').next().and_then(|u| u.parse().ok());
                let path = PathBuf::from(raw.labels.get(record::SOCKET).cloned().unwrap_or_default());
                // The container's id, for a runtime whose own process holds
                // the host end of the socket (gVisor's gofer; see `socket`).
                let container = container_id(&raw).ok();
                Channel::Direct { path, owners: socket::allowed_owners(uid), container }
            }
            // `docker exec` on the container id, never a name another container could take.
            Kind::Exec => Channel::Exec { id: id.to_string(), container: container_id(&raw)? },
        })
    }

    /// A sandbox this host made on the remote engine it drives now (its
    /// record, attributed to this engine: both written by sbx in its data
    /// dir at create) is reached on the container id recorded then,
    /// without an inspect first: over ssh that look-up is a third of a
    /// connect's time (`BENCHMARKS.md`, remote). Every remote create is
    /// relayed. A container paused, stopped or gone since is docker's
    /// answer to the `docker exec`, which `relay_status` says in sbx's words.
    fn recorded_remote_channel(&self, id: &str) -> Result<Option<Channel>> {
        if !self.engine()?.is_remote() {
            return Ok(None);
        }
        Ok(self.recorded_container(id)?.map(|container| Channel::Exec { id: id.to_string(), container }))
    }

    /// The container id this data dir recorded at create for sandbox `id`
    /// on the engine sbx drives now (None: not made here, or on another
    /// engine). A 64-hex id is never reused, so a docker call on it reaches
    /// this sandbox or fails.
    pub(in crate::sandbox) fn recorded_container(&self, id: &str) -> Result<Option<String>> {
        let engine = self.engine()?;
        let state = &self.state()?.state;
        if !state.belongs(id, &engine.endpoint) {
            return Ok(None);
        }
        Ok(state.record(id).map(|r| r.container))
    }
}

//! Create against a remote engine (issue 16): refused, before any docker
//! call, while it would put a path of this machine into an argv.

use super::super::Driver;
use crate::error::{Error, Result};
use crate::host::channel::Kind;
use crate::spec::SandboxSpec;

impl Driver {
    /// With a remote engine, before any docker call: what would put a path
    /// of this machine into an argv (issue 16). Host-path flags were refused
    /// on the request (exit 2, `spec::refuse_host_paths`); they are checked
    /// again here for creates that do not come from one (a pool's refill).
    /// What later slices of issue 16 bring (the helper and the socket
    /// reached without a bind mount) fails with exit 1 meanwhile.
    pub(super) fn refuse_remote(&self, spec: &SandboxSpec) -> Result<()> {
        let engine = self.engine()?;
        if !engine.is_remote() {
            return Ok(());
        }
        if spec.state_dir.is_some() || !spec.mounts.is_empty() || spec.clone.is_some() || spec.persist {
            let req = crate::spec::CreateRequest {
                ro: spec.mounts.iter().filter(|m| m.readonly).map(|m| m.host.display().to_string()).collect(),
                rw: spec.mounts.iter().filter(|m| !m.readonly).map(|m| m.host.display().to_string()).collect(),
                state_dir: spec.state_dir.as_ref().map(|m| m.host.display().to_string()),
                clone: spec.clone.as_ref().map(|c| c.url.clone()),
                persist: spec.persist,
                session: spec.session.clone(),
                ..Default::default()
            };
            crate::spec::refuse_host_paths(&req, engine)?;
        }
        let mut binds = vec!["sbx's helper (bind-mounted from this machine's data directory)"];
        if spec.channel.resolve(nix::unistd::geteuid().as_raw()) == Kind::Direct {
            binds.push("the socket directory (bind-mounted from this machine; `--channel exec` avoids it)");
        }
        if spec.egress.is_some() {
            binds.push("the egress gate's policy directory (bind-mounted from this machine)");
        }
        Err(Error::Host(crate::error::HostError::RemoteUnsupported {
            what: format!(
                "create against {}: the sandbox would mount {}, which that engine cannot see (issue 16)",
                engine.endpoint,
                binds.join(" and ")
            ),
        }))
    }
}

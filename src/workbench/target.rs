//! [`Target`]: the one handle to a sandbox every workbench operation takes,
//! made by `Driver::open` once the sandbox is proven this host's. Docker
//! calls name its container id; errors name the sandbox id the user gave.

use crate::docker::DockerExec;
use crate::model::names::{ContainerId, SandboxId};

/// A sandbox to work in: both its ids and the engine that runs it.
#[derive(Clone)]
pub struct Target<'a> {
    /// What the user gave and every message names.
    pub sandbox: SandboxId,
    /// What every docker call names.
    pub container: ContainerId,
    pub docker: &'a dyn DockerExec,
}

impl<'a> Target<'a> {
    pub fn new(docker: &'a dyn DockerExec, sandbox: SandboxId, container: ContainerId) -> Self {
        Target { sandbox, container, docker }
    }

    /// Sandbox `id` whose container docker knows by that name too (tests).
    #[cfg(test)]
    pub(crate) fn test(docker: &'a dyn DockerExec, id: &str) -> Self {
        Target::new(docker, id.parse().expect("a sandbox id"), ContainerId::known(id))
    }
}

impl std::fmt::Debug for Target<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target").field("sandbox", &self.sandbox).field("container", &self.container).finish()
    }
}

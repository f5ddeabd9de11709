//! `fork`: new sandboxes that carry on from a `--snapshots` sandbox's
//! state now, or from one of its checkpoints (also after it is gone).
//! Each child is made by create's own path from the request its parent
//! was made from (`sbx.remake`, kept in the checkpoint's HMAC-covered
//! spec), with an id, container, channel, ownership token and TTL of its
//! own; only its start differs: `docker create`, the checked image copied
//! into the engine under a fresh name, `docker start --checkpoint`.

use crate::error::{Invalid, Result, SnapshotError};
use crate::host::checkpoints::{self, Limits, Meta};
use crate::model::record;
use crate::sandbox::ops::create::Created;
use crate::sandbox::Driver;
use crate::spec::{CreateRequest, Restore, SandboxSpec, UserSpec};

/// The most children one fork makes.
pub const MAX_COUNT: usize = 64;

/// How many children are made at once: each restore is mostly the
/// engine's and runsc's time, which overlaps; more would only queue on a
/// small host's cores.
const AT_ONCE: usize = 4;

/// What `sbx.remake` holds.
#[derive(serde::Deserialize)]
struct Remake {
    request: CreateRequest,
    #[serde(default)]
    idle: bool,
}

impl Driver {
    /// `count` new sandboxes carrying on from `id`'s state now (saved as a
    /// checkpoint that is removed once they run), or from its checkpoint
    /// `from`. All or none: a child that fails takes the others made with it,
    /// and each stays marked in flight until all are made, so `sbx gc` undoes
    /// a fork whose sbx was killed part way.
    pub fn fork(
        &self,
        id: &str,
        count: usize,
        from: Option<&str>,
        limits: Limits,
        docker_host: Option<&str>,
    ) -> Result<Vec<Created>> {
        if count == 0 || count > MAX_COUNT {
            return Err(
                Invalid::new("--count", count.to_string(), format!("a fork makes 1 to {MAX_COUNT} sandboxes")).into()
            );
        }
        let store = self.checkpoint_store()?;
        // A hibernated sandbox's state now is its hibernation.
        let hibernated = from.is_none() && self.state()?.state.marked(id, crate::host::state::Mark::Hibernated);
        let from = if hibernated { Some(checkpoints::HIBERNATED) } else { from };
        let Some(name) = from else {
            // Named by this process, so gc knows one a SIGKILL left behind.
            let by = crate::host::state::ProcId::current().unwrap_or(crate::host::state::ProcId { pid: 0, start: 0 });
            let name = checkpoints::fork_name(by.pid, by.start);
            self.checkpoint(id, &name, limits)?;
            let made = self.fork_from(id, &name, count, docker_host);
            let _ = store.remove(id, &name);
            return made;
        };
        if !checkpoints::valid_name(name) {
            return Err(checkpoints::bad_name(id, name).into());
        }
        crate::spec::parse_id(id)?;
        self.fork_from(id, name, count, docker_host)
    }

    fn fork_from(&self, id: &str, name: &str, count: usize, docker_host: Option<&str>) -> Result<Vec<Created>> {
        let meta = self
            .checkpoint_store()?
            .get(id, name)
            .ok_or_else(|| SnapshotError::NotFound { id: id.into(), name: name.into() })?;
        let spec = self.child_spec(id, &meta, docker_host)?;
        let mut made: Vec<Created> = Vec::with_capacity(count);
        let mut failed = None;
        let mut left = count;
        while left > 0 && failed.is_none() {
            let n = left.min(AT_ONCE);
            left -= n;
            let batch: Vec<Result<Created>> = std::thread::scope(|s| {
                let started: Vec<_> = (0..n).map(|_| s.spawn(|| self.create(&spec))).collect();
                let panicked = || SnapshotError::Failed {
                    id: id.into(),
                    what: "forking",
                    detail: "a child's create panicked".into(),
                };
                started.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(panicked().into()))).collect()
            });
            for r in batch {
                match r {
                    Ok(c) => made.push(c),
                    Err(e) => failed = failed.or(Some(e)),
                }
            }
        }
        if let Some(e) = failed {
            let ids: Vec<String> = made.iter().map(|c| c.record.id.clone()).collect();
            if !ids.is_empty() {
                if let Err(d) = self.destroy(&ids) {
                    self.warn("fork_left", &format!("children {} of a failed fork stay: {d}", ids.join(" ")));
                }
            }
            return Err(e);
        }
        let state = &self.state()?.state;
        for c in &made {
            state.end_create(&c.record.id);
        }
        Ok(made)
    }

    /// The spec of a child of checkpoint `meta`: its parent's request,
    /// checked again as create checks it, running as its parent's user
    /// (the restored processes are that user's; under gVisor no host
    /// process has that uid), without `--setup` (it ran in the parent).
    fn child_spec(&self, id: &str, meta: &Meta, docker_host: Option<&str>) -> Result<SandboxSpec> {
        let untrusted =
            |reason: &str| SnapshotError::Untrusted { id: id.into(), name: meta.name.clone(), reason: reason.into() };
        let remake: Remake = meta
            .spec
            .get(record::REMAKE)
            .and_then(|r| serde_json::from_str(r).ok())
            .ok_or_else(|| untrusted("it records no request to make a sandbox from (made by an older sbx)"))?;
        let mut spec = SandboxSpec::from_request(&remake.request, docker_host)?;
        let runtime = meta.spec.get(record::RUNTIME).map(String::as_str).unwrap_or_default();
        if !self.registration(runtime)?.is_some_and(|r| r.snapshots()) {
            return Err(Invalid::new(
                "sandbox",
                id,
                format!(
                    "its checkpoints were made under {runtime:?}, which is no longer a registration runsc can restore"
                ),
            )
            .hint("`sbx doctor --runtime runsc-snap`")
            .into());
        }
        // `--from` skips checkpoint's checks: without this a remote engine's
        // DockerRootDir would name the local path the image is copied to.
        self.checkpoints_reachable(id)?;
        let user = meta.spec.get(record::USER).and_then(|u| UserSpec::parse(u).ok());
        spec.user = Some(user.ok_or_else(|| untrusted("it records no user"))?);
        spec.idle = remake.idle;
        spec.setup.clear();
        spec.restore = Some(Restore { sandbox: id.into(), name: meta.name.clone() });
        Ok(spec)
    }
}

//! `checkpoint`, `hibernate` and the hibernated side of `resume`: a
//! sandbox's memory and file systems saved by runsc through `docker
//! checkpoint`, kept in the data dir (`host::checkpoints`), restored with
//! `docker start --checkpoint`. Only a sandbox made with `--snapshots`
//! (gVisor without a network or a host socket) can be saved.
//!
//! What Docker's path allows on engine 20.10 with runsc 20221219 (measured):
//! `--leave-running` makes runsc panic and kills the sandbox, so a
//! checkpoint that leaves it running is a checkpoint (the container exits)
//! then a restore in place; `--checkpoint-dir` is refused, so images are
//! copied out of and into the engine's own directory; a checkpoint taken
//! while a `docker exec` runs in the sandbox cannot be restored and leaves
//! runsc's state behind ("id already in use"), so it is refused; and the
//! container must have exited before it is started again.

use std::path::PathBuf;

use super::{helper_mounted, user_ids, wrong_state, Changed, STARTABLE};
use crate::docker::parse::RawContainer;
use crate::docker::{argv, run_ok};
use crate::error::{Error, Invalid, Result, SnapshotError};
use crate::host::channel::Kind;
use crate::host::checkpoints::{Limits, Meta, Store, HIBERNATED};
use crate::host::state::Mark;
use crate::model::record;
use crate::model::runtime::Family;
use crate::sandbox::shared::boot::Boot;
use crate::sandbox::shared::restore::engine_name;
use crate::sandbox::{container_id, Driver};

/// How long a restored sandbox may take to answer on its socket again.
const RESTORE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

impl Driver {
    /// Save a running sandbox's memory and file systems as checkpoint
    /// `name` and leave it running (restored in place from what was saved).
    pub fn checkpoint(&self, id: &str, name: &str, limits: Limits) -> Result<Meta> {
        let mut raw = self.snapshot_target(id, "checkpoint")?;
        let (_op, waited) = self.snapshot_op(id)?;
        if waited {
            raw = self.snapshot_target(id, "checkpoint")?;
        }
        let store = self.checkpoint_store()?;
        if store.get(id, name).is_some() {
            return Err(SnapshotError::Exists { id: id.into(), name: name.into() }.into());
        }
        let cid = container_id(&raw)?;
        self.clear_engine_leftovers(&cid)?;
        let engine_name = engine_name();
        self.checkpoint_exited(id, &raw, &cid, &engine_name)?;
        let saved = self.keep(id, &raw, &cid, &engine_name, name, &store, limits);
        // Running again whether or not it was kept: from the engine's copy.
        let restored = self.restore_in_place(id, &raw, &cid, &engine_name);
        let _ = run_ok(&*self.docker, &argv::checkpoint_rm(&cid, &engine_name));
        if let Err(e) = restored {
            if saved.is_ok() {
                let _ = store.remove(id, name);
            }
            return Err(SnapshotError::Failed {
                id: id.into(),
                what: "restoring",
                detail: format!(
                    "{e}; it is stopped, its checkpoint discarded: `sbx start {id}` runs it again from its image"
                ),
            }
            .into());
        }
        saved
    }

    /// Checkpoint, then leave it exited: no memory and no runsc process
    /// held; `resume` restores it, also after the engine or host restarted.
    pub fn hibernate(&self, id: &str, limits: Limits) -> Result<Changed> {
        let mut raw = self.snapshot_target(id, "hibernate")?;
        let (_op, waited) = self.snapshot_op(id)?;
        if waited {
            raw = self.snapshot_target(id, "hibernate")?;
        }
        let store = self.checkpoint_store()?;
        let cid = container_id(&raw)?;
        self.clear_engine_leftovers(&cid)?;
        let engine_name = engine_name();
        // An earlier hibernation's image is stale once the sandbox ran again.
        store.remove(id, HIBERNATED)?;
        let state = &self.state()?.state;
        self.checkpoint_exited(id, &raw, &cid, &engine_name)?;
        let saved = self.keep(id, &raw, &cid, &engine_name, HIBERNATED, &store, limits);
        if let Err(e) = saved {
            // Not kept: running again, as it was, from the engine's copy.
            let restored = self.restore_in_place(id, &raw, &cid, &engine_name);
            let _ = run_ok(&*self.docker, &argv::checkpoint_rm(&cid, &engine_name));
            if let Err(r) = restored {
                self.warn("not_restored", &format!("sandbox {id} is stopped ({r}): `sbx start {id}` runs it again"));
            }
            return Err(e);
        }
        state.mark(id, Mark::Hibernated)?;
        let _ = run_ok(&*self.docker, &argv::checkpoint_rm(&cid, &engine_name));
        Ok(Changed::new(id, "hibernated", false))
    }

    /// `resume` of a hibernated sandbox: its image checked and copied into
    /// the engine under a fresh name, restored, and ready once its socket
    /// answers. On failure it stays hibernated, its image kept.
    pub(super) fn resume_hibernated(&self, id: &str, raw: &RawContainer) -> Result<Changed> {
        let state = &self.state()?.state;
        if !STARTABLE.contains(&raw.state.as_str()) {
            return Err(wrong_state(id, raw, state, "resume"));
        }
        self.snapshots_here(id, raw)?;
        let (_op, _) = self.snapshot_op(id)?;
        if !state.marked(id, Mark::Hibernated) {
            // Another resume restored it while this one waited.
            return Ok(Changed::new(id, "running", true));
        }
        let store = self.checkpoint_store()?;
        let cid = container_id(raw)?;
        self.clear_engine_leftovers(&cid)?;
        self.clear_runsc_state(id, raw, &cid)?;
        let (target, engine_name) = self.engine_checkpoint_target(&cid)?;
        let _slot = self.restore_slot()?;
        let meta = store.restore_into(id, HIBERNATED, &target)?;
        let discard = || {
            let _ = std::fs::remove_dir_all(&target);
        };
        if meta.spec != raw.labels {
            discard();
            return Err(SnapshotError::Untrusted {
                id: id.into(),
                name: HIBERNATED.into(),
                reason: "it was saved from a container with other labels".into(),
            }
            .into());
        }
        let (uid, gid) = user_ids(raw.labels.get(record::USER).map(String::as_str).unwrap_or_default());
        let channel = Kind::from_label(raw.labels.get(record::CHANNEL).map(String::as_str));
        let socket_path = PathBuf::from(raw.labels.get(record::SOCKET).cloned().unwrap_or_default());
        self.prepare_local_start(id, &socket_path, channel, uid, gid)?;
        let restored = self.restore_in_place(id, raw, &cid, &engine_name);
        // The engine keeps nothing of a checkpoint but its directory.
        discard();
        restored?;
        state.unmark(id, Mark::Hibernated);
        store.remove(id, HIBERNATED)?;
        let mut done = Changed::new(id, "running", false);
        let watched = state.watchdog(id).is_some_and(|w| w.is_alive());
        if raw.expiry(state.expiry(id)).is_some() && !watched {
            done.unwatched = socket_path.parent().map(PathBuf::from);
        }
        Ok(done)
    }

    /// Whether `id` can be saved here (a `--snapshots` sandbox, a local
    /// engine, sbx as root): what `sbx serve` hibernates on E2B's pause.
    pub fn can_snapshot(&self, id: &str) -> Result<bool> {
        let raw = self.inspect_one(id)?;
        Ok(self.snapshots_here(id, &raw).is_ok())
    }

    /// The checkpoints kept for `id` (for every sandbox when None), also
    /// of a sandbox that is gone: the data dir's own, whatever the engine holds.
    pub fn checkpoints(&self, id: Option<&str>) -> Result<Vec<Meta>> {
        if let Some(id) = id {
            crate::spec::parse_id(id)?;
        }
        Ok(self.checkpoint_store()?.list(id))
    }

    /// Remove checkpoints of `id`, also of a sandbox that is gone;
    /// hibernate's own only with its sandbox (it is the sandbox's whole
    /// state). Missing names are an error. Every name is checked before
    /// anything is done (exit 2, none removed).
    pub fn checkpoints_rm(&self, id: &str, names: &[String]) -> Result<()> {
        for name in names {
            if name == HIBERNATED {
                return Err(Invalid::new(
                    "checkpoint",
                    name,
                    "it holds a hibernated sandbox's whole state; it goes with `sbx destroy` or after `sbx resume`",
                )
                .into());
            }
            if !crate::host::checkpoints::valid_name(name) {
                return Err(crate::host::checkpoints::bad_name(id, name).into());
            }
        }
        crate::spec::parse_id(id)?;
        let store = self.checkpoint_store()?;
        for name in names {
            if !store.remove(id, name)? {
                return Err(SnapshotError::NotFound { id: id.into(), name: name.clone() }.into());
            }
        }
        // A gone sandbox's last one: nothing of it is left (never on an
        // engine that did not answer: a live hibernation is kept).
        if matches!(self.inspect_one(id), Err(Error::Sandbox(crate::error::SandboxError::NotFound { .. }))) {
            store.remove_transient(id)?;
        }
        Ok(())
    }

    /// A running sandbox that can be saved now, proven this host's.
    fn snapshot_target(&self, id: &str, action: &'static str) -> Result<RawContainer> {
        let raw = self.inspect_one(id)?;
        let state = &self.state()?.state;
        if raw.state != "running" {
            return Err(wrong_state(id, &raw, state, action));
        }
        self.refuse_ready_member(id, &raw, action)?;
        self.snapshots_here(id, &raw)?;
        // gVisor cannot restore a sandbox saved with a live exec session
        // (gvisor#11439), and runsc's state of one outlives the container.
        let execs = raw.full["ExecIDs"].as_array().map_or(0, Vec::len);
        if execs > 0 {
            return Err(SnapshotError::ExecLive { id: id.into(), count: execs }.into());
        }
        Ok(raw)
    }

    /// The sandbox runs under a registration runsc can checkpoint, on an
    /// engine whose checkpoint directory sbx can reach (this machine's, as root).
    fn snapshots_here(&self, id: &str, raw: &RawContainer) -> Result<()> {
        let needs = "create it with --snapshots (gVisor registered as runsc-snap: `sbx doctor --runtime runsc-snap`)";
        let runtime = raw.full["HostConfig"]["Runtime"].as_str().unwrap_or(crate::model::runtime::DEFAULT);
        let reg = self.registration(runtime)?;
        if !reg.as_ref().is_some_and(|r| r.snapshots()) {
            let why = match reg.map(|r| r.family()) {
                Some(Family::Gvisor) => format!(
                    "it runs under {runtime}, a gVisor registered with a network or host sockets, which runsc cannot save"
                ),
                _ => format!("it runs under {runtime}; only gVisor can save a sandbox's memory"),
            };
            return Err(Invalid::new("sandbox", id, why).hint(needs).into());
        }
        self.checkpoints_reachable(id)
    }

    /// The engine's checkpoint directory is this machine's and sbx can
    /// write it (root): what every save and restore copies through.
    pub(super) fn checkpoints_reachable(&self, id: &str) -> Result<()> {
        if self.engine()?.is_remote() {
            return Err(Invalid::new(
                "sandbox",
                id,
                "it is on a remote engine; sbx keeps checkpoints on the engine's own host, and only a local one",
            )
            .into());
        }
        if !nix::unistd::geteuid().is_root() {
            return Err(Invalid::new(
                "sandbox",
                id,
                "the engine keeps checkpoints in its own directory, which only root can read",
            )
            .hint("run sbx as root for checkpoint, fork, hibernate and resume of a hibernated sandbox")
            .into());
        }
        Ok(())
    }

    /// `docker checkpoint create`, then until the container has exited: a
    /// start before that fails, and an engine stop right after leaves
    /// runsc's state behind.
    fn checkpoint_exited(&self, id: &str, raw: &RawContainer, cid: &str, engine_name: &str) -> Result<()> {
        self.await_containerd(id, cid)?;
        if let Err(e) = run_ok(&*self.docker, &argv::checkpoint_create(cid, engine_name)) {
            let text = e.to_string();
            let detail = if text.contains("experimental") {
                format!("{text}; the engine needs \"experimental\": true in daemon.json (`sbx doctor --runtime runsc-snap`)")
            } else {
                text
            };
            return Err(SnapshotError::Failed { id: id.into(), what: "checkpointing", detail }.into());
        }
        run_ok(&*self.docker, &argv::wait_exit(cid))?;
        self.clear_runsc_state(id, raw, cid)
    }

    /// runsc's stale state of exited container `cid`, cleared when it runs
    /// under a registration that can be saved (see
    /// `host::gvisor::clear_stale_state`): after a checkpoint of a restored
    /// sandbox, and before any start, since a checkpoint killed part way
    /// leaves the same state and every start then fails "id already in use".
    pub(super) fn clear_runsc_state(
        &self,
        id: &str,
        raw: &crate::docker::parse::RawContainer,
        cid: &str,
    ) -> Result<()> {
        let name = raw.full["HostConfig"]["Runtime"].as_str().unwrap_or(crate::model::runtime::DEFAULT);
        if name == crate::model::runtime::DEFAULT {
            return Ok(());
        }
        let Some(reg) = self.registration(name).ok().flatten().filter(|r| r.snapshots()) else { return Ok(()) };
        let runsc = Some(reg.path).filter(|p| p.starts_with('/')).unwrap_or_else(|| "/usr/bin/runsc".into());
        crate::host::gvisor::clear_stale_state(std::path::Path::new(&runsc), cid).map(drop).map_err(|e| {
            crate::error::SnapshotError::Failed {
                id: id.into(),
                what: "clearing runsc's state of",
                detail: format!("{e}; `sbx destroy {id}` removes it"),
            }
            .into()
        })
    }

    /// The engine's image copied into the store as `name`.
    #[allow(clippy::too_many_arguments)]
    fn keep(
        &self,
        id: &str,
        raw: &RawContainer,
        cid: &str,
        engine_name: &str,
        name: &str,
        store: &Store,
        limits: Limits,
    ) -> Result<Meta> {
        let from = self.engine_checkpoint_dir(cid)?.join(engine_name);
        store.save(id, name, &from, &raw.labels, limits)
    }

    /// `docker start --checkpoint`, then create's checks and the socket.
    fn restore_in_place(&self, id: &str, raw: &RawContainer, cid: &str, engine_name: &str) -> Result<()> {
        self.start_from_checkpoint(cid, engine_name)?;
        let label = |k: &str| raw.labels.get(k).cloned().unwrap_or_default();
        let (uid, _) = user_ids(&label(record::USER));
        let socket_path = PathBuf::from(label(record::SOCKET));
        let image = label(record::IMAGE);
        // An idle sandbox (an E2B template's) binds no socket: ready once it runs.
        let socket_wait = if idles(raw) { std::time::Duration::ZERO } else { RESTORE_WAIT };
        let boot = Boot {
            id,
            image: &image,
            uid,
            socket_path: &socket_path,
            socket_wait,
            helper: helper_mounted(raw),
            family: Family::Gvisor,
            channel: Kind::from_label(raw.labels.get(record::CHANNEL).map(String::as_str)),
            remote: false,
        };
        if let Err(e) = self.await_ready(&boot, cid) {
            let _ = run_ok(&*self.docker, &argv::stop(cid, 0));
            return Err(e);
        }
        Ok(())
    }
}

/// Whether its main process is sbx's helper idling (`sbx serve`'s
/// templates), as create set it: the image's own ENTRYPOINT and CMD
/// cannot put `idle` after sbx's helper path in the engine's record
/// unless the image names that path itself, and then it is only not
/// waited for.
fn idles(raw: &RawContainer) -> bool {
    let c = &raw.full["Config"];
    c["Entrypoint"] == serde_json::json!([crate::model::paths::HELPER_PATH]) && c["Cmd"] == serde_json::json!(["idle"])
}

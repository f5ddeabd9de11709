//! What more than one operation needs of checkpoints on this engine: the
//! data dir's store, the engine's own checkpoint directory of a container
//! (runsc writes there; 20.10 refuses `--checkpoint-dir`), a fresh name
//! for each image put there, and a fork child's start from an image.

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

use crate::docker::{argv, run_ok};
use crate::error::{Error, Result};
use crate::host::checkpoints::Store;
use crate::sandbox::shared::boot::Boot;
use crate::sandbox::Driver;
use crate::spec::Restore;

/// How long a checkpoint waits for containerd's collector.
const CONTAINERD_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The most restores one sbx process runs at once (a fork makes 4 at a
/// time, so one fork never waits). Each copies a checkpoint (up to the
/// per-sandbox cap) into the engine's directory, which dockerd then tars
/// into containerd's store: about three copies on disk while it runs.
/// Unbounded, `sbx serve` clients asking for many forks and resumes at once
/// could fill the disk before any cap on kept checkpoints counts them.
pub(in crate::sandbox) const MAX_RESTORES: usize = 4;

static RESTORING: (std::sync::Mutex<usize>, std::sync::Condvar) = (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// One of the [`MAX_RESTORES`] slots, given back when dropped.
pub(in crate::sandbox) struct RestoreSlot(());

impl Drop for RestoreSlot {
    fn drop(&mut self) {
        let (count, freed) = &RESTORING;
        *count.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        freed.notify_one();
    }
}

impl Driver {
    /// A restore slot, waiting for one (Ctrl-C still ends the wait).
    pub(in crate::sandbox) fn restore_slot(&self) -> Result<RestoreSlot> {
        let (count, freed) = &RESTORING;
        let mut n = count.lock().unwrap_or_else(|e| e.into_inner());
        while *n >= MAX_RESTORES {
            self.check_interrupt()?;
            n = freed.wait_timeout(n, std::time::Duration::from_millis(100)).unwrap_or_else(|e| e.into_inner()).0;
        }
        *n += 1;
        Ok(RestoreSlot(()))
    }

    pub(in crate::sandbox) fn checkpoint_store(&self) -> Result<Store> {
        Ok(Store::at(&self.state()?.state.dir))
    }

    /// `DockerRootDir/containers/FULLID/checkpoints`. The root is asked
    /// once per engine start and configuration (`engine_key`, as the
    /// runtimes are): it changes only with them.
    pub(in crate::sandbox) fn engine_checkpoint_dir(&self, cid: &str) -> Result<PathBuf> {
        let root = self.engine_root_dir()?;
        if cid.len() != 64 || !cid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(crate::error::DockerError::Parse {
                command: "docker inspect".into(),
                reason: format!("not a full container id: {cid:?}"),
            }
            .into());
        }
        Ok(root.join("containers").join(cid).join("checkpoints"))
    }

    /// The engine's `DockerRootDir`, absolute.
    pub(in crate::sandbox) fn engine_root_dir(&self) -> Result<PathBuf> {
        let key = crate::host::state::engine_key(self.engine()?.default);
        let state = &self.state()?.state;
        let root = match key.as_deref().and_then(|k| state.root_dir(k)) {
            Some(root) => root,
            None => {
                let text = run_ok(&*self.docker, &argv::root_dir())?.stdout_str();
                let root: String = serde_json::from_str(text.trim()).map_err(|_| crate::error::DockerError::Parse {
                    command: "docker info".into(),
                    reason: format!("DockerRootDir is not a JSON string: {:?}", text.trim()),
                })?;
                if let Some(k) = key.as_deref().filter(|_| root.starts_with('/')) {
                    state.set_root_dir(k, &root);
                }
                root
            }
        };
        if !root.starts_with('/') {
            return Err(crate::error::DockerError::Parse {
                command: "docker info".into(),
                reason: format!("DockerRootDir is not absolute: {root:?}"),
            }
            .into());
        }
        Ok(PathBuf::from(root))
    }

    /// Until containerd keeps nothing of container `cid`'s last checkpoint
    /// (`host::containerd`): a checkpoint before then would stop the
    /// sandbox and lose its memory. Refused, with nothing done, if the
    /// collector has not come within `CONTAINERD_WAIT`.
    pub(in crate::sandbox) fn await_containerd(&self, id: &str, cid: &str) -> Result<()> {
        let own = std::path::Path::new(crate::host::containerd::OWN_SOCKET).exists();
        let dir = crate::host::containerd::blob_dir(&self.engine_root_dir()?, own);
        let deadline = std::time::Instant::now() + CONTAINERD_WAIT;
        loop {
            let held = crate::host::containerd::holds(&dir, cid)
                .map_err(|e| Error::io(format!("reading containerd's content store ({})", dir.display()), e))?;
            if !held {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(crate::error::SnapshotError::Failed {
                    id: id.into(),
                    what: "checkpointing",
                    detail: format!(
                        "containerd still keeps its last checkpoint after {}s (its collector runs late on a busy engine), and a checkpoint now would lose its memory; nothing was done: try again shortly",
                        CONTAINERD_WAIT.as_secs()
                    ),
                }
                .into());
            }
            self.check_interrupt()?;
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Where a checked image goes for container `cid` to be started from it:
    /// under a fresh name in its engine directory (made 0700), and that name.
    pub(in crate::sandbox) fn engine_checkpoint_target(&self, cid: &str) -> Result<(PathBuf, String)> {
        let dir = self.engine_checkpoint_dir(cid)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::io(format!("making {}", dir.display()), e))?;
        let name = engine_name();
        Ok((dir.join(&name), name))
    }

    /// Held for the whole of a checkpoint, hibernate or resume of `id`:
    /// one at a time per sandbox (a second waits), so none restores or
    /// stops what another is saving. `checkpoints/.ops/ID`, outside the
    /// sandbox's own checkpoint directory; forgotten with the sandbox.
    /// Whether it had to wait: what was looked up before is then stale.
    pub(in crate::sandbox) fn snapshot_op(&self, id: &str) -> Result<(nix::fcntl::Flock<std::fs::File>, bool)> {
        crate::spec::parse_id(id)?;
        let dir = self.state()?.state.dir.join("checkpoints").join(".ops");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::io(format!("making {}", dir.display()), e))?;
        let path = dir.join(id);
        match crate::host::lockfile::try_exclusive(&path, true)? {
            Some(held) => Ok((held, false)),
            None => Ok((crate::host::lockfile::exclusive(&path)?, true)),
        }
    }

    /// What a checkpoint, hibernate or resume killed part way left in the
    /// engine's directory of container `cid` (sbx's fresh names only),
    /// removed under [`Driver::snapshot_op`]: no other is in flight.
    pub(in crate::sandbox) fn clear_engine_leftovers(&self, cid: &str) -> Result<()> {
        let dir = self.engine_checkpoint_dir(cid)?;
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with("sbx-") {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        Ok(())
    }

    /// `docker start --checkpoint`. Engine 20.10 uploads the image into
    /// containerd's content store as a tar, by digest, and an upload of
    /// one already there fails ("commit failed: content sha256:...
    /// already exists"): two children of one fork at once, or a restore
    /// right after its checkpoint, whose upload containerd keeps until its
    /// collector runs (late on a busy engine). A file of random bytes in
    /// the image makes every upload one of its own, so starts need not
    /// wait for each other.
    pub(in crate::sandbox) fn start_from_checkpoint(&self, cid: &str, engine_name: &str) -> Result<()> {
        let image = self.engine_checkpoint_dir(cid)?.join(engine_name);
        crate::host::state::write_private(&image.join(".sbx-nonce"), &rand::random::<[u8; 16]>(), false)?;
        run_ok(&*self.docker, &argv::start_checkpoint(cid, engine_name))?;
        Ok(())
    }

    /// A fork child's start: `docker create`, the checkpoint checked and
    /// copied into the engine's directory for it, `docker start
    /// --checkpoint`, then create's checks and its socket. What was made
    /// is create's rollback's to undo.
    pub(in crate::sandbox) fn start_restored(&self, plan: &argv::RunPlan, from: &Restore) -> Result<String> {
        self.check_interrupt()?;
        // `docker create` prints the full id, which the engine's directory is named by.
        let full = run_ok(&*self.docker, &argv::container(plan, false))?.stdout_str().trim().to_string();
        let (target, engine_name) = self.engine_checkpoint_target(&full)?;
        let slot = self.restore_slot()?;
        let started = self
            .checkpoint_store()?
            .restore_into(&from.sandbox, &from.name, &target)
            .and_then(|_| self.check_interrupt())
            .and_then(|_| self.start_from_checkpoint(&full, &engine_name));
        // The engine keeps nothing of a checkpoint but its directory.
        let _ = std::fs::remove_dir_all(&target);
        drop(slot);
        started?;
        self.await_ready(&Boot::of(plan), &full)?;
        Ok(full)
    }
}

/// A fresh engine-side name for each save and restore: what runsc reads
/// is what sbx just checked, never a leftover of the same name.
pub(in crate::sandbox) fn engine_name() -> String {
    format!("sbx-{:016x}", rand::random::<u64>())
}

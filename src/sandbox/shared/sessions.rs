//! Persistent session volumes on this machine: the purge that `destroy
//! --purge`, `volumes rm` and gc share, a session's state removed, a
//! bounded /state mounted again before `sbx start`.

use std::path::Path;

use crate::docker::parse::{self};
use crate::docker::status_error;
use crate::error::SessionError;
use crate::error::{Error, Result};
use crate::host::persist::{self, image};
use crate::host::socket;
use crate::host::state::State;
use crate::sandbox::Driver;

impl Driver {
    pub(in crate::sandbox) fn purge_volume(&self, volume: &str, session: &str) -> Result<()> {
        let state = &self.state()?.state;
        let _lock = persist::lock(&state.dir, session)?;
        self.purge_volume_locked(volume, session)
    }

    /// [`Self::purge_volume`] with the session's lock already held.
    pub(in crate::sandbox) fn purge_volume_locked(&self, volume: &str, session: &str) -> Result<()> {
        let state = &self.state()?.state;
        let args = crate::docker::argv::volume_remove(volume);
        let out = self.docker.run(&args)?;
        if out.status != 0 && !parse::no_such_volume(&out.stderr_str()) {
            return Err(status_error(&args, &out).into());
        }
        remove_session_state(state, session)?;
        // Its files are gone: the session's uid may be another's now.
        self.release_uids(&[crate::host::uids::Holder::Session(session.to_string())]);
        Ok(())
    }
}

/// A session's directory under the data dir (its image unmounted, detached
/// and removed, or its nosuid,nodev bind detached, first) and its lock file, with the session's lock held.
pub(in crate::sandbox) fn remove_session_state(state: &State, session: &str) -> Result<()> {
    let dir = persist::host_dir(&state.dir, session);
    persist::unbind(&dir);
    image::remove(&state.dir, session)?;
    // The sandbox filled this tree: std's remove_dir_all holds one
    // descriptor per level and a deep /state ran it out of them (EMFILE);
    // remove_tree holds a bounded number.
    let parent = dir.parent().unwrap_or(Path::new("/"));
    socket::remove_tree(parent, session).map_err(|e| Error::io(format!("removing {}", dir.display()), e.into()))?;
    // The lock file goes with its volume.
    let _ = std::fs::remove_file(persist::lock_path(&state.dir, session));
    Ok(())
}

impl Driver {
    /// Before `sbx start` of a sandbox with a bounded /state: its session's
    /// image mounted again (gone after a reboot, or unmounted by hand),
    /// under the session's lock. Never made anew here: without its image
    /// the engine finds no `data` to bind and refuses the start.
    pub(in crate::sandbox) fn remount_bounded(
        &self,
        raw: &crate::docker::parse::RawContainer,
        uid: u32,
        gid: u32,
    ) -> Result<()> {
        let label = |k: &str| raw.labels.get(k).filter(|v| !v.is_empty());
        let (Some(_), Some(session)) = (label(crate::model::record::VOLUME), label(crate::model::record::SESSION))
        else {
            return Ok(());
        };
        if label(crate::model::record::PERSIST_SIZE).is_none_or(|s| s.parse::<u64>().is_err()) {
            return Ok(());
        }
        let state = &self.state()?.state;
        let _lock = persist::lock(&state.dir, session)?;
        if !image::is_bounded(&state.dir, session) {
            return Err(Error::Session(SessionError::Bound {
                session: session.clone(),
                what: "mounting it before the start".into(),
                detail: format!("its image {} is gone", image::image_path(&state.dir, session).display()),
            }));
        }
        image::ensure(&state.dir, session, None, false, (uid, gid)).map(drop)
    }
}

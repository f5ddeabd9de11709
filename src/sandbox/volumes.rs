//! Persistent session volumes: `volumes ls`, `volumes rm`, and the purge
//! that `destroy --purge` and gc share.

use std::path::Path;

use super::{Driver, HostState};
use crate::docker::parse::{self, SessionVolume, VolumeUser};
use crate::docker::{run_ok, status_error};
use crate::error::{Error, Result};
use crate::error::{SandboxError, SessionError};
use crate::host::persist::{self, image};
use crate::host::socket;
use crate::host::state::{self, State};

impl Driver {
    pub(super) fn purge_volume(&self, volume: &str, session: &str) -> Result<()> {
        let state = &self.state()?.state;
        let _lock = persist::lock(&state.dir, session)?;
        self.purge_volume_locked(volume, session)
    }

    /// [`Self::purge_volume`] with the session's lock already held.
    fn purge_volume_locked(&self, volume: &str, session: &str) -> Result<()> {
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

    /// `sbx volumes rm KEY`: the session's volume (only one this host made),
    /// its directory (never following links) and its lock file, under the
    /// session's lock; refused while a running sandbox uses the volume.
    /// On a remote engine, its two volumes there (`remote_state`).
    /// Returns the volume's name.
    pub fn remove_volume(&self, session: &str) -> Result<String> {
        if self.engine()?.is_remote() {
            return self.remove_remote_state(session, false);
        }
        let HostState { state, key } = self.state()?;
        let name = persist::volume_name(session);
        let _lock = persist::lock(&state.dir, session)?;
        let users = run_ok(&*self.docker, &crate::docker::argv::volume_users(Some(&name)))?;
        if let Some(user) = parse::rows::<VolumeUser>(&users.stdout_str()).into_iter().next() {
            return Err(Error::Session(SessionError::VolumeInUse { session: session.to_string(), id: user.container }));
        }
        let out = run_ok(&*self.docker, &crate::docker::argv::session_volumes())?;
        let listed: Vec<SessionVolume> = parse::rows(&out.stdout_str());
        let dir = persist::host_dir(&state.dir, session);
        match listed.iter().find(|v| v.name == name) {
            Some(v) if v.owner != state::owner_token(key, &name) => {
                return Err(Error::Sandbox(SandboxError::Foreign { id: name }));
            }
            Some(_) => self.purge_volume_locked(&name, session)?,
            None if std::fs::symlink_metadata(&dir).is_ok() => self.purge_volume_locked(&name, session)?,
            None => return Err(Error::Sandbox(SandboxError::NotFound { id: name })),
        }
        Ok(name)
    }

    /// The persistent session volumes sbx made, and who uses each.
    pub fn volumes(&self) -> Result<Vec<persist::VolumeInfo>> {
        if self.engine()?.is_remote() {
            return self.remote_state_list();
        }
        let HostState { state, key } = self.state()?;
        let out = run_ok(&*self.docker, &crate::docker::argv::session_volumes())?;
        let users = run_ok(&*self.docker, &crate::docker::argv::volume_users(None))?;
        let users: Vec<VolumeUser> = parse::rows(&users.stdout_str());
        Ok(parse::rows::<SessionVolume>(&out.stdout_str())
            .into_iter()
            .filter(|v| v.owner == state::owner_token(key, &v.name))
            .map(|SessionVolume { name, session, .. }| {
                let dir = persist::host_dir(&state.dir, &session);
                let img = image::image_path(&state.dir, &session);
                let limit = std::fs::metadata(&img).ok().map(|m| m.len());
                let usage = image::mounted(&dir).then(|| image::usage(&dir)).flatten();
                persist::VolumeInfo {
                    in_use_by: users.iter().filter(|u| u.volume == name).map(|u| u.container.clone()).collect(),
                    bytes: match (limit, usage) {
                        (Some(_), Some((used, _))) => used,
                        (Some(_), None) => 0,
                        (None, _) => persist::du(&dir),
                    },
                    mounted: limit.map(|_| usage.is_some()),
                    limit,
                    path: dir.display().to_string(),
                    name,
                    session,
                }
            })
            .collect())
    }
}

/// A session's directory under the data dir (its image unmounted, detached
/// and removed, or its nosuid,nodev bind detached, first) and its lock file, with the session's lock held.
pub(super) fn remove_session_state(state: &State, session: &str) -> Result<()> {
    let dir = persist::host_dir(&state.dir, session);
    persist::unbind(&dir);
    image::remove(&state.dir, session)?;
    // The sandbox filled this tree: std's remove_dir_all holds one
    // descriptor per level and a deep /state ran it out of them (EMFILE,
    // issue 9 finding 8 in the volume); remove_tree holds a bounded number.
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
    pub(super) fn remount_bounded(&self, raw: &crate::docker::parse::RawContainer, uid: u32, gid: u32) -> Result<()> {
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

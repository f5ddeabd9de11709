//! Persistent session volumes: `volumes ls`, `volumes rm` (the purge they
//! share with `destroy --purge` and gc is `shared::sessions`).

use crate::docker::parse::{self, SessionVolume, VolumeUser};
use crate::docker::run_ok;
use crate::error::{Error, Result, SandboxError, SessionError};
use crate::host::persist::{self, image};
use crate::host::state;
use crate::sandbox::{Driver, HostState};

impl Driver {
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

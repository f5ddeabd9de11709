//! Create's persistent session volume and `--clone`.

use std::path::Path;

use super::super::Driver;
use crate::docker::parse::{self, VolumeUser};
use crate::docker::run_ok;
use crate::error::SessionError;
use crate::error::{Error, Result};
use crate::host::persist;
use crate::host::state::{self, State};
use crate::spec::UserSpec;

pub(super) struct Persisted {
    pub(super) volume: String,
    /// The bind stays after create (see `NosuidBind`); this only says it was made.
    _nosuid: Option<persist::NosuidBind>,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl Driver {
    /// The name of `session`'s volume, refused while a container (a running
    /// sandbox) has it: two sandboxes never share a session's /state.
    fn volume_not_in_use(&self, session: &str) -> Result<String> {
        let volume = persist::volume_name(session);
        let out = run_ok(&*self.exec, &crate::docker::argv::volume_users(Some(&volume)))?;
        if let Some(user) = parse::rows::<VolumeUser>(&out.stdout_str()).into_iter().next() {
            return Err(Error::Session(SessionError::VolumeInUse { session: session.to_string(), id: user.container }));
        }
        Ok(volume)
    }

    /// The session's volume, made on first use, and proof no running sandbox
    /// has it; `--clone` fills it before the volume is created.
    pub(super) fn prepare_volume(
        &self,
        state: &State,
        key: &[u8],
        session: &str,
        user: UserSpec,
        clone: Option<&crate::spec::CloneSpec>,
        warnings: &mut Vec<String>,
    ) -> Result<Persisted> {
        let lock = persist::lock(&state.dir, session)?;
        let volume = self.volume_not_in_use(session)?;
        let dir = persist::host_dir(&state.dir, session);
        let fresh = persist::prepare_dir(&dir, user.uid, user.gid)?;
        let owner = state::owner_token(key, &volume);
        let filled = match clone {
            Some(c) => {
                // An earlier create's bind: a rename cannot cross into it.
                persist::unbind(&dir);
                self.clone_workspace(c, &dir, user, warnings)
            }
            None => Ok(()),
        }
        .and_then(|()| {
            run_ok(&*self.exec, &crate::docker::argv::volume_create(&volume, &dir, session, &owner))
                .map(drop)
                .map_err(Error::from)
        });
        if let Err(e) = filled {
            if fresh {
                let _ = std::fs::remove_dir(&dir);
            }
            return Err(e);
        }
        // After the clone: a rename cannot cross into this bind mount. It
        // stays after create (see `NosuidBind`).
        let nosuid = match persist::NosuidBind::new(&dir) {
            Ok(b) => Some(b),
            Err(e) => {
                warnings.push(format!(
                    "could not mount {} nosuid,nodev ({e}); /state is still nocopy and no-new-privileges",
                    dir.display()
                ));
                None
            }
        };
        Ok(Persisted { volume, _nosuid: nosuid, _lock: lock })
    }

    /// [`Self::prepare_volume`] on a remote engine (issue 16): the same lock
    /// and in-use check, the volumes made there (see `remote_state`), and
    /// `--clone` cloned here into a private directory beside the lock and
    /// copied in (see `remote_clone`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn prepare_remote_volume(
        &self,
        state: &State,
        key: &[u8],
        session: &str,
        user: UserSpec,
        image: &str,
        clone: Option<&crate::spec::CloneSpec>,
        warnings: &mut Vec<String>,
    ) -> Result<Persisted> {
        let lock = persist::remote_lock(&state.dir, session)?;
        self.volume_not_in_use(session)?;
        let scratch = persist::remote_dir(&state.dir);
        let (volume, cloned) = self.prepare_remote_state(key, session, user, image, clone.map(|c| (c, &*scratch)))?;
        if let (Some(c), Some(persist::Cloned::Kept)) = (clone, cloned) {
            warnings.push(format!(
                "/state/workspace of session {session} already has files (an earlier sandbox's work); not cloning {}",
                c.url
            ));
        }
        Ok(Persisted { volume, _nosuid: None, _lock: lock })
    }

    /// `--clone` into `<base>/workspace` (see `persist::clone_workspace`); an
    /// existing, non-empty one is the session's previous work and is kept.
    pub(super) fn clone_workspace(
        &self,
        c: &crate::spec::CloneSpec,
        base: &Path,
        user: UserSpec,
        warnings: &mut Vec<String>,
    ) -> Result<()> {
        let owner = (user.uid != 0).then_some(user);
        let mut bar = crate::output::progress();
        bar.update(&format!("cloning {}", c.url));
        let cloned = persist::clone_workspace(c, base, owner)?;
        drop(bar);
        if cloned == persist::Cloned::Kept {
            warnings.push(format!(
                "{} already has files (an earlier sandbox's work); not cloning {}",
                base.join("workspace").display(),
                c.url
            ));
        }
        Ok(())
    }
}

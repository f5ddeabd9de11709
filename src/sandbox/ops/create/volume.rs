//! Create's persistent session volume and `--clone`.

use std::path::Path;

use crate::docker::parse::{self, VolumeUser};
use crate::docker::run_ok;
use crate::error::SessionError;
use crate::error::{Error, Result};
use crate::host::persist;
use crate::host::persist::image;
use crate::host::state::{self, State};
use crate::model::invalid::Invalid;
use crate::sandbox::Driver;
use crate::spec::{PersistSize, SandboxSpec, UserSpec};

/// Said on every create that takes `--persist-size unbounded`.
fn unbounded_warning(session: &str) -> String {
    format!(
        "--persist-size unbounded: session {session}'s /state can fill the disk it is on (the engine's too); \
         `sbx audit` fails this sandbox"
    )
}

pub(super) struct Persisted {
    pub(super) volume: String,
    /// Its bound, the `sbx.persist-size` label.
    pub(super) size_label: String,
    /// The bind stays after create (see `NosuidBind`); this only says it was made.
    _nosuid: Option<persist::NosuidBind>,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl Driver {
    /// The name of `session`'s volume, refused while a container (a running
    /// sandbox) has it: two sandboxes never share a session's /state.
    fn volume_not_in_use(&self, session: &str) -> Result<String> {
        let volume = persist::volume_name(session);
        let out = run_ok(&*self.docker, &crate::docker::argv::volume_users(Some(&volume)))?;
        if let Some(user) = parse::rows::<VolumeUser>(&out.stdout_str()).into_iter().next() {
            return Err(Error::Session(SessionError::VolumeInUse { session: session.to_string(), id: user.container }));
        }
        Ok(volume)
    }

    /// Where `spec`'s `--persist` can be bounded, and the bound it gets
    /// (see `spec::persist_bound`): before anything is made, exit 2 where
    /// sbx cannot enforce one and the operator did not say `unbounded`.
    pub(super) fn persist_bound(&self, spec: &SandboxSpec) -> Result<Option<PersistSize>> {
        if !spec.persist {
            return Ok(None);
        }
        let engine = self.engine()?;
        let uid = nix::unistd::geteuid().as_raw();
        let here = match (engine.is_remote(), uid) {
            (true, _) => Err(format!("the engine is remote ({}), and its disk is not this machine's", engine.endpoint)),
            (false, 0) => Ok(()),
            (false, _) => {
                Err(format!("the bound is a file system sbx mounts, which takes root (sbx runs as uid {uid})"))
            }
        };
        Ok(Some(crate::spec::persist_bound(spec.persist_size, here)?))
    }

    /// The session's volume, made on first use, and proof no running sandbox
    /// has it; `--clone` fills it before the volume is created. Bounded: in
    /// the session's image (`persist::image`); unbounded: its directory.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn prepare_volume(
        &self,
        state: &State,
        key: &[u8],
        session: &str,
        user: UserSpec,
        bound: PersistSize,
        spec: &SandboxSpec,
        warnings: &mut Vec<String>,
    ) -> Result<Persisted> {
        let lock = persist::lock(&state.dir, session)?;
        let volume = self.volume_not_in_use(session)?;
        if let PersistSize::Bytes(_) = bound {
            return self.prepare_bounded(state, key, session, user, spec, warnings, (volume, lock));
        }
        if image::is_bounded(&state.dir, session) {
            return Err(Invalid::new(
                "--persist-size",
                crate::spec::UNBOUNDED,
                format!("session {session} has a bounded /state already; unbounded would not be what it is"),
            )
            .hint("drop --persist-size unbounded (or give the session's size or more)")
            .into());
        }
        warnings.push(unbounded_warning(session));
        let clone = spec.clone.as_ref();
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
            run_ok(&*self.docker, &crate::docker::argv::volume_create(&volume, &dir, session, &owner))
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
        Ok(Persisted { volume, size_label: bound.label(), _nosuid: nosuid, _lock: lock })
    }

    /// [`Self::prepare_volume`] bounded: the session's image made or grown
    /// and mounted, `--clone` into its `data`, and the volume binding that.
    #[allow(clippy::too_many_arguments)]
    fn prepare_bounded(
        &self,
        state: &State,
        key: &[u8],
        session: &str,
        user: UserSpec,
        spec: &SandboxSpec,
        warnings: &mut Vec<String>,
        (volume, lock): (String, nix::fcntl::Flock<std::fs::File>),
    ) -> Result<Persisted> {
        let want = match spec.persist_size {
            Some(PersistSize::Bytes(n)) => Some(n),
            _ => None,
        };
        let made = image::ensure(&state.dir, session, want, true, (user.uid, user.gid))?;
        let data = image::volume_device(&state.dir, session);
        let owner = state::owner_token(key, &volume);
        let filled = match spec.clone.as_ref() {
            Some(c) => self.clone_workspace(c, &data, user, warnings),
            None => Ok(()),
        }
        .and_then(|()| {
            // A volume of this name from before the image binds the bare
            // directory (docker keeps an existing volume's options): made again.
            if made.fresh {
                let args = crate::docker::argv::volume_remove(&volume);
                let out = self.docker.run(&args)?;
                if out.status != 0 && !parse::no_such_volume(&out.stderr_str()) {
                    return Err(crate::docker::status_error(&args, &out).into());
                }
            }
            run_ok(&*self.docker, &crate::docker::argv::volume_create(&volume, &data, session, &owner))
                .map(drop)
                .map_err(Error::from)
        });
        if let Err(e) = filled {
            // A fresh image holds nothing of the session's yet.
            if made.fresh {
                let _ = image::remove(&state.dir, session);
                let _ = std::fs::remove_dir(persist::host_dir(&state.dir, session));
            }
            return Err(e);
        }
        Ok(Persisted { volume, size_label: made.bytes.to_string(), _nosuid: None, _lock: lock })
    }

    /// [`Self::prepare_volume`] on a remote engine: the same lock
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
        warnings.push(unbounded_warning(session));
        Ok(Persisted { volume, size_label: PersistSize::Unbounded.label(), _nosuid: None, _lock: lock })
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

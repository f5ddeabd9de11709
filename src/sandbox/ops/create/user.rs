//! Which uid:gid a sandbox runs as: `--user`, else one of sbx's own range
//! (`host::uids`), whatever the image's USER says, so no two sandboxes
//! share the kernel's per-uid limits (see `model::ids`).

use crate::error::{ImageError, Result};
use crate::host::uids::Holder;
use crate::model::ids::{in_sbx_range, sbx_range_text};
use crate::sandbox::shared::uids::Lease;
use crate::sandbox::Driver;
use crate::spec::{SandboxSpec, UserSpec};

/// `flag` (checked by `UserSpec::not_reserved` and `outside_sbx_range`),
/// with a warning for root or group 0; None: the sandbox gets a uid of its
/// own. An image USER inside sbx's range is refused: it would run as a
/// neighbour's uid and share its limits. Any other is not used (named,
/// numeric or root alike: a number sbx has not handed out may be a host
/// account's or another sandbox's by `--user`); see [`image_user_warning`].
pub(in crate::sandbox) fn choose_user(
    flag: Option<UserSpec>,
    image: &str,
    image_user: &str,
    warnings: &mut Vec<String>,
) -> std::result::Result<Option<UserSpec>, ImageError> {
    if let Some(u) = flag {
        if u.uid == 0 {
            warnings.push(
                "running as root inside the sandbox (--user 0): a kernel or runtime escape would start as root".into(),
            );
        } else if u.gid == 0 {
            warnings.push(format!(
                "running with group 0 (root) inside the sandbox (--user {}:0): files of group root become writable to it",
                u.uid
            ));
        }
        return Ok(Some(u));
    }
    let in_range = image_user.split(':').any(|p| p.parse::<u32>().is_ok_and(in_sbx_range));
    if in_range {
        return Err(ImageError::UserInSbxRange {
            image: image.to_string(),
            user: image_user.to_string(),
            range: sbx_range_text(),
        });
    }
    Ok(None)
}

/// The warning for an image that asked for a specific non-root user, now
/// run as `uid`; none for no USER or root.
pub(in crate::sandbox) fn image_user_warning(image_user: &str, uid: u32) -> Option<String> {
    let name = image_user.split(':').next().unwrap_or_default();
    if name.is_empty() || name == "0" || name == "root" {
        return None;
    }
    Some(format!(
        "the image's user {image_user:?} is not used: the sandbox runs as {uid}:{uid}, a uid of its own \
         (pass --user UID[:GID] to choose)"
    ))
}

impl Driver {
    /// The user `chosen` (the flag's), else a uid claimed before anything of
    /// the sandbox exists and freed if the create fails: a persisted
    /// session's (kept for the session's life: its files are the uid's),
    /// else the sandbox's own.
    pub(super) fn sandbox_user(
        &self,
        chosen: Option<UserSpec>,
        spec: &SandboxSpec,
        id: &str,
        image_user: &str,
        warnings: &mut Vec<String>,
    ) -> Result<(UserSpec, Option<Lease<'_>>)> {
        if let Some(u) = chosen {
            return Ok((u, None));
        }
        let lease = match (spec.persist, &spec.session) {
            (true, Some(session)) => {
                let local = !self.engine()?.is_remote();
                let data = &self.state()?.state.dir;
                let prefer = local.then(|| self.session_uid(data, session)).flatten();
                self.claim_uid(Holder::Session(session.clone()), prefer)?
            }
            _ => self.claim_uid(Holder::Sandbox(id.to_string()), None)?,
        };
        warnings.extend(image_user_warning(image_user, lease.uid));
        Ok((UserSpec { uid: lease.uid, gid: lease.uid }, Some(lease)))
    }
}

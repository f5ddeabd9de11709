//! Which uid:gid a sandbox runs as: `--user`, else the image's USER when it
//! is numeric and neither root nor a reserved id (`model::ids`), else nobody.

use crate::model::ids::Reserved;
use crate::model::invalid::Invalid;
use crate::spec::{UserSpec, NOBODY};

/// Never root unless asked for by `--user 0`; otherwise the image's numeric
/// non-root user, otherwise nobody.
/// gid 0 only when asked for by `--user X:0`, with a warning; the image's
/// USER never yields it (group root makes root's group-writable files the
/// sandbox's).
/// Never a `reserved` id (the caller's uid or groups, the docker socket's
/// owner or group): `flag` was checked by [`UserSpec::not_reserved`]; the image's are
/// replaced as uid 0 is, with a warning, and when the replacement is
/// reserved too (sbx run as nobody) the create is refused (exit 2).
pub(in crate::sandbox) fn choose_user(
    flag: Option<UserSpec>,
    image_user: &str,
    reserved: &Reserved,
    warnings: &mut Vec<String>,
) -> std::result::Result<UserSpec, Invalid> {
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
        return Ok(u);
    }
    let pass = "pass --user UID[:GID] to choose";
    let chosen = match UserSpec::from_image(image_user) {
        Some(u) if reserved.why_uid(u.uid).is_some() => {
            let why = reserved.refuses(u.uid, u.gid).unwrap_or_default();
            warnings.push(format!(
                "the image's user {image_user:?} is not used: {why}; running as {NOBODY}:{NOBODY} instead ({pass})"
            ));
            UserSpec { uid: NOBODY, gid: NOBODY }
        }
        Some(u) if u.gid == 0 || reserved.why_gid(u.gid).is_some() => {
            // The group replaced as gid 0 always was: by the uid, unless
            // that names a reserved group too.
            let gid = if reserved.why_gid(u.uid).is_none() { u.uid } else { NOBODY };
            let why = match u.gid {
                0 => format!(
                    "has group 0 (root); running as {}:{gid} instead (pass --user {}:0 to keep group 0)",
                    u.uid, u.uid
                ),
                g => format!(
                    "is not used: gid {g} is {}; running as {}:{gid} instead ({pass})",
                    reserved.why_gid(g).unwrap_or_default(),
                    u.uid
                ),
            };
            warnings.push(format!("the image's user {image_user:?} {why}"));
            UserSpec { uid: u.uid, gid }
        }
        Some(u) => return Ok(u),
        None => {
            if !image_user.is_empty() {
                warnings.push(format!(
                    "the image's user {image_user:?} is not a numeric non-root user; running as {NOBODY}:{NOBODY} ({pass})"
                ));
            }
            UserSpec { uid: NOBODY, gid: NOBODY }
        }
    };
    match reserved.refuses(chosen.uid, chosen.gid) {
        None => Ok(chosen),
        Some(why) => Err(Invalid::new(
            "image user",
            image_user,
            format!("sbx would run it as {}:{}, but {why}", chosen.uid, chosen.gid),
        )
        .hint(crate::spec::RESERVED_HINT)),
    }
}

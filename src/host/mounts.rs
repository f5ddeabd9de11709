//! Where sbx's mounts really landed in a running sandbox: runc, and gVisor's gofer, follow the image's symlinks when they place
//! a mount, so after start sbx reads the kernel's mount table of the
//! sandbox's main process (runc) or of gVisor's gofer (see `gvisor`), which
//! the sandbox cannot forge, and refuses an image that moved or covered the
//! helper directory or the socket directory.

use crate::error::ImageError;
use crate::error::{Error, Result};
use crate::model::paths::HELPER_DIR as SANDBOX_DIR;

/// Check where the kernel put sbx's mounts in a running sandbox, from the
/// host's `/proc/PID/mountinfo` of its main process: the helper directory
/// exactly at /run/sbx (read-only), the socket directory exactly at
/// `socket_dir`. A symlink in the image moves them; that is refused.
pub fn check_mounts(mountinfo: &str, image: &str, helper: bool, socket_dir: &str) -> Result<()> {
    check_placement(mountinfo, image, helper, Some(socket_dir), true)
}

/// [`check_mounts`] on the mount table of gVisor's gofer (attack
/// finding 1): the gofer places the sandbox's bind mounts on the host,
/// resolving the image's symlinks as the Sentry does, so where they landed
/// there is where they are inside. The Sentry applies `readonly` itself (the
/// gofer's binds are rw), and a relayed channel's /run/sandbox is a tmpfs
/// of the Sentry's, not in the gofer's table: `socket_dir` None.
pub fn check_gofer_mounts(mountinfo: &str, image: &str, helper: bool, socket_dir: Option<&str>) -> Result<()> {
    check_placement(mountinfo, image, helper, socket_dir, false)
}

fn check_placement(mountinfo: &str, image: &str, helper: bool, socket_dir: Option<&str>, ro_seen: bool) -> Result<()> {
    let mounts = parse_mountinfo(mountinfo);
    let redirected = |path: &str, found: String| {
        Error::Image(ImageError::Redirected { image: image.to_string(), path: path.to_string(), found })
    };
    let elsewhere = |path: &str| {
        format!("no mount at {path} in the sandbox (mount points under /run and /tmp: {})", {
            let run: Vec<&str> = mounts
                .iter()
                .filter(|m| m.path.starts_with("/run") || m.path.starts_with("/tmp"))
                .map(|m| m.path.as_str())
                .collect();
            if run.is_empty() {
                "none".to_string()
            } else {
                run.join(", ")
            }
        })
    };
    if let Some(dir) = socket_dir.filter(|d| !mounts.iter().any(|m| m.path == *d)) {
        return Err(redirected(dir, elsewhere(dir)));
    }
    if helper {
        match mounts.iter().rev().find(|m| m.path == SANDBOX_DIR) {
            None => return Err(redirected(SANDBOX_DIR, elsewhere(SANDBOX_DIR))),
            Some(m) if ro_seen && !m.read_only => {
                return Err(redirected(SANDBOX_DIR, "the mount there is writable, not sbx's read-only helper".into()))
            }
            Some(_) => {}
        }
    }
    for at in [helper.then_some(SANDBOX_DIR), socket_dir].into_iter().flatten() {
        if let Some(over) = covered(&mounts, at) {
            return Err(redirected(
                at,
                format!("a mount placed after sbx's at {over} covers it (an image VOLUME or a --rw/--ro whose path is a symlink in the image)"),
            ));
        }
    }
    Ok(())
}

/// A mount listed after the first one at `at` whose mount point is `at`,
/// above it or below it: what the sandbox sees there is then not sbx's.
/// Found by attacking the fix for a redirected mount: docker mounts in order
/// of path depth and runc follows the image's symlinks, so `VOLUME
/// /x/y/z` with `/x/y/z -> /run` in the image put a writable volume (holding
/// the image's own `sbx/helper`) over /run after /run/sbx was mounted.
fn covered(mounts: &[MountPoint], at: &str) -> Option<String> {
    let first = mounts.iter().position(|m| m.path == at)?;
    let over = |p: &str| {
        let base = p.trim_end_matches('/');
        p == at || at.starts_with(&format!("{base}/")) || p.starts_with(&format!("{at}/"))
    };
    mounts[first + 1..].iter().find(|m| over(&m.path)).map(|m| m.path.clone())
}

/// One line of a mountinfo file: where something is mounted, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MountPoint {
    path: String,
    read_only: bool,
}

/// The mount points of a mountinfo file, in order.
fn parse_mountinfo(text: &str) -> Vec<MountPoint> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let point = f.nth(4)?;
            let opts = f.next()?;
            Some(MountPoint {
                path: crate::model::text::unescape_mount_point(point),
                read_only: opts.split(',').any(|o| o == "ro"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
600 500 0:51 / / ro,relatime master:1 - overlay overlay rw,lowerdir=/x
601 600 0:55 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
610 600 0:60 / /tmp rw,nosuid,relatime - tmpfs tmpfs rw,size=524288k
611 600 8:1 /tmp/sbxt-c1/sbx-0123456789ab /run/sandbox rw,relatime - ext4 /dev/sda1 rw
612 600 8:1 /var/lib/sbx/helper/v-k /run/sbx ro,relatime - ext4 /dev/sda1 rw
613 600 8:1 /x/a\\040b /data\\040dir rw,relatime - ext4 /dev/sda1 rw
";

    #[test]
    fn accepts_mounts_where_sbx_put_them() {
        check_mounts(GOOD, "img", true, "/run/sandbox").unwrap();
        assert!(parse_mountinfo(GOOD).contains(&MountPoint { path: "/data dir".to_string(), read_only: false }));
    }

    #[test]
    fn refuses_redirected_or_writable_mounts() {
        // `/run/sbx -> /tmp/sbx` in the image: runc mounted it under /tmp.
        let moved = GOOD.replace(" /run/sbx ro,", " /tmp/sbx ro,");
        let err = check_mounts(&moved, "img", true, "/run/sandbox").unwrap_err();
        assert!(
            matches!(&err, Error::Image(ImageError::Redirected { path, found, .. }) if path == "/run/sbx" && found.contains("/tmp/sbx")),
            "{err}"
        );
        assert!(err.to_string().contains("image img redirects /run/sbx"), "{err}");
        let moved = GOOD.replace(" /run/sandbox rw,", " /tmp/x rw,");
        assert!(
            matches!(check_mounts(&moved, "img", true, "/run/sandbox"), Err(Error::Image(ImageError::Redirected { path, .. })) if path == "/run/sandbox")
        );
        let writable = GOOD.replace(" /run/sbx ro,", " /run/sbx rw,");
        assert!(matches!(
            check_mounts(&writable, "img", true, "/run/sandbox"),
            Err(Error::Image(ImageError::Redirected { .. }))
        ));
        // Past the fix: a later mount over /run (or /,
        // or at/below /run/sbx or /run/sandbox) hides sbx's mounts.
        for (later, path) in [
            ("/run", "/run/sbx"),
            ("/", "/run/sbx"),
            ("/run/sbx", "/run/sbx"),
            ("/run/sbx/helper", "/run/sbx"),
            ("/run/sandbox/x", "/run/sandbox"),
        ] {
            // ro: an operator's --ro redirected there passes the ro test above.
            let info = format!("{GOOD}620 600 8:1 /vol/_data {later} ro,relatime - ext4 /dev/sda1 rw\n");
            let err = check_mounts(&info, "img", true, "/run/sandbox").unwrap_err();
            assert!(
                matches!(&err, Error::Image(ImageError::Redirected { path: p, found, .. }) if p == path && found.contains("covers")),
                "{later}: {err}"
            );
        }
        // A mount at /run BEFORE sbx's (VOLUME /run) is covered by them: fine;
        // so are later mounts elsewhere (/run/other, /data).
        let before = GOOD.replace("610 600", "609 600 8:1 /vol/_data /run rw,relatime - ext4 /dev/sda1 rw\n610 600");
        check_mounts(&before, "img", true, "/run/sandbox").unwrap();
        let elsewhere =
            format!("{GOOD}620 600 8:1 /v /run/sbxx rw - ext4 /dev/sda1 rw\n621 600 8:1 /v /data/run rw - ext4 x rw\n");
        check_mounts(&elsewhere, "img", true, "/run/sandbox").unwrap();
        // Without a helper only the socket directory is checked.
        check_mounts(&GOOD.replace(" /run/sbx ro,", " /tmp/sbx ro,"), "img", false, "/run/sandbox").unwrap();
    }
}

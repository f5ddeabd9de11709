//! The image's config fields that would shape the sandbox's mounts and its
//! working directory: its VOLUMEs and WORKDIR. Both are the image's, so
//! hostile; each is checked here before anything reaches an argv.
//!
//! Left to docker, each VOLUME is an anonymous volume under the engine's data
//! root: writable host disk without bound on a read-only sandbox (701 MiB
//! written as uid 65534 to `VOLUME /data` passed `sbx audit`). sbx mounts a
//! bounded tmpfs of its own there instead, so docker makes none. A WORKDIR
//! below a mount is made by runc, as root, inside whatever is mounted there
//! (a `--rw` workspace, a host-backed /state) before the sandbox runs.

use crate::model::paths;
use crate::spec::SandboxSpec;

/// An image with more VOLUMEs is refused: each becomes a tmpfs of its own.
pub const MAX_VOLUMES: usize = 32;
/// The longest VOLUME or WORKDIR path sbx accepts.
const MAX_PATH: usize = 256;
/// Never a mount from the image: the kernel's views (`VOLUME /proc` was
/// CVE-2019-16884's AppArmor bypass) and the files docker binds in itself.
const REFUSED_TREES: &[&str] = &["/proc", "/sys", "/dev", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf"];

/// Where sbx mounts something, and whether a mount point or directory made
/// below it stays inside the sandbox (a tmpfs of its own): /tmp only. Below
/// the others runc would create it as root in a host directory (a `--rw`,
/// `--state-dir` or session volume, the socket directory) or fail on a
/// read-only one (the helper's).
fn sbx_mounts(spec: &SandboxSpec) -> Vec<(&str, bool)> {
    let own = [("/tmp", true), ("/state", false), (paths::SANDBOX_SOCKET_DIR, false)];
    let helper = [(paths::HELPER_DIR, false), (paths::HELPER_BG_DIR, false)];
    let operator = spec.mounts.iter().map(|m| (m.sandbox.as_str(), false));
    // A terminating gate's CA bundle (read-only, like the helper's).
    let trust = spec.egress.as_ref().filter(|e| !e.policy.terminate.is_empty()).map(|_| (paths::CA_BUNDLE_DIR, false));
    own.into_iter().chain(helper).chain(trust).chain(operator).collect()
}

/// `path` with its `.`/`..` resolved as runc resolves them (`..` stops at
/// the root), or why it is not one sbx passes on.
fn clean(path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err("it is not an absolute path".into());
    }
    if path.len() > MAX_PATH {
        return Err(format!("it is longer than {MAX_PATH} bytes"));
    }
    // Nothing that could end the path in docker's `--tmpfs PATH:OPTIONS`
    // or `--mount k=v,...` syntax, nor anything unprintable.
    if let Some(c) = path.chars().find(|c| !(c.is_ascii_alphanumeric() || "/._-+@~".contains(*c))) {
        return Err(format!("it has {c:?} (sbx takes letters, digits and / . _ - + @ ~)"));
    }
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        match p {
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

/// `path` is `dir` or lies below it.
fn within(path: &str, dir: &str) -> bool {
    path == dir || path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
}

/// The image's VOLUMEs that get sbx's bounded tmpfs (clean, sorted, each
/// once). One at a path sbx already mounts is that mount's (a `--rw` or
/// /state wins); anything else sbx will not mount is refused with why.
///
/// The image's config, refused before anything exists where sbx would not
/// run it: containers inherit image labels, so an image must not write
/// sbx's record; its VOLUMEs and WORKDIR must be ones sbx can mount over
/// safely. Returns the VOLUMEs that get a tmpfs.
pub(super) fn checked(
    config: &crate::docker::parse::ImageConfig,
    spec: &SandboxSpec,
    remote: bool,
) -> crate::error::Result<Vec<String>> {
    use crate::error::{Error, ImageError};
    let image = spec.image.as_str().to_string();
    if let Some(label) = &config.sbx_label {
        return Err(Error::Image(ImageError::HasSbxLabel { image, label: label.clone() }));
    }
    let refused = |reason| Error::Image(ImageError::ConfigRefused { image: image.clone(), reason });
    let volumes = volume_tmpfs(&config.volumes, spec, remote).map_err(refused)?;
    check_working_dir(&config.working_dir, spec).map_err(refused)?;
    Ok(volumes)
}

/// `remote`: the engine is not this machine. runc follows the image's
/// symlinks when it places a mount and docker mounts deeper paths later, so
/// a VOLUME `/x/y/z -> /run` lands over /run/sbx; here the mountinfo check
/// after start refuses that, but a remote engine's /proc is out of reach and
/// `docker cp` of a created container does not show a tmpfs. There only a
/// top-level VOLUME (`/NAME`, mounted before sbx's /run/... whatever it links
/// to) is taken.
pub fn volume_tmpfs(volumes: &[String], spec: &SandboxSpec, remote: bool) -> Result<Vec<String>, String> {
    if volumes.len() > MAX_VOLUMES {
        return Err(format!("{} VOLUMEs (sbx mounts at most {MAX_VOLUMES}, each a tmpfs)", volumes.len()));
    }
    let mounts = sbx_mounts(spec);
    let mut out = Vec::new();
    for v in volumes {
        let why = |reason: String| format!("VOLUME {v:?}: {reason}");
        // `..` is refused, not resolved: docker would take it as written.
        if v.split('/').any(|p| p == "..") {
            return Err(why("it has a `..` component".into()));
        }
        let path = clean(v).map_err(why)?;
        if path == "/" {
            return Err(why("it is the root".into()));
        }
        if let Some(t) = REFUSED_TREES.iter().find(|t| within(&path, t)) {
            return Err(why(format!("it is or lies inside {t}")));
        }
        if mounts.iter().any(|(m, _)| path == *m) {
            continue;
        }
        if let Some((m, _)) = mounts.iter().find(|(m, inside)| !inside && within(&path, m)) {
            return Err(why(format!("it lies inside sbx's mount at {m}, where the engine would make it as root")));
        }
        if remote && path.matches('/').count() > 1 {
            return Err(why("on a remote engine sbx takes only a top-level VOLUME (/NAME): where a deeper one lands cannot be checked there".into()));
        }
        out.push(path);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The image's WORKDIR, refused when it lies below a mount whose inside is
/// not the sandbox's own (see [`sbx_mounts`]); at a mount point it exists.
pub fn check_working_dir(dir: &str, spec: &SandboxSpec) -> Result<(), String> {
    if dir.is_empty() {
        return Ok(());
    }
    let why = |reason: String| format!("WORKDIR {dir:?}: {reason}");
    let path = clean(dir).map_err(why)?;
    match sbx_mounts(spec).into_iter().find(|(m, inside)| !inside && path != *m && within(&path, m)) {
        Some((m, _)) => Err(why(format!("it lies inside sbx's mount at {m}, where runc would make it as root"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{CreateRequest, SandboxSpec};

    fn spec(rw: &[&str]) -> SandboxSpec {
        let dir = std::env::temp_dir();
        let rw = rw.iter().map(|p| format!("{}:{p}", dir.display())).collect();
        let req = CreateRequest { image: format!("sha256:{}", "a".repeat(64)), rw, ..Default::default() };
        SandboxSpec::from_request(&req, None).unwrap()
    }

    fn vols(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn each_image_volume_gets_a_tmpfs_unless_sbx_mounts_there() {
        let s = spec(&["/work"]);
        let got = volume_tmpfs(
            &vols(&["/data", "/var/lib/db/", "//data", "/tmp", "/state", "/work", "/tmp/cache"]),
            &s,
            false,
        );
        assert_eq!(got.unwrap(), ["/data", "/tmp/cache", "/var/lib/db"]);
        assert_eq!(volume_tmpfs(&[], &s, false).unwrap(), Vec::<String>::new());
        // An ancestor of sbx's mounts is fine: docker mounts by depth, sbx's land on top.
        assert_eq!(volume_tmpfs(&vols(&["/run"]), &s, false).unwrap(), ["/run"]);
    }

    #[test]
    fn hostile_image_volumes_are_refused_with_why() {
        let s = spec(&["/work"]);
        for (v, why) in [
            ("/", "the root"),
            ("data", "not an absolute path"),
            ("/x/../etc", "`..`"),
            ("/proc", "inside /proc"),
            ("/proc/self/attr", "inside /proc"),
            ("/sys/fs/cgroup", "inside /sys"),
            ("/dev/shm", "inside /dev"),
            ("/etc/resolv.conf", "inside /etc/resolv.conf"),
            ("/state/db", "inside sbx's mount at /state"),
            ("/run/sandbox/x", "inside sbx's mount at /run/sandbox"),
            ("/run/sbx/helper", "inside sbx's mount at /run/sbx"),
            ("/work/sub", "inside sbx's mount at /work"),
            ("/a:size=100g", "':'"),
            ("/a,tmpfs-size=0", "','"),
            ("/a b", "' '"),
            ("/a\n", "'\\n'"),
        ] {
            let err = volume_tmpfs(&vols(&["/ok", v]), &s, false).unwrap_err();
            assert!(err.contains(why) && err.contains(&format!("{v:?}")), "{v:?}: {err}");
        }
        let long = format!("/{}", "a".repeat(300));
        assert!(volume_tmpfs(&[long], &s, false).unwrap_err().contains("longer than 256"));
        let many: Vec<String> = (0..=MAX_VOLUMES).map(|i| format!("/v{i}")).collect();
        assert!(volume_tmpfs(&many[..MAX_VOLUMES], &s, false).is_ok());
        assert_eq!(volume_tmpfs(&many, &s, false).unwrap_err(), "33 VOLUMEs (sbx mounts at most 32, each a tmpfs)");
    }

    /// A remote engine's sandbox has no mountinfo check: a VOLUME deeper than
    /// the top level could land over /run/sbx through the image's symlinks.
    #[test]
    fn a_remote_engine_takes_only_top_level_volumes() {
        let s = spec(&[]);
        assert_eq!(volume_tmpfs(&vols(&["/data", "/tmp", "/state"]), &s, true).unwrap(), ["/data"]);
        for deep in ["/x/y/z", "/x/y", "/var/lib/db"] {
            let err = volume_tmpfs(&vols(&[deep]), &s, true).unwrap_err();
            assert!(err.contains("only a top-level VOLUME"), "{deep}: {err}");
            assert!(volume_tmpfs(&vols(&[deep]), &s, false).is_ok(), "{deep}: local");
        }
    }

    #[test]
    fn a_workdir_below_a_host_backed_mount_is_refused() {
        let s = spec(&["/work"]);
        for ok in ["", "/", "/app", "/state", "/work", "/tmp/build", "/data/x"] {
            assert_eq!(check_working_dir(ok, &s), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("/state/a/b", "inside sbx's mount at /state"),
            ("/work/x", "inside sbx's mount at /work"),
            ("/tmp/../state/x", "inside sbx's mount at /state"),
            ("/run/sandbox/x", "inside sbx's mount at /run/sandbox"),
            ("/a,b", "','"),
        ] {
            let err = check_working_dir(bad, &s).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}

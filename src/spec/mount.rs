//! Bind mounts from `--ro`/`--rw HOST[:SANDBOX]` and `--state-dir`.
//!
//! Passed to docker as `--mount type=bind,...`, which fails on a missing host
//! path, never as `-v`, which silently creates it as root.

use std::path::{Component, Path, PathBuf};

use crate::model::invalid::Invalid;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountSpec {
    /// Canonical host path (symlinks resolved, so the docker-socket check
    /// and docker itself see the same file).
    pub host: PathBuf,
    pub sandbox: String,
    pub readonly: bool,
}

/// Sandbox paths a mount may never cover: the kernel's views, the channel,
/// and the runtime directories where sockets live.
const FORBIDDEN_TARGETS: &[&str] = &["/", "/proc", "/sys", "/dev", "/run", "/run/sandbox", "/run/sbx", "/var/run"];
/// ... nor anything below these. `/run/sbx` holds sbx's helper: a mount
/// there fails in docker, or makes docker create `helper` as root in the
/// operator's host directory (issue 9 finding 12).
const FORBIDDEN_TREES: &[&str] = &["/proc", "/sys", "/dev", "/run/sandbox", "/run/sbx"];
/// Mounted by sbx itself: a second mount there would conflict or hide it.
const RESERVED_TARGETS: &[&str] = &["/tmp", "/state", crate::model::paths::HELPER_BG_DIR];
/// ... nor anything below /state: docker would create the mount point as
/// root inside the host directory behind it (a `--state-dir` or session
/// volume). Below /tmp is fine: the mount point is made in sbx's tmpfs.
const RESERVED_TREES: &[&str] = &["/state"];

/// Docker's own socket, wherever this host keeps it.
pub fn docker_socket_paths(docker_host: Option<&str>) -> Vec<PathBuf> {
    let mut v = vec![PathBuf::from("/var/run/docker.sock"), PathBuf::from("/run/docker.sock")];
    if let Some(p) = docker_host.and_then(|h| h.strip_prefix("unix://")) {
        v.push(PathBuf::from(p));
    }
    v.iter().filter_map(|p| p.canonicalize().ok()).chain(v.clone()).collect()
}

impl MountSpec {
    pub fn parse(spec: &str, readonly: bool, docker_sockets: &[PathBuf]) -> Result<Self, Invalid> {
        let what = if readonly { "--ro mount" } else { "--rw mount" };
        let bad = |reason: String| {
            Invalid::new(what, spec, reason).hint(
                "write HOST[:SANDBOX] with an existing host path and an absolute sandbox path, without ',' or '\"'",
            )
        };
        if spec.is_empty() {
            return Err(bad("it is empty".into()));
        }
        if let Some(c) = spec.chars().find(|c| matches!(c, ',' | '"' | '\n' | '\r' | '\0')) {
            return Err(bad(format!("{c:?} could inject options into docker's --mount")));
        }
        let (host, sandbox) = match spec.split_once(':') {
            Some((h, s)) => (h, s),
            None => (spec, spec),
        };
        if sandbox.contains(':') {
            return Err(bad("it has more than one ':'".into()));
        }
        if host.is_empty() || sandbox.is_empty() {
            return Err(bad("a part is empty".into()));
        }
        let host_path = canonical_host(host).map_err(|r| Invalid::new(what, spec, r))?;
        check_not_docker_socket(&host_path, docker_sockets).map_err(|r| Invalid::new(what, spec, r))?;
        let sandbox = sandbox_target(sandbox).map_err(bad)?;
        Ok(MountSpec { host: host_path, sandbox, readonly })
    }

    /// `--state-dir DIR`: a host directory mounted read-write at `/state`.
    pub fn state_dir(dir: &str, docker_sockets: &[PathBuf]) -> Result<Self, Invalid> {
        if let Some(c) = dir.chars().find(|c| matches!(c, ',' | '"' | '\n' | '\r' | '\0')) {
            return Err(Invalid::new("--state-dir", dir, format!("{c:?} could inject options into docker's --mount")));
        }
        let host = canonical_host(dir).map_err(|r| Invalid::new("--state-dir", dir, r))?;
        if !host.is_dir() {
            return Err(Invalid::new("--state-dir", dir, "it is not a directory"));
        }
        check_not_docker_socket(&host, docker_sockets).map_err(|r| Invalid::new("--state-dir", dir, r))?;
        Ok(MountSpec { host, sandbox: "/state".into(), readonly: false })
    }

    /// The `--mount` value; parts validated above, so no quoting is needed.
    pub fn mount_arg(&self) -> String {
        let mut s = format!("type=bind,src={},dst={}", self.host.display(), self.sandbox);
        if self.readonly {
            s.push_str(",readonly");
        }
        s
    }
}

/// Refuse a mount that is, holds or lies inside sbx's data directory (the
/// ownership key, the records `destroy` and `exec` act on, the
/// stopped/paused marks, the events journal), or that is or holds its
/// socket root or lies inside a sandbox's socket directory there (`sbx-*`;
/// another directory in the root holds nothing of sbx's). A sandbox given
/// one could forge what the host trusts (`ls` saying `stopped`, `sbx
/// events` lines) or reach another sandbox's socket. Mounts are canonical;
/// the two directories are made so here.
pub fn check_not_sbx_dirs(
    spec_mounts: &[MountSpec],
    state_dir: Option<&MountSpec>,
    data_dir: &Path,
    socket_root: &Path,
) -> Result<(), Invalid> {
    let canonical = |d: &Path| d.canonicalize().unwrap_or_else(|_| d.to_path_buf());
    let own = [("data directory", canonical(data_dir)), ("socket directory", canonical(socket_root))];
    let all = spec_mounts.iter().map(|m| (if m.readonly { "--ro mount" } else { "--rw mount" }, m));
    for (what, m) in all.chain(state_dir.map(|m| ("--state-dir", m))) {
        for (name, dir) in &own {
            let how = if *dir == m.host {
                "it is"
            } else if dir.starts_with(&m.host) {
                "it holds"
            } else if m.host.starts_with(dir) && (*name == "data directory" || in_sandbox_dir(&m.host, dir)) {
                "it is inside"
            } else {
                continue;
            };
            return Err(Invalid::new(
                what,
                m.host.display().to_string(),
                format!("{how} sbx's own {name} {}: the sandbox could forge what sbx trusts there", dir.display()),
            )
            .hint("mount a directory of the project alone, outside sbx's --data-dir and --socket-dir"));
        }
    }
    Ok(())
}

/// `path`, inside the socket root `root`, is in an entry named like a
/// sandbox's socket directory.
fn in_sandbox_dir(path: &Path, root: &Path) -> bool {
    let first = path.strip_prefix(root).ok().and_then(|rest| rest.components().next());
    matches!(first, Some(Component::Normal(n)) if n.to_string_lossy().starts_with("sbx-"))
}

fn canonical_host(host: &str) -> Result<PathBuf, String> {
    if host.starts_with('-') {
        return Err("the host path starts with '-'".into());
    }
    Path::new(host).canonicalize().map_err(|e| format!("host path {host:?} cannot be used: {e} (it must exist)"))
}

fn check_not_docker_socket(host: &Path, docker_sockets: &[PathBuf]) -> Result<(), String> {
    for sock in docker_sockets {
        if sock.starts_with(host) {
            return Err(format!(
                "it is or contains the docker socket {}: that hands the sandbox root on the host",
                sock.display()
            ));
        }
    }
    Ok(())
}

fn sandbox_target(path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err(format!("the sandbox path {path:?} is not absolute"));
    }
    let p = Path::new(path);
    if p.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)) {
        return Err(format!("the sandbox path {path:?} contains '.' or '..'"));
    }
    let normal: PathBuf = p.components().collect();
    let normal = normal.to_string_lossy().into_owned();
    // Images commonly have /var/run -> /run, and docker follows that link
    // inside the image, so /var/run/X is judged as /run/X.
    let judged = match Path::new(&normal).strip_prefix("/var/run") {
        Ok(rest) if !rest.as_os_str().is_empty() => Path::new("/run").join(rest),
        _ => PathBuf::from(&normal),
    };
    for f in FORBIDDEN_TARGETS {
        let under = FORBIDDEN_TREES.contains(f) && judged.starts_with(f);
        if judged == Path::new(f) || under {
            return Err(format!(
                "mounting over {f} is not allowed: it would replace what the sandbox's boundary relies on"
            ));
        }
    }
    for r in RESERVED_TARGETS {
        if judged == Path::new(r) || (RESERVED_TREES.contains(r) && judged.starts_with(r)) {
            return Err(format!(
                "{r} is sbx's own tmpfs or state mount; mounting on or under it is not possible, use another path (or --state-dir for /state)"
            ));
        }
    }
    Ok(normal)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory removed when the test ends, pass or fail (issue
    /// 10 item 9: these were left behind in /tmp, root-owned, on every run).
    struct TmpDir(PathBuf);

    impl std::ops::Deref for TmpDir {
        type Target = PathBuf;
        fn deref(&self) -> &PathBuf {
            &self.0
        }
    }

    impl Drop for TmpDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tmpdir(tag: &str) -> TmpDir {
        let d = std::env::temp_dir().join(format!("sbx-mount-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        TmpDir(d.canonicalize().unwrap())
    }

    #[test]
    fn scratch_directories_are_removed() {
        let d = tmpdir("gone");
        std::fs::write(d.join("f"), b"x").unwrap();
        let p = d.to_path_buf();
        drop(d);
        assert!(!p.exists(), "{} left behind", p.display());
    }

    #[test]
    fn parses_host_and_target() {
        let d = tmpdir("ok");
        let m = MountSpec::parse(&format!("{}:/data", d.display()), true, &[]).unwrap();
        assert_eq!(m.host, *d);
        assert_eq!(m.sandbox, "/data");
        assert_eq!(m.mount_arg(), format!("type=bind,src={},dst=/data,readonly", d.display()));
        let m = MountSpec::parse(&d.display().to_string(), false, &[]).unwrap();
        assert_eq!(m.sandbox, d.display().to_string());
        assert!(!m.mount_arg().contains("readonly"));
    }

    #[test]
    fn refuses_sbx_own_directories_and_what_holds_or_is_inside_them() {
        let d = tmpdir("own");
        for sub in ["data/stopped", "run/sbx-0123456789ab", "run/data", "project"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        let (data, run) = (d.join("data"), d.join("run"));
        let m = |p: &str| MountSpec::parse(&format!("{}:/x", d.join(p).display()), false, &[]).unwrap();
        for fine in ["project", "run/data"] {
            check_not_sbx_dirs(&[m(fine)], None, &data, &run).unwrap();
        }
        for (mount, how) in [
            ("data", "it is sbx's own data"),
            ("", "it holds"),
            ("data/stopped", "it is inside"),
            ("run/sbx-0123456789ab", "it is inside sbx's own socket"),
        ] {
            let e = check_not_sbx_dirs(&[m(mount)], None, &data, &run).unwrap_err();
            assert!(e.reason.starts_with(how), "{mount}: {}", e.reason);
        }
        let e = check_not_sbx_dirs(&[], Some(&m("run")), &data, &run).unwrap_err();
        assert_eq!(e.what, "--state-dir");
        assert!(e.reason.contains("socket directory"), "{}", e.reason);
    }

    #[test]
    fn refuses_hostile_specs() {
        let d = tmpdir("bad");
        let ds = d.display();
        let cases = [
            (format!("{ds}:/data,readonly=false"), "inject"),
            (format!("{ds},ro"), "inject"),
            (format!("{ds}:/a\"b"), "inject"),
            (format!("{ds}:relative"), "not absolute"),
            (format!("{ds}:/a/../proc"), "'..'"),
            (format!("{ds}:/"), "over /"),
            (format!("{ds}:/proc"), "over /proc"),
            (format!("{ds}:/proc/sys"), "over /proc"),
            (format!("{ds}:/sys"), "over /sys"),
            (format!("{ds}:/dev/"), "over /dev"),
            (format!("{ds}:/run"), "over /run"),
            (format!("{ds}:/run/sandbox"), "over /run/sandbox"),
            (format!("{ds}:/run/sandbox/x"), "over /run/sandbox"),
            (format!("{ds}:/var/run"), "over /var/run"),
            (format!("{ds}:/tmp"), "sbx's own tmpfs"),
            (format!("{ds}:/state/workspace"), "sbx's own tmpfs"),
            (format!("{ds}:/run/sbx-bg"), "sbx's own tmpfs"),
            (format!("{ds}:/run/sbx"), "over /run/sbx"),
            (format!("{ds}:/run/sbx/helper"), "over /run/sbx"),
            (format!("{ds}:/var/run/sbx/helper"), "over /run/sbx"),
            (format!("{ds}:/var/run/sandbox/sandbox.sock"), "over /run/sandbox"),
            (format!("{ds}:/var/run/"), "over /var/run"),
            (format!("{ds}:/a:/b"), "more than one"),
            ("/definitely/not/here:/data".to_string(), "must exist"),
            ("-x:/data".to_string(), "starts with '-'"),
            (":/data".to_string(), "empty"),
        ];
        for (spec, why) in cases {
            let err = MountSpec::parse(&spec, true, &[]).unwrap_err();
            assert!(err.reason.contains(why), "{spec:?}: {}", err.reason);
        }
    }

    #[test]
    fn refuses_the_docker_socket_and_its_parents() {
        let d = tmpdir("sock");
        let sock = d.join("docker.sock");
        std::fs::write(&sock, b"").unwrap();
        let socks = vec![sock.clone()];
        for spec in [sock.display().to_string(), d.display().to_string(), "/".to_string()] {
            let err = MountSpec::parse(&format!("{spec}:/x"), true, &socks).unwrap_err();
            assert!(err.reason.contains("docker socket"), "{spec}: {}", err.reason);
        }
        let err = MountSpec::state_dir(&d.display().to_string(), &socks).unwrap_err();
        assert!(err.reason.contains("docker socket"));
    }
}

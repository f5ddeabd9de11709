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
/// operator's host directory.
const FORBIDDEN_TREES: &[&str] = &["/proc", "/sys", "/dev", "/run/sandbox", "/run/sbx"];
/// Mounted by sbx itself: a second mount there would conflict or hide it.
const RESERVED_TARGETS: &[&str] =
    &["/tmp", "/state", crate::model::paths::HELPER_BG_DIR, crate::model::paths::CA_BUNDLE_DIR];
/// ... nor anything below /state: docker would create the mount point as
/// root inside the host directory behind it (a `--state-dir` or session
/// volume). Below /tmp is fine: the mount point is made in sbx's tmpfs.
const RESERVED_TREES: &[&str] = &["/state"];

/// Host trees that are the kernel's own interfaces: `--ro /proc:/hostproc`
/// handed the sandbox every same-uid process's root and environ. Refused
/// as sources that are, are inside or hold one (a canonical path, so a
/// symlink to /proc, `/proc/self/..` and `/./proc` count as /proc).
const KERNEL_SOURCES: &[&str] = &["/proc", "/sys", "/dev"];
/// Where the engine, containerd and the system keep their sockets and
/// state: refused as sources that are, are inside or hold one (a socket
/// there is the engine's or the system bus's; a unix socket connects
/// through a read-only mount too). /run/user holds each user's session bus
/// and a rootless engine's socket; /var/lib/docker every container's files.
const SOCKET_SOURCES: &[&str] = &[
    "/run/containerd",
    "/run/docker",
    "/run/dbus",
    "/run/systemd",
    "/run/user",
    "/var/lib/docker",
    "/var/lib/containerd",
];
/// Filesystem types of the kernel's interfaces, wherever they are mounted:
/// `mount --bind /proc /mnt/p` makes /mnt/p a /proc that no path names.
const KERNEL_FS: &[&str] = &[
    "proc",
    "sysfs",
    "devtmpfs",
    "devpts",
    "cgroup",
    "cgroup2",
    "securityfs",
    "debugfs",
    "tracefs",
    "bpf",
    "configfs",
    "pstore",
    "efivarfs",
    "fusectl",
    "binfmt_misc",
    "mqueue",
    "nsfs",
    "selinuxfs",
];

/// The mount points of the kernel filesystems in a mountinfo file
/// (`/proc/self/mountinfo`: the engine binds in the same mount namespace).
pub fn kernel_mount_points(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let point = l.split(' ').nth(4)?;
            let fstype = l.split_once(" - ")?.1.split(' ').next()?;
            KERNEL_FS.contains(&fstype).then(|| PathBuf::from(crate::model::text::unescape_mount_point(point)))
        })
        .collect()
}

/// This process's kernel mount points; none when /proc cannot be read (the
/// paths above are still refused).
fn kernel_mounts() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo").map(|t| kernel_mount_points(&t)).unwrap_or_default()
}

/// Refuse a canonical host source that hands the sandbox a kernel
/// interface or a host socket: in a kernel tree or on a kernel filesystem
/// (or holding one: docker's binds are recursive), in or holding a socket
/// directory of the engine or the system, or itself a socket or a device.
fn check_host_source(host: &Path, kernel_mounts: &[PathBuf]) -> Result<(), String> {
    let overlaps = |p: &Path| host.starts_with(p) || p.starts_with(host);
    let how = |p: &Path| if host.starts_with(p) { "is or lies in" } else { "holds" };
    for k in KERNEL_SOURCES.iter().map(Path::new).chain(kernel_mounts.iter().map(PathBuf::as_path)) {
        if overlaps(k) {
            return Err(format!(
                "it {} {}, the host kernel's interface (other processes' memory maps, environments, devices): \
                 never a sandbox's",
                how(k),
                k.display()
            ));
        }
    }
    for d in SOCKET_SOURCES.iter().map(Path::new) {
        if overlaps(d) {
            return Err(format!(
                "it {} {}, where the engine or the system keeps its sockets: one of them hands the sandbox the host",
                how(d),
                d.display()
            ));
        }
    }
    use std::os::unix::fs::FileTypeExt;
    let t =
        std::fs::metadata(host).map_err(|e| format!("host path {} cannot be used: {e}", host.display()))?.file_type();
    let what = if t.is_socket() {
        "a unix socket (a host service's door: containerd, dbus, an agent)"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        return Ok(());
    };
    Err(format!("it is {what}; mount a directory or a file"))
}

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
        check_host_source(&host_path, &kernel_mounts()).map_err(|r| Invalid::new(what, spec, r))?;
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
        check_host_source(&host, &kernel_mounts()).map_err(|r| Invalid::new("--state-dir", dir, r))?;
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
    let canonical = Path::new(host)
        .canonicalize()
        .map_err(|e| format!("host path {host:?} cannot be used: {e} (it must exist)"))?;
    if let Some((link, uid)) = untrusted_link(Path::new(host)) {
        return Err(format!(
            "{} on the way is a symlink owned by uid {uid}, not by root (a sandbox can make one in a --rw \
             mount, and the mount would follow it); name the real path: {}",
            link.display(),
            canonical.display()
        ));
    }
    Ok(canonical)
}

/// The first symlink on the way to `path` that root does not own, with its
/// owner: the rule `sbx cp` follows links by (see `workbench::transfer::host`),
/// here for a mount source, which docker resolves as canonicalize does.
fn untrusted_link(path: &Path) -> Option<(PathBuf, u32)> {
    use std::collections::VecDeque;
    use std::ffi::OsString;
    use std::os::unix::fs::MetadataExt;
    // Names to walk; None is `..`.
    let parts = |p: &Path| -> Vec<Option<OsString>> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(Some(n.to_os_string())),
                Component::ParentDir => Some(None),
                _ => None,
            })
            .collect()
    };
    let absolute = std::env::current_dir().ok()?.join(path);
    let mut cur = PathBuf::from("/");
    let mut todo: VecDeque<Option<OsString>> = parts(&absolute).into();
    let mut links = 0;
    while let Some(c) = todo.pop_front() {
        let Some(name) = c else {
            cur.pop();
            continue;
        };
        let next = cur.join(name);
        let md = std::fs::symlink_metadata(&next).ok()?;
        if !md.file_type().is_symlink() {
            cur = next;
            continue;
        }
        links += 1;
        if md.uid() != 0 {
            return Some((next, md.uid()));
        }
        let target = std::fs::read_link(&next).ok().filter(|_| links <= 40)?;
        if target.is_absolute() {
            cur = PathBuf::from("/");
        }
        for p in parts(&target).into_iter().rev() {
            todo.push_front(p);
        }
    }
    None
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
mod tests;

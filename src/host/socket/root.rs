//! Socket roots (the first usable candidate) and one sandbox's socket
//! directory in it: made empty, its own small tmpfs as root, and removed
//! with whatever the sandbox left there.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::unistd::{access, chown, AccessFlags, Gid, Uid};

use super::{remove_tree, MAX_SOCKET_PATH, SOCKET_NAME};
use crate::error::SocketError;

/// Where socket roots may come from, first usable one wins.
#[derive(Debug, Clone)]
pub struct RootChoice {
    /// `--socket-dir` or `SBX_SOCKET_DIR`: used as given or not at all.
    pub explicit: Option<PathBuf>,
    pub xdg_runtime_dir: Option<PathBuf>,
    pub temp_dir: PathBuf,
    pub euid: u32,
}

impl RootChoice {
    pub fn candidates(&self) -> Vec<PathBuf> {
        if let Some(p) = &self.explicit {
            return vec![p.clone()];
        }
        let mut v = vec![PathBuf::from("/run/sbx/sandboxes")];
        if let Some(x) = &self.xdg_runtime_dir {
            v.push(x.join("sbx-sandboxes"));
        }
        v.push(self.temp_dir.join(format!("sbx-sandboxes-{}", self.euid)));
        v
    }

    /// The first candidate that exists or can be made, is a real directory,
    /// and is writable. Defaults must also be ours: a shared temp dir lets
    /// another user plant the directory first.
    pub fn resolve(&self) -> Result<PathBuf, SocketError> {
        let mut tried = Vec::new();
        for path in self.candidates() {
            match self.usable(&path) {
                Ok(()) => return Ok(path),
                Err(reason) if self.explicit.is_some() => return Err(SocketError::BadRoot { path, reason }),
                Err(reason) => tried.push(format!("{} ({reason})", path.display())),
            }
        }
        Err(SocketError::NoRoot { tried: tried.join("; ") })
    }

    fn usable(&self, path: &Path) -> Result<(), String> {
        let s = path.to_string_lossy();
        if !path.is_absolute() || s.contains([',', '"', '\n', '\r']) {
            return Err("it must be an absolute path without ',', '\"' or newlines".into());
        }
        if let Err(e) = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path) {
            return Err(format!("cannot create it: {e}"));
        }
        let md = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
        if !md.is_dir() {
            return Err("it is not a directory (or it is a symlink)".into());
        }
        if self.explicit.is_none() && md.uid() != self.euid {
            return Err(format!("it is owned by uid {}, not by you", md.uid()));
        }
        access(path, AccessFlags::W_OK | AccessFlags::X_OK).map_err(|e| format!("not writable: {e}"))?;
        Ok(())
    }
}

pub fn socket_path(root: &Path, id: &str) -> PathBuf {
    root.join(id).join(SOCKET_NAME)
}

pub fn check_path_len(path: &Path) -> Result<(), SocketError> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(SocketError::PathTooLong { path: path.to_path_buf(), len });
    }
    Ok(())
}

/// Make `<root>/<id>/`, empty. 0700 owned by the sandbox user when sbx can
/// give it away; otherwise 01733 (anyone may create, nobody may list or
/// delete another's entry), so a non-root sandbox can still bind there.
pub fn make_dir(root: &Path, id: &str, uid: u32, gid: u32) -> Result<PathBuf, SocketError> {
    let dir = root.join(id);
    let io = |source| SocketError::Io { path: dir.clone(), source };
    remove_dir(&dir, id)?;
    std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(io)?;
    let given = uid != 0 && chown(&dir, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid))).is_ok();
    let mode = if given { 0o700 } else { 0o1733 };
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).map_err(io)?;
    if nix::unistd::geteuid().is_root() {
        bound(&dir, mode, uid, gid).map_err(|e| {
            let _ = std::fs::remove_dir(&dir);
            io(e.into())
        })?;
    }
    Ok(dir)
}

/// `<root>/<id>/` for a sandbox with the relayed channel: 0700 and sbx's
/// own, never mounted into the sandbox (its /run/sandbox is a tmpfs inside
/// the container). It marks the sandbox on the host as a socket directory
/// does: `gc` finds orphans by it, the TTL watchdog ends when it goes.
pub fn make_marker_dir(root: &Path, id: &str) -> Result<PathBuf, SocketError> {
    let dir = root.join(id);
    remove_dir(&dir, id)?;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|source| SocketError::Io { path: dir.clone(), source })?;
    Ok(dir)
}

/// What the sandbox writes to /run/sandbox lands on the
/// host (often a RAM-backed /run). As root, each socket directory is its
/// own tmpfs: 1 MiB and 64 inodes hold a socket and a few small files, far
/// from filling the host; nosuid,nodev,noexec since nothing there is run.
/// Without root the directory stays unbounded (`sbx doctor` says so).
use crate::model::paths::SOCKET_TMPFS_OPTIONS as TMPFS_OPTIONS;

fn bound(dir: &Path, mode: u32, uid: u32, gid: u32) -> nix::Result<()> {
    use nix::mount::{mount, MsFlags};
    let data = format!("{TMPFS_OPTIONS},mode={mode:o},uid={uid},gid={gid}");
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("sbx-socket"), dir, Some("tmpfs"), flags, Some(data.as_str()))
}

/// `dir` is bounded as [`make_dir`] left it: its own tmpfs as root (a
/// mount point of a tmpfs; the sandbox cannot mount on the host); without
/// root there is nothing sbx could have mounted. A reboot empties the tmpfs
/// but leaves the directory when the socket root is on a disk.
pub fn is_bounded(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if !nix::unistd::geteuid().is_root() {
        return true;
    }
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let (Ok(d), Ok(p)) = (std::fs::symlink_metadata(dir), std::fs::symlink_metadata(parent)) else { return false };
    let tmpfs = nix::sys::statfs::statfs(dir).is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC);
    d.is_dir() && d.dev() != p.dev() && tmpfs
}

/// Detach the tmpfs of a socket directory, if it has one (never following
/// a link: the entry is sbx's own, in sbx's root).
fn unbound(dir: &Path) -> nix::Result<()> {
    use nix::mount::{umount2, MntFlags};
    match umount2(dir, MntFlags::MNT_DETACH | MntFlags::UMOUNT_NOFOLLOW) {
        // Not a mount point (not root, or already unmounted), or gone.
        Ok(()) | Err(Errno::EINVAL | Errno::ENOENT) => Ok(()),
        // Not root: there is nothing sbx could have mounted.
        Err(Errno::EPERM) if !nix::unistd::geteuid().is_root() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Remove a socket directory and whatever the sandbox left in it. Refuses
/// any directory not named after the sandbox id. Never follows a symlink
/// the sandbox planted, and uses a bounded number of descriptors however
/// deep the tree (see [`remove_tree`]).
pub fn remove_dir(dir: &Path, id: &str) -> Result<(), SocketError> {
    if dir.file_name().and_then(|n| n.to_str()) != Some(id) {
        return Err(SocketError::Hostile {
            path: dir.to_path_buf(),
            reason: format!("not the socket directory of {id}"),
        });
    }
    let parent = dir.parent().unwrap_or(Path::new("/"));
    match unbound(dir).and_then(|()| remove_tree(parent, id)) {
        Ok(()) => Ok(()),
        // Another destroy or gc removing the same directory got there first.
        Err(_) if std::fs::symlink_metadata(dir).is_err() => Ok(()),
        Err(e) => Err(SocketError::Io { path: dir.to_path_buf(), source: e.into() }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tmp;
    use super::*;

    #[test]
    fn makes_and_purges_socket_dirs() {
        let root = tmp("root");
        let id = "sbx-0123456789ab";
        std::fs::create_dir_all(root.join(id)).unwrap();
        std::fs::write(root.join(id).join("stale"), b"x").unwrap();
        let dir = make_dir(&root, id, 65534, 65534).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "purged");
        let md = std::fs::metadata(&dir).unwrap();
        if nix::unistd::geteuid().is_root() {
            assert_eq!((md.uid(), md.mode() & 0o7777), (65534, 0o700));
            // Its own small tmpfs.
            let fs = nix::sys::statfs::statfs(&dir).unwrap();
            assert_eq!((fs.filesystem_type(), fs.files()), (nix::sys::statfs::TMPFS_MAGIC, 64));
            assert_eq!(fs.blocks() * fs.block_size() as u64, 1 << 20);
        } else {
            assert_eq!(md.mode() & 0o7777, 0o1733);
        }
        let dir0 = make_dir(&root, "sbx-00000000000a", 0, 0).unwrap();
        assert_eq!(std::fs::metadata(&dir0).unwrap().mode() & 0o7777, 0o1733);
        assert!(matches!(remove_dir(&root, id), Err(SocketError::Hostile { .. })));
        remove_dir(&dir, id).unwrap();
        remove_dir(&dir, id).unwrap();
        remove_dir(&dir0, "sbx-00000000000a").unwrap();
        assert!(!dir.exists() && !dir0.exists());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn root_resolution_order_and_limits() {
        let base = tmp("resolve");
        let c = RootChoice { explicit: None, xdg_runtime_dir: Some(base.join("xdg")), temp_dir: base.clone(), euid: 7 };
        assert_eq!(
            c.candidates(),
            vec![PathBuf::from("/run/sbx/sandboxes"), base.join("xdg/sbx-sandboxes"), base.join("sbx-sandboxes-7")]
        );
        let bad = RootChoice { explicit: Some(base.join("a,b")), ..c.clone() };
        assert!(matches!(bad.resolve(), Err(SocketError::BadRoot { .. })));
        let good = RootChoice { explicit: Some(base.join("explicit")), ..c };
        assert_eq!(good.resolve().unwrap(), base.join("explicit"));
        assert!(check_path_len(&PathBuf::from(format!("/{}", "x".repeat(106)))).is_ok());
        assert!(matches!(
            check_path_len(&PathBuf::from(format!("/{}", "x".repeat(107)))),
            Err(SocketError::PathTooLong { len: 108, .. })
        ));
        std::fs::remove_dir_all(base).unwrap();
    }
}

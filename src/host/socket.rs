//! The host side of the sandbox channel: where socket directories live, how
//! they are made and removed, and how sbx checks and connects to a socket
//! that the (untrusted) sandbox controls.
//!
//! The sandbox owns its socket directory, so it can swap `sandbox.sock` for
//! a symlink, a FIFO or someone else's socket at any moment. Checking a path
//! and then connecting to the same path is a race it can win; instead sbx
//! opens the entry once with `O_PATH|O_NOFOLLOW`, checks that inode with
//! `fstat`, connects through `/proc/self/fd/N` (the same inode, whatever the
//! path now names), and checks the peer's credentials after connecting.

use std::io::ErrorKind;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{open, openat, renameat2, OFlag, RenameFlags};
use nix::sys::socket::{connect, getsockopt, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, UnixAddr};
use nix::sys::stat::{fstat, Mode, SFlag};
use nix::unistd::{access, chown, unlinkat, AccessFlags, Gid, Uid, UnlinkatFlags};

use crate::error::SocketError;

pub const SOCKET_NAME: &str = "sandbox.sock";
/// sun_path is 108 bytes including the terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;

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

/// Whether this process may connect to the socket behind `fd` (write
/// permission on the inode; issue 10 item 7: a sandbox user's socket with
/// umask 022 is not writable by a non-root caller). Err: why not.
pub fn may_connect(fd: &OwnedFd) -> Result<(), String> {
    let via = format!("/proc/self/fd/{}", fd.as_raw_fd());
    nix::unistd::faccessat(None, via.as_str(), AccessFlags::W_OK, nix::fcntl::AtFlags::AT_EACCESS).map_err(|e| {
        let mode = fstat(fd.as_raw_fd()).map(|st| format!("{:o}", st.st_mode & 0o7777)).unwrap_or_default();
        let owner = fstat(fd.as_raw_fd()).map(|st| st.st_uid.to_string()).unwrap_or_default();
        format!("it is mode {mode}, owned by uid {owner} ({e})")
    })
}

pub fn not_yours(path: &Path, uid: u32, reason: String) -> SocketError {
    SocketError::NotYours { path: path.to_path_buf(), uid, reason }
}

pub use crate::model::paths::SOCKET_TMPFS_OPTIONS as TMPFS_OPTIONS;

fn bound(dir: &Path, mode: u32, uid: u32, gid: u32) -> nix::Result<()> {
    use nix::mount::{mount, MsFlags};
    let data = format!("{TMPFS_OPTIONS},mode={mode:o},uid={uid},gid={gid}");
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("sbx-socket"), dir, Some("tmpfs"), flags, Some(data.as_str()))
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

/// Directory levels held open at once while removing a tree.
const MAX_OPEN_LEVELS: usize = 16;

/// Remove `parent/name` and everything below it, without following
/// symlinks. Issue 9 finding 8: the sandbox can nest 100,000 directories
/// there, and one descriptor per level (std's `remove_dir_all`) runs out
/// (EMFILE). Here at most [`MAX_OPEN_LEVELS`] levels are open: a subtree
/// found deeper is renamed up into the top directory and removed from
/// there, so the tree flattens as it goes; every entry is moved at most
/// once, so the work stays linear. "Already gone" counts as removed.
pub fn remove_tree(parent: &Path, name: &str) -> nix::Result<()> {
    let pfd = open_dir(None, parent, OFlag::empty())?;
    let top = match open_dir(Some(&pfd), Path::new(name), OFlag::O_NOFOLLOW) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(()),
        // A symlink or a file where the directory was: remove the entry itself.
        Err(Errno::ENOTDIR | Errno::ELOOP) => {
            return gone_ok(unlinkat(Some(pfd.as_raw_fd()), name, UnlinkatFlags::NoRemoveDir))
        }
        Err(e) => return Err(e),
    };
    let mut moved = 0u64;
    empty(&top, &top, 1, &mut moved)?;
    drop(top);
    gone_ok(unlinkat(Some(pfd.as_raw_fd()), name, UnlinkatFlags::RemoveDir))
}

fn gone_ok(r: nix::Result<()>) -> nix::Result<()> {
    match r {
        Err(Errno::ENOENT) => Ok(()),
        other => other,
    }
}

fn open_dir(at: Option<&OwnedFd>, path: &Path, extra: OFlag) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | extra;
    let fd = openat(at.map(|f| f.as_raw_fd()), path, flags, Mode::empty())?;
    // SAFETY: `openat` just returned this descriptor and nothing else owns it.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// The names in a directory (one extra descriptor, only while listing).
fn names(dir: &OwnedFd) -> nix::Result<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStrExt;
    let mut d = nix::dir::Dir::openat(
        Some(dir.as_raw_fd()),
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let mut v = Vec::new();
    for e in d.iter() {
        let n = e?.file_name().to_bytes().to_vec();
        if n != b"." && n != b".." {
            v.push(std::ffi::OsStr::from_bytes(&n).to_os_string());
        }
    }
    Ok(v)
}

/// Empty `dir` (at `depth` below `top`), moving what lies too deep up into `top`.
fn empty(dir: &OwnedFd, top: &OwnedFd, depth: usize, moved: &mut u64) -> nix::Result<()> {
    loop {
        let entries = names(dir)?;
        if entries.is_empty() {
            return Ok(());
        }
        for name in entries {
            match unlinkat(Some(dir.as_raw_fd()), name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => continue,
                Err(Errno::EISDIR | Errno::EPERM) => {}
                Err(e) => return Err(e),
            }
            if depth < MAX_OPEN_LEVELS {
                let sub = match open_dir(Some(dir), Path::new(&name), OFlag::O_NOFOLLOW) {
                    Ok(sub) => sub,
                    Err(Errno::ENOENT) => continue,
                    Err(e) => return Err(e),
                };
                empty(&sub, top, depth + 1, moved)?;
                drop(sub);
                gone_ok(unlinkat(Some(dir.as_raw_fd()), name.as_os_str(), UnlinkatFlags::RemoveDir))?;
            } else {
                // Too deep: hand the subtree to `top`, whose loop lists it again.
                loop {
                    *moved += 1;
                    let to = format!(".sbx-deep-{moved}");
                    match renameat2(
                        Some(dir.as_raw_fd()),
                        name.as_os_str(),
                        Some(top.as_raw_fd()),
                        to.as_str(),
                        RenameFlags::RENAME_NOREPLACE,
                    ) {
                        Err(Errno::EEXIST) => continue,
                        r => break gone_ok(r)?,
                    }
                }
            }
        }
        // List again: the top finds what was moved into it.
    }
}

/// Owners a sandbox socket may have: this process, the sandbox user, root.
pub fn allowed_owners(sandbox_uid: Option<u32>) -> Vec<u32> {
    let mut v = vec![nix::unistd::geteuid().as_raw(), 0];
    v.extend(sandbox_uid);
    v
}

fn hostile(path: &Path, reason: impl Into<String>) -> SocketError {
    SocketError::Hostile { path: path.to_path_buf(), reason: reason.into() }
}

/// Open the directory entry itself (never what a symlink names) and check
/// that it is a socket with an allowed owner. `Ok(None)`: nothing there yet.
pub fn open_checked(path: &Path, owners: &[u32]) -> Result<Option<(OwnedFd, u32)>, SocketError> {
    let fd = match open(path, OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty()) {
        Ok(fd) => fd,
        Err(nix::errno::Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(SocketError::Io { path: path.to_path_buf(), source: e.into() }),
    };
    // SAFETY: `open` just returned this descriptor and nothing else owns it.
    let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let st = fstat(fd.as_raw_fd()).map_err(|e| SocketError::Io { path: path.to_path_buf(), source: e.into() })?;
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    let what = match kind {
        SFlag::S_IFSOCK => None,
        SFlag::S_IFLNK => Some("a symlink"),
        SFlag::S_IFREG => Some("a regular file"),
        SFlag::S_IFIFO => Some("a FIFO"),
        SFlag::S_IFDIR => Some("a directory"),
        _ => Some("not a socket"),
    };
    if let Some(what) = what {
        return Err(hostile(path, format!("it is {what}, not a unix socket")));
    }
    if !owners.contains(&st.st_uid) {
        return Err(hostile(path, format!("it is owned by uid {}, not by the sandbox user, you or root", st.st_uid)));
    }
    Ok(Some((fd, st.st_uid)))
}

/// How long a connect waits for the sandbox to accept, unless told otherwise.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Connect to the socket at `path`, safely (see the module docs), waiting
/// at most [`CONNECT_TIMEOUT`] for the sandbox to take the connection.
pub fn connect_checked(path: &Path, owners: &[u32]) -> Result<UnixStream, SocketError> {
    connect_within(path, owners, CONNECT_TIMEOUT)
}

/// [`connect_checked`] with a deadline. connect(2) on a unix socket whose
/// accept queue is full blocks until the listener accepts, and the sandbox
/// decides whether it ever does (issue 9 finding 11); SO_SNDTIMEO bounds
/// that wait (the kernel then answers EAGAIN) and is cleared once connected.
pub fn connect_within(path: &Path, owners: &[u32], timeout: std::time::Duration) -> Result<UnixStream, SocketError> {
    let io = |e: nix::errno::Errno| SocketError::Io { path: path.to_path_buf(), source: e.into() };
    let (fd, owner) = open_checked(path, owners)?.ok_or_else(|| SocketError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(ErrorKind::NotFound, "the sandbox has not bound its socket"),
    })?;
    let sock = socket(AddressFamily::Unix, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).map_err(io)?;
    let via = UnixAddr::new(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str()).map_err(io)?;
    // A zero SO_SNDTIMEO means "forever": keep the smallest real deadline.
    let limit = nix::sys::time::TimeVal::new(
        timeout.as_secs() as i64,
        if timeout.is_zero() { 1 } else { timeout.subsec_micros() as i64 },
    );
    setsockopt(&sock, sockopt::SendTimeout, &limit).map_err(io)?;
    match connect(sock.as_raw_fd(), &via) {
        Ok(()) => {}
        Err(nix::errno::Errno::EAGAIN) => {
            return Err(SocketError::NotAccepting {
                path: path.to_path_buf(),
                waited: humantime::format_duration(timeout).to_string(),
            })
        }
        Err(e) => return Err(io(e)),
    }
    // Relayed writes may wait as long as they must: the deadline was for connecting.
    setsockopt(&sock, sockopt::SendTimeout, &nix::sys::time::TimeVal::new(0, 0)).map_err(io)?;
    let peer = getsockopt(&sock.as_fd(), sockopt::PeerCredentials).map_err(io)?;
    if peer.uid() != owner || !owners.contains(&peer.uid()) {
        return Err(hostile(
            path,
            format!("the process behind it runs as uid {}, the socket belongs to uid {owner}", peer.uid()),
        ));
    }
    Ok(UnixStream::from(sock))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sbx-sock-{tag}-{}-{}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn me() -> Vec<u32> {
        allowed_owners(None)
    }

    #[test]
    fn connects_to_a_real_socket_and_checks_the_peer() {
        let d = tmp("ok");
        let p = d.join(SOCKET_NAME);
        let l = UnixListener::bind(&p).unwrap();
        assert!(open_checked(&p, &me()).unwrap().is_some());
        let s = connect_checked(&p, &me()).unwrap();
        drop((s, l));
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn gives_up_when_the_backlog_stays_full() {
        let d = tmp("full");
        let p = d.join(SOCKET_NAME);
        let l = UnixListener::bind(&p).unwrap();
        // Backlog 0 (one pending connection), never accepted: fill it.
        nix::sys::socket::listen(&l, nix::sys::socket::Backlog::new(0).unwrap()).unwrap();
        let mut held = Vec::new();
        let started = std::time::Instant::now();
        let err = loop {
            match connect_within(&p, &me(), std::time::Duration::from_millis(200)) {
                Ok(s) => held.push(s),
                Err(e) => break e,
            }
            assert!(held.len() < 10, "the queue never filled");
        };
        assert!(matches!(err, SocketError::NotAccepting { ref waited, .. } if waited == "200ms"), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // Once connected, writes are not bound by the connect deadline.
        let t = nix::sys::socket::getsockopt(&held[0], sockopt::SendTimeout).unwrap();
        assert_eq!((t.tv_sec(), t.tv_usec()), (0, 0));
        drop((held, l));
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn refuses_symlinks_files_and_fifos() {
        let d = tmp("bad");
        let real = d.join("real.sock");
        let _l = UnixListener::bind(&real).unwrap();
        let p = d.join(SOCKET_NAME);
        std::os::unix::fs::symlink(&real, &p).unwrap();
        assert!(
            matches!(connect_checked(&p, &me()), Err(SocketError::Hostile { reason, .. }) if reason.contains("symlink"))
        );
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, b"x").unwrap();
        assert!(
            matches!(open_checked(&p, &me()), Err(SocketError::Hostile { reason, .. }) if reason.contains("regular file"))
        );
        std::fs::remove_file(&p).unwrap();
        nix::unistd::mkfifo(&p, Mode::from_bits_truncate(0o600)).unwrap();
        assert!(matches!(open_checked(&p, &me()), Err(SocketError::Hostile { reason, .. }) if reason.contains("FIFO")));
        std::fs::remove_file(&p).unwrap();
        assert!(open_checked(&p, &me()).unwrap().is_none());
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn refuses_foreign_owners() {
        let d = tmp("owner");
        let p = d.join(SOCKET_NAME);
        let _l = UnixListener::bind(&p).unwrap();
        let err = open_checked(&p, &[4242]).unwrap_err();
        assert!(matches!(err, SocketError::Hostile { ref reason, .. } if reason.contains("owned by uid")), "{err}");
        std::fs::remove_dir_all(d).unwrap();
    }

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
            // Issue 9 finding 7: its own small tmpfs.
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

    /// Issue 9 finding 8: a tree far deeper than the levels held open, with
    /// symlinks out of it that must not be followed.
    #[test]
    fn removes_deep_trees_without_following_links() {
        let root = tmp("deep");
        let outside = tmp("outside");
        std::fs::write(outside.join("keep"), b"x").unwrap();
        let id = "sbx-0123456789ab";
        let mut fd = open_dir(None, &root, OFlag::empty()).unwrap();
        nix::sys::stat::mkdirat(Some(fd.as_raw_fd()), id, Mode::from_bits_truncate(0o700)).unwrap();
        fd = open_dir(Some(&fd), Path::new(id), OFlag::empty()).unwrap();
        for i in 0..3000 {
            if i % 500 == 0 {
                std::os::unix::fs::symlink(&outside, format!("/proc/self/fd/{}/link", fd.as_raw_fd())).unwrap();
                std::fs::write(format!("/proc/self/fd/{}/file", fd.as_raw_fd()), b"x").unwrap();
            }
            nix::sys::stat::mkdirat(Some(fd.as_raw_fd()), "d", Mode::from_bits_truncate(0o700)).unwrap();
            fd = open_dir(Some(&fd), Path::new("d"), OFlag::empty()).unwrap();
        }
        drop(fd);
        remove_dir(&root.join(id), id).unwrap();
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0, "nothing left");
        assert!(outside.join("keep").exists(), "a symlink was followed");
        // A symlink in place of the directory: the link goes, not its target.
        std::os::unix::fs::symlink(&outside, root.join(id)).unwrap();
        remove_dir(&root.join(id), id).unwrap();
        assert!(outside.join("keep").exists() && std::fs::symlink_metadata(root.join(id)).is_err());
        remove_dir(&root.join(id), id).unwrap();
        std::fs::remove_dir_all(root).unwrap();
        std::fs::remove_dir_all(outside).unwrap();
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

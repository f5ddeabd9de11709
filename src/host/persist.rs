//! Persistent sessions: `/state` in a named volume per session, backed by a
//! directory sbx owns under the data dir (so sbx can give it to the sandbox
//! user, and `--clone` can fill it before the sandbox starts). As root with
//! a local engine that directory is `data/` in a file system of the
//! session's own, which bounds it (`image`); otherwise, only when the
//! operator said `--persist-size unbounded`, the session's directory itself.
//!
//! One writer at a time: a create holds an exclusive lock on the session
//! while it checks that no running sandbox uses the volume and starts its
//! own, so two creates for one session cannot both get it.
//!
//! The docker calls for the volume itself are `docker::argv::volume_*`.

use std::fs::File;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::error::{SandboxError, SessionError};

mod du;
pub mod image;
mod scratch;
pub use du::du;
pub use scratch::{scratch_name, stale_scratch};

pub fn volume_name(session: &str) -> String {
    format!("sbx-state-{session}")
}

pub fn host_dir(data_dir: &Path, session: &str) -> PathBuf {
    data_dir.join("volumes").join(session)
}

pub fn lock_path(data_dir: &Path, session: &str) -> PathBuf {
    data_dir.join("volumes").join(format!("{session}.lock"))
}

/// [`lock`] without waiting: None when someone (a create) holds it.
pub fn try_lock(data_dir: &Path, session: &str) -> Result<Option<Flock<File>>> {
    let path = lock_path(data_dir, session);
    let f = match File::options().write(true).open(&path) {
        Ok(f) => f,
        // No lock file: nobody can hold it; make one to hold.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return lock(data_dir, session).map(Some),
        Err(e) => return Err(Error::io(format!("opening {}", path.display()), e)),
    };
    match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
        Ok(l) => Ok(Some(l)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(Error::io(format!("locking {}", path.display()), e.into())),
    }
}

/// Held for the whole create: see the module docs.
pub fn lock(data_dir: &Path, session: &str) -> Result<Flock<File>> {
    lock_at(&data_dir.join("volumes"), &lock_path(data_dir, session))
}

/// Remote engines' session locks, and a remote `--clone`'s
/// directory while it lasts: `volumes/.remote/`, not a session key, so gc's
/// sweep of local session state never takes it for one.
pub fn remote_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("volumes").join(".remote")
}

pub fn remote_lock_path(data_dir: &Path, session: &str) -> PathBuf {
    remote_dir(data_dir).join(format!("{session}.lock"))
}

/// [`lock`] of a session on a remote engine.
pub fn remote_lock(data_dir: &Path, session: &str) -> Result<Flock<File>> {
    lock_at(&remote_dir(data_dir), &remote_lock_path(data_dir, session))
}

fn lock_at(dir: &Path, path: &Path) -> Result<Flock<File>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    Flock::lock(f, FlockArg::LockExclusive).map_err(|(_, e)| Error::io(format!("locking {}", path.display()), e.into()))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VolumeInfo {
    pub name: String,
    pub session: String,
    pub path: String,
    /// What /state holds: the mounted file system's use for a bounded
    /// session (statvfs), else the files' sizes (`du`).
    pub bytes: u64,
    /// The bound (`--persist-size`), or None: unbounded.
    pub limit: Option<u64>,
    /// A bounded session's image is mounted (false: the next create or
    /// `sbx start` mounts it; the engine cannot start it without).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mounted: Option<bool>,
    /// Running sandboxes using it (at most one).
    pub in_use_by: Vec<String>,
}

/// Whether a session has work to keep: a bounded session's image (mounted
/// or not), or a directory that [`holds_data`].
pub fn session_holds_data(data_dir: &Path, session: &str) -> bool {
    image::is_bounded(data_dir, session) || holds_data(&host_dir(data_dir, session))
}

/// Whether a session's directory holds anything: true unless it is absent,
/// not a directory (a link sbx never made) or an empty directory. Read by
/// descriptor, never through a link; when it cannot be read, assumed to hold
/// data, since the caller would otherwise delete it.
pub fn holds_data(dir: &Path) -> bool {
    use nix::errno::Errno;
    match crate::host::socket::open_dir_at(None, dir, nix::fcntl::OFlag::O_NOFOLLOW) {
        Ok(fd) => crate::host::socket::dir_names(&fd).map_or(true, |n| !n.is_empty()),
        Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => false,
        Err(_) => true,
    }
}

/// Give a tree to the sandbox user (as root; a no-op otherwise), links
/// themselves rather than what they point at.
pub fn chown_tree(path: &Path, uid: u32, gid: u32) {
    use nix::fcntl::AtFlags;
    use nix::unistd::{fchownat, Gid, Uid};
    let _ = fchownat(None, path, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)), AtFlags::AT_SYMLINK_NOFOLLOW);
    if std::fs::symlink_metadata(path).map(|m| m.is_dir()).unwrap_or(false) {
        for e in std::fs::read_dir(path).into_iter().flatten().flatten() {
            chown_tree(&e.path(), uid, gid);
        }
    }
}

/// Open a directory sbx trusts the path of, refusing a symlink in its place.
fn open_dir(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    File::options()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(path)
}

/// The session's host directory, made by sbx (never copied from the image:
/// the volume is mounted `volume-nocopy`) and given to
/// the sandbox user, 0700. Returns whether it was made now.
pub fn prepare_dir(dir: &Path, uid: u32, gid: u32) -> Result<bool> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::DirBuilderExt;
    let fresh = match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(Error::io(format!("creating {}", dir.display()), e)),
    };
    let d = open_dir(dir).map_err(|e| Error::io(format!("opening {} (it must be a directory)", dir.display()), e))?;
    let fd = d.as_raw_fd();
    // As root: the sandbox user must own it (an image's root-owned /state
    // made it unwritable). Not root: it is already ours.
    if nix::unistd::geteuid().is_root() {
        // A session whose files are another uid's (made by an sbx that ran
        // every sandbox as 65534, or under an explicit --user) would be
        // unwritable to the uid it runs as now: its whole tree follows,
        // links themselves and never what they name. No sandbox has the
        // volume meanwhile (the caller holds the session's lock).
        let st = nix::sys::stat::fstat(fd).map_err(|e| Error::io(format!("inspecting {}", dir.display()), e.into()))?;
        if !fresh && (st.st_uid != uid || st.st_gid != gid) {
            chown_tree(dir, uid, gid);
        }
        nix::unistd::fchown(fd, Some(nix::unistd::Uid::from_raw(uid)), Some(nix::unistd::Gid::from_raw(gid)))
            .map_err(|e| Error::io(format!("giving {} to {uid}:{gid}", dir.display()), e.into()))?;
    }
    nix::sys::stat::fchmod(fd, nix::sys::stat::Mode::from_bits_truncate(0o700))
        .map_err(|e| Error::io(format!("chmod 0700 {}", dir.display()), e.into()))?;
    Ok(fresh)
}

/// A nosuid,nodev bind of the session's host directory onto itself: the
/// engine's bind of the volume, and the container's bind of that, copy these
/// flags. The local driver's `o=bind,nosuid,nodev` does
/// not work: a bind mount ignores those flags unless remounted, and engine
/// 20.10 only remounts for `ro`.
///
/// It stays for as long as the directory does (`destroy --purge` detaches
/// it): the engine binds the volume again on every start, so a bind held
/// only while `create` ran left a sandbox started again by `docker start`
/// (or a daemon restart) with a plain `rw` /state. Made once: a directory
/// already nosuid,nodev (this bind from an earlier create, or a file system
/// mounted so) gets no second one.
pub struct NosuidBind(());

impl NosuidBind {
    pub fn new(dir: &Path) -> std::result::Result<Self, nix::Error> {
        use nix::mount::{mount, umount2, MntFlags, MsFlags};
        use nix::sys::statvfs::{statvfs, FsFlags};
        if statvfs(dir)?.flags().contains(FsFlags::ST_NOSUID | FsFlags::ST_NODEV) {
            return Ok(NosuidBind(()));
        }
        let none: Option<&str> = None;
        mount(Some(dir), dir, none, MsFlags::MS_BIND, none)?;
        let flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
        if let Err(e) = mount(none, dir, none, flags, none) {
            let _ = umount2(dir, MntFlags::MNT_DETACH);
            return Err(e);
        }
        Ok(NosuidBind(()))
    }
}

/// Detach sbx's binds of a session directory onto itself (before a clone
/// renames into it, which cannot cross a mount, and before it is removed).
/// umount2 refuses a path that is not a mount point, so this never reaches
/// the file system the directory is on; bounded, for binds stacked by older
/// versions that a SIGKILL left behind.
pub fn unbind(dir: &Path) {
    for _ in 0..16 {
        if nix::mount::umount2(dir, nix::mount::MntFlags::MNT_DETACH).is_err() {
            break;
        }
    }
}

/// What `clone_workspace` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cloned {
    Cloned,
    /// An earlier sandbox's non-empty workspace, kept.
    Kept,
}

/// `--clone` into `<base>/workspace`, where `base` (the session's host
/// directory or `--state-dir`) holds whatever an earlier sandbox wrote, so
/// nothing there is followed: git clones as root into a
/// fresh 0700 directory next to `base` (root, so the operator's credentials
/// and repositories work; nothing the sandbox wrote is on that path), the
/// tree is given to the sandbox user without following links, and it is
/// moved into place with `renameat` relative to `base` opened
/// `O_DIRECTORY|O_NOFOLLOW`. rename(2) never follows its last component and
/// only replaces an empty directory. A `workspace` that is not a directory
/// (a symlink, say) is refused: it is not a workspace, and deleting what a
/// sandbox left is not sbx's call.
/// `owner`: whom the tree is given to; None leaves it root's.
pub fn clone_workspace(
    spec: &crate::spec::CloneSpec,
    base: &Path,
    owner: Option<crate::spec::UserSpec>,
) -> Result<Cloned> {
    use nix::fcntl::{AtFlags, OFlag};
    use nix::sys::stat::{fstatat, Mode, SFlag};
    use std::os::fd::AsRawFd;
    let ws = base.join("workspace");
    let b = open_dir(base).map_err(|e| Error::io(format!("opening {} (it must be a directory)", base.display()), e))?;
    match fstatat(Some(b.as_raw_fd()), "workspace", AtFlags::AT_SYMLINK_NOFOLLOW) {
        Err(nix::errno::Errno::ENOENT) => {}
        Err(e) => return Err(Error::io(format!("inspecting {}", ws.display()), e.into())),
        Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR => {
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            let mut d = nix::dir::Dir::openat(Some(b.as_raw_fd()), "workspace", flags, Mode::empty())
                .map_err(|e| Error::io(format!("opening {}", ws.display()), e.into()))?;
            let names = d.iter().flatten().filter(|e| ![&b"."[..], b".."].contains(&e.file_name().to_bytes())).count();
            if names > 0 {
                return Ok(Cloned::Kept);
            }
        }
        Ok(st) => {
            return Err(Error::Session(SessionError::WorkspaceNotDirectory {
                path: ws,
                found: file_kind(st.st_mode).into(),
            }))
        }
    }
    let parent = base.parent().unwrap_or(Path::new("/"));
    let name = base.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = parent.join(scratch_name(&format!("{name}-")));
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&tmp)
            .map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
    }
    let done = (|| {
        let fresh = tmp.join("workspace");
        clone(spec, &fresh)?;
        if let Some(crate::spec::UserSpec { uid, gid }) = owner {
            chown_tree(&fresh, uid, gid);
        }
        let t = open_dir(&tmp).map_err(|e| Error::io(format!("opening {}", tmp.display()), e))?;
        nix::fcntl::renameat(Some(t.as_raw_fd()), "workspace", Some(b.as_raw_fd()), "workspace").map_err(|e| {
            let hint =
                if e == nix::errno::Errno::EXDEV { " (it must be on the same filesystem as its parent)" } else { "" };
            Error::io(format!("moving the clone into {}{hint}", ws.display()), e.into())
        })?;
        Ok(Cloned::Cloned)
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    done
}

fn file_kind(mode: u32) -> &'static str {
    use nix::sys::stat::SFlag;
    match SFlag::from_bits_truncate(mode) & SFlag::S_IFMT {
        SFlag::S_IFLNK => "a symlink",
        SFlag::S_IFREG => "a regular file",
        SFlag::S_IFIFO => "a FIFO",
        SFlag::S_IFSOCK => "a socket",
        SFlag::S_IFCHR | SFlag::S_IFBLK => "a device",
        _ => "not a directory",
    }
}

/// `git clone` on the host, with git's command-running transports off.
pub fn clone(spec: &crate::spec::CloneSpec, into: &Path) -> Result<()> {
    let run = |args: &[&std::ffi::OsStr]| -> Result<()> {
        let out = std::process::Command::new("git")
            .args(args)
            .env("GIT_ALLOW_PROTOCOL", "file:git:http:https:ssh")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| Error::io("running git (is it installed?)", e))?;
        if !out.status.success() {
            return Err(Error::Sandbox(SandboxError::CommandFailed {
                command: "git".into(),
                code: out.status.code().unwrap_or(-1),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            }));
        }
        Ok(())
    };
    let dir = into.as_os_str();
    run(&["clone".as_ref(), "--quiet".as_ref(), "--".as_ref(), spec.url.as_ref(), dir])?;
    if let Some(r) = &spec.reference {
        run(&["-C".as_ref(), dir, "checkout".as_ref(), "--quiet".as_ref(), r.as_ref(), "--".as_ref()])?;
    }
    Ok(())
}

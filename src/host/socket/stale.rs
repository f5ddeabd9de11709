//! Before `sbx start`: the last run's socket is still in the sandbox's
//! socket directory (a program that binds the same path again gets
//! EADDRINUSE), and the sandbox had that directory to itself, so anything
//! may be there instead.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{open, AtFlags, OFlag};
use nix::sys::stat::{fstatat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};

use super::SOCKET_NAME;
use crate::error::SocketError;

/// What was in the socket directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stale {
    /// No directory at all (a reboot emptied /run): the caller makes it again.
    NoDir,
    /// The directory, now without a socket in it.
    Cleared,
}

/// Remove the last run's `sandbox.sock` from `dir` when it is a unix socket;
/// refuse anything else there (a symlink, a FIFO, a file, a directory), as
/// a connect does. Everything happens relative to a descriptor of `dir`
/// opened without following a link, and the entry itself is never
/// followed: a symlink to a host file leaves that file untouched. No
/// process of the (stopped) sandbox runs meanwhile to swap the entry.
pub fn clear_stale(dir: &Path, id: &str) -> Result<Stale, SocketError> {
    let sock = dir.join(SOCKET_NAME);
    let io = |e: Errno| SocketError::Io { path: dir.to_path_buf(), source: e.into() };
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = match open(dir, flags, Mode::empty()) {
        // SAFETY: `open` just returned this descriptor and nothing else owns it.
        Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd) },
        Err(Errno::ENOENT) => return Ok(Stale::NoDir),
        Err(Errno::ELOOP | Errno::ENOTDIR) => {
            return Err(SocketError::Stale { path: dir.to_path_buf(), id: id.into(), what: "not a directory".into() })
        }
        Err(e) => return Err(io(e)),
    };
    let st = match fstatat(Some(fd.as_raw_fd()), SOCKET_NAME, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::ENOENT) => return Ok(Stale::Cleared),
        Err(e) => return Err(io(e)),
    };
    let what = super::not_a_socket(st.st_mode);
    if let Some(what) = what {
        return Err(SocketError::Stale { path: sock, id: id.into(), what: format!("{what}, not a unix socket") });
    }
    match unlinkat(Some(fd.as_raw_fd()), SOCKET_NAME, UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(Stale::Cleared),
        Err(e) => Err(SocketError::Io { path: sock, source: e.into() }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tmp;
    use super::*;

    #[test]
    fn removes_a_socket_and_refuses_the_rest_without_following() {
        let dir = tmp("stale");
        let id = "sbx-0123456789ab";
        assert_eq!(clear_stale(&dir.join("gone"), id).unwrap(), Stale::NoDir);
        assert_eq!(clear_stale(&dir, id).unwrap(), Stale::Cleared, "nothing there");
        let sock = dir.join(SOCKET_NAME);
        drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
        assert_eq!(clear_stale(&dir, id).unwrap(), Stale::Cleared);
        assert!(std::fs::symlink_metadata(&sock).is_err(), "the old socket is gone");

        let target = dir.join("host-file");
        std::fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, &sock).unwrap();
        let e = clear_stale(&dir, id).unwrap_err();
        assert!(matches!(&e, SocketError::Stale { what, .. } if what.starts_with("a symlink")), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(std::fs::symlink_metadata(&sock).unwrap().file_type().is_symlink(), "left for the operator");

        // The directory itself a symlink: refused, never entered.
        let link = dir.join("linked");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(matches!(clear_stale(&link, id), Err(SocketError::Stale { .. })));
        std::fs::remove_dir_all(dir).unwrap();
    }
}

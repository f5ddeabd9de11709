//! Opening and connecting to a socket the sandbox controls: the entry is
//! opened once without following links, checked by its inode, connected to
//! through `/proc/self/fd/N`, and the peer's credentials checked after.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;

use nix::fcntl::{open, OFlag};
use nix::sys::socket::{connect, getsockopt, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, UnixAddr};
use nix::sys::stat::{fstat, Mode};
use nix::unistd::AccessFlags;

use crate::error::SocketError;

/// Whether this process may connect to the socket behind `fd` (write
/// permission on the inode; a sandbox user's socket with
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
    let what = super::not_a_socket(st.st_mode);
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
    connect_within(path, owners, None, CONNECT_TIMEOUT)
}

/// [`connect_checked`] with a deadline. connect(2) on a unix socket whose
/// accept queue is full blocks until the listener accepts, and the sandbox
/// decides whether it ever does; SO_SNDTIMEO bounds
/// that wait (the kernel then answers EAGAIN) and is cleared once connected.
///
/// The peer must run as the socket's owner (runc: the sandbox user who
/// bound it), or be a process of the sandbox's container `container`: under
/// gVisor the host end of the socket is held by the runtime's gofer (root,
/// in the container's cgroup) on the sandbox user's behalf, while the inode
/// is still the sandbox user's.
pub fn connect_within(
    path: &Path,
    owners: &[u32],
    container: Option<&str>,
    timeout: std::time::Duration,
) -> Result<UnixStream, SocketError> {
    let io = |e: nix::errno::Errno| SocketError::Io { path: path.to_path_buf(), source: e.into() };
    let (fd, owner) = open_checked(path, owners)?.ok_or_else(|| SocketError::NotBound { path: path.to_path_buf() })?;
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
    let same_user = peer.uid() == owner && owners.contains(&peer.uid());
    if !same_user && !container.is_some_and(|c| crate::host::gvisor::in_container(Path::new("/proc"), peer.pid(), c)) {
        return Err(hostile(
            path,
            format!("the process behind it runs as uid {}, the socket belongs to uid {owner}", peer.uid()),
        ));
    }
    Ok(UnixStream::from(sock))
}

#[cfg(test)]
mod tests {
    use super::super::{tmp, SOCKET_NAME};
    use super::*;
    use std::os::unix::net::UnixListener;

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
            match connect_within(&p, &me(), None, std::time::Duration::from_millis(200)) {
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
        let err = connect_checked(&p, &me()).unwrap_err();
        assert!(matches!(&err, SocketError::NotBound { path } if *path == p), "{err}");
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
}

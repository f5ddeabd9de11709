//! Host trees read and written through directory descriptors.
//!
//! `cp` into a directory the sandbox can also write (a
//! `--rw` mount) was raced by swapping a directory for a symlink between the
//! link check and the open. Here the destination is opened once and every
//! entry is created relative to a descriptor of its parent, resolved with
//! openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS) or,
//! where the kernel lacks it, component by component with
//! O_NOFOLLOW|O_DIRECTORY. Nothing is checked by path and then opened.
//!
//! Overwrite rules: an existing directory of the same name is merged into;
//! an existing file or symlink of the same name is unlinked and created
//! anew (O_EXCL|O_NOFOLLOW: never opened, never followed); anything else
//! refuses the entry. Files are created 0600 and get their mode by fchmod,
//! setuid/setgid dropped (sbx often runs as root).

mod read;
mod write;

pub use read::send_host;
pub use write::{HostWriter, Resolve};

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

/// A host path sbx refuses to read or write through (see [`super::wire::Refused`]).
pub(super) fn invalid(msg: String) -> io::Error {
    super::wire::refused(io::ErrorKind::InvalidData, msg)
}

/// Open the directory `path` names (an operator's path, above what is
/// copied). Component by component with O_NOFOLLOW: a symlink on the way is
/// followed only when root owns it, and the last one not at all with
/// `nofollow`. Finding 4 one level up: with `--rw HOST:/work` the sandbox
/// made `/work/build` a symlink to a host directory, and `sbx cp ID:/tmp/f
/// HOST/build/f` wrote there as root (`sbx cp HOST/build/secret ID:/tmp/`
/// read from there); the kernel followed it when opening the path. The
/// caller's own links are not trusted either: a sandbox can be the caller's
/// uid (an image `USER 1003` started by another user, or before `create`
/// refused it: then `~/project/build -> ~/.ssh` replaced authorized_keys),
/// never root's (`--user 0` is refused with a writable mount).
pub(super) fn open_dir(path: &Path, nofollow: bool) -> io::Result<OwnedFd> {
    use std::collections::VecDeque;
    use std::ffi::OsString;
    use std::path::Component;
    let err = |e: Errno| io::Error::new(io::Error::from(e).kind(), format!("{}: {e}", path.display()));
    let start = |abs: bool| {
        rustix::fs::open(if abs { "/" } else { "." }, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
    };
    let parts = |p: &Path| -> Vec<OsString> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect()
    };
    let mut cur = start(path.is_absolute()).map_err(err)?;
    let mut todo: VecDeque<OsString> = parts(path).into();
    let mut links = 0;
    while let Some(c) = todo.pop_front() {
        let fd =
            rustix::fs::openat(&cur, c.as_os_str(), OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
                .map_err(err)?;
        let st = rustix::fs::fstat(&fd).map_err(err)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Symlink {
            cur = fd;
            continue;
        }
        if todo.is_empty() && nofollow {
            return Err(invalid(format!("{} is a symlink; name the directory itself", path.display())));
        }
        if st.st_uid != 0 {
            return Err(invalid(format!(
                "{}: {:?} on the way is a symlink owned by uid {}, not by root (a sandbox can make one \
                 in a --rw mount); refusing to follow it, name the real directory (`realpath`)",
                path.display(),
                c,
                st.st_uid
            )));
        }
        links += 1;
        if links > 40 {
            return Err(err(Errno::LOOP));
        }
        let target = rustix::fs::readlinkat(&fd, "", Vec::new()).map_err(err)?;
        let target = PathBuf::from(std::ffi::OsStr::from_bytes(target.as_bytes()));
        if target.is_absolute() {
            cur = start(true).map_err(err)?;
        }
        for p in parts(&target).into_iter().rev() {
            todo.push_front(p);
        }
    }
    rustix::fs::openat(&cur, ".", OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).map_err(err)
}

pub(super) fn at(rel: &str, e: Errno) -> io::Error {
    io::Error::new(io::Error::from(e).kind(), format!("{rel}: {e}"))
}

#[cfg(test)]
mod tests;

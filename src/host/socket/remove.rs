//! Removing a directory tree the sandbox wrote, never following a link it
//! planted and with a bounded number of descriptors however deep it is.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{openat, renameat2, OFlag, RenameFlags};
use nix::sys::stat::Mode;
use nix::unistd::{unlinkat, UnlinkatFlags};

/// Directory levels held open at once while removing a tree.
const MAX_OPEN_LEVELS: usize = 16;

/// Remove `parent/name` and everything below it, without following
/// symlinks. The sandbox can nest 100,000 directories
/// there, and one descriptor per level (std's `remove_dir_all`) runs out
/// (EMFILE). Here at most `MAX_OPEN_LEVELS` levels are open: a subtree
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

pub(crate) fn open_dir(at: Option<&OwnedFd>, path: &Path, extra: OFlag) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | extra;
    let fd = openat(at.map(|f| f.as_raw_fd()), path, flags, Mode::empty())?;
    // SAFETY: `openat` just returned this descriptor and nothing else owns it.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// The names in a directory (one extra descriptor, only while listing).
pub(crate) fn names(dir: &OwnedFd) -> nix::Result<Vec<std::ffi::OsString>> {
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

#[cfg(test)]
mod tests {
    use super::super::{remove_dir, tmp};
    use super::*;

    /// A tree far deeper than the levels held open, with
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
}

//! The size `sbx volumes` shows: a walk of a tree the sandbox wrote, by
//! descriptor. A walk by path stopped at ENAMETOOLONG, so 300 MiB two
//! thousand levels down showed as 1 MiB; recursion would overflow the
//! stack on a deep enough tree, and one descriptor per level runs out of
//! them (as std's `remove_dir_all` did, see `socket::remove_tree`).

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{fstat, fstatat, FileStat, SFlag};

use crate::host::socket::{dir_names, open_dir_at};

/// Directory levels the walk holds open at once; a level above them is
/// opened again through `..` of the one below when the walk climbs back.
const OPEN_LEVELS: usize = 16;

/// One directory on the walk's path: its descriptor while it is among the
/// deepest [`OPEN_LEVELS`], who it is (to check a reopening), and the names
/// in it not walked yet.
struct Level {
    fd: Option<OwnedFd>,
    id: (u64, u64),
    todo: Vec<OsString>,
}

fn id(st: &FileStat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
}

/// Total size of the regular files under `dir`, never following a link,
/// however deep: every name is looked at relative to its directory's
/// descriptor (fstatat, openat with O_NOFOLLOW), the path is an explicit
/// stack rather than recursion, and at most [`OPEN_LEVELS`] of its
/// directories are open. A tree moved about under the walk (the sandbox
/// may be running) ends the walk where a level cannot be found again: the
/// number is what was counted, never anything outside the tree.
pub fn du(dir: &Path) -> u64 {
    let top = match open_dir_at(None, dir, OFlag::O_NOFOLLOW) {
        Ok(fd) => fd,
        Err(_) => {
            return std::fs::symlink_metadata(dir).ok().filter(|m| m.is_file()).map_or(0, |m| m.len());
        }
    };
    let Ok(st) = fstat(top.as_raw_fd()) else { return 0 };
    let Ok(todo) = dir_names(&top) else { return 0 };
    let mut total = 0u64;
    let mut path = vec![Level { fd: Some(top), id: id(&st), todo }];
    while let Some(last) = path.last_mut() {
        let Some(name) = last.todo.pop() else {
            let done = path.pop().and_then(|l| l.fd);
            match (path.last_mut(), done) {
                (Some(up), Some(below)) if up.fd.is_none() => match reopen_parent(&below, up.id) {
                    Some(fd) => up.fd = Some(fd),
                    None => break,
                },
                _ => {}
            }
            continue;
        };
        let Some(fd) = last.fd.as_ref() else { break };
        let Ok(st) = fstatat(Some(fd.as_raw_fd()), name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
            continue;
        };
        match kind(&st) {
            SFlag::S_IFREG => total = total.saturating_add(st.st_size.max(0) as u64),
            SFlag::S_IFDIR => {
                let Ok(sub) = open_dir_at(Some(fd), Path::new(&name), OFlag::O_NOFOLLOW) else { continue };
                let (Ok(st), Ok(todo)) = (fstat(sub.as_raw_fd()), dir_names(&sub)) else { continue };
                path.push(Level { fd: Some(sub), id: id(&st), todo });
                if path.len() > OPEN_LEVELS {
                    let n = path.len() - OPEN_LEVELS - 1;
                    path[n].fd = None;
                }
            }
            _ => {}
        }
    }
    total
}

/// `..` of `below`, if it is still the directory `want` (the tree may have
/// been moved about since it was left).
fn reopen_parent(below: &OwnedFd, want: (u64, u64)) -> Option<OwnedFd> {
    let fd = open_dir_at(Some(below), Path::new(".."), OFlag::O_NOFOLLOW).ok()?;
    let st = fstat(fd.as_fd().as_raw_fd()).ok()?;
    (id(&st) == want).then_some(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::stat::{mkdirat, Mode};

    /// A real tree under the temp dir far deeper than PATH_MAX allows a
    /// path to reach, with files all the way down and links out of it that
    /// must not be followed or counted.
    #[test]
    fn counts_a_tree_deeper_than_a_path_reaches_without_following_links() {
        let root = std::env::temp_dir().join(format!("sbx-du-{}-{:08x}", std::process::id(), rand::random::<u32>()));
        let outside = root.with_extension("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("big"), vec![0u8; 1 << 20]).unwrap();
        let mut fd = open_dir_at(None, &root, OFlag::empty()).unwrap();
        let (levels, each) = (2000usize, 1000usize);
        for i in 0..levels {
            let at = |n: &str| format!("/proc/self/fd/{}/{n}", fd.as_raw_fd());
            std::fs::write(at("f"), vec![1u8; each]).unwrap();
            if i % 100 == 0 {
                std::os::unix::fs::symlink(&outside, at("out")).unwrap();
                std::os::unix::fs::symlink(outside.join("big"), at("big")).unwrap();
            }
            mkdirat(Some(fd.as_raw_fd()), "d", Mode::from_bits_truncate(0o700)).unwrap();
            fd = open_dir_at(Some(&fd), Path::new("d"), OFlag::empty()).unwrap();
        }
        // Siblings after the deep branch: found again after climbing back up.
        std::fs::write(root.join("top"), vec![2u8; 7]).unwrap();
        drop(fd);
        assert_eq!(du(&root), (levels * each + 7) as u64);
        // A link in the directory's place is not followed either.
        let link = root.with_extension("link");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        assert_eq!(du(&link), 0);
        std::fs::remove_file(&link).unwrap();
        crate::host::socket::remove_tree(&std::env::temp_dir(), root.file_name().unwrap().to_str().unwrap()).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }
}

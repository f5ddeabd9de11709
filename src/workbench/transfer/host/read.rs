//! [`send_host`]: a host tree read into a record stream through directory
//! descriptors, by the walk the helper shares ([`send_tree`]).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, SeekFrom};
use rustix::io::Errno;

use super::{at, invalid, open_dir};
use crate::workbench::transfer::wire::{root_name, send_tree, Encoder, Node, SparseFile, Tree};

/// Read a host path into a record stream, never following a symlink below
/// it (a link is sent as a link; a tree in a `--rw` mount can change while
/// it is read, so everything is opened with O_NOFOLLOW relative to its
/// parent's descriptor). Devices, fifos and sockets are skipped, and said
/// ([`Encoder::skipped`]).
pub fn send_host<W: Write>(src: &Path, enc: &mut Encoder<W>) -> io::Result<()> {
    let name = src
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| invalid(format!("{} has no usable name", src.display())))?;
    debug_assert_eq!(root_name(&src.to_string_lossy()).as_deref(), Some(name));
    let parent = src.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let pfd = open_dir(parent, false)?;
    send_tree(&mut Descriptors, &pfd, name.as_bytes(), name.as_bytes(), enc)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", src.display())))
}

/// The host's [`Tree`]: each entry opened relative to its parent's descriptor.
struct Descriptors;

impl Tree for Descriptors {
    type Dir = OwnedFd;
    type File = File;

    fn node(&mut self, dir: &OwnedFd, name: &[u8], rel: &[u8]) -> io::Result<Node<OwnedFd, File>> {
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
        let mode = st.st_mode & 0o7777;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(dir, name, Vec::new())?.into_bytes();
                Ok(Node::Symlink { mode, mtime: st.st_mtime as i64, target })
            }
            FileType::Directory | FileType::RegularFile => {
                let fd = rustix::fs::openat(
                    dir,
                    name,
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| at(&String::from_utf8_lossy(rel), e))?;
                // What was opened, not what the name held a moment before.
                let st = rustix::fs::fstat(&fd)?;
                let (mode, mtime) = (st.st_mode & 0o7777, st.st_mtime as i64);
                Ok(match FileType::from_raw_mode(st.st_mode) {
                    FileType::Directory => Node::Dir { mode, mtime, dir: fd },
                    FileType::RegularFile => Node::File { mode, mtime, size: st.st_size as u64, file: File::from(fd) },
                    _ => Node::Skip,
                })
            }
            _ => Ok(Node::Skip),
        }
    }

    fn names(&mut self, dir: &OwnedFd) -> io::Result<Vec<Vec<u8>>> {
        let mut names = Vec::new();
        for e in rustix::fs::Dir::read_from(dir)? {
            let e = e?;
            let n = e.file_name().to_bytes();
            if n == b"." || n == b".." {
                continue;
            }
            names.push(n.to_vec());
        }
        Ok(names)
    }
}

impl SparseFile for File {
    fn next_data(&mut self, pos: u64) -> io::Result<Option<u64>> {
        match rustix::fs::seek(&*self, SeekFrom::Data(pos)) {
            Ok(s) => Ok(Some(s)),
            Err(Errno::NXIO) => Ok(None),
            // No hole support on this filesystem: all of it is data.
            Err(Errno::INVAL) | Err(Errno::OPNOTSUPP) => Ok(Some(pos)),
            Err(e) => Err(e.into()),
        }
    }

    fn next_hole(&mut self, pos: u64, size: u64) -> u64 {
        rustix::fs::seek(&*self, SeekFrom::Hole(pos)).unwrap_or(size)
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, at)
    }
}

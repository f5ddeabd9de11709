//! [`HostWriter`]: a record stream written below a host destination, every
//! entry created relative to its parent's descriptor (see the module above).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::{at, invalid, open_dir};
use crate::workbench::transfer::wire::{self, fill, Decoder, Kind};

/// How directories below the destination are opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolve {
    /// openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS.
    Openat2,
    /// openat per component with O_NOFOLLOW|O_DIRECTORY (kernels before 5.6).
    Walk,
}

type Hook<'h> = Box<dyn FnMut(&str) + 'h>;

/// Writes a record stream under a host destination, as `cp` does: into
/// `dst` when it is an existing directory, otherwise as `dst` itself.
pub struct HostWriter<'h> {
    base: OwnedFd,
    shown: PathBuf,
    /// The name the stream's root gets under `base`.
    top: String,
    resolve: Resolve,
    parent: Option<(Vec<u8>, OwnedFd)>,
    /// Directories the stream is still in whose final mode denies their
    /// owner, outermost first: each gets its mode when the stream leaves it,
    /// so what is held is bounded by the path depth, not by the number of
    /// such directories (a million 0500 directories with
    /// 4 KiB paths held ~4 GiB when all were kept to the end).
    fix_modes: Vec<(Vec<u8>, u32)>,
    created: u64,
    /// Test hook: runs after an entry's parent is resolved and before the
    /// entry is created, the window finding 4's racer used.
    pub(crate) between: Option<Hook<'h>>,
}

impl<'h> HostWriter<'h> {
    /// `root` is the name the stream's entries start with.
    pub fn new(dst: &Path, root: &str) -> io::Result<Self> {
        let (base, shown, top) = match std::fs::symlink_metadata(dst) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(invalid(format!("{} is a symlink; name the directory it points to", dst.display())))
            }
            // O_NOFOLLOW: it cannot have become a link since.
            Ok(m) if m.is_dir() => (open_dir(dst, true)?, dst.to_path_buf(), root.to_string()),
            Ok(_) => Self::as_new_name(dst)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Self::as_new_name(dst)?,
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dst.display()))),
        };
        Ok(HostWriter {
            base,
            shown,
            top,
            resolve: Resolve::Openat2,
            parent: None,
            fix_modes: Vec::new(),
            created: 0,
            between: None,
        })
    }

    fn as_new_name(dst: &Path) -> io::Result<(OwnedFd, PathBuf, String)> {
        let name = dst
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| invalid(format!("{} has no usable file name", dst.display())))?;
        let parent = dst.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        // The operator's own path up to the parent; below it, nothing is followed.
        Ok((open_dir(parent, false)?, parent.to_path_buf(), name.to_string()))
    }

    /// Use the component-by-component walk (for tests of the fallback).
    pub fn with_resolve(mut self, r: Resolve) -> Self {
        self.resolve = r;
        self
    }

    /// Where the copy lands, for messages.
    pub fn target(&self) -> PathBuf {
        self.shown.join(&self.top)
    }

    /// Write every entry of `dec`. On failure the error says what was left.
    pub fn write_from<R: Read>(&mut self, dec: &mut Decoder<R>) -> io::Result<()> {
        let r = self.write_all(dec);
        match r {
            Err(e) if self.created > 0 => {
                let msg = format!(
                    "{e}; stopped after {} entries, so the copy at {} is incomplete (remove it)",
                    self.created,
                    self.target().display()
                );
                // A refusal stays one, with the same text.
                Err(match crate::workbench::transfer::refusal(&e) {
                    Some(_) => wire::refused(e.kind(), msg),
                    None => io::Error::new(e.kind(), msg),
                })
            }
            r => r,
        }
    }

    fn write_all<R: Read>(&mut self, dec: &mut Decoder<R>) -> io::Result<()> {
        while let Some(rec) = dec.next_record()? {
            // Decoder checked: the path is the root or below it. Names are
            // bytes (one need not be UTF-8); messages show them lossily.
            let rest = rec.path.iter().position(|&b| b == b'/').map(|i| &rec.path[i..]);
            let rel = [self.top.as_bytes(), rest.unwrap_or_default()].concat();
            let shown = String::from_utf8_lossy(&rel).into_owned();
            while let Some((open, _)) = self.fix_modes.last() {
                if rel.starts_with(open) && rel.get(open.len()) == Some(&b'/') {
                    break;
                }
                self.set_final_mode()?;
            }
            let (parent, name) = match rel.iter().rposition(|&b| b == b'/') {
                Some(i) => (&rel[..i], &rel[i + 1..]),
                None => (&b""[..], &rel[..]),
            };
            let pfd = self.parent_fd(parent)?;
            if let Some(h) = self.between.as_mut() {
                h(&shown);
            }
            let rel = shown;
            // The same mask as the tars sbx writes: no setuid/setgid from a
            // sandbox onto the host, no group or other write.
            let mode = crate::workbench::transfer::host_mode(rec.mode);
            match rec.kind {
                Kind::Dir => {
                    match rustix::fs::mkdirat(&pfd, name, Mode::from_raw_mode(0o700)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(at(&rel, e)),
                    }
                    let d = rustix::fs::openat(
                        &pfd,
                        name,
                        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(|e| refused(&rel, e))?;
                    // Keep it fillable until the stream leaves it.
                    rustix::fs::fchmod(&d, Mode::from_raw_mode(mode | 0o700)).map_err(|e| at(&rel, e))?;
                    if mode & 0o700 != 0o700 {
                        self.fix_modes.push(([parent, b"/", name].concat(), mode));
                    }
                }
                Kind::Symlink { target } => {
                    replace(&pfd, name, &rel, || rustix::fs::symlinkat(target.as_slice(), &pfd, name))?;
                    if rec.mtime >= 0 {
                        let t = rustix::fs::Timestamps {
                            last_access: rustix::fs::Timespec { tv_sec: 0, tv_nsec: rustix::fs::UTIME_OMIT },
                            last_modification: rustix::fs::Timespec { tv_sec: rec.mtime, tv_nsec: 0 },
                        };
                        // The link's own time, never its target's; best effort, as tar.
                        let _ = rustix::fs::utimensat(&pfd, name, &t, AtFlags::SYMLINK_NOFOLLOW);
                    }
                }
                Kind::File { size } => {
                    let fd = replace(&pfd, name, &rel, || {
                        rustix::fs::openat(
                            &pfd,
                            name,
                            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                            Mode::from_raw_mode(0o600),
                        )
                    })?;
                    let f = File::from(fd);
                    // The file's time as sent (on its descriptor), as `docker cp` keeps it.
                    let when = u64::try_from(rec.mtime)
                        .ok()
                        .map(|t| std::time::UNIX_EPOCH + std::time::Duration::from_secs(t));
                    if let Err(e) = fill(&f, size, dec)
                        .and_then(|()| Ok(rustix::fs::fchmod(&f, Mode::from_raw_mode(mode))?))
                        .and_then(|()| when.map_or(Ok(()), |t| f.set_modified(t)))
                    {
                        // Created by us with O_EXCL: an incomplete file goes.
                        let _ = rustix::fs::unlinkat(&pfd, name, AtFlags::empty());
                        return Err(e);
                    }
                }
            }
            self.created += 1;
        }
        while !self.fix_modes.is_empty() {
            self.set_final_mode()?;
        }
        Ok(())
    }

    /// The innermost pending directory gets its final mode.
    fn set_final_mode(&mut self) -> io::Result<()> {
        let Some((rel, mode)) = self.fix_modes.pop() else { return Ok(()) };
        let d = self.open_beneath(&rel)?;
        rustix::fs::fchmod(&d, Mode::from_raw_mode(mode)).map_err(|e| at(&String::from_utf8_lossy(&rel), e))
    }

    /// The parent directory's descriptor; the last one is kept (a stream
    /// lists a directory's entries together).
    fn parent_fd(&mut self, parent: &[u8]) -> io::Result<OwnedFd> {
        if let Some((p, fd)) = &self.parent {
            if p == parent {
                return fd.try_clone();
            }
        }
        let fd = self.open_beneath(parent)?;
        self.parent = Some((parent.to_vec(), fd.try_clone()?));
        Ok(fd)
    }

    /// A directory below the destination, never through a symlink.
    fn open_beneath(&mut self, rel: &[u8]) -> io::Result<OwnedFd> {
        if rel.is_empty() {
            return self.base.try_clone();
        }
        let refused = |e| refused(&String::from_utf8_lossy(rel), e);
        let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
        if self.resolve == Resolve::Openat2 {
            let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
            let mut tries = 0;
            loop {
                match rustix::fs::openat2(&self.base, rel, flags, Mode::empty(), how) {
                    Err(Errno::NOSYS) => {
                        self.resolve = Resolve::Walk;
                        break;
                    }
                    // A rename elsewhere during the lookup: the kernel asks to retry.
                    Err(Errno::AGAIN) if tries < 16 => tries += 1,
                    r => return r.map_err(refused),
                }
            }
        }
        let mut cur = self.base.try_clone()?;
        for c in rel.split(|&b| b == b'/') {
            cur = rustix::fs::openat(&cur, c, flags, Mode::empty()).map_err(refused)?;
        }
        Ok(cur)
    }
}

/// A lookup that met a symlink (or a non-directory) below the destination.
fn refused(rel: &str, e: Errno) -> io::Error {
    match e {
        Errno::LOOP | Errno::NOTDIR | Errno::XDEV => {
            invalid(format!("{rel}: a symlink or not a directory on the way; refusing to write through it"))
        }
        e => at(rel, e),
    }
}

/// Create with `make`; if the name exists and is not a directory, unlink it
/// (never open it) and create again.
fn replace<T>(pfd: &OwnedFd, name: &[u8], rel: &str, make: impl Fn() -> rustix::io::Result<T>) -> io::Result<T> {
    match make() {
        Err(Errno::EXIST) => {
            let st = rustix::fs::statat(pfd, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| at(rel, e))?;
            if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
                return Err(invalid(format!("{rel}: a directory is in the way of a file or link")));
            }
            rustix::fs::unlinkat(pfd, name, AtFlags::empty()).map_err(|e| at(rel, e))?;
            make().map_err(|e| at(rel, e))
        }
        r => r.map_err(|e| at(rel, e)),
    }
}

//! The workspace as a tar stream, for `backup` and `restore`.
//!
//! `backup` turns the helper's record stream into tar as it arrives (holes
//! become zeros: plain tar has no portable sparse form). `restore` reads a
//! tar that must be checked whole before the sandbox changes (an empty,
//! truncated or non-tar stdin once emptied the workspace), so the
//! archive is spooled to an unnamed temporary file first, checked end to
//! end, then sent.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use super::wire::{shown, Seen};
use super::{Decoder, Encoder, Kind};

/// Why an archive was refused.
#[derive(Debug)]
pub enum Problem {
    /// Not a whole tar archive: empty, cut short, or something else.
    NotTar(String),
    /// A tar, but with an entry sbx will not restore (escapes, links, devices).
    Refused(String),
    Io(io::Error),
}

impl From<io::Error> for Problem {
    fn from(e: io::Error) -> Self {
        Problem::Io(e)
    }
}

/// A file's bytes as tar needs them: holes as zeros, exactly `size` bytes.
struct Logical<'d, R> {
    dec: &'d mut Decoder<R>,
    size: u64,
    pos: u64,
    /// Start of the current segment, if one is open.
    seg: Option<u64>,
    done: bool,
}

impl<R: Read> Read for Logical<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() || self.pos >= self.size {
            return Ok(0);
        }
        if self.seg.is_none() && !self.done {
            match self.dec.next_segment()? {
                Some((off, _)) => self.seg = Some(off),
                None => self.done = true,
            }
        }
        let hole_end = match self.seg {
            Some(off) if off <= self.pos => {
                let n = self.dec.read(buf)?;
                if n == 0 {
                    self.seg = None;
                    return self.read(buf);
                }
                self.pos += n as u64;
                return Ok(n);
            }
            Some(off) => off,
            None => self.size,
        };
        let n = buf.len().min((hole_end - self.pos).min(usize::MAX as u64) as usize);
        buf[..n].fill(0);
        self.pos += n as u64;
        Ok(n)
    }
}

/// A file record's bytes as one stream: holes as zeros, exactly `size`
/// bytes (`sbx serve`'s file download).
pub fn file_bytes<R: Read>(dec: &mut Decoder<R>, size: u64) -> impl Read + '_ {
    Logical { dec, size, pos: 0, seg: None, done: false }
}

/// A record stream as tar whose root is the stream's root itself (`.`).
pub fn to_tar<R: Read>(dec: &mut Decoder<R>, out: impl Write) -> io::Result<()> {
    write_tar(dec, out, false)
}

/// A record stream as tar whose entries keep the root's name (`report.txt`,
/// `dir/a`), as `docker cp ID:/path -` writes it.
pub fn to_tar_rooted<R: Read>(dec: &mut Decoder<R>, out: impl Write) -> io::Result<()> {
    write_tar(dec, out, true)
}

fn write_tar<R: Read>(dec: &mut Decoder<R>, out: impl Write, rooted: bool) -> io::Result<()> {
    let mut b = tar::Builder::new(out);
    b.follow_symlinks(false);
    while let Some(rec) = dec.next_record()? {
        let name: &[u8] = match rec.path.iter().position(|&b| b == b'/') {
            _ if rooted => &rec.path,
            Some(i) => &rec.path[i + 1..],
            None => b".",
        };
        // Names are bytes (one that is not UTF-8 is kept, as tar keeps it).
        let name = Path::new(OsStr::from_bytes(name));
        let mut h = tar::Header::new_gnu();
        h.set_mode(super::host_mode(rec.mode));
        // The times the files have (every entry had 0).
        h.set_mtime(u64::try_from(rec.mtime).unwrap_or(0));
        // Owner 0 on purpose (so the mode is the host's, `host_mode`, never
        // setuid): uids inside a sandbox name no one on the host, and a
        // root `tar -x` of a backup must not hand its files to whichever
        // host user has the sandbox's uid; restore ignores owners (the
        // sandbox user owns what it writes).
        h.set_uid(0);
        h.set_gid(0);
        match rec.kind {
            Kind::Dir => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                b.append_data(&mut h, name, io::empty())?;
            }
            Kind::File { size } => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(size);
                b.append_data(&mut h, name, Logical { dec: &mut *dec, size, pos: 0, seg: None, done: false })?;
            }
            Kind::Symlink { target } => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                b.append_link(&mut h, name, OsStr::from_bytes(&target))?;
            }
        }
    }
    b.into_inner()?.flush()
}

/// Copy `input` into an unnamed temporary file, at most `max` bytes.
pub fn spool(mut input: impl Read, max: u64) -> Result<File, Problem> {
    let dir = std::env::temp_dir();
    let mut f = match rustix::fs::open(
        &dir,
        rustix::fs::OFlags::TMPFILE | rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::from_raw_mode(0o600),
    ) {
        Ok(fd) => File::from(fd),
        // No O_TMPFILE on this filesystem: a named one, unlinked at once.
        Err(_) => {
            let p = dir.join(format!(".sbx-restore-{}-{:x}", std::process::id(), rand::random::<u64>()));
            let f =
                std::fs::OpenOptions::new().read(true).write(true).create_new(true).custom_flags_nofollow().open(&p)?;
            std::fs::remove_file(&p)?;
            f
        }
    };
    let n = io::copy(&mut (&mut input).take(max + 1), &mut f)?;
    if n > max {
        return Err(Problem::Refused(format!(
            "the archive is larger than the cap of {}; raise it with --max-bytes",
            super::human(max)
        )));
    }
    if n == 0 {
        return Err(Problem::NotTar("stdin is not a tar archive (0 bytes)".into()));
    }
    f.rewind()?;
    Ok(f)
}

trait NoFollow {
    fn custom_flags_nofollow(&mut self) -> &mut Self;
}

impl NoFollow for std::fs::OpenOptions {
    fn custom_flags_nofollow(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::custom_flags(self, nix::libc::O_NOFOLLOW)
    }
}

fn not_tar(e: io::Error) -> Problem {
    Problem::NotTar(format!("stdin is not a whole tar archive: {e}"))
}

/// One archive entry, checked: its path below the root (bytes: a name need
/// not be UTF-8), or `None` for the root itself.
fn entry_path(e: &tar::Entry<impl Read>) -> Result<Option<Vec<u8>>, Problem> {
    let raw = e.path().map_err(not_tar)?.into_owned();
    let rel: PathBuf = raw.components().filter(|c| !matches!(c, Component::CurDir)).collect();
    if rel.as_os_str().is_empty() {
        return Ok(None);
    }
    if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(Problem::Refused(format!(
            "entry {} would escape the workspace",
            shown(raw.as_os_str().as_bytes())
        )));
    }
    Ok(Some(rel.into_os_string().into_vec()))
}

/// Walk the whole archive: every entry acceptable, every byte present, and
/// the end-of-archive blocks there (a stream cut at a block boundary is
/// otherwise indistinguishable from a short archive). Returns the entry count.
pub fn check(f: &mut File) -> Result<u64, Problem> {
    f.rewind()?;
    let len = f.metadata()?.len();
    let mut count = 0;
    let mut end = 0u64;
    // What the helper's decoder would refuse half-way, after `restore`
    // cleared the workspace, is refused here before anything changes.
    let mut seen = Seen::default();
    {
        let mut a = tar::Archive::new(&mut *f);
        for e in a.entries().map_err(not_tar)? {
            let mut e = e.map_err(not_tar)?;
            let kind = e.header().entry_type();
            let path = entry_path(&e)?;
            let name = || shown(path.as_deref().unwrap_or_default());
            if !(kind.is_dir() || kind.is_file() || kind.is_symlink()) {
                return Err(Problem::Refused(format!(
                    "entry {} is a {kind:?}, not a file, directory or symlink",
                    name()
                )));
            }
            if kind.is_symlink() && e.link_name().map_err(not_tar)?.is_none() {
                return Err(Problem::Refused(format!("symlink {} has no target", name())));
            }
            if let Some(p) = &path {
                seen.add(p, kind.is_dir()).map_err(|e| Problem::Refused(e.to_string()))?;
            }
            let size = e.size();
            let n = io::copy(&mut e, &mut io::sink()).map_err(not_tar)?;
            if n != size {
                return Err(Problem::NotTar(format!(
                    "stdin is a truncated tar archive: {} has {n} of its {size} bytes",
                    name()
                )));
            }
            end = e.raw_file_position() + size.div_ceil(512) * 512;
            count += 1;
        }
    }
    if end > len {
        return Err(Problem::NotTar("stdin is a truncated tar archive".into()));
    }
    // The two zero blocks that end every tar archive.
    let mut tail = vec![0u8; 1024];
    f.seek(io::SeekFrom::Start(end))?;
    if f.read_exact(&mut tail).is_err() || tail.iter().any(|&b| b != 0) {
        return Err(Problem::NotTar(
            "stdin is a truncated tar archive (no end-of-archive blocks after the last entry)".into(),
        ));
    }
    Ok(count)
}

/// A checked archive as a record stream under the root name `root`.
pub fn send_tar<W: Write>(f: &mut File, root: &str, enc: &mut Encoder<W>) -> io::Result<()> {
    let bad = |e: Problem| match e {
        Problem::Io(e) => e,
        Problem::NotTar(m) | Problem::Refused(m) => super::wire::refused(io::ErrorKind::InvalidData, m),
    };
    f.rewind()?;
    let mut a = tar::Archive::new(f);
    let mut root_sent = false;
    for e in a.entries()? {
        let mut e = e?;
        let mode = e.header().mode().unwrap_or(0o644) & 0o7777;
        let mtime = e.header().mtime().ok().and_then(|t| i64::try_from(t).ok()).unwrap_or(0);
        let rel = entry_path(&e).map_err(bad)?;
        if !root_sent {
            // The root keeps 0755 whatever the archive says (the sandbox
            // user must be able to use it) and takes the archive's time
            // when the archive starts with it, as `backup` writes it.
            let t = if rel.is_none() { mtime } else { now() };
            enc.dir(root, 0o755, t)?;
            root_sent = true;
        }
        let Some(rel) = rel else { continue };
        let path = [root.as_bytes(), b"/", &rel].concat();
        let kind = e.header().entry_type();
        if kind.is_dir() {
            enc.dir(&path, mode, mtime)?;
        } else if kind.is_file() {
            let size = e.size();
            enc.file(&path, mode, mtime, size)?;
            enc.segment(0, size, &mut e)?;
            enc.end_file()?;
        } else if let Some(target) = e.link_name()? {
            enc.symlink(&path, mode, mtime, target.as_os_str().as_bytes())?;
        }
    }
    if !root_sent {
        enc.dir(root, 0o755, now())?;
    }
    Ok(())
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests;

//! The workspace as a tar stream, for `backup` and `restore`.
//!
//! `backup` turns the helper's record stream into tar as it arrives (holes
//! become zeros: plain tar has no portable sparse form). `restore` reads a
//! tar that must be checked whole before the sandbox changes (issue 10 item
//! 2: an empty, truncated or non-tar stdin emptied the workspace), so the
//! archive is spooled to an unnamed temporary file first, checked end to
//! end, then sent.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::{Component, Path, PathBuf};

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
        let name = match rec.path.split_once('/') {
            _ if rooted => PathBuf::from(&rec.path),
            Some((_, rest)) => PathBuf::from(rest),
            None => PathBuf::from("."),
        };
        let mut h = tar::Header::new_gnu();
        h.set_mode(rec.mode);
        // The times the files have (issue 10 item 9: every entry had 0).
        h.set_mtime(u64::try_from(rec.mtime).unwrap_or(0));
        // Owner 0 on purpose: uids inside a sandbox name no one on the host,
        // and a root `tar -x` of a backup must not hand its files to
        // whichever host user has the sandbox's uid; restore ignores owners
        // (the sandbox user owns what it writes).
        h.set_uid(0);
        h.set_gid(0);
        match rec.kind {
            Kind::Dir => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                b.append_data(&mut h, &name, io::empty())?;
            }
            Kind::File { size } => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(size);
                b.append_data(&mut h, &name, Logical { dec: &mut *dec, size, pos: 0, seg: None, done: false })?;
            }
            Kind::Symlink { target } => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                let target = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&target);
                b.append_link(&mut h, &name, target)?;
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

/// One archive entry, checked: its path below the root, or `None` for the root itself.
fn entry_path(e: &tar::Entry<impl Read>) -> Result<Option<String>, Problem> {
    let raw = e.path().map_err(not_tar)?.into_owned();
    let rel: PathBuf = raw.components().filter(|c| !matches!(c, Component::CurDir)).collect();
    if rel.as_os_str().is_empty() {
        return Ok(None);
    }
    let s = rel.to_str().ok_or_else(|| Problem::Refused(format!("entry {:?} is not UTF-8", raw.display())))?;
    if !Path::new(s).components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(Problem::Refused(format!("entry {:?} would escape the workspace", raw.display())));
    }
    Ok(Some(s.to_string()))
}

/// Walk the whole archive: every entry acceptable, every byte present, and
/// the end-of-archive blocks there (a stream cut at a block boundary is
/// otherwise indistinguishable from a short archive). Returns the entry count.
pub fn check(f: &mut File) -> Result<u64, Problem> {
    f.rewind()?;
    let len = f.metadata()?.len();
    let mut count = 0;
    let mut end = 0u64;
    {
        let mut a = tar::Archive::new(&mut *f);
        for e in a.entries().map_err(not_tar)? {
            let mut e = e.map_err(not_tar)?;
            let kind = e.header().entry_type();
            let path = entry_path(&e)?;
            if !(kind.is_dir() || kind.is_file() || kind.is_symlink()) {
                return Err(Problem::Refused(format!(
                    "entry {:?} is a {kind:?}, not a file, directory or symlink",
                    path.unwrap_or_default()
                )));
            }
            if kind.is_symlink() && e.link_name().map_err(not_tar)?.is_none() {
                return Err(Problem::Refused(format!("symlink {:?} has no target", path.unwrap_or_default())));
            }
            let size = e.size();
            let n = io::copy(&mut e, &mut io::sink()).map_err(not_tar)?;
            if n != size {
                return Err(Problem::NotTar(format!(
                    "stdin is a truncated tar archive: {:?} has {n} of its {size} bytes",
                    path.unwrap_or_default()
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
        let path = format!("{root}/{rel}");
        let kind = e.header().entry_type();
        if kind.is_dir() {
            enc.dir(&path, mode, mtime)?;
        } else if kind.is_file() {
            let size = e.size();
            enc.file(&path, mode, mtime, size)?;
            enc.segment(0, size, &mut e)?;
            enc.end_file()?;
        } else if let Some(target) = e.link_name()? {
            enc.symlink(&path, mode, mtime, target.as_os_str().as_encoded_bytes())?;
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
mod tests {
    use super::*;
    use crate::workbench::transfer::wire::tests::raw;
    use crate::workbench::transfer::Limits;

    fn tar_of(stream: &[u8], root: &str) -> Vec<u8> {
        let mut dec = Decoder::new(stream, root, Limits::default()).unwrap();
        let mut out = Vec::new();
        to_tar(&mut dec, &mut out).unwrap();
        out
    }

    fn spooled(data: &[u8]) -> Result<File, Problem> {
        spool(data, 1 << 20)
    }

    #[test]
    fn tar_round_trip_and_escapes_refused() {
        let s = raw(&[
            (b'D', 0o755, "workspace", b""),
            (b'F', 0o640, "workspace/a.txt", b"hello"),
            (b'L', 0o777, "workspace/l", b"a.txt"),
        ]);
        let t = tar_of(&s, "workspace");
        let mut f = spooled(&t).unwrap();
        assert_eq!(check(&mut f).unwrap(), 3);
        let mut enc = Encoder::new(Vec::new()).unwrap();
        send_tar(&mut f, "workspace", &mut enc).unwrap();
        // Back to the same tar.
        assert_eq!(tar_of(&enc.end().unwrap(), "workspace"), t);

        for evil in ["../escape", "/abs"] {
            let mut b = tar::Builder::new(Vec::new());
            let mut h = tar::Header::new_gnu();
            h.set_size(1);
            h.set_mode(0o644);
            // Write the name raw: the builder itself refuses such paths.
            h.as_old_mut().name[..evil.len()].copy_from_slice(evil.as_bytes());
            h.set_cksum();
            b.append(&h, &b"x"[..]).unwrap();
            let data = b.into_inner().unwrap();
            match check(&mut spooled(&data).unwrap()) {
                Err(Problem::Refused(m)) => assert!(m.contains("escape"), "{evil}: {m}"),
                other => panic!("{evil}: {other:?}"),
            }
        }
    }

    /// Issue 10 item 2: `restore < /dev/null` emptied the workspace.
    #[test]
    fn empty_truncated_and_non_tar_input_is_refused() {
        match spool(&b""[..], 100) {
            Err(Problem::NotTar(m)) => assert_eq!(m, "stdin is not a tar archive (0 bytes)"),
            other => panic!("{other:?}"),
        }
        let s = raw(&[(b'D', 0o755, "w", b""), (b'F', 0o640, "w/a.txt", &[7u8; 3000])]);
        let t = tar_of(&s, "w");
        // Cut anywhere, including at block boundaries: refused.
        for cut in (1..t.len()).step_by(256) {
            match check(&mut spooled(&t[..cut]).unwrap()) {
                Err(Problem::NotTar(_)) => {}
                other => panic!("cut at {cut} of {}: {other:?}", t.len()),
            }
        }
        match check(&mut spooled(b"this is not a tar archive, just some text\n").unwrap()) {
            Err(Problem::NotTar(m)) => assert!(m.contains("not a whole tar"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(spool(&t[..], 100), Err(Problem::Refused(_))));
        // What backup writes for an empty workspace is a valid archive.
        let empty = tar_of(&raw(&[(b'D', 0o755, "w", b"")]), "w");
        assert_eq!(check(&mut spooled(&empty).unwrap()).unwrap(), 1);
    }

    /// Issue 10 item 9: every entry had mtime 0.
    #[test]
    fn tar_entries_keep_times_and_modes() {
        let mut enc = Encoder::new(Vec::new()).unwrap();
        enc.dir("w", 0o750, 1_600_000_000).unwrap();
        enc.file("w/a", 0o640, 1_700_000_000, 1).unwrap();
        enc.segment(0, 1, &mut &b"x"[..]).unwrap();
        enc.end_file().unwrap();
        enc.symlink("w/l", 0o777, 1_650_000_000, b"a").unwrap();
        let t = tar_of(&enc.end().unwrap(), "w");
        let mut a = tar::Archive::new(t.as_slice());
        let got: Vec<(String, u32, u64, u64)> = a
            .entries()
            .unwrap()
            .map(|e| {
                let h = e.unwrap().header().clone();
                (h.path().unwrap().display().to_string(), h.mode().unwrap(), h.mtime().unwrap(), h.uid().unwrap())
            })
            .collect();
        assert_eq!(
            got,
            [
                (".".to_string(), 0o750, 1_600_000_000, 0),
                ("a".into(), 0o640, 1_700_000_000, 0),
                ("l".into(), 0o777, 1_650_000_000, 0)
            ]
        );
    }

    #[test]
    fn holes_become_zeros_in_tar() {
        let mut enc = Encoder::new(Vec::new()).unwrap();
        enc.file("f", 0o644, 0, 10).unwrap();
        enc.segment(3, 2, &mut &b"ab"[..]).unwrap();
        enc.segment(8, 1, &mut &b"c"[..]).unwrap();
        enc.end_file().unwrap();
        let t = tar_of(&enc.end().unwrap(), "f");
        let mut a = tar::Archive::new(t.as_slice());
        let mut e = a.entries().unwrap().next().unwrap().unwrap();
        let mut got = Vec::new();
        e.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"\0\0\0ab\0\0\0c\0");
    }
}

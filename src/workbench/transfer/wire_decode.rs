//! The record stream's decoder (see `wire` for the format): every name
//! checked before anything is made, every size and count within its
//! limits, nothing held whole.

use std::io::{self, Read};

use super::*;

/// What a record decodes to.
enum Entry {
    Record(Record),
    /// An 'S' record's path.
    Skipped(Vec<u8>),
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
    /// What every entry must be or be below; `None` until the first entry names it.
    root: Option<Vec<u8>>,
    limits: Limits,
    entries: u64,
    bytes: u64,
    file: Option<FileState>,
    ended: bool,
    seen: Seen,
    skipped: Skipped,
}

/// How a stream began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Magic,
    /// Nothing at all.
    Empty,
    /// Fewer bytes than [`MAGIC`], each as it begins: a stream cut off
    /// before its first write was whole (its helper killed with its
    /// sandbox), not a stream of another kind.
    Cut,
    /// Something other than this version's [`MAGIC`]: its first bytes, as many as came.
    Other([u8; 8], u8),
}

/// Read the first 8 bytes (fewer if the stream ends) and say what they were.
pub fn read_magic(r: &mut impl Read) -> io::Result<Start> {
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
    Ok(match got {
        0 => Start::Empty,
        _ if &magic[..got] == MAGIC => Start::Magic,
        _ if magic[..got] == MAGIC[..got] => Start::Cut,
        _ => Start::Other(magic, got as u8),
    })
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

fn truncated(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        refused(io::ErrorKind::UnexpectedEof, "the stream ended in the middle of an entry")
    } else {
        e
    }
}

impl<R: Read> Decoder<R> {
    /// Read and check the helper's stream's magic; every entry must be
    /// `root` or below it.
    pub fn new(mut r: R, root: &str, limits: Limits) -> io::Result<Self> {
        match read_magic(&mut r)? {
            Start::Magic => Ok(Self::after_magic(r, Some(root), limits)),
            Start::Empty => Err(refused(io::ErrorKind::UnexpectedEof, "the helper sent nothing")),
            Start::Cut => Err(refused(io::ErrorKind::UnexpectedEof, "the helper's output ended in its first bytes")),
            // What came is shown (escaped, at most 8 bytes): a helper of
            // another version and a docker message on stdout read apart.
            Start::Other(b, n) => Err(invalid(format!(
                "the helper's output is not sbx's record stream version 4 (a helper of another sbx version, \
                 or a replaced one): it began \"{}\"",
                b[..n as usize].escape_ascii()
            ))),
        }
    }

    /// The entries after a magic the caller read with [`read_magic`] (each
    /// side words its own refusal). `root: None`: the first entry's first
    /// name is the root (the helper's `receive`, whose root the host chose).
    pub fn after_magic(r: R, root: Option<&str>, limits: Limits) -> Self {
        Decoder {
            r,
            root: root.map(|r| r.as_bytes().to_vec()),
            limits,
            entries: 0,
            bytes: 0,
            file: None,
            ended: false,
            seen: Seen::default(),
            skipped: Skipped::default(),
        }
    }

    /// The entries the stream said it left out (its 'S' records).
    pub fn skipped(&self) -> &Skipped {
        &self.skipped
    }

    /// Entries so far and the sum of their file sizes.
    pub fn counts(&self) -> (u64, u64) {
        (self.entries, self.bytes)
    }

    /// The next entry, `None` at the end record. Data of a file the caller
    /// did not read is skipped; so are the entries the other side did not
    /// send (counted in [`Decoder::skipped`]).
    pub fn next_record(&mut self) -> io::Result<Option<Record>> {
        loop {
            match self.next_entry()? {
                Some(Entry::Skipped(path)) => self.skipped.add(&path),
                Some(Entry::Record(r)) => return Ok(Some(r)),
                None => return Ok(None),
            }
        }
    }

    fn next_entry(&mut self) -> io::Result<Option<Entry>> {
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
        let root = self.root.get_or_insert_with(|| path.split(|&b| b == b'/').next().unwrap_or_default().to_vec());
        check_name(&path, root)?;
        self.seen.add(&path, head[0] == b'D')?;
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(invalid(format!(
                "more than {} entries in one stream; refusing the rest",
                self.limits.max_entries
            )));
        }
        let shown = || shown(&path);
        let kind = match head[0] {
            b'D' if len == 0 => Kind::Dir,
            b'D' => return Err(invalid(format!("directory {} claims {len} bytes of data", shown()))),
            b'S' if len == 0 => return Ok(Some(Entry::Skipped(path))),
            b'S' => return Err(invalid(format!("skipped entry {} claims {len} bytes of data", shown()))),
            b'L' => {
                if len > MAX_PATH as u64 {
                    return Err(invalid(format!("refusing symlink {}: its target is {len} bytes long", shown())));
                }
                // A link's target takes host disk too
                // (a block each), so it counts against the byte cap.
                self.charge(&path, len)?;
                let mut target = vec![0u8; len as usize];
                self.r.read_exact(&mut target).map_err(truncated)?;
                if target.is_empty() || target.contains(&0) {
                    return Err(invalid(format!("refusing symlink {}: empty target or a NUL byte in it", shown())));
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
        Ok(Some(Entry::Record(Record { kind, mode, mtime, path })))
    }

    /// Count `len` bytes of `path` against the cap.
    fn charge(&mut self, path: &[u8], len: u64) -> io::Result<()> {
        let total = self.bytes.saturating_add(len);
        if total > self.limits.max_bytes {
            return Err(refused(
                io::ErrorKind::Other,
                format!(
                    "{} is {} and would bring the copy to {}, over the cap of {}; raise it with --max-bytes",
                    shown(path),
                    human(len),
                    human(total),
                    human(self.limits.max_bytes)
                ),
            ));
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
            return Err(refused(io::ErrorKind::UnexpectedEof, "the stream ended in the middle of a file"));
        }
        f.left -= n as u64;
        Ok(n)
    }
}

//! The record stream sbx moves files in, both ways between host and
//! sandbox: its constants, the checked [`Decoder`], the [`Encoder`], the
//! directory walk that feeds it ([`send_tree`]) and the writer of a file's
//! segments ([`fill`]). Std only: the in-sandbox helper
//! (`helper/sbx_helper.rs`, built with plain rustc) includes this very file
//! with `#[path]`, so the two sides cannot drift.
//!
//! The decoder is `wire_decode.rs`, named by a `#[path]` relative to this
//! file, so the crate and the helper find it alike. Its tests are in
//! `wire/tests.rs`.
//!
//! Wire format, version 4 (both sides start with [`MAGIC`], so a helper of
//! another version fails clearly):
//!
//! ```text
//! stream  = MAGIC record* end
//! record  = kind:u8 mode:u32 mtime:i64 path_len:u16 path len:u64 body
//!   'D'   directory, len 0, no body
//!   'L'   symlink, len = target length (<= 4096), body = target
//!   'F'   file, len = its size; body = segment* (0:u64 0:u64)
//!         segment = offset:u64 seg_len:u64 bytes, seg_len > 0, ascending,
//!         within the size; what no segment covers is a hole (sparse files
//!         stay sparse)
//!   'S'   an entry not sent (a fifo, socket or device), len 0: the
//!         receiver counts it, so nothing is left out unsaid
//! end     = 'E' 0:u32 0:i64 0:u16 0:u64
//! ```
//! Integers are big-endian; `mtime` is seconds since the epoch. Version 3
//! added `mtime`, so `backup` tars keep the files' times.
//! Version 4 made paths bytes (a name need not be UTF-8; one that was not
//! used to be left out of a backup without a word) and added 'S'.
//! Paths are relative and '/'-separated; the first entry is the root (the
//! copied file or directory's own name) and every other one is below it.
//! No path comes twice and none is below one the stream sent as a file,
//! symlink or skipped entry ([`Seen`]): a forged `x -> /root/.ssh` and then
//! `x/authorized_keys` would otherwise make a tar that writes through the
//! link when extracted without a filter.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;

/// First bytes of every record stream: name and format version.
pub const MAGIC: &[u8; 8] = b"SBXREC\x00\x04";
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

impl Limits {
    /// No cap: the helper's side, which takes what the host chose to send
    /// (the host applied its own caps when it read the source).
    pub const UNLIMITED: Limits = Limits { max_bytes: u64::MAX, max_entries: u64::MAX };
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
    /// Relative, '/'-separated, starting with the root name; any bytes
    /// but NUL (see [`shown`] for messages).
    pub path: Vec<u8>,
}

/// A path from a stream as messages quote it: like `{:?}` of a string,
/// bytes that are not UTF-8 as `\xNN`.
pub fn shown(path: &[u8]) -> String {
    let mut s = String::from("\"");
    let mut rest = path;
    loop {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(v) => (v, &[][..]),
            Err(e) => {
                let (v, after) = rest.split_at(e.valid_up_to());
                let n = e.error_len().unwrap_or(after.len());
                (std::str::from_utf8(v).unwrap_or_default(), &after[..n])
            }
        };
        s.extend(valid.chars().flat_map(char::escape_debug));
        for b in bad {
            s.push_str(&format!("\\x{b:02x}"));
        }
        rest = &rest[valid.len() + bad.len()..];
        if rest.is_empty() {
            break;
        }
    }
    s.push('"');
    s
}

/// What a stream left out (fifos, sockets, devices): how many, and the
/// first few paths for the warning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    pub count: u64,
    pub first: Vec<Vec<u8>>,
}

impl Skipped {
    /// How many paths [`Skipped::first`] keeps.
    pub const SHOWN: usize = 5;

    fn add(&mut self, path: &[u8]) {
        self.count += 1;
        if self.first.len() < Self::SHOWN {
            self.first.push(path.to_vec());
        }
    }
}

/// Every path a stream named so far and whether it was a directory, as
/// 128-bit keyed hashes (16 bytes an entry whatever the path's length; the
/// keys are random, so a stream cannot aim for a collision). Refuses a path
/// named twice and one below a path named as anything but a directory:
/// a forged `x -> /root/.ssh` then `x/authorized_keys` put both into a
/// backup tar, which Python's `tarfile` without a filter extracts through
/// the link.
#[derive(Default)]
pub struct Seen {
    keys: [std::collections::hash_map::RandomState; 2],
    dirs: std::collections::HashMap<u128, bool>,
}

impl Seen {
    /// Note `path` (a directory or not), or refuse it.
    pub fn add(&mut self, path: &[u8], dir: bool) -> io::Result<()> {
        use std::hash::{BuildHasher, Hasher};
        let mut h = [self.keys[0].build_hasher(), self.keys[1].build_hasher()];
        let key = |h: &[std::collections::hash_map::DefaultHasher; 2]| {
            (u128::from(h[0].finish()) << 64) | u128::from(h[1].finish())
        };
        let mut at = 0;
        for (i, c) in path.split(|&b| b == b'/').enumerate() {
            if i > 0 {
                if self.dirs.get(&key(&h)) == Some(&false) {
                    return Err(invalid(format!(
                        "refusing entry {}: it is below {}, which the stream sent as a file, symlink or \
                         skipped entry",
                        shown(path),
                        shown(&path[..at - 1])
                    )));
                }
                h.iter_mut().for_each(|h| h.write_u8(b'/'));
            }
            h.iter_mut().for_each(|h| h.write(c));
            at += c.len() + 1;
        }
        if self.dirs.insert(key(&h), dir).is_some() {
            return Err(invalid(format!("refusing entry {}: the stream sent it twice", shown(path))));
        }
        Ok(())
    }
}

/// What this side refuses of what the other sent (the format, a name, a
/// limit): not an I/O failure. It travels inside an `io::Error` whose text
/// is exactly its own, since the std-only helper shares these readers; the
/// host tells it apart by downcasting (`workbench::helper::transfer_failure`).
#[derive(Debug)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// A [`Refused`] as the `io::Error` of `kind` the readers return.
pub fn refused(kind: io::ErrorKind, msg: impl Into<String>) -> io::Error {
    io::Error::new(kind, Refused(msg.into()))
}

fn invalid(msg: String) -> io::Error {
    refused(io::ErrorKind::InvalidData, msg)
}

/// A path from the other side that is exactly `root` or below it: no
/// absolute path, no `..`, `.` or empty component, no NUL, no overlong name.
pub fn check_name(path: &[u8], root: &[u8]) -> io::Result<()> {
    let refuse = |why: &str| Err(invalid(format!("refusing entry {}: {why}", shown(path))));
    if path.len() > MAX_PATH {
        return refuse("the path is too long");
    }
    if path.contains(&0) {
        return refuse("it contains a NUL byte");
    }
    for (i, c) in path.split(|&b| b == b'/').enumerate() {
        if c.is_empty() || c == b"." || c == b".." {
            return refuse("it would leave the destination (absolute, or an empty, '.' or '..' component)");
        }
        if c.len() > MAX_NAME {
            return refuse("a name in it is longer than 255 bytes");
        }
        if i == 0 && c != root {
            return refuse(&format!("it is not {} or inside it, which is all that was asked for", shown(root)));
        }
    }
    Ok(())
}

/// The name a copy of `path` (in the sandbox) carries: its last component.
pub fn root_name(path: &str) -> Option<String> {
    std::path::Path::new(path).file_name().and_then(|n| n.to_str()).map(str::to_string)
}

/// The decoder: its own file, so neither half of the format grows past
/// what a reader takes in at once (the helper includes both by path).
#[path = "wire_decode.rs"]
mod decode;
pub use decode::{read_magic, Decoder, Start};

/// Writes a record stream.
pub struct Encoder<W: Write> {
    w: W,
    skipped: Skipped,
}

impl<W: Write> Encoder<W> {
    pub fn new(mut w: W) -> io::Result<Self> {
        w.write_all(MAGIC)?;
        Ok(Encoder { w, skipped: Skipped::default() })
    }

    fn head(&mut self, kind: u8, mode: u32, mtime: i64, path: &[u8], len: u64) -> io::Result<()> {
        if path.len() > MAX_PATH {
            return Err(invalid(format!("{} is longer than {MAX_PATH} bytes", shown(path))));
        }
        self.w.write_all(&[kind])?;
        self.w.write_all(&mode.to_be_bytes())?;
        self.w.write_all(&mtime.to_be_bytes())?;
        self.w.write_all(&(path.len() as u16).to_be_bytes())?;
        self.w.write_all(path)?;
        self.w.write_all(&len.to_be_bytes())
    }

    pub fn dir(&mut self, path: impl AsRef<[u8]>, mode: u32, mtime: i64) -> io::Result<()> {
        self.head(b'D', mode, mtime, path.as_ref(), 0)
    }

    pub fn symlink(&mut self, path: impl AsRef<[u8]>, mode: u32, mtime: i64, target: &[u8]) -> io::Result<()> {
        self.head(b'L', mode, mtime, path.as_ref(), target.len() as u64)?;
        self.w.write_all(target)
    }

    /// A file header; then [`Encoder::segment`]s and [`Encoder::end_file`].
    pub fn file(&mut self, path: impl AsRef<[u8]>, mode: u32, mtime: i64, size: u64) -> io::Result<()> {
        self.head(b'F', mode, mtime, path.as_ref(), size)
    }

    /// An entry left out (a fifo, socket or device): said, not sent.
    pub fn skip(&mut self, path: impl AsRef<[u8]>) -> io::Result<()> {
        self.skipped.add(path.as_ref());
        self.head(b'S', 0, 0, path.as_ref(), 0)
    }

    /// What [`Encoder::skip`] left out so far.
    pub fn skipped(&self) -> &Skipped {
        &self.skipped
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
        self.head(b'E', 0, 0, b"", 0)?;
        self.w.flush()?;
        Ok(self.w)
    }
}

/// One entry of a tree being sent, as [`Tree::node`] found it.
pub enum Node<D, F> {
    Symlink {
        mode: u32,
        mtime: i64,
        target: Vec<u8>,
    },
    Dir {
        mode: u32,
        mtime: i64,
        dir: D,
    },
    File {
        mode: u32,
        mtime: i64,
        size: u64,
        file: F,
    },
    /// Devices, fifos, sockets: not sent, but said ([`Encoder::skip`]).
    Skip,
}

/// The filesystem under [`send_tree`]: the host opens entries relative to
/// a directory descriptor (rustix), the helper by path (std). Neither may
/// follow a symlink: a link is sent as a link.
pub trait Tree {
    type Dir;
    type File: SparseFile;
    /// The entry `name` in `dir`, not followed if it is a symlink; `rel`
    /// (its path in the stream) is for messages.
    fn node(&mut self, dir: &Self::Dir, name: &[u8], rel: &[u8]) -> io::Result<Node<Self::Dir, Self::File>>;
    /// Every name in `dir` (any bytes: a name need not be UTF-8), without
    /// `.` and `..`.
    fn names(&mut self, dir: &Self::Dir) -> io::Result<Vec<Vec<u8>>>;
}

/// A file read by data segments (SEEK_DATA/SEEK_HOLE).
pub trait SparseFile {
    /// Where the next data at or after `pos` starts; `None`: only holes
    /// follow. A filesystem without hole support answers `pos`.
    fn next_data(&mut self, pos: u64) -> io::Result<Option<u64>>;
    /// Where the hole after `pos` starts (at most `size`).
    fn next_hole(&mut self, pos: u64, size: u64) -> u64;
    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize>;
}

/// Send `name` in `dir` as `rel`, and everything below it in name order.
pub fn send_tree<T: Tree, W: Write>(
    t: &mut T,
    dir: &T::Dir,
    name: &[u8],
    rel: &[u8],
    enc: &mut Encoder<W>,
) -> io::Result<()> {
    match t.node(dir, name, rel)? {
        Node::Symlink { mode, mtime, target } => enc.symlink(rel, mode, mtime, &target),
        Node::Dir { mode, mtime, dir } => {
            enc.dir(rel, mode, mtime)?;
            let mut names = t.names(&dir)?;
            names.sort();
            for n in names {
                send_tree(t, &dir, &n, &[rel, b"/", &n].concat(), enc)?;
            }
            Ok(())
        }
        Node::File { mode, mtime, size, mut file } => {
            enc.file(rel, mode, mtime, size)?;
            let mut pos = 0;
            while pos < size {
                let Some(start) = file.next_data(pos)? else { break };
                if start >= size {
                    break;
                }
                let end = file.next_hole(start, size).min(size);
                enc.segment(start, end - start, &mut ReadAt { f: &file, pos: start })?;
                pos = end;
            }
            enc.end_file()
        }
        Node::Skip => enc.skip(rel),
    }
}

struct ReadAt<'a, F> {
    f: &'a F,
    pos: u64,
}

impl<F: SparseFile> Read for ReadAt<'_, F> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.f.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// The current file's data from `dec` into `f`: its size first (holes stay
/// holes), then each segment where it belongs.
pub fn fill<R: Read>(f: &File, size: u64, dec: &mut Decoder<R>) -> io::Result<()> {
    f.set_len(size)?;
    let mut buf = vec![0u8; 64 * 1024];
    while let Some((mut off, _)) = dec.next_segment()? {
        loop {
            let n = dec.read(&mut buf)?;
            if n == 0 {
                break;
            }
            f.write_all_at(&buf[..n], off)?;
            off += n as u64;
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;

//! The strict parser of what the helper's `list` and `watch` print
//! (helper/fsops.rs has the writer and the format). Everything here comes
//! from the sandbox: a line is read with a bound, every field must have
//! exactly its shape, names are hex-decoded and validated (no '/', no NUL,
//! not `.`/`..`, at most NAME_MAX bytes), and nothing is allocated from a
//! size the sandbox claims.

use std::io::BufRead;

/// Longest line accepted: a relative path of 64 levels of 255-byte names and
/// a 4095-byte link target, hex-encoded, fit with room to spare.
pub const MAX_LINE: usize = 192 * 1024;
/// NAME_MAX and PATH_MAX - 1 on Linux: no name or link target is longer.
pub const MAX_NAME: usize = 255;
pub const MAX_TARGET: usize = 4095;

/// What a line failed on; said in sbx's words by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

/// A path below the listed or watched directory: validated components.
/// Empty: that directory itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelPath(pub Vec<Vec<u8>>);

impl RelPath {
    /// `base` joined with the components, as bytes (`base` is sbx's own, validated).
    pub fn under(&self, base: &str) -> Vec<u8> {
        let mut p = base.as_bytes().to_vec();
        for c in &self.0 {
            if p.last() != Some(&b'/') {
                p.push(b'/');
            }
            p.extend_from_slice(c);
        }
        p
    }

    /// The components joined with '/' (relative).
    pub fn joined(&self) -> Vec<u8> {
        self.0.join(&b'/')
    }

    pub fn name(&self) -> &[u8] {
        self.0.last().map(Vec::as_slice).unwrap_or(b"")
    }
}

/// An entry's type, as `ls -l`'s first letter says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Socket,
    Fifo,
    Char,
    Block,
    Other,
}

impl Kind {
    fn parse(t: &[u8]) -> Result<Kind, Malformed> {
        Ok(match t {
            b"f" => Kind::File,
            b"d" => Kind::Dir,
            b"l" => Kind::Symlink,
            b"s" => Kind::Socket,
            b"p" => Kind::Fifo,
            b"c" => Kind::Char,
            b"b" => Kind::Block,
            b"?" => Kind::Other,
            _ => return Err(bad("an unknown entry type")),
        })
    }

    pub fn word(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Symlink => "symlink",
            Kind::Socket => "socket",
            Kind::Fifo => "fifo",
            Kind::Char => "char",
            Kind::Block => "block",
            Kind::Other => "other",
        }
    }

    pub fn letter(self) -> char {
        match self {
            Kind::File => '-',
            Kind::Dir => 'd',
            Kind::Symlink => 'l',
            Kind::Socket => 's',
            Kind::Fifo => 'p',
            Kind::Char => 'c',
            Kind::Block => 'b',
            Kind::Other => '?',
        }
    }
}

/// One listed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    /// Permission bits with setuid/setgid/sticky (at most 0o7777).
    pub mode: u32,
    pub size: u64,
    /// Seconds since the epoch.
    pub mtime: i64,
    pub path: RelPath,
    /// A symlink's target, exactly as stored (never followed).
    pub target: Option<Vec<u8>>,
}

/// A line of `list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListLine {
    Root(Kind),
    Entry(Entry),
    /// A directory (or entry) that could not be read, with its errno.
    Unreadable {
        path: RelPath,
        errno: i32,
    },
    Truncated,
    End {
        count: u64,
        cut: u64,
    },
}

/// What changed, as `watch` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Modified,
    Deleted,
    /// Permissions, owner or times changed (`watch -a` only).
    Attrib,
}

impl Change {
    pub fn word(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Modified => "modified",
            Change::Deleted => "deleted",
            Change::Attrib => "attrib",
        }
    }
}

/// A line of `watch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchLine {
    Ready,
    Changed {
        change: Change,
        dir: bool,
        path: RelPath,
    },
    Moved {
        from: RelPath,
        to: RelPath,
    },
    Overflow,
    /// The inotify watch limit: changes below this directory are not seen.
    Limit(RelPath),
    Unreadable {
        path: RelPath,
        errno: i32,
    },
    /// The watched directory itself was deleted, moved or unmounted.
    Gone,
}

fn bad(what: &str) -> Malformed {
    Malformed(what.to_string())
}

/// What [`read_line`] says of a last line without its newline: the helper
/// always ends its lines, so the stream was cut (the helper killed mid-write,
/// as when its sandbox is destroyed under a `watch`).
pub const CUT_OFF: &str = "a cut-off line";

/// Read one line of at most [`MAX_LINE`] bytes, without the newline.
/// Ok(None): end of stream. A longer line is an error (its rest is not
/// read: the caller stops); a last line without its newline is one too,
/// since the helper always ends its lines.
pub fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> Result<Option<()>, Malformed> {
    buf.clear();
    let n = std::io::Read::take(&mut *r, MAX_LINE as u64 + 1)
        .read_until(b'\n', buf)
        .map_err(|e| Malformed(format!("reading the helper's output failed: {e}")))?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(if buf.len() > MAX_LINE { bad("a line longer than 192 KiB") } else { bad(CUT_OFF) });
    }
    buf.pop();
    Ok(Some(()))
}

fn unhex(s: &[u8], max: usize) -> Result<Vec<u8>, Malformed> {
    if s.is_empty() || s.len() % 2 != 0 || s.len() / 2 > max {
        return Err(bad("a name of the wrong length"));
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(bad("a name that is not lowercase hex")),
    };
    s.chunks(2).map(|p| Ok(digit(p[0])? << 4 | digit(p[1])?)).collect()
}

/// Hex components joined by '/'; "" is the root. Each decoded name is a
/// single component: not empty, no '/', no NUL, not `.` or `..`.
pub fn rel_path(s: &[u8]) -> Result<RelPath, Malformed> {
    if s.is_empty() {
        return Ok(RelPath::default());
    }
    let mut parts = Vec::new();
    for c in s.split(|b| *b == b'/') {
        let name = unhex(c, MAX_NAME)?;
        if name.contains(&b'/') || name.contains(&0) || name == b"." || name == b".." {
            return Err(bad("a name that is not a single path component"));
        }
        parts.push(name);
    }
    Ok(RelPath(parts))
}

fn nonempty(s: &[u8]) -> Result<RelPath, Malformed> {
    let p = rel_path(s)?;
    if p.0.is_empty() {
        return Err(bad("an entry without a name"));
    }
    Ok(p)
}

fn digits(s: &[u8]) -> Result<&str, Malformed> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(u8::is_ascii_digit) {
        return Err(bad("a malformed number"));
    }
    Ok(std::str::from_utf8(s).unwrap_or("x"))
}

fn unsigned(s: &[u8]) -> Result<u64, Malformed> {
    digits(s)?.parse().map_err(|_| bad("a number out of range"))
}

fn signed(s: &[u8]) -> Result<i64, Malformed> {
    match s.strip_prefix(b"-") {
        Some(rest) => digits(rest)?.parse::<i64>().map(|n| -n).map_err(|_| bad("a number out of range")),
        None => digits(s)?.parse().map_err(|_| bad("a number out of range")),
    }
}

fn errno(s: &[u8]) -> Result<i32, Malformed> {
    let n = unsigned(s)?;
    if n == 0 || n > 4095 {
        return Err(bad("an errno out of range"));
    }
    Ok(n as i32)
}

/// Fields separated by exactly one space; an empty field only where the
/// format has the root's empty path, so `fields(.., n)` checks the count.
fn fields(line: &[u8], n: usize) -> Result<Vec<&[u8]>, Malformed> {
    let f: Vec<&[u8]> = line.splitn(n + 1, |b| *b == b' ').collect();
    if f.len() != n {
        return Err(bad("a line with the wrong number of fields"));
    }
    Ok(f)
}

pub fn parse_list(line: &[u8]) -> Result<ListLine, Malformed> {
    let verb = line.split(|b| *b == b' ').next().unwrap_or(b"");
    Ok(match verb {
        b"ROOT" => ListLine::Root(Kind::parse(fields(line, 2)?[1])?),
        b"E" => {
            let f = fields(line, 7)?;
            let kind = Kind::parse(f[1])?;
            let mode = std::str::from_utf8(f[2])
                .ok()
                .filter(|m| !m.is_empty() && m.len() <= 4 && m.bytes().all(|c| (b'0'..=b'7').contains(&c)))
                .and_then(|m| u32::from_str_radix(m, 8).ok())
                .ok_or_else(|| bad("a malformed mode"))?;
            let target = match (kind, f[6]) {
                (Kind::Symlink, b"-") => None, // unreadable: said as "?"
                (Kind::Symlink, t) => Some(unhex(t, MAX_TARGET)?),
                (_, b"-") => None,
                _ => return Err(bad("a link target on an entry that is not a symlink")),
            };
            if target.as_ref().is_some_and(|t| t.contains(&0)) {
                return Err(bad("a link target with a NUL byte"));
            }
            ListLine::Entry(Entry {
                kind,
                mode,
                size: unsigned(f[3])?,
                mtime: signed(f[4])?,
                path: nonempty(f[5])?,
                target,
            })
        }
        b"W" => {
            let f = fields(line, 3)?;
            ListLine::Unreadable { path: rel_path(f[1])?, errno: errno(f[2])? }
        }
        b"T" if line == b"T" => ListLine::Truncated,
        b"END" => {
            let f = fields(line, 3)?;
            ListLine::End { count: unsigned(f[1])?, cut: unsigned(f[2])? }
        }
        _ => return Err(bad("an unknown line")),
    })
}

pub fn parse_watch(line: &[u8]) -> Result<WatchLine, Malformed> {
    let verb = line.split(|b| *b == b' ').next().unwrap_or(b"");
    Ok(match verb {
        b"READY" if line == b"READY" => WatchLine::Ready,
        b"OVERFLOW" if line == b"OVERFLOW" => WatchLine::Overflow,
        b"GONE" if line == b"GONE" => WatchLine::Gone,
        b"EV" => {
            let f = fields(line, 4)?;
            let change = match f[1] {
                b"created" => Change::Created,
                b"modified" => Change::Modified,
                b"deleted" => Change::Deleted,
                b"attrib" => Change::Attrib,
                _ => return Err(bad("an unknown change")),
            };
            let dir = match f[2] {
                b"d" => true,
                b"f" => false,
                _ => return Err(bad("an unknown entry type")),
            };
            WatchLine::Changed { change, dir, path: nonempty(f[3])? }
        }
        b"MV" => {
            let f = fields(line, 3)?;
            WatchLine::Moved { from: nonempty(f[1])?, to: nonempty(f[2])? }
        }
        b"LIMIT" => WatchLine::Limit(rel_path(fields(line, 2)?[1])?),
        b"W" => {
            let f = fields(line, 3)?;
            WatchLine::Unreadable { path: rel_path(f[1])?, errno: errno(f[2])? }
        }
        _ => return Err(bad("an unknown line")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &[u8]) -> String {
        s.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn entries_decode_exactly() {
        let name = b"a\nE f 644 0 0 61 -\x1b[2J\xff";
        let line = format!("E l 777 4 -5 {}/{} {}", h(b"dir"), h(name), h(b"/etc\n"));
        let ListLine::Entry(e) = parse_list(line.as_bytes()).unwrap() else { panic!() };
        assert_eq!((e.kind, e.mode, e.size, e.mtime), (Kind::Symlink, 0o777, 4, -5));
        assert_eq!(e.path.0, vec![b"dir".to_vec(), name.to_vec()]);
        assert_eq!(e.target.as_deref(), Some(&b"/etc\n"[..]));
        assert_eq!(e.path.under("/tmp"), [&b"/tmp/dir/"[..], name].concat());
        assert_eq!(e.path.under("/"), [&b"/dir/"[..], name].concat());
        assert_eq!(parse_list(b"END 3 1").unwrap(), ListLine::End { count: 3, cut: 1 });
        assert_eq!(parse_list(b"ROOT d").unwrap(), ListLine::Root(Kind::Dir));
        assert_eq!(parse_list(b"T").unwrap(), ListLine::Truncated);
        assert_eq!(parse_list(b"W  13").unwrap(), ListLine::Unreadable { path: RelPath::default(), errno: 13 });
    }

    /// Hostile lines: forged separators, bad hex, names that are paths,
    /// numbers with signs or overflow, extra fields, huge names.
    #[test]
    fn hostile_list_lines_are_refused() {
        let slash = format!("E f 644 0 0 {} -", h(b"a/b"));
        let nul = format!("E f 644 0 0 {} -", h(b"a\0b"));
        let dotdot = format!("E f 644 0 0 {}/{} -", h(b"x"), h(b".."));
        let dot = format!("E f 644 0 0 {} -", h(b"."));
        let long = format!("E f 644 0 0 {} -", h(&[b'a'; 256]));
        let target_on_file = format!("E f 644 0 0 {} {}", h(b"a"), h(b"b"));
        let nul_target = format!("E l 777 0 0 {} {}", h(b"a"), h(b"\0"));
        let huge_target = format!("E l 777 0 0 {} {}", h(b"a"), h(&[b'a'; 4096]));
        for l in [
            slash.as_str(),
            &nul,
            &dotdot,
            &dot,
            &long,
            &target_on_file,
            &nul_target,
            &huge_target,
            "E f 644 0 0 6 -",
            "E f 644 0 0 6G -",
            "E f 644 0 0 6A -",
            "E f 644 0 0  -",
            "E f 644 0 0 61//62 -",
            "E f 644 0 0 61/ -",
            "E f 644 +1 0 61 -",
            "E f 644 99999999999999999999 0 61 -",
            "E f 644 0 0 61 - extra",
            "E f 644 0 0 61",
            "E f 644  0 0 61 -",
            "E f 10000 0 0 61 -",
            "E f 8 0 0 61 -",
            "E x 644 0 0 61 -",
            "END 1",
            "END -1 0",
            "T x",
            "ROOT",
            "W 61 0",
            "W 61 -1",
            "e f 644 0 0 61 -",
            "",
        ] {
            assert!(parse_list(l.as_bytes()).is_err(), "{l:?}");
        }
    }

    #[test]
    fn watch_lines_decode_and_hostile_ones_are_refused() {
        assert_eq!(parse_watch(b"READY").unwrap(), WatchLine::Ready);
        assert_eq!(parse_watch(b"OVERFLOW").unwrap(), WatchLine::Overflow);
        assert_eq!(
            parse_watch(format!("EV created d {}", h(b"n\n")).as_bytes()).unwrap(),
            WatchLine::Changed { change: Change::Created, dir: true, path: RelPath(vec![b"n\n".to_vec()]) }
        );
        assert_eq!(
            parse_watch(b"MV 61 62/63").unwrap(),
            WatchLine::Moved { from: RelPath(vec![b"a".to_vec()]), to: RelPath(vec![b"b".to_vec(), b"c".to_vec()]) }
        );
        assert_eq!(parse_watch(b"LIMIT ").unwrap(), WatchLine::Limit(RelPath::default()));
        assert_eq!(
            parse_watch(b"EV attrib f 61").unwrap(),
            WatchLine::Changed { change: Change::Attrib, dir: false, path: RelPath(vec![b"a".to_vec()]) }
        );
        for l in
            ["EV created d ", "EV made d 61", "EV created x 61", "MV 61", "MV 61 ", "READY ", "OVERFLOW 1", "GONE\r"]
        {
            assert!(parse_watch(l.as_bytes()).is_err(), "{l:?}");
        }
    }

    #[test]
    fn lines_are_bounded() {
        let mut buf = Vec::new();
        let mut r = std::io::Cursor::new(b"END 0 0\nlast".to_vec());
        assert_eq!(read_line(&mut r, &mut buf), Ok(Some(())));
        assert_eq!(buf, b"END 0 0");
        assert!(read_line(&mut r, &mut buf).is_err(), "a line without its newline is cut off");
        let mut r = std::io::Cursor::new(vec![b'a'; MAX_LINE + 10]);
        assert_eq!(read_line(&mut r, &mut buf), Err(Malformed("a line longer than 192 KiB".into())));
        assert!(buf.len() <= MAX_LINE + 1);
        let mut r = std::io::Cursor::new(Vec::new());
        assert_eq!(read_line(&mut r, &mut buf), Ok(None));
    }
}

//! The helper's `list`, `stat`, `mkdir`, `remove`, `move` and `watch`: a directory's
//! entries and its changes, for images with no tools. Included by
//! sbx_helper.rs with `#[path]`; std and a few libc calls only.
//!
//! Output is line-based ASCII the host parses strictly
//! (src/workbench/lines.rs): every name travels as hex of its bytes, a
//! relative path as hex components joined by '/', so no name can forge a
//! line, a field or a path separator.
//!
//!   list:  ROOT T | E T MODE SIZE MTIME PATH TARGET|- | W PATH ERRNO | T | END COUNT CUT
//!   watch: READY | EV created|modified|deleted|attrib d|f PATH | MV FROM TO | OVERFLOW
//!          | LIMIT PATH | W PATH ERRNO | GONE
//!
//! layout: ~620 lines, over the tree's ~400, on purpose: the helper is
//! built by plain rustc from few files, and these commands share the
//! encoding and the no-follow directory walk.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

extern "C" {
    fn inotify_init1(flags: i32) -> i32;
    fn inotify_add_watch(fd: i32, path: *const u8, mask: u32) -> i32;
    fn inotify_rm_watch(fd: i32, wd: i32) -> i32;
    fn read(fd: i32, buf: *mut u8, n: usize) -> isize;
    fn poll(fds: *mut PollFd, nfds: u64, timeout: i32) -> i32;
}

#[repr(C)]
struct PollFd {
    fd: i32,
    events: i16,
    revents: i16,
}

const O_NOFOLLOW: i32 = 0o400000;
const O_DIRECTORY: i32 = 0o200000;

/// Exit codes beyond sbx_helper.rs's table (src/workbench/helper.rs `helper_exit` has them too).
pub const EXISTS: i32 = 9;
pub const NOT_A_DIRECTORY: i32 = 10;
pub const WATCH_LIMIT: i32 = 11;

fn hex(b: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(D[(x >> 4) as usize] as char);
        s.push(D[(x & 15) as usize] as char);
    }
    s
}

/// A relative path (components joined by '/', names never hold one) as
/// hex components joined by '/'.
fn hex_path(rel: &[u8]) -> String {
    if rel.is_empty() {
        return String::new();
    }
    rel.split(|b| *b == b'/').map(hex).collect::<Vec<_>>().join("/")
}

fn join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = rel.to_vec();
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

fn kind_char(ft: &std::fs::FileType) -> char {
    if ft.is_symlink() {
        'l'
    } else if ft.is_dir() {
        'd'
    } else if ft.is_file() {
        'f'
    } else if ft.is_socket() {
        's'
    } else if ft.is_fifo() {
        'p'
    } else if ft.is_char_device() {
        'c'
    } else if ft.is_block_device() {
        'b'
    } else {
        '?'
    }
}

/// The directory at `path` itself, never through a final symlink.
fn open_dir(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).custom_flags(O_NOFOLLOW | O_DIRECTORY).open(path)
}

/// `/proc/self/fd/N`: the opened directory, whatever its path names now
/// (an entry below it is looked up in that directory, as openat would).
fn via(dir: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()))
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

struct Lister<W: Write> {
    out: W,
    limit: u64,
    count: u64,
    cut: u64,
    max_depth: u32,
    truncated: bool,
}

impl<W: Write> Lister<W> {
    fn entry(&mut self, rel: &[u8], md: &std::fs::Metadata, at: &Path) -> io::Result<()> {
        let ft = md.file_type();
        let target = if ft.is_symlink() {
            match std::fs::read_link(at) {
                Ok(t) => hex(t.as_os_str().as_bytes()),
                Err(_) => "-".into(),
            }
        } else {
            "-".into()
        };
        writeln!(
            self.out,
            "E {} {:o} {} {} {} {}",
            kind_char(&ft),
            md.mode() & 0o7777,
            md.size(),
            md.mtime(),
            hex_path(rel),
            target
        )?;
        self.count += 1;
        Ok(())
    }

    /// Depth-first, names sorted by their bytes within each directory.
    fn walk(&mut self, dir: &File, rel: &[u8], depth: u32) -> io::Result<()> {
        let base = via(dir);
        let room = (self.limit - self.count) as usize;
        // The first names in byte order, one more than fits (which tells the
        // listing is cut): a huge directory is read through, never held.
        let mut heap: std::collections::BinaryHeap<Vec<u8>> = std::collections::BinaryHeap::new();
        match std::fs::read_dir(&base) {
            Ok(rd) => {
                for e in rd {
                    match e {
                        Ok(e) => heap.push(e.file_name().as_bytes().to_vec()),
                        Err(e) => {
                            writeln!(self.out, "W {} {}", hex_path(rel), errno(&e))?;
                            break;
                        }
                    }
                    if heap.len() > room.saturating_add(1) {
                        heap.pop();
                    }
                }
            }
            Err(e) => {
                writeln!(self.out, "W {} {}", hex_path(rel), errno(&e))?;
                return Ok(());
            }
        }
        let names = heap.into_sorted_vec();
        for name in names {
            if self.count >= self.limit {
                self.truncated = true;
                return Ok(());
            }
            let at = base.join(std::ffi::OsStr::from_bytes(&name));
            let child = join(rel, &name);
            let md = match std::fs::symlink_metadata(&at) {
                Ok(md) => md,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // gone meanwhile
                Err(e) => {
                    writeln!(self.out, "W {} {}", hex_path(&child), errno(&e))?;
                    continue;
                }
            };
            self.entry(&child, &md, &at)?;
            if md.is_dir() {
                if depth >= self.max_depth {
                    self.cut += 1;
                    continue;
                }
                match open_dir(&at) {
                    Ok(sub) => self.walk(&sub, &child, depth + 1)?,
                    // ELOOP/ENOTDIR: replaced by a link meanwhile, never followed.
                    Err(e) if matches!(errno(&e), 2 | 20 | 40) => {}
                    Err(e) => writeln!(self.out, "W {} {}", hex_path(&child), errno(&e))?,
                }
                if self.truncated {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// `list PATH MAX_DEPTH LIMIT`: PATH's entries (PATH itself when it is not
/// a directory, a symlink included), to MAX_DEPTH levels, at most LIMIT.
pub fn list(path: &Path, max_depth: u32, limit: u64) -> io::Result<()> {
    let md = std::fs::symlink_metadata(path)?;
    let mut l =
        Lister { out: BufWriter::new(io::stdout().lock()), limit, count: 0, cut: 0, max_depth, truncated: false };
    writeln!(l.out, "ROOT {}", kind_char(&md.file_type()))?;
    if md.is_dir() {
        let dir = open_dir(path)?;
        l.walk(&dir, b"", 1)?;
    } else {
        let name = path.file_name().map(|n| n.as_bytes().to_vec()).unwrap_or_default();
        l.entry(&name, &md, path)?;
    }
    if l.truncated {
        writeln!(l.out, "T")?;
    }
    writeln!(l.out, "END {} {}", l.count, l.cut)?;
    l.out.flush()
}

/// `stat PATH`: PATH itself as `list` says a single entry (ROOT, E, END),
/// a directory and a symlink included, never followed.
pub fn stat(path: &Path) -> io::Result<()> {
    let md = std::fs::symlink_metadata(path)?;
    let mut l =
        Lister { out: BufWriter::new(io::stdout().lock()), limit: 1, count: 0, cut: 0, max_depth: 0, truncated: false };
    writeln!(l.out, "ROOT {}", kind_char(&md.file_type()))?;
    let name = path.file_name().map(|n| n.as_bytes().to_vec()).unwrap_or_default();
    l.entry(&name, &md, path)?;
    writeln!(l.out, "END 1 0")?;
    l.out.flush()
}

/// `remove PATH`: unlink PATH, or delete the directory PATH with all it
/// holds. A symlink is removed itself, never followed (std's
/// `remove_dir_all` opens each directory O_NOFOLLOW, race-free).
pub fn remove(path: &Path) -> io::Result<()> {
    let md = std::fs::symlink_metadata(path)?;
    if md.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// `move FROM TO`: rename(2) FROM to TO (its missing parents made first),
/// replacing what is at TO as rename does; a symlink at either end is the
/// link itself, never written through. Then TO as `stat` says it.
pub fn rename(from: &Path, to: &Path) -> Result<(), i32> {
    std::fs::symlink_metadata(from).map_err(|e| crate::report(Err(e)))?;
    if let Some(parent) = to.parent() {
        match std::fs::create_dir_all(parent) {
            Ok(()) => {}
            Err(e) if matches!(errno(&e), 17 | 20) => return Err(NOT_A_DIRECTORY),
            Err(e) => return Err(crate::report(Err(e))),
        }
    }
    match std::fs::rename(from, to) {
        Ok(()) => {}
        Err(e) => {
            return Err(match errno(&e) {
                39 => EXISTS,           // ENOTEMPTY: a directory with entries at TO
                20 | 21 => NOT_A_DIRECTORY, // a directory onto a file, or the other way
                _ => crate::report(Err(e)),
            })
        }
    }
    stat(to).map_err(|e| crate::report(Err(e)))
}

/// `mkdir PATH [-p]`: prints `created` or (with -p) `existed`.
pub fn mkdir(path: &Path, parents: bool) -> Result<(), i32> {
    let existed = parents && std::fs::symlink_metadata(path).map(|m| m.is_dir()).unwrap_or(false);
    let r = if parents { std::fs::create_dir_all(path) } else { std::fs::create_dir(path) };
    match r {
        Ok(()) => {
            println!("{}", if existed { "existed" } else { "created" });
            Ok(())
        }
        Err(e) => Err(match errno(&e) {
            17 if parents => NOT_A_DIRECTORY, // there, and not a directory
            17 => EXISTS,
            20 => NOT_A_DIRECTORY,
            _ => return Err(crate::report(Err(e))),
        }),
    }
}

const IN_MODIFY: u32 = 0x2;
const IN_ATTRIB: u32 = 0x4;
const IN_MOVED_FROM: u32 = 0x40;
const IN_MOVED_TO: u32 = 0x80;
const IN_CREATE: u32 = 0x100;
const IN_DELETE: u32 = 0x200;
const IN_DELETE_SELF: u32 = 0x400;
const IN_MOVE_SELF: u32 = 0x800;
const IN_UNMOUNT: u32 = 0x2000;
const IN_Q_OVERFLOW: u32 = 0x4000;
const IN_IGNORED: u32 = 0x8000;
const IN_ONLYDIR: u32 = 0x0100_0000;
const IN_DONT_FOLLOW: u32 = 0x0200_0000;
const IN_EXCL_UNLINK: u32 = 0x0400_0000;
const IN_ISDIR: u32 = 0x4000_0000;
const MASK: u32 = IN_MODIFY
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK;

struct Watcher {
    fd: i32,
    root: PathBuf,
    root_wd: i32,
    recursive: bool,
    /// The mask watches are added with: [`MASK`], with IN_ATTRIB for `-a`.
    mask: u32,
    /// Watch descriptor -> the directory's path relative to the root.
    wds: HashMap<i32, Vec<u8>>,
    /// An IN_MOVED_FROM waiting for its IN_MOVED_TO: (cookie, path, is_dir).
    pending: Option<(u32, Vec<u8>, bool)>,
    /// The last line of this batch was `modified` of this path: another is the same news.
    last_modified: Option<Vec<u8>>,
    out: BufWriter<io::StdoutLock<'static>>,
}

enum Added {
    Yes,
    No,
}

impl Watcher {
    fn line(&mut self, s: &str) -> io::Result<()> {
        self.last_modified = None;
        writeln!(self.out, "{s}")
    }

    /// Watch the directory at `rel`, never through a symlink (IN_DONT_FOLLOW|IN_ONLYDIR).
    fn add(&mut self, rel: &[u8]) -> io::Result<Added> {
        let mut c = self.root.as_os_str().as_bytes().to_vec();
        if !rel.is_empty() {
            c.push(b'/');
            c.extend_from_slice(rel);
        }
        c.push(0);
        let wd = unsafe { inotify_add_watch(self.fd, c.as_ptr(), self.mask) };
        if wd >= 0 {
            self.wds.insert(wd, rel.to_vec());
            return Ok(Added::Yes);
        }
        let e = io::Error::last_os_error();
        match errno(&e) {
            28 => self.line(&format!("LIMIT {}", hex_path(rel)))?, // ENOSPC: max_user_watches
            2 | 20 | 40 => {}                                      // gone, or not a directory (any more)
            n => self.line(&format!("W {} {n}", hex_path(rel)))?,
        }
        Ok(Added::No)
    }

    /// Add watches below `rel` (already watched); with `report`, say each
    /// entry found as created (it may have come before the watch did).
    fn scan(&mut self, rel: &[u8], report: bool) -> io::Result<()> {
        let mut todo = vec![rel.to_vec()];
        while let Some(dir) = todo.pop() {
            let path =
                if dir.is_empty() { self.root.clone() } else { self.root.join(std::ffi::OsStr::from_bytes(&dir)) };
            let Ok(f) = open_dir(&path) else { continue };
            let base = via(&f);
            let Ok(rd) = std::fs::read_dir(&base) else { continue };
            let mut names: Vec<Vec<u8>> = rd.flatten().map(|e| e.file_name().as_bytes().to_vec()).collect();
            names.sort();
            for name in names {
                let child = join(&dir, &name);
                let Ok(md) = std::fs::symlink_metadata(base.join(std::ffi::OsStr::from_bytes(&name))) else { continue };
                if report {
                    self.line(&format!("EV created {} {}", if md.is_dir() { 'd' } else { 'f' }, hex_path(&child)))?;
                }
                if md.is_dir() && self.recursive && !self.kernel_dir(&child) {
                    if let Added::Yes = self.add(&child)? {
                        todo.push(child);
                    }
                }
            }
        }
        Ok(())
    }

    /// /proc and /sys, which a recursive watch of / does not enter: thousands
    /// of the kernel's directories, taken from the uid's watch limit (which
    /// every sandbox of that uid shares) for files that never change there.
    fn kernel_dir(&self, rel: &[u8]) -> bool {
        let mut full = self.root.as_os_str().as_bytes().to_vec();
        if full.last() != Some(&b'/') {
            full.push(b'/');
        }
        full.extend_from_slice(rel);
        full == b"/proc" || full == b"/sys"
    }

    /// A directory left the tree: stop watching it and what is below it.
    fn forget(&mut self, rel: &[u8]) {
        let gone: Vec<i32> = self
            .wds
            .iter()
            .filter(|(_, p)| p.as_slice() == rel || (p.starts_with(rel) && p.get(rel.len()) == Some(&b'/')))
            .map(|(wd, _)| *wd)
            .collect();
        for wd in gone {
            self.wds.remove(&wd);
            unsafe { inotify_rm_watch(self.fd, wd) };
        }
    }

    /// A directory moved within the tree: its watches keep working, under the new path.
    fn renamed(&mut self, from: &[u8], to: &[u8]) {
        for p in self.wds.values_mut() {
            if p.as_slice() == from {
                *p = to.to_vec();
            } else if p.starts_with(from) && p.get(from.len()) == Some(&b'/') {
                let mut n = to.to_vec();
                n.extend_from_slice(&p[from.len()..]);
                *p = n;
            }
        }
    }

    /// An unpaired IN_MOVED_FROM: moved out of the tree, so, here, deleted.
    fn flush_pending(&mut self) -> io::Result<()> {
        if let Some((_, from, dir)) = self.pending.take() {
            self.line(&format!("EV deleted {} {}", if dir { 'd' } else { 'f' }, hex_path(&from)))?;
            if dir {
                self.forget(&from);
            }
        }
        Ok(())
    }

    /// One event; Ok(false): the watch is over (the root went away).
    fn event(&mut self, wd: i32, mask: u32, cookie: u32, name: &[u8]) -> io::Result<bool> {
        let is_dir = mask & IN_ISDIR != 0;
        let pairs = mask & IN_MOVED_TO != 0 && matches!(&self.pending, Some((c, _, _)) if *c == cookie);
        if !pairs {
            self.flush_pending()?;
        }
        if mask & IN_Q_OVERFLOW != 0 {
            self.line("OVERFLOW")?;
            return Ok(true);
        }
        if wd == self.root_wd && mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED) != 0 {
            self.line("GONE")?;
            return Ok(false);
        }
        if mask & IN_IGNORED != 0 {
            self.wds.remove(&wd);
            return Ok(true);
        }
        let Some(dir) = self.wds.get(&wd) else { return Ok(true) };
        if name.is_empty() {
            return Ok(true); // about the directory itself: its parent says it
        }
        let rel = join(dir, name);
        let t = if is_dir { 'd' } else { 'f' };
        if mask & IN_CREATE != 0 {
            self.line(&format!("EV created {t} {}", hex_path(&rel)))?;
            if is_dir && self.recursive {
                if let Added::Yes = self.add(&rel)? {
                    self.scan(&rel, true)?;
                }
            }
        } else if mask & IN_MODIFY != 0 {
            if self.last_modified.as_deref() != Some(rel.as_slice()) {
                self.line(&format!("EV modified {t} {}", hex_path(&rel)))?;
                self.last_modified = Some(rel);
            }
        } else if mask & IN_DELETE != 0 {
            self.line(&format!("EV deleted {t} {}", hex_path(&rel)))?;
        } else if mask & IN_ATTRIB != 0 {
            self.line(&format!("EV attrib {t} {}", hex_path(&rel)))?;
        } else if mask & IN_MOVED_FROM != 0 {
            self.pending = Some((cookie, rel, is_dir));
        } else if mask & IN_MOVED_TO != 0 {
            if pairs {
                let (_, from, _) = self.pending.take().unwrap_or_default();
                self.line(&format!("MV {} {}", hex_path(&from), hex_path(&rel)))?;
                if is_dir {
                    self.renamed(&from, &rel);
                }
            } else {
                // Moved in from outside the tree: new here.
                self.line(&format!("EV created {t} {}", hex_path(&rel)))?;
                if is_dir && self.recursive {
                    if let Added::Yes = self.add(&rel)? {
                        self.scan(&rel, true)?;
                    }
                }
            }
        }
        Ok(true)
    }
}

/// Wait for `fd` (and stdin) to be readable. Ok(true): `fd` is; Ok(false):
/// `timeout` passed; Err: stdin ended (the host closed it: stop).
fn wait(fd: i32, timeout: i32) -> io::Result<bool> {
    loop {
        let mut fds = [PollFd { fd, events: 1, revents: 0 }, PollFd { fd: 0, events: 1, revents: 0 }];
        let n = unsafe { poll(fds.as_mut_ptr(), 2, timeout) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[1].revents != 0 {
            let mut b = [0u8; 256];
            let r = unsafe { read(0, b.as_mut_ptr(), b.len()) };
            if r <= 0 {
                return Err(io::Error::other("stdin closed"));
            }
        }
        if fds[0].revents != 0 {
            return Ok(true);
        }
        if n == 0 {
            return Ok(false);
        }
    }
}

/// `watch PATH [-r]`: one line per change below PATH until stdin ends (the
/// host's Ctrl-C: `docker exec -i` passes on the close) or PATH goes away.
pub fn watch(path: &Path, recursive: bool, attrib: bool) -> i32 {
    match std::fs::symlink_metadata(path) {
        Ok(md) if !md.is_dir() => return NOT_A_DIRECTORY,
        Ok(_) => {}
        Err(e) => return crate::report(Err(e)),
    }
    // IN_NONBLOCK | IN_CLOEXEC
    let fd = unsafe { inotify_init1(0o4000 | 0o2000000) };
    if fd < 0 {
        return crate::report(Err(io::Error::last_os_error()));
    }
    let mut w = Watcher {
        fd,
        root: path.to_path_buf(),
        root_wd: -1,
        recursive,
        mask: if attrib { MASK | IN_ATTRIB } else { MASK },
        wds: HashMap::new(),
        pending: None,
        last_modified: None,
        out: BufWriter::new(io::stdout().lock()),
    };
    let mut c = path.as_os_str().as_bytes().to_vec();
    c.push(0);
    let wd = unsafe { inotify_add_watch(fd, c.as_ptr(), w.mask) };
    if wd < 0 {
        let e = io::Error::last_os_error();
        return match errno(&e) {
            28 => WATCH_LIMIT,
            20 | 40 => NOT_A_DIRECTORY,
            _ => crate::report(Err(e)),
        };
    }
    w.root_wd = wd;
    w.wds.insert(wd, Vec::new());
    match run(&mut w) {
        Ok(()) | Err(_) => 0,
    }
}

fn run(w: &mut Watcher) -> io::Result<()> {
    if w.recursive {
        w.scan(b"", false)?;
    }
    w.line("READY")?;
    w.out.flush()?;
    // inotify_event: wd i32, mask u32, cookie u32, len u32, name[len]; aligned for it.
    let mut buf = vec![0u64; 8192];
    loop {
        // A pending move waits briefly for its other half, which the kernel queues right after.
        let timeout = if w.pending.is_some() { 50 } else { -1 };
        if !wait(w.fd, timeout)? {
            w.flush_pending()?;
            w.out.flush()?;
            continue;
        }
        let n = unsafe { read(w.fd, buf.as_mut_ptr() as *mut u8, buf.len() * 8) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) {
                continue;
            }
            return Err(e);
        }
        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const u8, n as usize) };
        let mut at = 0usize;
        while at + 16 <= bytes.len() {
            let word =
                |i: usize| u32::from_ne_bytes([bytes[at + i], bytes[at + i + 1], bytes[at + i + 2], bytes[at + i + 3]]);
            let (wd, mask, cookie, len) = (word(0) as i32, word(4), word(8), word(12) as usize);
            let end = (at + 16 + len).min(bytes.len());
            let raw = &bytes[at + 16..end];
            let name = &raw[..raw.iter().position(|b| *b == 0).unwrap_or(raw.len())];
            let name = name.to_vec();
            at = end;
            if !w.event(wd, mask, cookie, &name)? {
                w.out.flush()?;
                return Ok(());
            }
        }
        // Repeated writes are one `modified` per batch the kernel hands over,
        // never one for a file written all day.
        w.last_modified = None;
        w.out.flush()?;
    }
}

//! Checkpoint images on this machine: a sandbox's memory and file systems as
//! runsc saved them, kept under the data dir (`checkpoints/ID/NAME/`, every
//! directory 0700, every file 0600) and restored only when an HMAC under a
//! key of this data dir's own proves that this data dir wrote that image for
//! that sandbox, name and spec. A checkpoint is the sandbox's memory: what
//! runsc restores from it is the sandbox's to shape, so an image from
//! another data dir, one swapped between two sandboxes, or one edited in
//! place is refused, not only a damaged one.
//!
//! The engine keeps checkpoints in its own directory
//! (`DockerRootDir/containers/FULLID/checkpoints/NAME`, root's; 20.10 refuses
//! `--checkpoint-dir`): runsc writes there, sbx copies the image out and
//! removes the engine's copy; a restore copies a verified image in under a
//! fresh name, so what runsc reads is what was checked.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::error::{Error, Invalid, Result, SnapshotError};

/// What this build writes and reads; another is refused by name.
pub const FORMAT: &str = "sbx-checkpoint-2";

/// The checkpoint `hibernate` writes and `resume` restores (a reserved name).
pub const HIBERNATED: &str = "hibernated";

/// The prefix of the checkpoints `fork` makes for itself, removed once its
/// children run (`checkpoint --name` refuses it).
pub const FORK_PREFIX: &str = "fork-";

/// The name of the checkpoint a fork by process `pid` (started at
/// `start`) makes for itself: `fork-PID-START-RAND`, so one a killed fork
/// left is known for its own.
pub fn fork_name(pid: i32, start: u64) -> String {
    format!("{FORK_PREFIX}{pid}-{start}-{:08x}", rand::random::<u32>())
}

/// The process that made fork checkpoint `name` (None: a name of no shape).
fn fork_maker(name: &str) -> Option<(i32, u64)> {
    let mut parts = name.strip_prefix(FORK_PREFIX)?.split('-');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Whether checkpoint `name` goes with its sandbox (hibernate's, a fork's
/// own); every other is the operator's, kept until `checkpoints rm`.
pub fn transient(name: &str) -> bool {
    name == HIBERNATED || name.starts_with(FORK_PREFIX)
}

/// Defaults of `--max-checkpoint-size` (a sandbox's checkpoints together)
/// and of the data dir's total.
pub const DEFAULT_PER_SANDBOX: u64 = 4 << 30;
pub const DEFAULT_TOTAL: u64 = 16 << 30;

/// The lock file in `checkpoints/ID/` that one save at a time holds.
const LOCK: &str = ".lock";

/// How deep an image's directories may go (runsc writes files at its top).
const MAX_DEPTH: usize = 4;

/// A checkpoint's record beside its image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    pub format: String,
    pub sandbox: String,
    pub name: String,
    /// Bytes of the image.
    pub size: u64,
    /// Seconds since the epoch.
    pub created: u64,
    /// The sandbox's labels when it was saved: its spec, what a fork makes again.
    pub spec: BTreeMap<String, String>,
    /// HMAC-SHA256 (hex) over the format, sandbox, name, spec and image.
    pub mac: String,
}

/// The limits a new checkpoint must fit in.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub per_sandbox: u64,
    pub total: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { per_sandbox: DEFAULT_PER_SANDBOX, total: DEFAULT_TOTAL }
    }
}

/// `--name`: letters, digits, '.', '_', '-', not starting with '.' or '-', at
/// most 64; `hibernated` is hibernate's own.
pub fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Why `n` is no checkpoint's name of sandbox `id`.
pub fn bad_name(id: &str, n: &str) -> Invalid {
    Invalid::new(
        "checkpoint",
        n,
        "a checkpoint's name is 1 to 64 letters, digits, '.', '_', '-', starting with a letter or digit",
    )
    .hint(format!("`sbx checkpoints {id}` lists its checkpoints"))
}

pub struct Store {
    root: PathBuf,
}

type Mac256 = Hmac<Sha256>;

impl Store {
    pub fn at(data: &Path) -> Store {
        Store { root: data.join("checkpoints") }
    }

    fn dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    /// `id` and `name` as a path under `checkpoints/ID/` may use them: a
    /// sandbox's id and a checkpoint's name, never `..`, `/` or empty (the
    /// names of `checkpoints rm` come from the command line as typed).
    fn checked(id: &str, name: Option<&str>) -> Result<()> {
        crate::spec::parse_id(id)?;
        match name {
            Some(n) if !valid_name(n) => Err(bad_name(id, n).into()),
            _ => Ok(()),
        }
    }

    fn image(&self, id: &str, name: &str) -> PathBuf {
        self.dir(id).join(name)
    }

    fn meta_path(&self, id: &str, name: &str) -> PathBuf {
        self.dir(id).join(format!("{name}.json"))
    }

    /// The data dir's own key: made once, 0600, never read through a link.
    fn key(&self) -> Result<Vec<u8>> {
        mkdir_private(&self.root)?;
        let path = self.root.join("key");
        let ctx = || format!("the checkpoint key {}", path.display());
        match OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path) {
            Ok(mut f) => {
                let key: [u8; 32] = rand::random();
                f.write_all(&key).and_then(|_| f.sync_all()).map_err(|e| Error::io(ctx(), e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(ctx(), e)),
        }
        let mut key = Vec::new();
        open_nofollow(&path).and_then(|mut f| f.read_to_end(&mut key)).map_err(|e| Error::io(ctx(), e))?;
        if key.len() != 32 {
            return Err(Error::io(ctx(), std::io::Error::other("not 32 bytes: remove it to make a new one")));
        }
        Ok(key)
    }

    fn mac(&self, id: &str, name: &str, spec: &BTreeMap<String, String>) -> Result<Mac256> {
        let mut mac = Mac256::new_from_slice(&self.key()?).expect("HMAC takes any key length");
        let spec = serde_json::to_string(spec).unwrap_or_default();
        for part in [FORMAT, id, name, &spec] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        Ok(mac)
    }

    pub fn get(&self, id: &str, name: &str) -> Option<Meta> {
        Self::checked(id, Some(name)).ok()?;
        let mut text = String::new();
        open_nofollow(&self.meta_path(id, name)).ok()?.read_to_string(&mut text).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Every checkpoint of `id` (of every sandbox when None), oldest first.
    pub fn list(&self, id: Option<&str>) -> Vec<Meta> {
        let ids: Vec<String> = match id {
            Some(i) => vec![i.to_string()],
            None => self.sandboxes(),
        };
        let ids = ids.into_iter().filter(|i| Self::checked(i, None).is_ok());
        let mut all = Vec::new();
        for i in ids {
            for e in fs::read_dir(self.dir(&i)).into_iter().flatten().flatten() {
                let file = e.file_name().to_string_lossy().into_owned();
                if let Some(name) = file.strip_suffix(".json") {
                    all.extend(self.get(&i, name).filter(|m| m.sandbox == i && m.name == name));
                }
            }
        }
        all.sort_by(|a, b| (a.created, &a.sandbox, &a.name).cmp(&(b.created, &b.sandbox, &b.name)));
        all
    }

    /// Copy the engine's image at `from` in as `id`'s `name`, with its MAC;
    /// refused (nothing kept) past `limits`.
    pub fn save(
        &self,
        id: &str,
        name: &str,
        from: &Path,
        spec: &BTreeMap<String, String>,
        limits: Limits,
    ) -> Result<Meta> {
        Self::checked(id, Some(name))?;
        mkdir_private(&self.root)?;
        mkdir_private(&self.dir(id))?;
        // One save of a sandbox at a time: what another left is then a leftover.
        let _held = crate::host::lockfile::exclusive(&self.dir(id).join(LOCK))?;
        self.sweep(id);
        if self.get(id, name).is_some() {
            return Err(SnapshotError::Exists { id: id.into(), name: name.into() }.into());
        }
        let mine: u64 = self.list(Some(id)).iter().map(|m| m.size).sum();
        let all: u64 = self.list(None).iter().map(|m| m.size).sum();
        let room = (limits.per_sandbox.saturating_sub(mine), "--max-checkpoint-size, per sandbox")
            .min((limits.total.saturating_sub(all), "the data dir's total, --max-checkpoints-total"));
        let tmp = self.dir(id).join(format!(".{name}.{:016x}", rand::random::<u64>()));
        let mut mac = self.mac(id, name, spec)?;
        let mut copy = Copy { mac: &mut mac, size: 0, cap: room.0 };
        let copied = copy.tree(from, &tmp, 0);
        let size = copy.size;
        if let Err(e) = copied {
            let _ = fs::remove_dir_all(&tmp);
            return Err(match e {
                CopyError::Cap => SnapshotError::TooBig {
                    id: id.into(),
                    name: name.into(),
                    size: size + mine,
                    limit: if room.1.starts_with("--max-checkpoint-size") { limits.per_sandbox } else { limits.total },
                    which: room.1,
                }
                .into(),
                CopyError::Io(what, e) => Error::io(what, e),
            });
        }
        let meta = Meta {
            format: FORMAT.into(),
            sandbox: id.into(),
            name: name.into(),
            size,
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            spec: spec.clone(),
            mac: hex(&mac.finalize().into_bytes()),
        };
        let image = self.image(id, name);
        let _ = fs::remove_dir_all(&image);
        fs::rename(&tmp, &image).map_err(|e| Error::io(format!("keeping checkpoint {}", image.display()), e))?;
        write_private(&self.meta_path(id, name), &serde_json::to_vec(&meta).unwrap_or_default())?;
        Ok(meta)
    }

    /// What a save killed part way left in `checkpoints/ID/` (a `.NAME.*`
    /// copy, an image without its record, a record's temp file), counted
    /// against no limit: removed, under the lock. Whole checkpoints stay.
    fn sweep(&self, id: &str) {
        for e in fs::read_dir(self.dir(id)).into_iter().flatten().flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            let image = is_dir && valid_name(&file) && self.meta_path(id, &file).exists();
            let record = !is_dir && file.strip_suffix(".json").is_some_and(valid_name);
            if file == LOCK || image || record {
                continue;
            }
            let _ = if is_dir { fs::remove_dir_all(e.path()) } else { fs::remove_file(e.path()) };
        }
    }

    /// [`Store::sweep`] of every sandbox whose save lock is free: what a
    /// killed save left goes at gc, not only at that sandbox's next save.
    /// No lock file, nothing to sweep: a save makes it before anything else
    /// (and making it here would leave an entry gc then forgets each run).
    pub fn sweep_unheld(&self) {
        for id in self.sandboxes() {
            if let Ok(Some(_held)) = crate::host::lockfile::try_exclusive(&self.dir(&id).join(LOCK), false) {
                self.sweep(&id);
            }
        }
    }

    /// Copy `id`'s `name` into `to` (made 0700, absent before) while
    /// checking its MAC; on any mismatch `to` is removed and the restore
    /// refused. Returns its record, whose spec the MAC covered.
    pub fn restore_into(&self, id: &str, name: &str, to: &Path) -> Result<Meta> {
        let untrusted =
            |reason: String| -> Error { SnapshotError::Untrusted { id: id.into(), name: name.into(), reason }.into() };
        Self::checked(id, Some(name))?;
        let Some(meta) = self.get(id, name) else {
            return Err(SnapshotError::NotFound { id: id.into(), name: name.into() }.into());
        };
        if meta.format != FORMAT {
            return Err(untrusted(format!(
                "it was written as {:?}, and this sbx ({}) reads only {FORMAT}",
                meta.format,
                env!("CARGO_PKG_VERSION")
            )));
        }
        let mut mac = self.mac(id, name, &meta.spec)?;
        let mut copy = Copy { mac: &mut mac, size: 0, cap: u64::MAX };
        let copied = copy.tree(&self.image(id, name), to, 0);
        let size = copy.size;
        let fail = |e: Error| {
            let _ = fs::remove_dir_all(to);
            e
        };
        match copied {
            Ok(()) => {}
            Err(CopyError::Cap) => return Err(fail(untrusted("too large".into()))),
            Err(CopyError::Io(what, e)) => return Err(fail(untrusted(format!("{what}: {e}")))),
        }
        let expected = unhex(&meta.mac).ok_or_else(|| fail(untrusted("its record holds no MAC".into())))?;
        if size != meta.size || mac.verify_slice(&expected).is_err() {
            return Err(fail(untrusted(
                "its MAC does not match: it is not the image this data dir wrote for this sandbox and name".into(),
            )));
        }
        Ok(meta)
    }

    /// Remove one; false when it was not there.
    pub fn remove(&self, id: &str, name: &str) -> Result<bool> {
        Self::checked(id, Some(name))?;
        let meta = self.meta_path(id, name);
        let image = self.image(id, name);
        let found = meta.exists() || image.exists();
        match fs::remove_dir_all(&image) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("removing checkpoint {}", image.display()), e)),
        }
        let _ = fs::remove_file(&meta);
        let _ = fs::remove_dir(self.dir(id));
        Ok(found)
    }

    /// What goes with a sandbox once it is gone: its hibernation, a fork's
    /// own checkpoint, what a killed save left, and the directory once
    /// empty. Its named checkpoints stay: `fork --from` carries on from
    /// them after it is gone, until `checkpoints rm`.
    pub fn remove_transient(&self, id: &str) -> Result<()> {
        Self::checked(id, None)?;
        let dir = self.dir(id);
        for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
            if self.named(id, &e) {
                continue;
            }
            let gone = if e.file_type().is_ok_and(|t| t.is_dir()) {
                fs::remove_dir_all(e.path())
            } else {
                fs::remove_file(e.path())
            };
            match gone {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io(format!("removing {}", e.path().display()), err));
                }
                _ => {}
            }
        }
        // Only an empty one: named checkpoints keep it.
        let _ = fs::remove_dir(&dir);
        Ok(())
    }

    /// The sandboxes with something here that goes with them once they are
    /// gone ([`Store::remove_transient`]), an empty directory included.
    pub fn with_transient(&self) -> Vec<String> {
        let mut ids = self.sandboxes();
        ids.retain(|id| {
            let mut entries = fs::read_dir(self.dir(id)).into_iter().flatten().flatten().peekable();
            entries.peek().is_none() || entries.any(|e| !self.named(id, &e))
        });
        ids
    }

    /// Whether `e` in `checkpoints/ID/` is part of a whole named checkpoint
    /// (its image directory with its record, or that record).
    fn named(&self, id: &str, e: &fs::DirEntry) -> bool {
        let file = e.file_name().to_string_lossy().into_owned();
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        let name = if is_dir { Some(file.as_str()) } else { file.strip_suffix(".json") };
        name.is_some_and(|n| {
            valid_name(n) && !transient(n) && self.meta_path(id, n).is_file() && self.image(id, n).is_dir()
        })
    }

    /// Remove the checkpoints that a fork killed before it removed them
    /// left (`alive(pid, start)` false for its process, or a name of no
    /// shape), of every sandbox, live or not; what went.
    pub fn remove_abandoned_forks(&self, alive: &dyn Fn(i32, u64) -> bool) -> Vec<(String, String)> {
        let mut gone = Vec::new();
        for id in self.sandboxes() {
            for m in self.list(Some(&id)) {
                let running = fork_maker(&m.name).is_some_and(|(pid, start)| alive(pid, start));
                if m.name.starts_with(FORK_PREFIX) && !running && self.remove(&id, &m.name).is_ok() {
                    gone.push((id.clone(), m.name));
                }
            }
        }
        gone
    }

    /// The sandboxes that have checkpoints here (directories named as one).
    pub fn sandboxes(&self) -> Vec<String> {
        fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|i| Self::checked(i, None).is_ok())
            .collect()
    }
}

enum CopyError {
    Cap,
    Io(String, std::io::Error),
}

/// A copy of a tree of directories and regular files (never a link or
/// anything else), in name order, fed to the MAC as it goes: per directory
/// its count of entries, per entry its kind and name, per file its length
/// and bytes.
struct Copy<'a> {
    mac: &'a mut Mac256,
    size: u64,
    cap: u64,
}

impl Copy<'_> {
    fn tree(&mut self, from: &Path, to: &Path, depth: usize) -> std::result::Result<(), CopyError> {
        let io = |what: String| move |e: std::io::Error| CopyError::Io(what, e);
        if depth > MAX_DEPTH {
            return Err(CopyError::Io(from.display().to_string(), std::io::Error::other("directories too deep")));
        }
        fs::DirBuilder::new().mode(0o700).create(to).map_err(io(format!("making {}", to.display())))?;
        let mut names: Vec<_> = fs::read_dir(from)
            .map_err(io(format!("reading {}", from.display())))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<std::io::Result<_>>()
            .map_err(io(format!("reading {}", from.display())))?;
        names.sort();
        // Each directory's entries counted first: without it a file moved
        // from `a/` up beside it (or down into it) is met in the same order.
        self.mac.update(&(names.len() as u64).to_be_bytes());
        for name in names {
            let (src, dst) = (from.join(&name), to.join(&name));
            let t = fs::symlink_metadata(&src).map_err(io(format!("reading {}", src.display())))?.file_type();
            let tag = name.as_encoded_bytes();
            self.mac.update(&[u8::from(t.is_dir())]);
            self.mac.update(&(tag.len() as u64).to_be_bytes());
            self.mac.update(tag);
            if t.is_dir() {
                self.tree(&src, &dst, depth + 1)?;
            } else if t.is_file() {
                self.file(&src, &dst)?;
            } else {
                return Err(CopyError::Io(
                    src.display().to_string(),
                    std::io::Error::other("neither a regular file nor a directory"),
                ));
            }
        }
        Ok(())
    }

    fn file(&mut self, src: &Path, dst: &Path) -> std::result::Result<(), CopyError> {
        let io = |what: String| move |e: std::io::Error| CopyError::Io(what, e);
        let mut input = open_nofollow(src).map_err(io(format!("opening {}", src.display())))?;
        let len = input.metadata().map_err(io(format!("reading {}", src.display())))?.len();
        self.mac.update(&len.to_be_bytes());
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc_nofollow())
            .open(dst)
            .map_err(io(format!("writing {}", dst.display())))?;
        let mut buf = vec![0u8; 1 << 20];
        let mut left = len;
        while left > 0 {
            let n = input.read(&mut buf).map_err(io(format!("reading {}", src.display())))?;
            if n == 0 {
                return Err(CopyError::Io(src.display().to_string(), std::io::Error::other("shorter than its size")));
            }
            let n = n.min(left as usize);
            self.size += n as u64;
            if self.size > self.cap {
                return Err(CopyError::Cap);
            }
            self.mac.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(io(format!("writing {}", dst.display())))?;
            left -= n as u64;
        }
        out.sync_all().map_err(io(format!("writing {}", dst.display())))
    }
}

fn libc_nofollow() -> i32 {
    nix::fcntl::OFlag::O_NOFOLLOW.bits()
}

fn open_nofollow(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc_nofollow()).open(path)
}

/// A directory of sbx's own, 0700 (made so, or checked so; never a link).
fn mkdir_private(dir: &Path) -> Result<()> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            use std::os::unix::fs::MetadataExt;
            let m = fs::symlink_metadata(dir).map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
            if !m.is_dir() || m.mode() & 0o077 != 0 || m.uid() != nix::unistd::geteuid().as_raw() {
                return Err(Error::io(
                    format!("checking {}", dir.display()),
                    std::io::Error::other("not a directory of sbx's own with mode 0700"),
                ));
            }
            Ok(())
        }
        Err(e) => Err(Error::io(format!("making {}", dir.display()), e)),
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{:08x}", rand::random::<u32>()));
    let ctx = || format!("writing {}", path.display());
    let mut f =
        OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp).map_err(|e| Error::io(ctx(), e))?;
    f.write_all(bytes).and_then(|_| f.sync_all()).map_err(|e| Error::io(ctx(), e))?;
    fs::rename(&tmp, path).map_err(|e| Error::io(ctx(), e))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests;

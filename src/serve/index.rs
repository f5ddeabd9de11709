//! What `sbx serve` keeps per sandbox that labels cannot hold (E2B
//! metadata, the envd access token): one JSON file, `serve/index.json`
//! under the data dir, 0600, replaced whole through a temp file and a
//! rename, so a reader never sees half of it. Read once at start; the
//! server's copy is the truth while it runs.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One sandbox made through `serve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The envd access token, `X-Access-Token`: reaches this sandbox only.
    pub token: String,
    /// The E2B template id it was made from.
    pub template: String,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// RFC 3339.
    pub started_at: String,
    pub cpu_count: u32,
    pub memory_mb: u64,
}

/// The index at `path` (none yet: empty), never read through a link: one
/// planted there would have sbx take another file's contents for its own.
fn read(path: &Path) -> Result<BTreeMap<String, Entry>> {
    let ctx = |e| Error::io(format!("reading {}", path.display()), e);
    let opened = std::fs::File::options().read(true).custom_flags(nix::libc::O_NOFOLLOW).open(path);
    let mut f = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(ctx(e)),
    };
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut f, &mut bytes).map_err(ctx)?;
    let file: File = serde_json::from_slice(&bytes).map_err(|e| ctx(std::io::Error::other(e.to_string())))?;
    Ok(file.sandboxes)
}

/// What `sbx ls` shows of the sandboxes serve made, from one read of the
/// index under `data_dir` (none: empty): their E2B template and metadata,
/// never the access token.
pub fn shown(data_dir: &Path) -> Result<BTreeMap<String, serde_json::Value>> {
    let all = read(&data_dir.join("serve").join("index.json"))?;
    Ok(all
        .into_iter()
        .map(|(id, e)| (id, serde_json::json!({ "template": e.template, "metadata": e.metadata })))
        .collect())
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    sandboxes: BTreeMap<String, Entry>,
}

const VERSION: u32 = 1;

pub struct Index {
    /// None: kept in memory only (`sbx mcp`'s).
    path: Option<PathBuf>,
    entries: Mutex<BTreeMap<String, Entry>>,
    /// `serve.lock`, held while the server runs: a second server on the
    /// same data dir would overwrite this one's index with its own copy.
    _lock: Option<nix::fcntl::Flock<std::fs::File>>,
}

impl Index {
    /// `dir/index.json`, or an empty index when there is none yet;
    /// refused while another server holds it.
    pub fn open(dir: PathBuf) -> Result<Self> {
        let lock_path = dir.join("serve.lock");
        let f = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            // A link planted there would have sbx make or lock a file elsewhere.
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&lock_path)
            .map_err(|e| Error::io(format!("opening {}", lock_path.display()), e))?;
        let lock = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
            let why = if e == nix::errno::Errno::EWOULDBLOCK {
                std::io::Error::other("another sbx serve uses this data dir; stop it, or give this one --data-dir")
            } else {
                e.into()
            };
            Error::io(format!("locking {}", lock_path.display()), why)
        })?;
        let path = dir.join("index.json");
        let entries = read(&path)?;
        Ok(Index { path: Some(path), entries: Mutex::new(entries), _lock: Some(lock) })
    }

    /// An index that is never written: one per `sbx mcp` session, so it
    /// never contends with a server on the same data dir.
    pub fn memory() -> Self {
        Index { path: None, entries: Mutex::default(), _lock: None }
    }

    pub fn get(&self, id: &str) -> Option<Entry> {
        self.lock().get(id).cloned()
    }

    /// Sandbox `id`'s access token alone: what an envd request is checked
    /// against costs the same whatever metadata the sandbox carries.
    pub fn token(&self, id: &str) -> Option<String> {
        self.lock().get(id).map(|e| e.token.clone())
    }

    pub fn all(&self) -> BTreeMap<String, Entry> {
        self.lock().clone()
    }

    pub fn insert(&self, id: &str, e: Entry) -> Result<()> {
        let mut m = self.lock();
        m.insert(id.to_string(), e);
        self.save(&m)
    }

    /// Forget sandboxes (destroyed, or gone by TTL or `sbx destroy`).
    pub fn remove(&self, ids: &[String]) -> Result<()> {
        let mut m = self.lock();
        let before = m.len();
        for id in ids {
            m.remove(id);
        }
        if m.len() == before {
            return Ok(());
        }
        self.save(&m)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Written under the lock, so two saves never interleave.
    fn save(&self, m: &BTreeMap<String, Entry>) -> Result<()> {
        let Some(path) = &self.path else { return Ok(()) };
        let file = File { version: VERSION, sandboxes: m.clone() };
        let bytes = serde_json::to_vec_pretty(&file).expect("the index serializes");
        let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
        let write = || -> std::io::Result<()> {
            let _ = std::fs::remove_file(&tmp);
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::io(format!("writing {}", path.display()), e)
        })
    }
}

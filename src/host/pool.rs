//! A warm pool's host-side files (`sbx pool`). The members are ordinary
//! sandboxes labelled `sbx.pool=NAME`; what must change after they start
//! (ready, claimed, by whom) lives here, under `<data dir>/pools/NAME/`:
//!
//! ```text
//! spec.json     the pool: size, max idle, the create flags as given, its engine
//! ready/ID      a member the filler saw ready (`Member`); a claim renames it
//! claimed/ID.PID.START  ... to here, named after the claimer (rename is atomic:
//!               two claimers never win one member; gc knows whose it is with no window)
//! dead/ID       a member a claim found dead; the refiller or gc destroys it
//! status.json   the filler's last outcome (`Status`), for `pool ls`
//! fill.lock     flock of the one refiller at work
//! ```
//!
//! The claim itself (session, claimer, complete) is `<data dir>/claims/ID`
//! (`state::Claim`), so `destroy` and gc forget it with the sandbox.

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use std::os::fd::AsRawFd;

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg};
use nix::libc;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::host::state::ProcId;
use crate::model::engine::DEFAULT_ENDPOINT;
use crate::model::invalid::Invalid;
use crate::spec::CreateRequest;

/// What `sbx pool create` recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PoolSpec {
    pub size: u32,
    /// Members idle longer than this are recycled (seconds).
    #[serde(default)]
    pub max_idle_secs: Option<u64>,
    /// The create flags, as given (the environment's defaults folded in).
    pub request: CreateRequest,
    /// The endpoint of the engine its members live on (credentials left
    /// out); None: the default local engine, which is what pools recorded
    /// before it meant. Only sbx driving this engine acts on the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// The docker context that named it at `pool create`, for the hint
    /// when another engine is driven.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

impl PoolSpec {
    /// The endpoint of the pool's engine.
    pub fn endpoint(&self) -> &str {
        self.engine.as_deref().unwrap_or(DEFAULT_ENDPOINT)
    }
}

/// A ready member: everything a claim needs without asking the engine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Member {
    pub id: String,
    /// The host socket (direct channel); None when relayed.
    pub socket: Option<PathBuf>,
    pub uid: u32,
    /// The main process as the host sees it, and its start time (ticks since boot).
    pub pid: i32,
    pub start: u64,
    /// Unix seconds when the filler saw it ready.
    pub ready_at: u64,
    /// `create --json`'s object for it, as create printed it.
    pub created: CreatedJson,
    /// On a remote engine: what its inspect said at fill time (`pid` is
    /// then the engine machine's, `start` 0). A claim checks it with one
    /// docker call, since this machine's /proc knows nothing of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteProc>,
}

/// A remote member as the engine reported it when it was filled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteProc {
    /// The full container id.
    pub container: String,
    /// `State.StartedAt`: a restart changes it.
    pub started_at: String,
}

/// `create --json`'s object, field for field in its order, so a claim
/// prints what `create` prints (with the claim's session and expiry).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreatedJson {
    pub id: String,
    pub session: String,
    pub image: String,
    pub tier: u8,
    pub runtime: String,
    pub socket: String,
    pub channel: serde_json::Value,
    pub routes: serde_json::Value,
    pub created_at: String,
    pub user: String,
    pub expires_at: Option<String>,
    pub gaps: serde_json::Value,
    pub warnings: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<serde_json::Value>,
}

/// The filler's last outcome.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Status {
    /// Members being made now (by the refiller holding the lock).
    pub filling: u32,
    /// Failed creates since the last success.
    pub failed: u32,
    pub last_error: Option<String>,
}

/// Pool names: what a session key may be, at most 40 characters (see
/// [`PoolName`](crate::model::names::PoolName), which clap parses).
pub fn check_name(name: &str) -> std::result::Result<String, Invalid> {
    name.parse::<crate::model::names::PoolName>().map(String::from)
}

#[derive(Debug, Clone)]
pub struct Pool {
    pub name: String,
    pub dir: PathBuf,
}

pub fn root(data: &Path) -> PathBuf {
    data.join("pools")
}

/// Every pool with a spec.
pub fn all(data: &Path) -> Vec<Pool> {
    let mut v: Vec<Pool> = std::fs::read_dir(root(data))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| check_name(n).is_ok())
        .map(|n| Pool::at(data, &n))
        .filter(|p| p.dir.join("spec.json").exists())
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// Whether `id` is an unclaimed member of any pool in `data` (one with a
/// spec or not): file look-ups only, no docker call.
pub fn ready_anywhere(data: &Path, id: &str) -> bool {
    std::fs::read_dir(root(data))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| crate::spec::parse_id(id).is_ok() && e.path().join("ready").join(id).exists())
}

fn mkdir(p: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .map_err(|e| Error::io(format!("creating {}", p.display()), e))
}

/// The sandbox ids named in `dir` (names sbx makes only), sorted.
pub(crate) fn ids_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| crate::spec::parse_id(n).is_ok())
        .collect();
    v.sort();
    v
}

fn write_json<T: Serialize>(dir: &Path, name: &str, v: &T) -> Result<()> {
    mkdir(dir)?;
    write_json_in(dir, name, v)
}

/// As [`write_json`], into a directory that must already exist.
fn write_json_in<T: Serialize>(dir: &Path, name: &str, v: &T) -> Result<()> {
    let text = serde_json::to_string(v).map_err(|e| Error::io(format!("encoding {name}"), e.into()))?;
    let tmp = dir.join(format!(".{name}.{}.{:x}", std::process::id(), rand::random::<u32>()));
    std::fs::write(&tmp, text).map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
    let dst = dir.join(name);
    std::fs::rename(&tmp, &dst).map_err(|e| Error::io(format!("writing {}", dst.display()), e))
}

impl Pool {
    pub fn at(data: &Path, name: &str) -> Self {
        Pool { name: name.to_string(), dir: root(data).join(name) }
    }

    pub fn exists(&self) -> bool {
        self.dir.join("spec.json").exists()
    }

    /// Record a new pool; Ok(false) when one of that name exists.
    pub fn create(&self, spec: &PoolSpec) -> Result<bool> {
        if let Some(parent) = self.dir.parent() {
            mkdir(parent)?;
        }
        match std::fs::DirBuilder::new().mode(0o700).create(&self.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists && !self.exists() => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(Error::io(format!("creating {}", self.dir.display()), e)),
        }
        write_json(&self.dir, "spec.json", spec)?;
        Ok(true)
    }

    pub fn spec(&self) -> Result<PoolSpec> {
        let path = self.dir.join("spec.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        serde_json::from_str(&text).map_err(|e| Error::io(format!("reading {}", path.display()), e.into()))
    }

    /// Forget the pool: its spec first, so no claim or refiller starts on it.
    pub fn forget(&self) {
        let _ = std::fs::remove_file(self.dir.join("spec.json"));
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    pub fn ready(&self) -> Vec<String> {
        ids_in(&self.dir.join("ready"))
    }

    /// Members taken by a claim that has not finished, with their claimer.
    pub fn claimed(&self) -> Vec<(String, ProcId)> {
        let mut v: Vec<(String, ProcId)> = std::fs::read_dir(self.dir.join("claimed"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter_map(|n| {
                let mut parts = n.splitn(3, '.');
                let id = crate::spec::parse_id(parts.next()?).ok()?;
                let by = ProcId { pid: parts.next()?.parse().ok()?, start: parts.next()?.parse().ok()? };
                Some((id, by))
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    fn claimed_name(id: &str, by: ProcId) -> String {
        format!("{id}.{}.{}", by.pid, by.start)
    }

    pub fn dead(&self) -> Vec<String> {
        ids_in(&self.dir.join("dead"))
    }

    pub fn member(&self, place: &str, id: &str) -> Option<Member> {
        serde_json::from_str(&std::fs::read_to_string(self.dir.join(place).join(id)).ok()?).ok()
    }

    pub fn add_ready(&self, m: &Member) -> Result<()> {
        write_json(&self.dir.join("ready"), &m.id, m)
    }

    /// Take a ready member: true when this caller won it. The member's file
    /// moves to `claimed/` under a name that says who took it.
    pub fn take(&self, id: &str, by: ProcId) -> Result<bool> {
        let dir = self.dir.join("claimed");
        mkdir(&dir)?;
        match std::fs::rename(self.dir.join("ready").join(id), dir.join(Self::claimed_name(id, by))) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(format!("claiming {id} from pool {}", self.name), e)),
        }
    }

    /// The member a claimer took.
    pub fn taken(&self, id: &str, by: ProcId) -> Option<Member> {
        self.member("claimed", &Self::claimed_name(id, by))
    }

    /// A taken member whose check could not be made (the engine did not
    /// answer): back to `ready/`, as it was.
    pub fn put_back(&self, id: &str, by: ProcId) {
        let _ =
            std::fs::rename(self.dir.join("claimed").join(Self::claimed_name(id, by)), self.dir.join("ready").join(id));
    }

    /// A taken member found dead: on to `dead/`.
    pub fn give_up(&self, id: &str, by: ProcId) {
        let dir = self.dir.join("dead");
        if mkdir(&dir).is_ok() {
            let _ = std::fs::rename(self.dir.join("claimed").join(Self::claimed_name(id, by)), dir.join(id));
        }
    }

    pub fn drop_taken(&self, id: &str, by: ProcId) {
        self.drop_member("claimed", &Self::claimed_name(id, by));
    }

    /// Move a member between places (`ready`, `claimed`, `dead`); false when it was not there.
    pub fn shift(&self, id: &str, from: &str, to: &str) -> bool {
        let dir = self.dir.join(to);
        mkdir(&dir).is_ok() && std::fs::rename(self.dir.join(from).join(id), dir.join(id)).is_ok()
    }

    pub fn drop_member(&self, place: &str, id: &str) {
        let _ = std::fs::remove_file(self.dir.join(place).join(id));
    }

    /// How long ago a member file was last moved (its ctime: rename sets it).
    pub fn moved_ago(&self, place: &str, id: &str) -> Option<Duration> {
        let md = std::fs::symlink_metadata(self.dir.join(place).join(id)).ok()?;
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(md.ctime().max(0) as u64);
        Some(SystemTime::now().duration_since(at).unwrap_or_default())
    }

    pub fn status(&self) -> Status {
        std::fs::read_to_string(self.dir.join("status.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    /// Only into a recorded pool, and never making its directory: a refiller
    /// racing `pool rm` would otherwise leave `pools/NAME/status.json` behind.
    pub fn set_status(&self, s: &Status) {
        if self.exists() {
            let _ = write_json_in(&self.dir, "status.json", s);
        }
    }

    /// The refiller's lock, without waiting: None while another holds it.
    /// An open-file-description lock (released when the returned file
    /// closes, or the holder dies), so [`Pool::filling`] can test it
    /// without taking it: a probe that took it, even for a moment, would
    /// make a refiller starting at that moment think another is at work and exit.
    pub fn try_lock(&self) -> Result<Option<File>> {
        // Never made here: a refiller racing `pool rm` must not bring the directory back.
        let path = self.dir.join("fill.lock");
        let f = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let lock = whole_file(libc::F_WRLCK);
        match fcntl(f.as_raw_fd(), FcntlArg::F_OFD_SETLK(&lock)) {
            Ok(_) => Ok(Some(f)),
            Err(Errno::EAGAIN | Errno::EACCES) => Ok(None),
            Err(e) => Err(Error::io(format!("locking {}", path.display()), e.into())),
        }
    }

    /// Whether a refiller holds the lock now (tested, never taken).
    pub fn filling(&self) -> bool {
        let Ok(f) = File::open(self.dir.join("fill.lock")) else { return false };
        let mut lock = whole_file(libc::F_WRLCK);
        fcntl(f.as_raw_fd(), FcntlArg::F_OFD_GETLK(&mut lock)).is_ok() && lock.l_type != libc::F_UNLCK as libc::c_short
    }
}

/// A lock on the whole file (`l_pid` must be 0 for an OFD lock).
fn whole_file(kind: libc::c_int) -> libc::flock {
    // SAFETY: flock is plain old data; all-zero is a valid value of it.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l
}

pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}

#[cfg(test)]
mod tests;

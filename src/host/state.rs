//! sbx's host-side state: what a container label cannot hold because it
//! must change (a TTL moved by `sbx ttl`), must stay secret from images (the
//! ownership key), or must describe a create still in flight.
//!
//! Layout under the state directory (`SBX_DATA_DIR`, else `/var/lib/sbx`
//! for root, else `$XDG_STATE_HOME/sbx`, else `~/.local/state/sbx`; it
//! outlives reboots, unlike the socket root under /run):
//!
//! ```text
//! key                 32 random bytes, 0600: HMAC key for ownership tokens
//! expires/<id>        RFC 3339 expiry, rewritten atomically by `sbx ttl`
//! creating/<id>       "<pid> <starttime>" of a create still running
//! watchdog/<id>       "<pid> <starttime>" of the TTL watchdog
//! records/<id>        what `destroy` needs (see `SandboxRecord`), written once the sandbox runs
//! claims/<id>         a warm pool member's claim (`Claim`): session, claimer, complete
//! stopped/<id>        `sbx stop` stopped it (docker shows it `exited` like a program that ended)
//! paused/<id>         `sbx pause` froze it (destroy thaws it first: see `Mark::Paused`)
//! engines/<id>        the endpoint of the engine it lives on, unless the default one (`engine`)
//! image-config/<d>    an image's USER and whether it carries an sbx label, per digest
//! ```

use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub use crate::model::token::{owner_token, record_token};

use crate::error::HostError;
use crate::error::{Error, Result};

#[derive(Debug, Clone)]
pub struct StateChoice {
    pub explicit: Option<PathBuf>,
    pub xdg_state_home: Option<PathBuf>,
    pub home: Option<PathBuf>,
    pub euid: u32,
}

impl StateChoice {
    pub fn candidates(&self) -> Vec<PathBuf> {
        if let Some(p) = &self.explicit {
            return vec![p.clone()];
        }
        let mut v = Vec::new();
        if self.euid == 0 {
            v.push(PathBuf::from("/var/lib/sbx"));
        }
        if let Some(x) = &self.xdg_state_home {
            v.push(x.join("sbx"));
        }
        if let Some(h) = &self.home {
            v.push(h.join(".local/state/sbx"));
        }
        v
    }

    pub fn resolve(&self) -> Result<State> {
        let mut tried = Vec::new();
        for p in self.candidates() {
            // The helper is bind-mounted from here with `--mount src=...`.
            if p.to_string_lossy().contains([',', '"', '\n', '\r']) {
                tried.push(format!("{} (',', '\"' or newlines cannot be passed to docker --mount)", p.display()));
                continue;
            }
            match std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&p) {
                Ok(()) if nix::unistd::access(&p, nix::unistd::AccessFlags::W_OK).is_ok() => {
                    return Ok(State { dir: p })
                }
                Ok(()) => tried.push(format!("{} (not writable)", p.display())),
                Err(e) => tried.push(format!("{} ({e})", p.display())),
            }
        }
        Err(Error::Host(HostError::NoStateDir { tried: tried.join("; ") }))
    }
}

/// A process identity that survives pid reuse: the pid and its start time
/// in clock ticks since boot (field 22 of /proc/PID/stat).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcId {
    pub pid: i32,
    pub start: u64,
}

impl ProcId {
    pub fn current() -> Option<Self> {
        let pid = std::process::id() as i32;
        Some(ProcId { pid, start: start_time(pid)? })
    }

    pub fn is_alive(&self) -> bool {
        start_time(self.pid) == Some(self.start)
    }

    fn parse(s: &str) -> Option<Self> {
        let (p, t) = s.trim().split_once(' ')?;
        Some(ProcId { pid: p.parse().ok()?, start: t.parse().ok()? })
    }

    fn render(&self) -> String {
        format!("{} {}\n", self.pid, self.start)
    }
}

pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

fn parse_start_time(stat: &str) -> Option<u64> {
    stat_field(stat, 19)
}

/// Field `n` of a /proc/PID/stat line, counted from the state (0) on. The
/// command name before it is the process's own to choose, spaces and ')'
/// included, so fields are counted after the last ')'.
pub(crate) fn stat_field<T: std::str::FromStr>(stat: &str, n: usize) -> Option<T> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n)?.parse().ok()
}

#[derive(Debug, Clone)]
pub struct State {
    pub dir: PathBuf,
}

/// `engines` last: a forget cut short leaves the files still attributed.
const KINDS: &[&str] =
    &["expires", "creating", "watchdog", "records", "claims", "stopped", "paused", "hibernated", "engines"];

/// Who claimed a pool member, for what session: labels cannot change after
/// the member started, so `ls`, `inspect` and gc merge this with them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Claim {
    pub pool: String,
    pub session: Option<String>,
    /// The claiming process (pid, start time): an incomplete claim whose
    /// claimer is gone is reaped by gc.
    pub pid: i32,
    pub start: u64,
    /// Set once the id was printed.
    pub complete: bool,
}

/// What sbx made for a sandbox, so `destroy` can remove it with one docker
/// call: the full container id is unforgeable proof of ownership (no other
/// container can ever have it), where a name alone would need an inspect.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SandboxRecord {
    pub container: String,
    pub socket_dir: PathBuf,
    #[serde(default)]
    pub private: Vec<crate::model::record::PrivateRoute>,
    #[serde(default)]
    pub volume: Option<String>,
    #[serde(default)]
    pub session: Option<String>,
    /// The egress gate's container id, when the sandbox has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
}

/// A create recorded as in flight: the sandbox id, and the process making
/// it (None when its file does not parse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Creating {
    pub id: String,
    pub by: Option<ProcId>,
}

impl State {
    pub fn at(dir: PathBuf) -> Self {
        State { dir }
    }

    fn file(&self, kind: &str, id: &str) -> PathBuf {
        self.dir.join(kind).join(id)
    }

    /// The ownership key, made once. Concurrent first runs race safely: each
    /// writes a private temp file and hard-links it into place; the loser
    /// reads the winner's key.
    pub fn key(&self) -> Result<Vec<u8>> {
        let path = self.dir.join("key");
        match std::fs::read(&path) {
            Ok(k) if k.len() == 32 => return Ok(k),
            Ok(_) => return Err(Error::Host(HostError::BadKey { path })),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        }
        let key: [u8; 32] = rand::random();
        let tmp = self.dir.join(format!("key.{}.{:x}", std::process::id(), rand::random::<u32>()));
        write_private(&tmp, &key, true)?;
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(key.to_vec()),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                std::fs::read(&path).map_err(|e| Error::io(format!("reading {}", path.display()), e))
            }
            Err(e) => Err(Error::io(format!("writing {}", path.display()), e)),
        }
    }

    /// Write atomically (temp file and rename). Not fsynced: these files only
    /// matter while this host stays up, or can be found again; the key is.
    fn put(&self, kind: &str, id: &str, text: &str) -> Result<()> {
        let dir = self.dir.join(kind);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let tmp = dir.join(format!(".{id}.{}.{:x}", std::process::id(), rand::random::<u32>()));
        write_private(&tmp, text.as_bytes(), false)?;
        let dst = self.file(kind, id);
        std::fs::rename(&tmp, &dst).map_err(|e| Error::io(format!("writing {}", dst.display()), e))
    }

    fn get(&self, kind: &str, id: &str) -> Option<String> {
        std::fs::read_to_string(self.file(kind, id)).ok()
    }

    fn drop_file(&self, kind: &str, id: &str) {
        let _ = std::fs::remove_file(self.file(kind, id));
    }

    fn ids(&self, kind: &str) -> Vec<String> {
        std::fs::read_dir(self.dir.join(kind))
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| crate::spec::parse_id(n).is_ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn set_expiry(&self, id: &str, at: SystemTime) -> Result<()> {
        self.put("expires", id, &format!("{}\n", humantime::format_rfc3339_millis(at)))
    }

    /// The file [`Self::set_expiry`] writes: a remote sandbox's TTL watchdog
    /// ends when it goes (destroy and gc forget it), since nothing of a
    /// remote sandbox is on this machine's file system but its state here.
    pub fn expiry_file(&self, id: &str) -> PathBuf {
        self.file("expires", id)
    }

    pub fn expiry(&self, id: &str) -> Option<SystemTime> {
        humantime::parse_rfc3339(self.get("expires", id)?.trim()).ok()
    }

    pub fn expiring(&self) -> Vec<String> {
        self.ids("expires")
    }

    pub fn begin_create(&self, id: &str, who: ProcId) -> Result<()> {
        self.put("creating", id, &who.render())
    }

    pub fn end_create(&self, id: &str) {
        self.drop_file("creating", id);
    }

    /// Creates in flight (or whose creator died).
    pub fn creating(&self) -> Vec<Creating> {
        self.ids("creating")
            .into_iter()
            .map(|id| Creating { by: self.get("creating", &id).and_then(|s| ProcId::parse(&s)), id })
            .collect()
    }

    pub fn set_watchdog(&self, id: &str, who: ProcId) -> Result<()> {
        self.put("watchdog", id, &who.render())
    }

    pub fn watchdog(&self, id: &str) -> Option<ProcId> {
        ProcId::parse(&self.get("watchdog", id)?)
    }

    pub fn set_record(&self, id: &str, r: &SandboxRecord) -> Result<()> {
        let text = serde_json::to_string(r)
            .map_err(|source| Error::Host(HostError::Json { context: "encoding the sandbox record".into(), source }))?;
        self.put("records", id, &text)
    }

    /// The record of a sandbox, if one was written and still parses.
    pub fn record(&self, id: &str) -> Option<SandboxRecord> {
        let r: SandboxRecord = serde_json::from_str(&self.get("records", id)?).ok()?;
        // A container id is 64 lowercase hex digits; anything else is not ours.
        let ok =
            r.container.len() == 64 && r.container.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then_some(r)
    }

    pub fn set_claim(&self, id: &str, c: &Claim) -> Result<()> {
        let text = serde_json::to_string(c)
            .map_err(|source| Error::Host(HostError::Json { context: "encoding the claim".into(), source }))?;
        self.put("claims", id, &text)
    }

    pub fn claim(&self, id: &str) -> Option<Claim> {
        serde_json::from_str(&self.get("claims", id)?).ok()
    }

    pub fn claims(&self) -> Vec<String> {
        self.ids("claims")
    }

    /// The user and sbx-label verdict of a content-addressed image, as cached
    /// earlier: an image id or digest names immutable content, so neither
    /// changes. (The older `images/` cache held the user alone, without the
    /// label verdict, so it is not read.)
    pub fn image_user(&self, image: &str) -> Option<crate::docker::parse::ImageConfig> {
        let c: crate::docker::parse::ImageConfig =
            serde_json::from_str(&self.get("image-config", &image_key(image)?)?).ok()?;
        (c.version == crate::docker::parse::ImageConfig::VERSION).then_some(c)
    }

    pub fn set_image_user(&self, image: &str, config: &crate::docker::parse::ImageConfig) {
        if let (Some(k), Ok(text)) = (image_key(image), serde_json::to_string(config)) {
            let _ = self.put("image-config", &k, &text);
        }
    }

    /// The engine's runtimes (`docker info`'s raw answer) as last seen
    /// under `key` (see [`engine_key`]).
    pub fn runtimes(&self, key: &str) -> Option<String> {
        let v: serde_json::Value = serde_json::from_str(&self.get("engine", "runtimes")?).ok()?;
        (v["key"] == key).then(|| v["runtimes"].as_str().map(str::to_string)).flatten()
    }

    /// The engine's `DockerRootDir` as last seen under `key`.
    pub fn root_dir(&self, key: &str) -> Option<String> {
        let v: serde_json::Value = serde_json::from_str(&self.get("engine", "root-dir")?).ok()?;
        (v["key"] == key).then(|| v["root"].as_str().map(str::to_string)).flatten()
    }

    pub fn set_root_dir(&self, key: &str, root: &str) {
        let v = serde_json::json!({ "key": key, "root": root });
        let _ = self.put("engine", "root-dir", &v.to_string());
    }

    pub fn set_runtimes(&self, key: &str, runtimes: &str) {
        let v = serde_json::json!({ "key": key, "runtimes": runtimes });
        let _ = self.put("engine", "runtimes", &v.to_string());
    }

    /// Forget everything about a sandbox that is gone: everything kept here
    /// for `id` but its named checkpoints, which `fork --from` can still use.
    pub fn forget(&self, id: &str) {
        let _ = crate::host::checkpoints::Store::at(&self.dir).remove_transient(id);
        if crate::spec::parse_id(id).is_ok() {
            let _ = std::fs::remove_file(self.dir.join("checkpoints").join(".ops").join(id));
        }
        for k in KINDS {
            self.drop_file(k, id);
        }
    }
}

/// The digest of a pinned image reference, as a file name.
fn image_key(image: &str) -> Option<String> {
    let hex = image.rsplit_once("sha256:")?.1;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("{}-{hex}", if image.contains('@') { "d" } else { "i" }))
}

/// `data` into a new file at `path`, 0600 (never over an existing one).
pub(crate) fn write_private(path: &Path, data: &[u8], durable: bool) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    f.write_all(data)
        .and_then(|()| if durable { f.sync_all() } else { Ok(()) })
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

mod engine;
mod mark;
#[cfg(test)]
mod tests;
mod view;

pub use mark::Mark;
pub use view::View;

/// What identifies the local engine's runtime configuration:
/// dockerd changes its runtimes only when it reloads daemon.json (SIGHUP)
/// or restarts, and an operator edits the file before either; so the file's
/// identity and dockerd's pid file make a key under which `docker info`'s
/// runtimes may be remembered. None (ask every time) unless the engine is
/// the default local one (`default_engine`: no DOCKER_HOST, no context;
/// see `model::engine::Engine::default`) and both files can be read.
pub fn engine_key(default_engine: bool) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if !default_engine {
        return None;
    }
    let pid = std::fs::read_to_string("/var/run/docker.pid").ok()?;
    let pid_file = std::fs::metadata("/var/run/docker.pid").ok()?;
    let conf = match std::fs::metadata("/etc/docker/daemon.json") {
        Ok(m) => format!("{}:{}:{}.{}", m.ino(), m.size(), m.mtime(), m.mtime_nsec()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "none".into(),
        Err(_) => return None,
    };
    Some(format!("dockerd {} {}.{} conf {conf}", pid.trim(), pid_file.mtime(), pid_file.mtime_nsec()))
}

//! Which of sbx's uids (`model::ids::SBX_UIDS`) each sandbox, each
//! sandbox's own services (its egress gate and forwarders) and each
//! persisted session holds: a table under an exclusive lock, so two sbx
//! processes never hand out one uid. A uid is also its gid.
//!
//! The kernel counts inotify instances and watches, mqueue bytes, pending
//! signals and pipe pages per uid: sandboxes that share a uid share those
//! limits, and one can exhaust them for the others. Docker 20.10 has no
//! per-container user namespace, so the uid itself must differ.
//!
//! Where the table is: root on a local engine keeps one for the whole
//! machine ([`HOST_WIDE`]), whatever the data dir, since the limits are the
//! kernel's; anyone else keeps it in their data dir (another operator's
//! sbx may pick the same uid: the chance is in README). An entry is
//! written before `docker run`; it is freed when its sandbox is destroyed
//! and pruned by the calls that list containers anyway (gc, ls, pool
//! refill) once no container carries it and its creator is dead, so a
//! create killed half way leaves nothing that lasts. A persisted session's
//! entry lasts as long as its data dir (its files are owned by the uid).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, HostError, Result};
use crate::host::state::ProcId;
use crate::model::ids::{in_sbx_range, Reserved, SBX_UID_BASE, SBX_UID_COUNT};

/// The machine-wide table of root on a local engine.
pub const HOST_WIDE: &str = "/var/lib/sbx/uids";

/// What holds a uid.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "name")]
pub enum Holder {
    /// A sandbox, by id.
    Sandbox(String),
    /// A sandbox's egress gate and forwarders, by the sandbox's id.
    Service(String),
    /// A persisted session, by key (of its data dir).
    Session(String),
}

impl Holder {
    /// The sandbox id a sandbox's or a service's entry lives as long as.
    fn sandbox(&self) -> Option<&str> {
        match self {
            Holder::Sandbox(id) | Holder::Service(id) => Some(id),
            Holder::Session(_) => None,
        }
    }
}

/// One uid held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub uid: u32,
    /// The engine's endpoint: only a listing of that engine prunes it.
    pub engine: String,
    /// The data dir of the sbx that made it (a session's key is its).
    pub data: PathBuf,
    pub holder: Holder,
    /// The create that wrote it: while it runs, no container carries it yet.
    pub by: Option<ProcId>,
}

/// Whose table entries an sbx writes and prunes: its engine and data dir.
#[derive(Debug, Clone)]
pub struct Place<'a> {
    pub engine: &'a str,
    pub data: &'a Path,
}

/// A container a listing saw: its name and the uid its `sbx.user` names.
pub struct Live {
    pub name: String,
    pub uid: Option<u32>,
}

/// The table: `uids.json` and its lock in `dir`.
#[derive(Debug, Clone)]
pub struct Table {
    dir: PathBuf,
}

/// Whether a uid must not be handed out although no entry holds it.
pub type Refuse<'a> = &'a dyn Fn(u32) -> bool;

impl Table {
    pub fn at(dir: PathBuf) -> Self {
        Table { dir }
    }

    fn file(&self) -> PathBuf {
        self.dir.join("uids.json")
    }

    /// The entries, with the lock held until the guard drops.
    fn locked(&self) -> Result<(nix::fcntl::Flock<fs::File>, Vec<Entry>)> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| Error::io(format!("making {}", self.dir.display()), e))?;
        let lock = crate::host::lockfile::exclusive(&self.dir.join("uids.lock"))?;
        let entries = match fs::read(self.file()) {
            Ok(b) => serde_json::from_slice(&b).map_err(|source| {
                Error::from(HostError::Json { context: format!("reading {}", self.file().display()), source })
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Error::io(format!("reading {}", self.file().display()), e)),
        };
        Ok((lock, entries))
    }

    /// Written whole and renamed over the old one (the lock is held).
    fn save(&self, entries: &[Entry]) -> Result<()> {
        let file = self.file();
        let tmp = self.dir.join(format!("uids.json.{}", std::process::id()));
        let bytes = serde_json::to_vec(entries)
            .map_err(|source| Error::from(HostError::Json { context: "encoding the uid table".into(), source }))?;
        fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
            .and_then(|()| fs::rename(&tmp, &file))
            .map_err(|e| Error::io(format!("writing {}", file.display()), e))
    }

    /// The uid `holder` holds at `place`, made if it holds none: the first
    /// free one from `start` on (a random number; wrapping), free meaning no
    /// entry of any place has it and `refuse` does not refuse it. Returns
    /// whether it was made now.
    pub fn claim(&self, place: &Place, holder: Holder, start: u32, refuse: Refuse) -> Result<(u32, bool)> {
        let (_lock, mut entries) = self.locked()?;
        let mine = |e: &Entry| e.holder == holder && e.engine == place.engine && e.data == place.data;
        if let Some(e) = entries.iter().find(|e| mine(e)) {
            return Ok((e.uid, false));
        }
        let taken: std::collections::BTreeSet<u32> = entries.iter().map(|e| e.uid).collect();
        let uid = (0..SBX_UID_COUNT)
            .map(|i| SBX_UID_BASE + (start.wrapping_add(i) % SBX_UID_COUNT))
            .find(|u| !taken.contains(u) && !refuse(*u))
            .ok_or(HostError::UidsExhausted { table: self.file() })?;
        entries.push(Entry {
            uid,
            engine: place.engine.into(),
            data: place.data.into(),
            holder,
            by: ProcId::current(),
        });
        self.save(&entries)?;
        Ok((uid, true))
    }

    /// Free what `holders` hold at `place` (destroy, a failed create).
    pub fn release(&self, place: &Place, holders: &[Holder]) -> Result<()> {
        let (_lock, mut entries) = self.locked()?;
        let before = entries.len();
        entries.retain(|e| !(e.engine == place.engine && e.data == place.data && holders.contains(&e.holder)));
        if entries.len() != before {
            self.save(&entries)?;
        }
        Ok(())
    }

    /// After a listing of every sbx container on `place`'s engine: drop
    /// what no container carries and no live create is making (a session's
    /// entry: once its data dir is gone), and take in what a container
    /// carries that no entry has (written by a table since lost), so the
    /// next claim avoids it.
    pub fn prune(&self, place: &Place, live: &[Live], alive: &dyn Fn(&ProcId) -> bool) -> Result<()> {
        let (_lock, mut entries) = self.locked()?;
        let names: std::collections::BTreeSet<&str> = live.iter().map(|l| l.name.as_str()).collect();
        let uids: BTreeMap<u32, &str> = live.iter().filter_map(|l| Some((l.uid?, l.name.as_str()))).collect();
        let before = entries.clone();
        entries.retain(|e| {
            e.engine != place.engine
                || match e.holder.sandbox() {
                    Some(id) => names.contains(id) || uids.contains_key(&e.uid) || e.by.is_some_and(|p| alive(&p)),
                    None => e.data.exists(),
                }
        });
        for (uid, name) in uids {
            if in_sbx_range(uid) && !entries.iter().any(|e| e.uid == uid) {
                entries.push(Entry {
                    uid,
                    engine: place.engine.into(),
                    data: place.data.into(),
                    holder: Holder::Sandbox(name.into()),
                    by: None,
                });
            }
        }
        if entries != before {
            self.save(&entries)?;
        }
        Ok(())
    }
}

/// What no sandbox may be given besides what others hold: an id reserved
/// as uid or gid (the caller's, the docker socket's), or one this
/// machine's user or group database names (NSS: files, LDAP alike), whose
/// owner's files and limits it would share. A remote engine's machine is
/// not this one: its accounts cannot be looked up from here.
pub fn refused(reserved: &Reserved, local: bool) -> impl Fn(u32) -> bool + '_ {
    move |id| {
        reserved.why_uid(id).is_some()
            || reserved.why_gid(id).is_some()
            || (local
                && (nix::unistd::User::from_uid(id.into()).ok().flatten().is_some()
                    || nix::unistd::Group::from_gid(id.into()).ok().flatten().is_some()))
    }
}

#[cfg(test)]
mod tests;

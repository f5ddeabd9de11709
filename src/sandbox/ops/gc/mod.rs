//! `gc`: reap expired sandboxes, those of creates that died, orphaned
//! socket directories, private networks, session state and egress gates. What goes is
//! decided by the pure [`plan`]; this file asks docker and removes it.

mod egress;
mod filler;

pub mod plan;
mod pools;
mod probes;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use crate::docker::parse::RawContainer;
use crate::docker::parse::{self, PrivateNetwork, SessionVolume};
use crate::docker::{argv, run_ok, status_error};
use crate::error::{Error, Result, NOT_TRIED};
use crate::host::persist;
use crate::host::socket;
use crate::host::state::{self, ProcId, State};
use crate::model::record;
use crate::sandbox::shared::removal::journal_expired;
use crate::sandbox::shared::sessions::remove_session_state;
use crate::sandbox::{is_timeout, Driver, HostState};

/// What `gc` removed, or would remove with `--dry-run`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    pub dry_run: bool,
    pub containers: Vec<crate::sandbox::gc::plan::Reap>,
    pub socket_dirs: Vec<String>,
    pub networks: Vec<String>,
    /// Session state under the data dir whose volume is gone and that holds
    /// no data: an empty session directory and its lock file (paths).
    pub volume_state: Vec<String>,
    /// Session volumes made again: their volume was gone (`docker volume
    /// rm`, `docker volume prune`) but their directory holds a session's
    /// work, which gc never deletes; the next `create --persist --session`
    /// finds it, `sbx volumes rm` deletes it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restored_volumes: Vec<String>,
    /// Clone scratch directories an sbx killed mid-`--clone` left (their
    /// cloning process is gone, or, named by an older sbx, a day untouched),
    /// in the data dir's `volumes/`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clone_scratch: Vec<String>,
    /// Half-made session images and loop devices of unmounted ones that a
    /// killed create left (`persist::image::leftovers`).
    pub persist_leftovers: Vec<String>,
    /// Egress gates (container names) whose sandbox is gone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<String>,
    /// Private routes' forwarders (container names) whose sandbox is gone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub forwarders: Vec<String>,
    /// Egress policy directories whose sandbox is gone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub policy_dirs: Vec<String>,
    /// Kept decision logs of gates gone for longer than `host::egress::KEPT_LOG_DAYS`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub egress_logs: Vec<String>,
    /// sbx's own egress network, once no gate uses it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub egress_networks: Vec<String>,
    /// Fillers a killed remote create left (`filler`): of the helper volume or a session's backing volume.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fillers: Vec<String>,
    /// Audit's status probes left behind past their expiry (container names).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<String>,
    /// What could not be removed, and why (one failure
    /// must not stop the rest; gc exits 1 at the end).
    pub failed: Vec<GcFailure>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GcFailure {
    pub item: String,
    pub error: String,
}

impl Driver {
    /// Reap expired sandboxes, sandboxes of creates that died, orphaned
    /// socket directories and stale state, in a few batched docker calls.
    /// Safe to run concurrently with other sbx commands and with itself:
    /// every removal tolerates "already gone".
    pub fn gc(&self, dry_run: bool) -> Result<GcReport> {
        let HostState { state, key } = self.state()?;
        let root = self.roots.resolve()?;
        let engine = self.engine()?;
        let local = !engine.is_remote();
        // This machine's files of sandboxes on other engines (a
        // remote sandbox's marker, TTL and marks; a local one's, seen from
        // gc against a remote engine) are not this engine's to judge: only
        // ids attributed to it count (`State::set_engine`).
        let mine = |id: &str| state.belongs(id, &engine.endpoint);
        let (owned, creating, mut plan) = self.reap_plan(state, key, &root, &mine, dry_run)?;
        let expiry = |r: &RawContainer| r.expiry(state.expiry(&r.name));
        let mut report = GcReport {
            dry_run,
            containers: plan.containers.clone(),
            networks: plan.networks.iter().map(|p| p.network.clone()).collect(),
            ..GcReport::default()
        };
        if let Err(e) = self.gc_audit_probes(dry_run, &mut report) {
            report.failed.push(GcFailure { item: "audit probes".into(), error: e.to_string() });
        }
        let reaped: Vec<&RawContainer> =
            owned.iter().filter(|c| plan.containers.iter().any(|r| r.id == c.name)).collect();
        let mut dirs = reaped_dirs(&reaped, &plan, &root, local);
        report.socket_dirs = dirs.iter().filter(|(d, _)| d.exists()).map(|(d, _)| d.display().to_string()).collect();
        let orphaned = if local { self.orphan_volume_state(state, key)? } else { Vec::new() };
        // What a dry run says; a real one reports what it then did.
        for (session, paths) in &orphaned {
            if persist::session_holds_data(&state.dir, session) {
                report.restored_volumes.push(persist::volume_name(session));
            } else {
                report.volume_state.extend(paths.iter().cloned());
            }
        }
        // This machine's, whichever engine: their cloning process is gone.
        let mut at = vec![state.dir.join("volumes"), persist::remote_dir(&state.dir)];
        at.extend(persist::image::mounted_dirs(&state.dir));
        let scratch: Vec<PathBuf> = at.iter().flat_map(|d| persist::stale_scratch(d)).collect();
        report.clone_scratch = scratch.iter().map(|p| p.display().to_string()).collect();
        // A killed create's half-made image or loop device (never an image: data).
        report.persist_leftovers = if local { persist::image::leftovers(&state.dir, !dry_run) } else { Vec::new() };
        // What stays: sandboxes not reaped, and creates in flight.
        let reaping: BTreeSet<&str> = plan.containers.iter().map(|r| r.id.as_str()).collect();
        let mut keep: BTreeSet<String> =
            owned.iter().map(|c| c.name.clone()).filter(|n| !reaping.contains(n.as_str())).collect();
        keep.extend(creating.iter().filter(|c| c.by.as_ref().is_some_and(|p| p.is_alive())).map(|c| c.id.clone()));
        if !local {
            self.gc_fillers(key, dry_run, &mut report)?;
        }
        gc_abandoned_forks(&state.dir, dry_run);
        if dry_run {
            report.forwarders = self.gc_forwarders(&keep, true)?;
            self.gc_egress(&keep, &mine, true, &mut report)?;
            return Ok(report);
        }
        // Before the removal, so `sbx events` shows why it goes before it goes.
        let now = SystemTime::now();
        for c in reaped.iter().filter(|c| expiry(c).is_some_and(|e| e <= now)) {
            journal_expired(&state.dir, &c.name, c.labels.get(record::SESSION).cloned());
        }
        for p in &scratch {
            if let Err(e) = std::fs::remove_dir_all(p) {
                report.clone_scratch.retain(|d| *d != p.display().to_string());
                report.failed.push(GcFailure { item: format!("clone scratch {}", p.display()), error: e.to_string() });
            }
        }
        report.volume_state.clear();
        report.restored_volumes.clear();
        self.settle_orphans(state, key, &orphaned, &mut report);
        let mut fail = |item: String, e: &dyn std::fmt::Display| {
            report.failed.push(GcFailure { item, error: e.to_string() });
        };
        let (hung, left) = self.remove_reaped(&reaped, &mut fail);
        // Forwarders before their networks; those of sandboxes still there stay.
        let standing: BTreeSet<String> = keep.iter().chain(left.iter()).cloned().collect();
        let forwarders = match self.gc_forwarders(&standing, false) {
            Ok(names) => names,
            Err(e) => {
                fail("route forwarders".into(), &e);
                Vec::new()
            }
        };
        if hung && !plan.networks.is_empty() {
            // Each network call would only wait out its own deadline too.
            fail(format!("private route networks {}", report.networks.join(" ")), &NOT_TRIED);
            report.networks.clear();
        } else if let Err(e) = self.remove_private(&plan.networks) {
            fail(format!("private route networks {}", report.networks.join(" ")), &e);
        }
        // A sandbox still there keeps its directory and state for the next gc.
        report.containers.retain(|c| !left.contains(&c.id));

        dirs.retain(|(_, id)| !left.contains(id));
        report.socket_dirs.retain(|d| dirs.iter().any(|(dir, _)| dir.display().to_string() == *d));
        plan.forget.retain(|id| !left.contains(id));
        let mut kept = Vec::new();
        for (dir, id) in &dirs {
            if let Err(e) = socket::remove_dir(dir, id) {
                fail(format!("socket directory {}", dir.display()), &e);
                kept.push(dir.display().to_string());
            }
        }
        report.socket_dirs.retain(|d| !kept.contains(d));
        for id in &plan.forget {
            state.forget(id);
        }
        let standing: Vec<String> = keep.iter().chain(left.iter()).cloned().collect();
        let removed: Vec<String> = report.containers.iter().map(|c| c.id.clone()).collect();
        self.pool_forget_gone(state, &standing, &removed, &mine);
        report.forwarders = forwarders;
        // Gates of sandboxes still there (a failed removal) stay with them.
        keep.extend(left);
        if let Err(e) = self.gc_egress(&keep, &mine, false, &mut report) {
            report.failed.push(GcFailure { item: "egress gates".into(), error: e.to_string() });
        }
        Ok(report)
    }

    /// Session state whose volume is gone: removed when it holds nothing,
    /// its volume made again when it holds a session's work; a create of
    /// that session holding its lock now (or having made its volume) means
    /// it is not orphaned.
    fn settle_orphans(&self, state: &State, key: &[u8], orphaned: &[(String, Vec<String>)], report: &mut GcReport) {
        for (session, paths) in orphaned {
            match self.settle_orphan_volume_state(state, key, session) {
                Ok(Orphan::Removed) => report.volume_state.extend(paths.iter().cloned()),
                Ok(Orphan::Restored) => report.restored_volumes.push(persist::volume_name(session)),
                Ok(Orphan::Live) => {}
                Err(e) => {
                    report.failed.push(GcFailure { item: format!("session state {session}"), error: e.to_string() })
                }
            }
        }
    }

    /// What this gc reaps, from the socket entries, the engine's private
    /// networks and sbx containers, the creates in flight and the ids with
    /// state, plus idle pool members past their time. Order matters: socket
    /// entries, then containers, then creates in flight, so a create racing
    /// this gc is seen in at least one of them; and a create may have
    /// finished between `docker ps` and reading the creates in flight, so
    /// any candidate orphan that is a container now is kept.
    fn reap_plan(
        &self,
        state: &State,
        key: &[u8],
        root: &Path,
        mine: &dyn Fn(&str) -> bool,
        dry_run: bool,
    ) -> Result<(Vec<RawContainer>, Vec<state::Creating>, plan::GcPlan)> {
        // Order matters: socket entries, then containers, then creates in
        // flight, so a create racing this gc is seen in at least one of them.
        let entries: Vec<String> = std::fs::read_dir(root)
            .map_err(|e| Error::io(format!("reading {}", root.display()), e))?
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| mine(n))
            .collect();
        let out = run_ok(&*self.docker, &argv::private_networks())?;
        let private_networks: Vec<PrivateNetwork> = parse::rows::<PrivateNetwork>(&out.stdout_str())
            .into_iter()
            .filter(|n| n.owner == state::owner_token(key, &n.sandbox))
            .collect();
        let out = run_ok(&*self.docker, &argv::list())?;
        let all = crate::docker::parse::parse_ps(&out.stdout_str(), "docker ps")?;
        // Every sbx's sandboxes on this engine: what the uid table keeps.
        self.prune_uids(&all);
        let owned: Vec<RawContainer> = all.into_iter().filter(|r| r.is_sbx(key)).collect();
        let creating = state.creating();
        let my_creating: Vec<_> = creating.iter().filter(|c| mine(&c.id)).cloned().collect();
        // Ids with state to forget once their container is gone: expiries,
        // marks, attributions left alone by a forget cut short, and
        // checkpoints (of a sandbox removed with docker itself).
        let mut expiring = state.expiring();
        expiring.extend(state.marked_ids());
        expiring.extend(state.attributed());
        // The hibernation and fork leftovers of a sandbox removed behind
        // sbx's back (or by a destroy killed before it forgot them) go with
        // its other state; its named checkpoints stay.
        expiring.extend(crate::host::checkpoints::Store::at(&state.dir).with_transient());
        expiring.retain(|id| mine(id));
        let expiry = |r: &RawContainer| r.expiry(state.expiry(&r.name));
        let marked: BTreeSet<String> = creating.iter().map(|c| c.id.clone()).collect();
        let argvs = std::cell::OnceCell::new();
        let calling =
            |id: &str| argvs.get_or_init(|| command_lines(&self.proc)).iter().any(|a: &String| a.contains(id));
        let mut plan = crate::sandbox::gc::plan::plan(&crate::sandbox::gc::plan::Inputs {
            containers: &owned,
            creating: &my_creating,
            marked: &marked,
            expiring: &expiring,
            socket_entries: &entries,
            private_networks: &private_networks,
            expiry: &expiry,
            alive: &|p: &ProcId| p.is_alive(),
            calling: &calling,
            now: SystemTime::now(),
        });
        let live_creates: Vec<String> =
            creating.iter().filter(|c| c.by.as_ref().is_some_and(|p| p.is_alive())).map(|c| c.id.clone()).collect();
        for r in self.pool_reaps(state, &owned, &live_creates, dry_run) {
            if !plan.containers.iter().any(|c| c.id == r.id) {
                plan.forget.push(r.id.clone());
                plan.containers.push(r);
            }
        }
        let started = self.confirm_unstarted(&mut plan)?;
        plan.networks.retain(|n| !private_networks.iter().any(|p| p.name == n.network && started.contains(&p.sandbox)));
        // A create may have finished between `docker ps` and reading the
        // creates in flight: keep any candidate orphan that is a container now.
        if !plan.orphan_dirs.is_empty() {
            let exists: Vec<String> = self.inspect_existing(&plan.orphan_dirs)?.into_iter().map(|r| r.name).collect();
            plan.orphan_dirs.retain(|d| !exists.contains(d));
        }
        Ok((owned, creating, plan))
    }

    /// A create may have started its sandbox and ended its mark between
    /// `docker ps` and reading the marks: a sandbox reaped for never having
    /// started is looked at again, and kept (its state, its networks) unless
    /// docker still says `created`. Returns those kept.
    fn confirm_unstarted(&self, plan: &mut plan::GcPlan) -> Result<BTreeSet<String>> {
        if plan.unstarted.is_empty() {
            return Ok(BTreeSet::new());
        }
        let now = self.inspect_existing(&plan.unstarted)?;
        let started: BTreeSet<String> = plan
            .unstarted
            .iter()
            .filter(|id| now.iter().any(|r| r.name == **id && r.state != "created"))
            .cloned()
            .collect();
        plan.containers.retain(|r| !started.contains(&r.id));
        plan.forget.retain(|id| !started.contains(id));
        plan.unstarted.retain(|id| !started.contains(id));
        Ok(started)
    }

    /// Remove the reaped sandboxes in paced batches (one failed batch is
    /// reported, the rest go on); returns whether the engine stopped
    /// answering, and the ids still there.
    fn remove_reaped(
        &self,
        reaped: &[&RawContainer],
        fail: &mut dyn FnMut(String, &dyn std::fmt::Display),
    ) -> (bool, BTreeSet<String>) {
        let mut hung = false;
        let mut left: BTreeSet<String> = BTreeSet::new();
        if !reaped.is_empty() {
            let ids: Vec<String> = reaped.iter().map(|c| c.name.clone()).collect();
            self.thaw(ids.iter().map(|i| (i.as_str(), i.as_str())));
            // Paced: one failed batch is reported, the rest go on.
            let mut untried = Vec::new();
            for (batch, e) in self.remove_paced(&ids) {
                match e {
                    Some(e) => {
                        hung |= is_timeout(&e);
                        fail(format!("containers {}", batch.join(" ")), &e)
                    }
                    None => untried.extend(batch.iter().cloned()),
                }
                left.extend(batch);
            }
            if !untried.is_empty() {
                fail(format!("containers {}", untried.join(" ")), &NOT_TRIED);
            }
        }
        (hung, left)
    }

    /// Sessions whose directory or lock file under the data dir has no
    /// volume any more (a create killed between the two, a volume removed
    /// behind sbx's back), with their paths. One `docker volume
    /// ls`, and only when the data dir holds session state at all.
    fn orphan_volume_state(&self, state: &State, key: &[u8]) -> Result<Vec<(String, Vec<String>)>> {
        let dir = state.dir.join("volumes");
        let mut sessions: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(name) = e.file_name().into_string() else { continue };
            let session = persist::image::session_of(&name).to_string();
            // Only names sbx makes: a session key (see `spec::parse_session`).
            if crate::spec::parse_session(&session).is_err() {
                continue;
            }
            sessions.entry(session).or_default().push(dir.join(&name).display().to_string());
        }
        if sessions.is_empty() {
            return Ok(Vec::new());
        }
        sessions.values_mut().for_each(|paths| paths.sort());
        let out = run_ok(&*self.docker, &crate::docker::argv::session_volumes())?;
        let volumes: Vec<String> = parse::rows::<SessionVolume>(&out.stdout_str())
            .into_iter()
            .filter(|v| v.owner == state::owner_token(key, &v.name))
            .map(|v| v.name)
            .collect();
        Ok(sessions.into_iter().filter(|(s, _)| !volumes.contains(&persist::volume_name(s))).collect())
    }

    /// Settle a session's orphaned state under its lock, taken without
    /// waiting. The volume is looked up again under the lock, since a create
    /// may have finished since the list; only docker's "no such volume" says
    /// it is gone. A directory that holds anything is the session's work:
    /// its volume is made again (as create makes it), never the work
    /// deleted because a docker object went (`docker volume prune` removes
    /// every unused volume and leaves a bind's data on disk). Only an empty
    /// directory (a create killed before `docker volume create`) and a lone
    /// lock file go.
    fn settle_orphan_volume_state(&self, state: &State, key: &[u8], session: &str) -> Result<Orphan> {
        let Some(_lock) = persist::try_lock(&state.dir, session)? else { return Ok(Orphan::Live) };
        let name = persist::volume_name(session);
        let args = argv::volume_inspect(&name);
        let out = self.docker.run(&args)?;
        if out.status == 0 {
            return Ok(Orphan::Live);
        }
        if !parse::no_such_volume(&out.stderr_str()) {
            return Err(status_error(&args, &out).into());
        }
        if persist::session_holds_data(&state.dir, session) {
            let dir = persist::image::volume_device(&state.dir, session);
            run_ok(&*self.docker, &argv::volume_create(&name, &dir, session, &state::owner_token(key, &name)))?;
            return Ok(Orphan::Restored);
        }
        remove_session_state(state, session)?;
        Ok(Orphan::Removed)
    }
}

/// What gc did with a session's state whose volume looked gone.
enum Orphan {
    /// A create holds the session's lock, or the volume is there after all.
    Live,
    /// Nothing of the session's work was there: its empty directory and lock file went.
    Removed,
    /// Its directory holds the session's work: its volume was made again.
    Restored,
}

/// The socket directories of the reaped sandboxes and of orphans, each with
/// its id. A remote create's sandbox has its socket inside and only a
/// marker here, named by its id, whichever engine it is on.
fn reaped_dirs(reaped: &[&RawContainer], plan: &plan::GcPlan, root: &Path, local: bool) -> Vec<(PathBuf, String)> {
    // A remote create's sandbox has its socket inside and
    // only a marker here, named by its id, whichever engine it is on.
    let relayed = |c: &&&RawContainer| {
        c.labels.get(record::SOCKET).map(String::as_str) == Some(crate::model::paths::SANDBOX_SOCKET)
    };
    let mut dirs: Vec<(PathBuf, String)> = reaped
        .iter()
        .filter(|c| local && !relayed(c))
        .filter_map(|c| Some((Path::new(c.labels.get(record::SOCKET)?).parent()?.to_path_buf(), c.name.clone())))
        .collect();
    dirs.extend(reaped.iter().filter(relayed).map(|c| (root.join(&c.name), c.name.clone())));
    dirs.extend(plan.orphan_dirs.iter().map(|id| (root.join(id), id.clone())));
    dirs
}

/// The argv of every other process on this machine, each joined into one
/// string. The docker CLI always runs here, whichever engine it talks to,
/// and a create's calls name its sandbox (`--name`, `sbx.id=`). Read only
/// when a dead create has no container, so rarely.
fn command_lines(proc: &Path) -> Vec<String> {
    let me = std::process::id().to_string();
    std::fs::read_dir(proc)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n != me && n.bytes().all(|b| b.is_ascii_digit())))
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .collect()
}

/// A killed fork's own checkpoint of a parent that runs on (a gone
/// parent's goes with its other state), and a killed save's partial copy.
fn gc_abandoned_forks(data: &std::path::Path, dry_run: bool) {
    if dry_run {
        return;
    }
    let alive = |pid, start| crate::host::state::ProcId { pid, start }.is_alive();
    let store = crate::host::checkpoints::Store::at(data);
    for (id, name) in store.remove_abandoned_forks(&alive) {
        tracing::info!(%id, %name, "removed a killed fork's checkpoint");
    }
    // And what a killed save left beside whole checkpoints.
    store.sweep_unheld();
}

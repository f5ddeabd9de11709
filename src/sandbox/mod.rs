//! The sandbox lifecycle in terms of docker calls: [`Driver`], one file or
//! folder per operation under `ops/` (create, destroy, egress, events, gc,
//! lifecycle: stop/start/pause/resume, pool, revoke, ttl, volumes), each an
//! `impl Driver` block, and under `shared/` what more than one of them uses.
//! An operation names only `shared/` and the driver's public API, never
//! another operation (`src/layering.rs`). This file holds the driver itself
//! and the look-ups every operation shares (inspect, list, ownership).
//!
//! Every docker call goes through the injected [`DockerExec`]; the driver
//! decides what to run, in which order, and what to undo when a step fails.

mod ops;
pub mod shared;

pub use ops::create::Created;
pub use ops::destroy::Destroyed;
pub use ops::gc::{GcFailure, GcReport};
pub use ops::lifecycle::{whole_seconds, Changed};
pub use ops::revoke::Revoked;
pub use ops::{events, gc, pool};
pub use shared::boundary;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use crate::docker::pace::Pace;
use crate::docker::parse::RawContainer;
use crate::docker::{argv, parse, status_error, DockerExec};
use crate::error::SandboxError;
use crate::error::{DockerError, Error, Result};
use crate::host::engine::EngineChoice;
use crate::host::socket::RootChoice;
use crate::host::state::{ProcId, State, StateChoice};
use crate::model::engine::Engine;
use crate::model::ids::Reserved;
use crate::model::names::{ContainerId, SandboxId};
use crate::model::record::Record;
use crate::spec;
use crate::workbench::Target;

/// Returns the signal number once one is pending (see `interrupt`).
pub type InterruptCheck = Arc<dyn Fn() -> Option<i32> + Send + Sync>;
pub type IdSource = Arc<dyn Fn() -> String + Send + Sync>;
/// The ids no sandbox on an engine may run as (`host::invoker::reserved`).
pub type ReservedIds = Arc<dyn Fn(&Engine) -> Reserved + Send + Sync>;
/// A number: where the search for a free uid starts (see `host::uids`).
pub type UidStart = Arc<dyn Fn() -> u32 + Send + Sync>;

/// The state directory and the key that proves what this host made.
pub struct HostState {
    pub state: State,
    pub key: Vec<u8>,
}

pub struct Driver {
    /// The docker CLI, behind its seam (the real one, or the fake in tests).
    docker: Arc<dyn DockerExec>,
    roots: RootChoice,
    states: StateChoice,
    state: OnceLock<HostState>,
    interrupted: InterruptCheck,
    new_id: IdSource,
    /// Where the host's /proc is (tests point it at a directory of their own).
    proc: PathBuf,
    /// Where the host's cgroup file system is mounted (in a test, below its /proc).
    cgroups: PathBuf,
    /// How bulk removals are batched (see `docker::pace`).
    pace: Pace,
    /// The sbx executable packed into the egress gate's image (`host::self_image`).
    exe: PathBuf,
    /// What names the engine, resolved on first use.
    engine_choice: EngineChoice,
    engine: OnceLock<Engine>,
    reserved: ReservedIds,
    /// Where the uid table is (`host::uids`); None: where `uid_table` says.
    uid_table: Option<PathBuf>,
    /// Where a new uid's search starts in sbx's range (random).
    uid_start: UidStart,
}

impl Driver {
    pub fn new(docker: Arc<dyn DockerExec>, roots: RootChoice, states: StateChoice) -> Self {
        Driver {
            docker,
            roots,
            states,
            state: OnceLock::new(),
            interrupted: Arc::new(|| None),
            new_id: Arc::new(spec::new_id),
            proc: PathBuf::from("/proc"),
            cgroups: PathBuf::from("/sys/fs/cgroup"),
            pace: Pace::default(),
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe")),
            // Tests get the default local engine (no config file is read).
            engine_choice: EngineChoice::default(),
            engine: OnceLock::new(),
            reserved: Arc::new(crate::host::invoker::reserved),
            uid_table: None,
            uid_start: Arc::new(rand::random::<u32>),
        }
    }

    /// Where the engine is named (DOCKER_HOST, contexts); see `host::engine`.
    pub fn with_engine(mut self, choice: EngineChoice) -> Self {
        self.engine_choice = choice;
        self
    }

    /// Err (exit 1, before any docker call) when the engine is remote and
    /// `what` needs this machine to be the engine's (its /proc, its files):
    /// what later work brings.
    pub fn local_only(&self, what: &str) -> Result<()> {
        let engine = self.engine()?;
        if engine.is_remote() {
            return Err(Error::Host(crate::error::HostError::RemoteUnsupported {
                what: format!("{what} (the engine is {})", engine.endpoint),
            }));
        }
        Ok(())
    }

    /// Where the engine is, resolved once (no docker call in the default case).
    pub fn engine(&self) -> Result<&Engine> {
        if let Some(e) = self.engine.get() {
            return Ok(e);
        }
        let e = self.engine_choice.resolve(&*self.docker)?;
        Ok(self.engine.get_or_init(|| e))
    }

    /// The sbx executable packed into sbx's own image (the egress gate, audit's probe).
    pub fn exe(&self) -> &std::path::Path {
        &self.exe
    }

    /// sbx's own image on this engine: the id this data dir's own `docker
    /// import` returned, with no docker call once recorded (see
    /// `host::self_image`; never found by a label or a tag).
    pub fn self_image(&self) -> Result<String> {
        let dir = &self.state()?.state.dir;
        let endpoint = &self.engine()?.endpoint;
        crate::host::self_image::ensure(&*self.docker, &self.exe, crate::host::self_image::Place { dir, endpoint })
    }

    /// What every user of sbx's image does with `first`, the result of a
    /// `create`/`run` of `image`: when docker said the image is gone, import
    /// it again and `retry` with the new id, once (`self_image::again_if_gone`).
    pub fn self_image_again<T>(
        &self,
        first: Result<T>,
        image: &str,
        retry: impl FnOnce(&str) -> Result<T>,
    ) -> Result<T> {
        if !matches!(&first, Err(e) if crate::host::self_image::is_gone(e)) {
            return first;
        }
        let dir = &self.state()?.state.dir;
        let endpoint = &self.engine()?.endpoint;
        let place = crate::host::self_image::Place { dir, endpoint };
        crate::host::self_image::again_if_gone(first, &*self.docker, &self.exe, place, image, retry)
    }

    /// The executable the egress gate's image is made from (tests use a small file).
    pub fn with_exe(mut self, exe: PathBuf) -> Self {
        self.exe = exe;
        self
    }

    pub fn with_pace(mut self, pace: Pace) -> Self {
        self.pace = pace;
        self
    }

    pub fn with_proc(mut self, proc: PathBuf) -> Self {
        self.cgroups = proc.join("sys-fs-cgroup");
        self.proc = proc;
        self
    }

    /// The state directory and the ownership key, resolved on first use.
    pub fn state(&self) -> Result<&HostState> {
        if let Some(s) = self.state.get() {
            return Ok(s);
        }
        let st = self.states.resolve()?;
        let key = st.key()?;
        Ok(self.state.get_or_init(|| HostState { state: st, key }))
    }

    pub fn docker(&self) -> &dyn DockerExec {
        &*self.docker
    }

    /// The same docker, shared, for work that outlives a borrow of the
    /// driver (port-forward's relay threads).
    pub fn docker_handle(&self) -> Arc<dyn DockerExec> {
        self.docker.clone()
    }

    pub fn socket_root(&self) -> Result<PathBuf> {
        Ok(self.roots.resolve()?)
    }

    pub fn with_interrupts(mut self, check: InterruptCheck) -> Self {
        self.interrupted = check;
        self
    }

    /// Who the user running sbx is, for tests (see [`Driver::reserved_ids`]).
    pub fn with_reserved(mut self, reserved: ReservedIds) -> Self {
        self.reserved = reserved;
        self
    }

    /// The uids and gids no sandbox on this engine may run as: the caller's
    /// and the docker socket's (see `model::ids`).
    pub fn reserved_ids(&self) -> Result<Reserved> {
        Ok((self.reserved)(self.engine()?))
    }

    /// The uid table in `dir` and its searches starting at `start` (tests).
    pub fn with_uids(mut self, dir: PathBuf, start: UidStart) -> Self {
        self.uid_table = Some(dir);
        self.uid_start = start;
        self
    }

    pub fn with_ids(mut self, ids: IdSource) -> Self {
        self.new_id = ids;
        self
    }

    fn check_interrupt(&self) -> Result<()> {
        match (self.interrupted)() {
            Some(signal) => Err(Error::Interrupted { signal }),
            None => Ok(()),
        }
    }

    /// The one way the driver says something on stderr besides its result.
    fn warn(&self, kind: &str, message: &str) {
        crate::output::warn(kind, message);
    }

    /// Inspect sandboxes by id. Missing ones are left out; a container sbx
    /// did not create is an error.
    fn inspect_many(&self, ids: &[String]) -> Result<Vec<RawContainer>> {
        let raws = self.inspect_existing(ids)?;
        let key = &self.state()?.key;
        if let Some(foreign) = raws.iter().find(|r| !r.is_sbx(key)) {
            return Err(Error::Sandbox(SandboxError::Foreign { id: foreign.name.clone() }));
        }
        Ok(raws)
    }

    /// Inspect containers by name or id, whoever made them: those docker
    /// says are gone are left out; any other failure is an error.
    fn inspect_existing(&self, ids: &[String]) -> Result<Vec<RawContainer>> {
        let args = argv::inspect(ids);
        let out = self.docker.run(&args)?;
        let raws = crate::docker::parse::parse_inspect(&out.stdout_str(), &crate::docker::render(&args))?;
        if out.status != 0 {
            let missing = parse::missing_containers(ids, &out.stderr_str());
            if missing.len() + raws.len() != ids.len() {
                return Err(status_error(&args, &out).into());
            }
        }
        Ok(raws)
    }

    /// The one way to reach sandbox `id`, once it is proven this host's
    /// (`exec` ran in a hand-made container that copied sbx's labels): its
    /// full container id, from the record create wrote (no docker call;
    /// acting on the id means a container later given the same name is
    /// never touched), else from an inspect whose owner token matches.
    pub fn open(&self, id: &SandboxId) -> Result<Target<'_>> {
        let state = &self.state()?.state;
        let container = match state.record(id) {
            Some(r) => ContainerId::known(r.container),
            None => ContainerId::known(container_id(&self.inspect_one(id)?)?),
        };
        Ok(Target::new(&*self.docker, id.clone(), container))
    }

    pub fn inspect(&self, id: &str) -> Result<Record> {
        let raw = self.inspect_one(id)?;
        let mut r = [self.record(&raw, started_at(&raw))];
        if let Ok(HostState { state, .. }) = self.state() {
            crate::sandbox::shared::creating::mark_creates(&mut r, &state.creating(), &|p: &ProcId| p.is_alive());
        }
        let _ = self.read_allowlists(&mut r);
        let [r] = r;
        Ok(r)
    }

    /// What docker reported of `raw`, as sbx says it: a view, it writes
    /// nothing. `run` is the `State.StartedAt` of the run docker reports
    /// (None when unknown), which tells sbx's Stopped mark from a stale one.
    pub(crate) fn record(&self, raw: &RawContainer, run: Option<&str>) -> Record {
        let view = self.state().map(|h| h.state.view_of(&raw.name)).unwrap_or_default();
        self.record_in(raw, run, &view)
    }

    /// [`Driver::record`], the host state read from `view`.
    fn record_in(&self, raw: &RawContainer, run: Option<&str>, view: &crate::host::state::View) -> Record {
        let mut r = raw.record(raw.expiry(view.expiry(&raw.name)), SystemTime::now());
        // A pool member's session is its claim's (labels cannot change).
        if let Some(pool) = raw.labels.get(crate::model::record::POOL) {
            r.session = shared::members::session_in(view, &raw.name, pool);
        }
        // Docker says `exited` for a sandbox `sbx stop` stopped too: its exit
        // code is the stop's SIGTERM or SIGKILL, nothing about the program.
        let stoppable = STOPPED_STATES.contains(&r.state.as_str());
        if stoppable && view.hibernated(&raw.name) {
            r.state = "hibernated".into();
            r.exit_code = None;
            r.oom_killed = false;
            r.reason = Some(format!("saved to disk by `sbx hibernate`; `sbx resume {}` restores it", raw.name));
        } else if stoppable && view.stopped_by_sbx(&raw.name, run) {
            r.state = "stopped".into();
            r.exit_code = None;
            r.oom_killed = false;
            r.reason = Some(format!("stopped by `sbx stop`; `sbx start {}` runs it again", raw.name));
        }
        r
    }

    /// Sandbox `id` as docker inspects it, once proven this host's.
    pub fn inspect_one(&self, id: &str) -> Result<RawContainer> {
        self.inspect_many(&[id.to_string()])?
            .into_iter()
            .next()
            .ok_or_else(|| Error::Sandbox(SandboxError::NotFound { id: id.to_string() }))
    }

    pub fn list(&self) -> Result<Vec<Record>> {
        let args = argv::list();
        // docker answers while sbx reads its key.
        let job = self.docker.spawn(&args)?;
        let HostState { state, key } = self.state()?;
        let out = job.wait()?;
        if out.status != 0 {
            return Err(status_error(&args, &out).into());
        }
        let raws = crate::docker::parse::parse_ps(&out.stdout_str(), "docker ps")?;
        // Every sbx's sandboxes, on this engine: what the uid table keeps.
        self.prune_uids(&raws);
        let ours: Vec<&RawContainer> = raws.iter().filter(|r| r.is_sbx(key)).collect();
        let view = state.view();
        let runs = self.stopped_runs(&ours, &view);
        let mut recs: Vec<Record> =
            ours.iter().map(|r| self.record_in(r, runs.get(&r.name).map(String::as_str), &view)).collect();
        crate::sandbox::shared::creating::mark_creates(&mut recs, &state.creating(), &|p: &ProcId| p.is_alive());
        Ok(recs)
    }

    /// The allowlists of the gated among `recs`, as their gates read them
    /// now (`sbx allow`/`deny` change them): None where the policy file is
    /// unreadable. One file per gated sandbox, so only a listing that shows
    /// them (`ls --json`) reads them.
    pub fn read_allowlists(&self, recs: &mut [Record]) -> Result<()> {
        let data = &self.state()?.state.dir;
        for r in recs {
            if let Some(e) = r.egress.as_mut() {
                e.allow = crate::host::egress::read(data, &r.id)
                    .ok()
                    .map(|p| p.rules.iter().map(ToString::to_string).collect());
            }
        }
        Ok(())
    }
}

impl Driver {
    /// The `State.StartedAt` of each of `raws` (from `docker ps`, which has
    /// no start time) that docker says exited and a Stopped mark names a run
    /// of: one inspect for them all, none when there is no such sandbox.
    /// Unanswered, the marks hold, as they did before they named runs.
    fn stopped_runs(&self, raws: &[&RawContainer], view: &crate::host::state::View) -> BTreeMap<String, String> {
        let judged: Vec<String> = raws
            .iter()
            .filter(|r| STOPPED_STATES.contains(&r.state.as_str()) && view.stopped_run(&r.name).is_some())
            .map(|r| r.name.clone())
            .collect();
        if judged.is_empty() {
            return BTreeMap::new();
        }
        let inspected = self.inspect_many(&judged).unwrap_or_default();
        inspected.iter().filter_map(|r| Some((r.name.clone(), started_at(r)?.to_string()))).collect()
    }
}

/// What docker says of a sandbox sbx stopped (`created`: a create killed
/// between `docker create` and `docker start`); a Stopped mark shows only here.
const STOPPED_STATES: &[&str] = &["exited", "created"];

/// The `State.StartedAt` docker's inspect gave for `raw` (None from `docker ps`).
pub(crate) fn started_at(raw: &RawContainer) -> Option<&str> {
    raw.full["State"]["StartedAt"].as_str()
}

fn is_timeout(e: &Error) -> bool {
    matches!(e, Error::Docker(DockerError::Timeout { .. }))
}

/// The full container id (64 hex digits) from an inspect: what sbx acts on,
/// never a name another container could take.
/// What a docker call on `raw` names: its full container id where the
/// inspect gave one, else its name (`docker ps` gives no id).
pub(crate) fn acted_on(raw: &RawContainer) -> String {
    full_id(raw).map_or_else(|| raw.name.clone(), Into::into)
}

/// The full container id docker's inspect gave for `raw`, if it is one.
fn full_id(raw: &RawContainer) -> Option<ContainerId> {
    raw.full["Id"].as_str().and_then(ContainerId::full)
}

fn container_id(raw: &RawContainer) -> Result<String> {
    match full_id(raw) {
        Some(cid) => Ok(cid.into()),
        None => {
            Err(DockerError::Parse { command: "docker container inspect".into(), reason: "no container Id".into() }
                .into())
        }
    }
}

/// Items in order, each once.
fn unique(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    items.filter(|n| seen.insert(n.clone())).collect()
}

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

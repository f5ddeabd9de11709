//! `stop`, `start`, `pause`, `resume`: the sandbox's processes end, run
//! again, freeze or thaw; its container, id, labels, routes and a persistent
//! /state stay. Docker reports a container sbx stopped as `exited`, like
//! one whose program ended, so `stop` leaves a mark in the state dir
//! (`state::Mark`) and `ls`/`inspect` show `stopped` for it alone.

pub(crate) mod fork;
mod remote;
mod snapshot;

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::docker::parse::RawContainer;
use crate::docker::{argv, parse, run_ok};
use crate::error::{Error, Result, SandboxError, SocketError};
use crate::host::channel::Kind;
use crate::host::socket::{self, Stale};
use crate::host::state::Mark;
use crate::model::record;
use crate::model::runtime::{Family, Registered, DEFAULT};
use crate::sandbox::shared::boot::Boot;
use crate::sandbox::{container_id, Driver};

/// What a lifecycle command did (`--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Changed {
    pub id: String,
    /// `stopped`, `running`, `paused` or `hibernated`: the state it is in now.
    pub state: &'static str,
    /// It was in that state already; nothing was done but the mark.
    pub already: bool,
    /// `start` of a sandbox with a TTL whose watchdog is gone (a reboot):
    /// what a new watchdog watches (`Driver::watched`).
    #[serde(skip)]
    pub unwatched: Option<PathBuf>,
}

impl Changed {
    pub(crate) fn new(id: &str, state: &'static str, already: bool) -> Self {
        Changed { id: id.to_string(), state, already, unwatched: None }
    }
}

/// Docker states a sandbox can be started from (`created`: a create killed
/// between `docker create` and `docker start`).
const STARTABLE: &[&str] = &["exited", "created"];

impl Driver {
    /// SIGTERM to the sandbox's processes, SIGKILL after `grace` (rounded up
    /// to whole seconds, as `docker stop --time` takes them). Idempotent: a
    /// sandbox already stopped, or whose program exited, is marked stopped.
    pub fn stop(&self, id: &str, grace: Duration) -> Result<Changed> {
        if let Some(done) = self.stop_recorded(id, grace)? {
            return Ok(done);
        }
        let raw = self.inspect_one(id)?;
        let cid = container_id(&raw)?;
        let state = &self.state()?.state;
        self.refuse_ready_member(id, &raw, "stop")?;
        // Before the stop: a crash in between still shows `stopped`, never
        // `exited` as if the program had ended by itself. The mark names
        // the run it ends, so a `docker start` outside sbx makes it stale.
        let run = crate::sandbox::started_at(&raw).unwrap_or_default().to_string();
        state.mark_stopped_run(id, &run)?;
        let live = match raw.state.as_str() {
            "running" | "restarting" => true,
            // A frozen process cannot handle SIGTERM, so its grace would
            // only be waited out (and gVisor waits 10 s more): thaw first.
            "paused" => {
                run_ok(&*self.docker, &argv::unpause(&cid))?;
                true
            }
            _ => false,
        };
        if live {
            if let Err(e) = run_ok(&*self.docker, &argv::stop(&cid, whole_seconds(grace))) {
                // Still running: were the mark kept, its program's own exit
                // later would read as `stopped`.
                state.unmark(id, Mark::Stopped);
                return Err(e.into());
            }
        }
        state.unmark(id, Mark::Paused);
        if live {
            // It ran since any hibernation (a resume killed after its restore,
            // a `docker start` outside sbx): a start would roll it back.
            state.unmark(id, Mark::Hibernated);
            let _ = crate::host::checkpoints::Store::at(&state.dir).remove(id, crate::host::checkpoints::HIBERNATED);
        }
        Ok(Changed::new(id, "stopped", !live))
    }

    /// `docker stop` on the container id recorded at create, with the
    /// inspect that names the run it ends beside it, not before it: the
    /// inspect first was most of sbx's cost over a bare stop (150 against
    /// 122 ms, BENCHMARKS.md). The mark is written first naming no run (it
    /// holds for any: a crash before it is rewritten still shows `stopped`).
    /// Whether it was stopped already is judged from the look: not running
    /// then, and finished before this stop was sent, by this machine's
    /// clock, so only against a local engine. Anything else (a pool's ready
    /// member, a sandbox sbx paused, hibernated or stopped, docker refusing)
    /// takes the inspecting path. One frozen behind sbx's back (`docker
    /// pause`) is stopped as docker's own stop does it (20.10 stops a frozen
    /// container; a grace is waited out, as there).
    fn stop_recorded(&self, id: &str, grace: Duration) -> Result<Option<Changed>> {
        if self.engine()?.is_remote() {
            return Ok(None);
        }
        let Some(cid) = self.recorded_container(id)? else { return Ok(None) };
        let state = &self.state()?.state;
        let marked = [Mark::Stopped, Mark::Paused, Mark::Hibernated].into_iter().any(|m| state.marked(id, m));
        if marked || crate::host::pool::ready_anywhere(&state.dir, id) {
            return Ok(None);
        }
        state.mark(id, Mark::Stopped)?;
        let sent = std::time::SystemTime::now();
        let look = self.docker.spawn(&argv::inspect(&[cid.as_str()]));
        let stopped = self.docker.run(&argv::stop(&cid, whole_seconds(grace)));
        let looked = look.and_then(|l| l.wait());
        match stopped {
            Ok(o) if o.status == 0 => {}
            other => {
                state.unmark(id, Mark::Stopped);
                return match other {
                    Ok(_) => Ok(None),
                    Err(e) => Err(e.into()),
                };
            }
        }
        let raw = looked
            .ok()
            .filter(|o| o.status == 0)
            .and_then(|o| parse::parse_inspect(&o.stdout_str(), "docker container inspect").ok())
            .and_then(|mut v| v.pop());
        let Some(raw) = raw else { return Ok(Some(Changed::new(id, "stopped", false))) };
        if let Some(run) = crate::sandbox::started_at(&raw) {
            state.mark_stopped_run(id, run)?;
        }
        let already = !["running", "restarting", "paused"].contains(&raw.state.as_str())
            && finished_at(&raw).is_none_or(|f| f < sent);
        if !already {
            let _ = crate::host::checkpoints::Store::at(&state.dir).remove(id, crate::host::checkpoints::HIBERNATED);
        }
        Ok(Some(Changed::new(id, "stopped", already)))
    }

    /// Run a stopped (or exited) sandbox again and wait for its socket, with
    /// create's checks: where the mounts landed (a persistent /state or a
    /// volume may have changed since), then readiness. On failure it is
    /// stopped again, not destroyed: its /state may be all the work there is.
    /// Against a remote engine the mounts are checked before the start,
    /// through `docker cp` (see `lifecycle::remote`).
    pub fn start(&self, id: &str, socket_wait: Duration) -> Result<Changed> {
        let raw = self.inspect_one(id)?;
        let state = &self.state()?.state;
        // Started afresh it would lose what hibernate saved: restored instead.
        if state.marked(id, Mark::Hibernated) {
            return self.resume_hibernated(id, &raw);
        }
        if !STARTABLE.contains(&raw.state.as_str()) {
            return Err(wrong_state(id, &raw, state, "start"));
        }
        let cid = container_id(&raw)?;
        let label = |k: &str| raw.labels.get(k).cloned().unwrap_or_default();
        let (uid, gid) = user_ids(&label(record::USER));
        let channel = Kind::from_label(raw.labels.get(record::CHANNEL).map(String::as_str));
        let socket_path = PathBuf::from(label(record::SOCKET));
        let remote = match self.engine()?.is_remote() {
            true => Some(self.prepare_remote_start(id, &raw, channel)?),
            false => None,
        };
        let family = match &remote {
            // Only the local /proc check needs it: no `docker info` over the network.
            Some(r) if r.readable => Family::Gvisor,
            Some(_) => Family::Runc,
            None => {
                self.prepare_local_start(id, &socket_path, channel, uid, gid)?;
                self.remount_bounded(&raw, uid, gid)?;
                self.family_of(&raw)?
            }
        };
        if remote.is_none() {
            self.clear_runsc_state(id, &raw, &cid)?;
        }
        self.check_interrupt()?;
        // Its gate first, with its secrets: the program may call out at once.
        self.repush_vault(id)?;
        run_ok(&*self.docker, &argv::start(&cid))?;
        state.unmark(id, Mark::Stopped);
        let image = label(record::IMAGE);
        let boot = Boot {
            id,
            image: &image,
            uid,
            socket_path: &socket_path,
            socket_wait,
            helper: helper_mounted(&raw),
            family,
            channel,
            remote: remote.is_some(),
        };
        if let Err(e) = self.await_ready(&boot, &cid) {
            self.stop_again(id, &cid);
            return Err(e);
        }
        let watched = state.watchdog(id).is_some_and(|w| w.is_alive());
        let expires = raw.expiry(state.expiry(id)).is_some();
        let mut done = Changed::new(id, "running", false);
        // A remote sandbox's label names its socket inside; its watchdog watches its expiry here.
        let watch = match remote {
            Some(r) => r.watched,
            None => socket_path.parent().unwrap_or(&socket_path).to_path_buf(),
        };
        done.unwatched = (expires && !watched).then_some(watch);
        Ok(done)
    }

    /// The socket directory on this machine before a local start.
    fn prepare_local_start(&self, id: &str, socket_path: &Path, channel: Kind, uid: u32, gid: u32) -> Result<()> {
        let dir = socket_dir(socket_path, id)?;
        let root = dir.parent().unwrap_or(Path::new("/"));
        // Gone after a reboot emptied /run: made again as create made it
        // (`docker start` fails on a missing bind source).
        let remake = |make: &dyn Fn() -> std::result::Result<PathBuf, SocketError>| -> Result<()> {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(root)
                .map_err(|e| Error::io(format!("creating the socket root {}", root.display()), e))?;
            make()?;
            Ok(())
        };
        match channel {
            // What the sandbox left at its socket's path is refused first;
            // then a directory without its tmpfs (a reboot of a socket root
            // on a disk) is made again, never bound bare (unbounded writes).
            Kind::Direct => {
                if socket::clear_stale(&dir, id)? == Stale::NoDir || !socket::is_bounded(&dir) {
                    remake(&|| socket::make_dir(root, id, uid, gid))?;
                }
            }
            // Its socket is in a tmpfs of the container's, fresh at each
            // start; the host directory only marks it (gc, the watchdog).
            Kind::Exec if !dir.exists() => remake(&|| socket::make_marker_dir(root, id))?,
            Kind::Exec => {}
        }
        Ok(())
    }

    /// Freeze every process of a running sandbox. Idempotent on a paused one.
    pub fn pause(&self, id: &str) -> Result<Changed> {
        if let Some(done) = self.pause_recorded(id)? {
            return Ok(done);
        }
        let raw = self.inspect_one(id)?;
        let state = &self.state()?.state;
        match raw.state.as_str() {
            "paused" => return Ok(Changed::new(id, "paused", true)),
            "running" => {}
            _ => return Err(wrong_state(id, &raw, state, "pause")),
        }
        self.refuse_ready_member(id, &raw, "pause")?;
        let cid = container_id(&raw)?;
        state.mark(id, Mark::Paused)?;
        if let Err(e) = run_ok(&*self.docker, &argv::pause(&cid)) {
            state.unmark(id, Mark::Paused);
            return Err(e.into());
        }
        Ok(Changed::new(id, "paused", false))
    }

    /// `docker pause` on the container id recorded at create, without an
    /// inspect first: on calls this short the inspect was half of sbx's
    /// cost (pause + resume 1.93x of bare docker, BENCHMARKS.md). A 64-hex
    /// id names one container for ever, so the call reaches this sandbox or
    /// fails; any failure (already paused, not running, gone) is left to
    /// the inspecting path, which says it in sbx's words. A pool's
    /// unclaimed member takes that path too, to be refused.
    fn pause_recorded(&self, id: &str) -> Result<Option<Changed>> {
        let Some(cid) = self.recorded_container(id)? else { return Ok(None) };
        let state = &self.state()?.state;
        if crate::host::pool::ready_anywhere(&state.dir, id) {
            return Ok(None);
        }
        let marked = state.marked(id, Mark::Paused);
        state.mark(id, Mark::Paused)?;
        if self.docker.run(&argv::pause(&cid)).is_ok_and(|o| o.status == 0) {
            return Ok(Some(Changed::new(id, "paused", false)));
        }
        if !marked {
            state.unmark(id, Mark::Paused);
        }
        Ok(None)
    }

    /// A warm pool's unclaimed member is handed out by `create --pool`
    /// without a docker call: stopped or frozen, it would be handed out
    /// dead or stalled. Claim it first.
    fn refuse_ready_member(&self, id: &str, raw: &RawContainer, action: &'static str) -> Result<()> {
        let Some(pool) = raw.labels.get(record::POOL) else { return Ok(()) };
        let data = &self.state()?.state.dir;
        if crate::host::pool::Pool::at(data, pool).ready().iter().any(|m| m == id) {
            let state = format!("a ready member of pool {pool}, not claimed");
            return Err(Error::Sandbox(SandboxError::WrongState { id: id.to_string(), state, action }));
        }
        Ok(())
    }

    /// Thaw a paused sandbox, or restore a hibernated one.
    pub fn resume(&self, id: &str) -> Result<Changed> {
        if self.state()?.state.marked(id, Mark::Hibernated) {
            let raw = self.inspect_one(id)?;
            return self.resume_hibernated(id, &raw);
        }
        // As `pause_recorded`: the recorded id first, the inspecting path
        // only when docker refuses (not paused, gone).
        if let Some(cid) = self.recorded_container(id)? {
            if self.docker.run(&argv::unpause(&cid)).is_ok_and(|o| o.status == 0) {
                self.state()?.state.unmark(id, Mark::Paused);
                return Ok(Changed::new(id, "running", false));
            }
        }
        let raw = self.inspect_one(id)?;
        let state = &self.state()?.state;
        if raw.state != "paused" {
            return Err(wrong_state(id, &raw, state, "resume"));
        }
        run_ok(&*self.docker, &argv::unpause(&container_id(&raw)?))?;
        state.unmark(id, Mark::Paused);
        Ok(Changed::new(id, "running", false))
    }

    /// After a failed start: SIGKILL at once (it never became ready) and
    /// mark it stopped; what failed is the answer, this only a warning.
    fn stop_again(&self, id: &str, cid: &str) {
        if let Ok(h) = self.state() {
            let _ = h.state.mark(id, Mark::Stopped);
        }
        match run_ok(&*self.docker, &argv::stop(cid, 0)) {
            Ok(_) => self.warn(
                "stopped_again",
                &format!("sandbox {id} was stopped again, its /state kept: `sbx start {id}` retries, `sbx destroy {id}` removes it"),
            ),
            Err(e) => self.warn("not_stopped", &format!("could not stop sandbox {id} again ({e}): `sbx stop {id}`")),
        }
    }

    /// The family of the runtime the container runs under (the engine's
    /// record of it, else its label): what `check_mounts` reads.
    fn family_of(&self, raw: &RawContainer) -> Result<Family> {
        let name = raw.full["HostConfig"]["Runtime"]
            .as_str()
            .map(str::to_string)
            .or_else(|| raw.labels.get(record::RUNTIME).cloned())
            .unwrap_or_else(|| DEFAULT.into());
        if name == DEFAULT {
            return Ok(Family::Runc);
        }
        Ok(self.registration(&name)?.as_ref().map(Registered::family).unwrap_or(Family::Other))
    }

    /// Runtime `name` as the engine lists it (as last seen under the
    /// engine's current key, else asked); None when it lists no such one.
    fn registration(&self, name: &str) -> Result<Option<Registered>> {
        let key = crate::host::state::engine_key(self.engine()?.default);
        let seen = key.as_deref().and_then(|k| self.state().ok()?.state.runtimes(k));
        let text = match seen {
            Some(t) => t,
            None => run_ok(&*self.docker, &argv::runtimes())?.stdout_str(),
        };
        Ok(parse::runtimes(&text).unwrap_or_default().remove(name))
    }
}

/// The state a wrong-state error names: `stopped` when sbx stopped it.
fn wrong_state(id: &str, raw: &RawContainer, state: &crate::host::state::State, action: &'static str) -> Error {
    let startable = STARTABLE.contains(&raw.state.as_str());
    let shown = if startable && state.marked(id, Mark::Hibernated) {
        "hibernated".to_string()
    } else if startable && state.stopped_by_sbx(id, crate::sandbox::started_at(raw)) {
        "stopped".to_string()
    } else {
        raw.state.clone()
    };
    Error::Sandbox(SandboxError::WrongState { id: id.to_string(), state: shown, action })
}

/// When the container's last run ended, by the engine's clock (None: it
/// never ran, docker's zero time, or no time docker writes).
fn finished_at(raw: &RawContainer) -> Option<std::time::SystemTime> {
    let at = humantime::parse_rfc3339(raw.full["State"]["FinishedAt"].as_str()?).ok()?;
    (at > std::time::UNIX_EPOCH).then_some(at)
}

/// `docker stop --time` takes whole seconds: a fraction rounds up, so the
/// program gets at least the grace it was promised.
pub fn whole_seconds(grace: Duration) -> u64 {
    grace.as_secs() + u64::from(grace.subsec_nanos() > 0)
}

/// `UID:GID` from the `sbx.user` label.
fn user_ids(label: &str) -> (u32, u32) {
    let mut it = label.split(':').map(|p| p.parse().unwrap_or(crate::spec::NOBODY));
    let uid = it.next().unwrap_or(crate::spec::NOBODY);
    (uid, it.next().unwrap_or(uid))
}

/// The socket directory named in the (token-covered) `sbx.socket` label;
/// it must be the sandbox's own, as `socket::remove_dir` requires.
fn socket_dir(socket_path: &Path, id: &str) -> Result<PathBuf> {
    match socket_path.parent() {
        Some(d) if d.file_name().and_then(|n| n.to_str()) == Some(id) => Ok(d.to_path_buf()),
        _ => Err(SocketError::Hostile {
            path: socket_path.to_path_buf(),
            reason: format!("not in the socket directory of {id}"),
        }
        .into()),
    }
}

/// sbx's helper is mounted at /run/sbx (docker's record of the container's mounts).
fn helper_mounted(raw: &RawContainer) -> bool {
    raw.full["HostConfig"]["Mounts"]
        .as_array()
        .is_some_and(|ms| ms.iter().any(|m| m["Target"] == crate::model::paths::HELPER_DIR))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_rounds_up_to_whole_seconds() {
        assert_eq!(whole_seconds(Duration::ZERO), 0);
        assert_eq!(whole_seconds(Duration::from_secs(10)), 10);
        assert_eq!(whole_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
    }

    #[test]
    fn user_label() {
        assert_eq!(user_ids("1000:1001"), (1000, 1001));
        assert_eq!(user_ids("1000"), (1000, 1000));
        assert_eq!(user_ids(""), (crate::spec::NOBODY, crate::spec::NOBODY));
    }
}

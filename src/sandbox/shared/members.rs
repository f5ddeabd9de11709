//! Warm pool members as pool, gc and the look-ups see them: alive (by
//! this machine's /proc and socket, or on a remote engine by one inspect),
//! claimed, and the session they show.

use crate::docker::argv;
use crate::docker::parse::{self, RawContainer};
use crate::error::Result;
use crate::host::pool::{Member, PoolSpec};
use crate::host::socket;
use crate::host::state::{Claim, ProcId};
use crate::model::engine::{location_of, Location};
use crate::model::record;
use crate::sandbox::Driver;

/// Alive without asking the engine: the main process recorded at fill time
/// still runs (pid and start time), and a direct socket still passes
/// create's readiness check (opened O_PATH, owner checked, never connected:
/// a connection would be the program's first client).
pub fn alive(m: &Member) -> bool {
    if !(ProcId { pid: m.pid, start: m.start }).is_alive() {
        return false;
    }
    match &m.socket {
        Some(path) => matches!(
            socket::open_checked(path, &socket::allowed_owners(Some(m.uid))),
            Ok(Some((fd, _))) if socket::may_connect(&fd).is_ok()
        ),
        None => true,
    }
}

pub(in crate::sandbox) fn claimer_alive(c: &Claim) -> bool {
    (ProcId { pid: c.pid, start: c.start }).is_alive()
}

/// What `ls` and `inspect` show as a pool member's session: its claim's,
/// or `pool:NAME` while unclaimed (no session key has a ':').
pub fn session_in(view: &crate::host::state::View, id: &str, pool: &str) -> String {
    match view.claimed_session(id) {
        Some(session) => session.map_or_else(|| id.to_string(), str::to_string),
        None => format!("pool:{pool}"),
    }
}

/// The pool's engine is a remote one: its members are checked through docker.
pub fn is_remote(spec: &PoolSpec) -> bool {
    location_of(spec.endpoint()) == Location::Remote
}

/// A remote member as the engine reports it now is the one the fill
/// recorded, alive: the same container, sbx's (owner token) and of this
/// pool, running and not paused, with the same main process (pid and
/// start time: a restarted container has a new one).
pub fn verified(raw: &RawContainer, m: &Member, pool: &str, key: &[u8]) -> bool {
    let Some(r) = &m.remote else { return false };
    let s = &raw.full["State"];
    raw.name == m.id
        && raw.full["Id"].as_str() == Some(r.container.as_str())
        && raw.is_sbx(key)
        && raw.labels.get(record::POOL).map(String::as_str) == Some(pool)
        && s["Status"].as_str() == Some("running")
        && s["Running"].as_bool() == Some(true)
        && s["Paused"].as_bool() == Some(false)
        && s["Restarting"].as_bool() != Some(true)
        && m.pid > 0
        && s["Pid"].as_i64() == Some(i64::from(m.pid))
        && s["StartedAt"].as_str() == Some(r.started_at.as_str())
}

impl Driver {
    /// Which of `members` (of pool `name`) the engine reports alive, from
    /// one `docker container inspect` of their containers. Err when the
    /// engine did not answer for all of them (unknown is not dead).
    pub(crate) fn remote_alive(&self, name: &str, members: &[Member]) -> Result<Vec<String>> {
        let containers: Vec<&str> =
            members.iter().filter_map(|m| m.remote.as_ref()).map(|r| r.container.as_str()).collect();
        if containers.is_empty() {
            return Ok(Vec::new());
        }
        let args = argv::inspect(&containers);
        let out = self.docker.run(&args)?;
        let raws = parse::parse_inspect(&out.stdout_str(), &crate::docker::render(&args))?;
        if out.status != 0 {
            let asked: Vec<String> = containers.iter().map(|c| c.to_string()).collect();
            let missing = parse::missing_containers(&asked, &out.stderr_str());
            if missing.len() + raws.len() != containers.len() {
                return Err(crate::docker::status_error(&args, &out).into());
            }
        }
        let key = &self.state()?.key;
        Ok(members.iter().filter(|m| raws.iter().any(|r| verified(r, m, name, key))).map(|m| m.id.clone()).collect())
    }
}

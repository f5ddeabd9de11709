//! Doctor's report of where the engine is and what a remote one
//! changes, one line each.

use super::{check, Check, Doctor, Status};
use crate::model::engine::Engine;

/// What a remote engine changes: (name, status, detail).
const REMOTE: &[(&str, Status, &str)] = &[
    (
        "remote host-paths",
        Status::Ok,
        "create --ro/--rw/--state-dir are refused (exit 2): they name paths on this machine, which the engine cannot see; --clone needs --persist (cloned here, copied into the session's volume)",
    ),
    (
        "remote persist",
        Status::Ok,
        "create --persist: /state is a volume on the engine (sbx-state-KEY, a nosuid,nodev overlay over sbx-data-KEY), mounted volume-nocopy, its root the sandbox user's (0700); destroy --purge and volumes rm remove both",
    ),
    (
        "remote channel",
        Status::Ok,
        "create always uses the relayed channel (`--channel exec`: the socket in a tmpfs inside the sandbox, connect through `docker exec`); --channel direct is refused (exit 2)",
    ),
    (
        "remote helper",
        Status::Ok,
        "sbx's helper reaches the engine in a volume sbx fills there (sbx-helper-KEY, read-only at /run/sbx); each create checks the image's /run and that helper through `docker cp` before start",
    ),
    (
        "remote /proc",
        Status::Ok,
        "audit reads a sandbox's process status through a probe container of sbx's own in the sandbox's pid namespace on the engine (no network, read-only, root with every capability dropped but CAP_SYS_PTRACE, removed after; gc reaps one left behind), and the engine's AppArmor from `docker info`; doctor's probe sandbox is read the same way; start checks the sandbox's /run through `docker cp` before it starts",
    ),
    (
        "remote state",
        Status::Ok,
        "this machine's markers and state of each sandbox are attributed to its engine's endpoint (data dir engines/ID): destroy and gc act only on this engine's, and reap those its removed sandboxes left",
    ),
    (
        "remote pools",
        Status::Ok,
        "a pool belongs to the engine it was made on (other engines' are refused, exit 2); a claim checks its member with one `docker container inspect` (running, not paused, the pid and start recorded at fill), not this machine's /proc",
    ),
    (
        "remote egress",
        Status::Ok,
        "create --allow/--egress: the gate's policy goes into a volume of the gate's own through `docker cp` (at create, and on every `sbx allow`/`deny`), never a bind of this machine's files",
    ),
];

impl Doctor<'_> {
    /// Push the engine's location (and, when remote, what that changes);
    /// true when the engine is remote.
    pub(super) fn location(&self, checks: &mut Vec<Check>) -> bool {
        let engine = match self.driver.engine() {
            Ok(e) => e,
            Err(e) => {
                checks.push(check(
                    "engine-location",
                    Status::Fail,
                    format!("cannot tell where the engine is: {e}"),
                    e.hint(),
                ));
                return false;
            }
        };
        checks.push(check("engine-location", Status::Ok, describe(engine), None));
        if engine.is_remote() {
            checks.extend(REMOTE.iter().map(|(name, status, detail)| check(name, *status, *detail, None)));
        }
        engine.is_remote()
    }
}

/// `local: unix:///var/run/docker.sock` or `remote: ssh://u@h (context far)`.
pub fn describe(engine: &Engine) -> String {
    let place = if engine.is_remote() { "remote" } else { "local" };
    match &engine.context {
        Some(c) => format!("{place}: {} (docker context {c})", engine.endpoint),
        None => format!("{place}: {}", engine.endpoint),
    }
}

//! Doctor's report of where the engine is (issue 16) and what a remote one
//! changes, one line each; what later slices bring says "not yet supported".

use super::{check, Check, Doctor, Status};
use crate::model::engine::Engine;

/// What a remote engine changes: (name, status, detail).
const REMOTE: &[(&str, Status, &str)] = &[
    (
        "remote host-paths",
        Status::Ok,
        "create --ro/--rw/--state-dir/--clone are refused (exit 2): they name paths on this machine, which the engine cannot see",
    ),
    (
        "remote persist",
        Status::Warn,
        "create --persist: not yet supported (the session's volume is bound to a directory on this machine)",
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
        Status::Warn,
        "audit reads a sandbox's process status through a probe container of sbx's own in the sandbox's pid namespace on the engine (no network, read-only, root with every capability dropped but CAP_SYS_PTRACE, removed after; gc reaps one left behind), and the engine's AppArmor from `docker info`; doctor's probe sandbox is read the same way; start checks mounts in this machine's /proc: not yet supported",
    ),
    (
        "remote state",
        Status::Ok,
        "destroy and gc remove only what they find on the engine, and this machine's marker of each sandbox they removed; other socket dirs and state stay (destroy --purge, volumes rm: not yet supported)",
    ),
    (
        "remote egress",
        Status::Warn,
        "create --allow/--egress: not yet supported (exit 2): the egress gate's policy directory is bind-mounted from this machine",
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

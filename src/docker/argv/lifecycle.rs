//! Containers by id: start, stop, pause, unpause, state, logs tail, inspect, list, remove.
//! (`docker run`/`create` itself is in `run`.)

use std::ffi::OsString;

use super::{os, with_tail};
use crate::docker::parse;
use crate::model::record;

/// Lines of the sandbox's log quoted when it dies or never binds.
pub const LOG_TAIL: &str = "20";

pub fn start(id: &str) -> Vec<OsString> {
    os(&["start", "--", id])
}

/// `docker wait CONTAINER`: ends when the container stops (at once when it
/// is gone), printing its exit code.
pub fn wait_exit(id: &str) -> Vec<OsString> {
    os(&["wait", "--", id])
}

/// SIGTERM, then SIGKILL after `grace_secs` whole seconds (`docker stop
/// --time` takes no fraction; the caller rounds up).
pub fn stop(id: &str, grace_secs: u64) -> Vec<OsString> {
    os(&["stop", "--time", &grace_secs.to_string(), "--", id])
}

/// Freeze every process of the container (the cgroup freezer; gVisor: the Sentry).
pub fn pause(id: &str) -> Vec<OsString> {
    os(&["pause", "--", id])
}

pub fn unpause(id: &str) -> Vec<OsString> {
    os(&["unpause", "--", id])
}

/// `STATUS EXITCODE`, e.g. `running 0` or `exited 3`.
pub fn state(id: &str) -> Vec<OsString> {
    os(&["container", "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", "--", id])
}

/// `PID STATUS EXITCODE` of the main process, e.g. `4242 running 0` or
/// `0 exited 3`: where create reads the sandbox's mount table.
pub fn running_pid(id: &str) -> Vec<OsString> {
    os(&["container", "inspect", "--format", "{{.State.Pid}} {{.State.Status}} {{.State.ExitCode}}", "--", id])
}

/// `-v` removes anonymous volumes the image declared, so nothing outlives it.
pub fn remove<S: AsRef<str>>(ids: &[S]) -> Vec<OsString> {
    with_tail(&["rm", "-f", "-v", "--"], ids)
}

pub fn inspect<S: AsRef<str>>(ids: &[S]) -> Vec<OsString> {
    with_tail(&["container", "inspect", "--format", "{{json .}}", "--"], ids)
}

pub fn list() -> Vec<OsString> {
    let filter = format!("label={}=1", record::MANAGED);
    vec![
        "ps".into(),
        "-a".into(),
        "--no-trunc".into(),
        "--filter".into(),
        filter.into(),
        "--format".into(),
        parse::ps_template().into(),
    ]
}

/// `docker checkpoint create`: runsc saves the sandbox's memory and file
/// systems into the engine's checkpoint directory; the container exits.
/// (Not `--leave-running`: runsc 20221219 then panics, "invalid state
/// transition: paused => stopped", and the sandbox dies.)
pub fn checkpoint_create(id: &str, name: &str) -> Vec<OsString> {
    os(&["checkpoint", "create", "--", id, name])
}

pub fn checkpoint_rm(id: &str, name: &str) -> Vec<OsString> {
    os(&["checkpoint", "rm", "--", id, name])
}

/// `docker start --checkpoint NAME`: the container restored from the
/// engine's checkpoint directory (20.10 refuses `--checkpoint-dir`).
pub fn start_checkpoint(id: &str, name: &str) -> Vec<OsString> {
    os(&["start", "--checkpoint", name, "--", id])
}

/// Where the engine keeps its containers (a checkpoint's directory is
/// `ROOT/containers/FULLID/checkpoints/NAME`).
pub fn root_dir() -> Vec<OsString> {
    os(&["info", "--format", "{{json .DockerRootDir}}"])
}

#[cfg(test)]
mod tests {
    use super::super::strs;
    use super::*;

    #[test]
    fn lifecycle_builders() {
        assert_eq!(strs(remove(&["a", "b"])), ["rm", "-f", "-v", "--", "a", "b"]);
        assert_eq!(strs(stop("c", 3)), ["stop", "--time", "3", "--", "c"]);
        assert_eq!(strs(pause("c")), ["pause", "--", "c"]);
        assert_eq!(strs(unpause("c")), ["unpause", "--", "c"]);
        assert_eq!(strs(list())[..5], ["ps", "-a", "--no-trunc", "--filter", "label=sbx.managed=1"]);
        // Never --leave-running (runsc 20221219 panics), never --checkpoint-dir (20.10 refuses it).
        assert_eq!(strs(checkpoint_create("c", "n")), ["checkpoint", "create", "--", "c", "n"]);
        assert_eq!(strs(checkpoint_rm("c", "n")), ["checkpoint", "rm", "--", "c", "n"]);
        assert_eq!(strs(start_checkpoint("c", "n")), ["start", "--checkpoint", "n", "--", "c"]);
    }
}

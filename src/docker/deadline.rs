//! How long a docker call may take (see [`Deadlines`]).

use std::ffi::OsString;
use std::time::Duration;

use crate::model::invalid::Invalid;

/// How long a docker call may take before sbx stops waiting for the engine.
///
/// Engine 20.10's network controller can deadlock when many containers go
/// at once (libnetwork's controller and datastore locks taken in opposite
/// orders); every later `docker rm`, `ps` or `info` then hangs until dockerd
/// restarts. A script or cron job must get an error instead of hanging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// Look-ups that should answer at once: version, info, inspect, ps, ls.
    pub quick: Duration,
    /// Calls that change the engine: run, create, start, rm, network and
    /// volume changes, import (4x quick).
    pub change: Duration,
    /// A whole `docker pull` (`SBX_PULL_TIMEOUT`, 10 minutes unless set):
    /// a registry that stops answering mid-pull must not hang create.
    pub pull: Duration,
}

/// How long a pull may take unless `SBX_PULL_TIMEOUT` says otherwise.
pub const DEFAULT_PULL: Duration = Duration::from_secs(600);

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines::scaled(Duration::from_secs(30))
    }
}

impl Deadlines {
    fn scaled(quick: Duration) -> Self {
        Deadlines { quick, change: quick * 4, pull: DEFAULT_PULL }
    }

    /// From `SBX_DOCKER_TIMEOUT` (a duration such as `30s` or `2m`: the
    /// look-ups' deadline; changes get four times as long).
    pub fn from_env(value: Option<&str>) -> Result<Self, Invalid> {
        let Some(v) = value else { return Ok(Deadlines::default()) };
        match humantime::parse_duration(v.trim()) {
            Ok(d) if d >= Duration::from_millis(100) => Ok(Deadlines::scaled(d)),
            _ => Err(Invalid::new("SBX_DOCKER_TIMEOUT", v, "it must be a duration of at least 100ms")
                .hint("e.g. SBX_DOCKER_TIMEOUT=30s (look-ups; engine changes get 4x that)")),
        }
    }

    /// With the pull deadline from `SBX_PULL_TIMEOUT` (a duration such as `20m`).
    pub fn with_pull(self, value: Option<&str>) -> Result<Self, Invalid> {
        let Some(v) = value else { return Ok(self) };
        match humantime::parse_duration(v.trim()) {
            Ok(d) if d >= Duration::from_secs(1) => Ok(Deadlines { pull: d, ..self }),
            _ => Err(Invalid::new("SBX_PULL_TIMEOUT", v, "it must be a duration of at least 1s")
                .hint("e.g. SBX_PULL_TIMEOUT=30m for a large image on a slow link")),
        }
    }

    /// The deadline of `docker ARGS`, or None for calls that stream or run
    /// for as long as their user wants (exec, logs, cp, stats, events, wait).
    pub fn of(&self, args: &[OsString]) -> Option<Duration> {
        let word = |i: usize| args.get(i).and_then(|a| a.to_str()).unwrap_or("");
        let (verb, sub) = match word(0) {
            "container" | "image" | "network" | "volume" | "system" => (word(1), word(0)),
            v => (v, ""),
        };
        // The relayed channel's readiness poll is a prompt look-up, though an exec
        // (the helper waits at most 500 ms inside): a hung engine must not hang create.
        if verb == "exec" && args.iter().any(|a| a == "probe-socket") {
            return Some(self.quick);
        }
        // Audit's status probe reads two /proc files and exits (within ten
        // seconds by itself): a prompt look-up, though a `run`.
        if verb == "run" && args.iter().any(|a| a == "__audit-probe") {
            return Some(self.quick);
        }
        // The helper's mkdir answers at once, unless a process in the
        // sandbox stopped it (SIGSTOP: same user): then sbx must not wait for ever.
        // So do its other one-shot verbs (`exec -d`, `ps`, `kill`, the shell
        // look-ups): an attack pass hung `sbx exec -d` for ever that way.
        if verb == "exec" && matches!(helper_verb(args), Some("mkdir" | "bg" | "ps" | "kill" | "which" | "find-shell"))
        {
            return Some(self.quick);
        }
        // `docker stop --time N` waits up to N seconds for the program before
        // SIGKILL, on top of what any change takes.
        if verb == "stop" {
            let grace = args.iter().position(|a| a == "--time").and_then(|i| word(i + 1).parse::<u64>().ok());
            return Some(self.change + Duration::from_secs(grace.unwrap_or(10)));
        }
        match verb {
            "exec" | "logs" | "attach" | "cp" | "stats" | "events" | "wait" | "push" | "load" | "save" | "export"
            | "build" | "prune" => None,
            "pull" => Some(self.pull),
            "run" | "create" | "start" | "stop" | "restart" | "rm" | "kill" | "pause" | "unpause" | "import"
            | "connect" | "disconnect" | "rmi" | "update" => Some(self.change),
            _ if sub == "network" || sub == "volume" => {
                Some(if verb == "inspect" || verb == "ls" { self.quick } else { self.change })
            }
            _ => Some(self.quick),
        }
    }

    /// The idle deadline of a streamed call: how long one read of its
    /// output (or write of its input) may wait. A helper's listing runs for
    /// as long as the sandbox has entries and a restore for as long as its
    /// archive keeps going in, but a helper that sends or takes nothing for
    /// this long was stopped by its sandbox (or the engine hung).
    pub fn idle(&self, args: &[OsString]) -> Option<Duration> {
        if args.first().is_none_or(|a| a != "exec") {
            return None;
        }
        // What the helper sends as it goes: a listing, `cp` out and backup
        // (`send`), a background process's log without -f; and `receive`
        // (`cp` in, `restore`), which takes its input as it goes and
        // answers at the end. Its idle deadline is a change's: before it
        // reads on, `restore` clears the old workspace, however large. Not
        // `logs -f` and `watch`: silence is their normal state.
        match helper_verb(args) {
            Some("list" | "send") => Some(self.quick),
            Some("logs") if !args.iter().any(|a| a == "-f") => Some(self.quick),
            Some("receive") => Some(self.change),
            // `wait-port PORT MILLIS` waits up to MILLIS inside, then
            // answers: its wait plus a look-up's. An idle deadline, not a
            // whole-call one, so the watch of its sandbox's end stays on.
            Some("wait-port") => {
                let inside = args.last().and_then(|a| a.to_str()).and_then(|m| m.parse::<u64>().ok()).unwrap_or(0);
                Some(self.quick + Duration::from_millis(inside))
            }
            _ => None,
        }
    }
}

/// `docker exec ... -- ID HELPER VERB ...`: the helper's VERB.
fn helper_verb(args: &[OsString]) -> Option<&str> {
    let at = args.iter().position(|a| a == "--")?;
    match args.get(at + 2..at + 4) {
        Some([h, v]) if h == crate::model::paths::HELPER_PATH => v.to_str(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::docker::argv::os as argv;

    #[test]
    fn a_stop_gets_its_grace_on_top() {
        let d = Deadlines::from_env(Some("5s")).unwrap();
        assert_eq!(d.of(&crate::docker::argv::stop("c", 600)), Some(Duration::from_secs(620)));
        assert_eq!(d.of(&argv(&["stop", "c"])), Some(Duration::from_secs(30)));
    }

    /// A helper call a process in the sandbox can stop (SIGSTOP) never hangs sbx.
    #[test]
    fn helper_listings_and_mkdir_have_deadlines() {
        let d = Deadlines::from_env(Some("5s")).unwrap();
        let five = Some(Duration::from_secs(5));
        assert_eq!(d.of(&argv(&["exec", "--", "c", "/run/sbx/helper", "mkdir", "/x"])), five);
        assert_eq!(d.idle(&argv(&["exec", "--", "c", "/run/sbx/helper", "list", "/x", "1", "10"])), five);
        assert_eq!(d.of(&argv(&["exec", "--", "c", "/run/sbx/helper", "list", "/x", "1", "10"])), None);
        // A watch streams for as long as its user wants; a user's command named `mkdir` is theirs.
        assert_eq!(d.idle(&argv(&["exec", "-i", "--", "c", "/run/sbx/helper", "watch", "/x"])), None);
        assert_eq!(d.of(&argv(&["exec", "--", "c", "mkdir", "/x"])), None);
        let wait = argv(&["exec", "--", "c", "/run/sbx/helper", "wait-port", "80", "60000"]);
        assert_eq!(d.idle(&wait), Some(Duration::from_secs(65)), "its own wait, then a look-up's");
        assert_eq!(d.of(&wait), None, "its sandbox's end is watched");
        for verb in ["bg", "ps", "kill", "which", "find-shell"] {
            assert_eq!(d.of(&argv(&["exec", "--", "c", "/run/sbx/helper", verb])), five, "{verb}");
        }
        assert_eq!(d.idle(&argv(&["exec", "--", "c", "/run/sbx/helper", "send", "/x"])), five);
        assert_eq!(d.idle(&argv(&["exec", "--", "c", "/run/sbx/helper", "logs", "p1", "-1"])), five);
        assert_eq!(d.idle(&argv(&["exec", "--", "c", "/run/sbx/helper", "logs", "p1", "-f", "-1"])), None);
        // A receive a process in the sandbox stopped hung `cp` in and restore for ever.
        let receive = argv(&["exec", "-i", "--", "c", "/run/sbx/helper", "receive", "/x", "--into"]);
        assert_eq!(d.idle(&receive), Some(Duration::from_secs(20)));
        assert_eq!(d.idle(&argv(&["logs", "--", "c", "/run/sbx/helper", "list"])), None);
    }

    #[test]
    fn every_prompt_call_has_a_deadline_and_streams_have_none() {
        let d = Deadlines::from_env(Some("5s")).unwrap();
        assert_eq!(d.of(&argv(&["ps", "-a"])), Some(Duration::from_secs(5)));
        assert_eq!(d.of(&argv(&["container", "inspect", "x"])), Some(Duration::from_secs(5)));
        assert_eq!(d.of(&argv(&["network", "ls"])), Some(Duration::from_secs(5)));
        assert_eq!(d.of(&argv(&["rm", "-f", "x"])), Some(Duration::from_secs(20)));
        assert_eq!(d.of(&argv(&["network", "rm", "x"])), Some(Duration::from_secs(20)));
        assert_eq!(d.of(&argv(&["run", "-d", "x"])), Some(Duration::from_secs(20)));
        assert_eq!(d.of(&argv(&["run", "--rm", "--", "img", "__audit-probe", "c", "1"])), Some(Duration::from_secs(5)));
        assert_eq!(d.of(&argv(&["exec", "-i", "x"])), None);
        let probe = argv(&["exec", "--", "c", "/run/sbx/helper", "probe-socket", "/run/sandbox/sandbox.sock", "500"]);
        assert_eq!(d.of(&probe), Some(Duration::from_secs(5)));
        assert_eq!(d.of(&argv(&["logs", "-f", "x"])), None);
        assert_eq!(d.of(&argv(&["pull", "--", "r@sha256:0"])), Some(DEFAULT_PULL));
        let p = d.with_pull(Some("90s")).unwrap();
        assert_eq!((p.of(&argv(&["pull", "--", "r@sha256:0"])), p.quick), (Some(Duration::from_secs(90)), d.quick));
        assert!(d.with_pull(Some("0s")).is_err() && d.with_pull(Some("later")).is_err());
        assert_eq!(Deadlines::from_env(None).unwrap(), Deadlines::default());
        assert!(Deadlines::from_env(Some("soon")).is_err());
        assert!(Deadlines::from_env(Some("0s")).is_err());
    }
}

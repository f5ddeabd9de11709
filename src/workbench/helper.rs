//! Calls of the in-sandbox helper (`helper/sbx_helper.rs`, mounted at
//! [`HELPER`]) and what their failures mean in sbx's words: the argv, the
//! exit-code table both sides share, the sandbox's own failures (no helper,
//! no sandbox, stopped) and the outcome of a streamed call.

use std::ffi::OsString;

use crate::docker::argv::{self, ExecOpts};
use crate::docker::Output;
use crate::error::SandboxError;
use crate::error::{Error, Explained, Result, TransferError};
use crate::host::helper::SANDBOX_PATH as HELPER;
use crate::workbench::transfer::refusal;
use crate::workbench::Target;

/// `docker exec [-i] -- CONTAINER HELPER ARGS...`: a call of the in-sandbox helper.
pub(crate) fn helper_argv(t: &Target, interactive: bool, args: &[&str]) -> Vec<OsString> {
    let mut cmd = vec![HELPER.to_string()];
    cmd.extend(args.iter().map(|a| a.to_string()));
    argv::exec(&t.container, &ExecOpts { interactive, ..ExecOpts::default() }, &cmd)
}

/// What a failed `docker exec` said about the sandbox itself: no helper in
/// it, or no such sandbox. `None`: the command itself failed.
pub(crate) fn sandbox_error(t: &Target, stderr: &str) -> Option<Error> {
    let id = t.sandbox.as_str();
    if stderr.contains(HELPER) && (stderr.contains("no such file") || stderr.contains("not found")) {
        return Some(crate::host::helper::missing(id));
    }
    match crate::docker::explain::classify(stderr) {
        Some(crate::docker::explain::Known::NotRunning { .. }) => {
            return Some(Explained::Stopped { id: id.to_string() }.into())
        }
        Some(crate::docker::explain::Known::Paused { .. }) => {
            return Some(Explained::Paused { id: id.to_string() }.into())
        }
        _ => {}
    }
    crate::docker::parse::no_such_container(stderr)
        .then(|| Error::Sandbox(SandboxError::NotFound { id: id.to_string() }))
}

/// The helper's exit codes; helper/sbx_helper.rs has the same table. The
/// host says what they mean in its own words and never relays the helper's
/// text as its own: that text comes from the sandbox.
pub mod helper_exit {
    pub const NO_PROCESS: i32 = 3;
    pub const EXITED: i32 = 4;
    pub const NO_SUCH_PATH: i32 = 5;
    pub const READ_ONLY: i32 = 6;
    pub const DENIED: i32 = 7;
    pub const NO_SPACE: i32 = 8;
    pub const EXISTS: i32 = 9;
    pub const NOT_A_DIRECTORY: i32 = 10;
    pub const WATCH_LIMIT: i32 = 11;
    pub const UNKNOWN_COMMAND: i32 = 64;
}

/// A helper call that ran and failed with `code`, as an sbx error. `argv`
/// is the helper call (`... HELPER VERB ARG ...`): its verb and first
/// argument (a path or a handle) name what failed.
pub(crate) fn helper_failure(t: &Target, argv: &[OsString], code: i32, stderr: &str) -> Error {
    let (_, arg) = verb_arg(argv);
    let id = t.sandbox.to_string();
    use helper_exit::*;
    match code {
        NO_PROCESS => Explained::NoProcess { id, handle: arg }.into(),
        EXITED => Explained::ProcessExited { id, handle: arg }.into(),
        NO_SUCH_PATH => Explained::NoSuchPath { id, path: arg }.into(),
        READ_ONLY => Explained::ReadOnly { id, path: arg }.into(),
        DENIED => Explained::Denied { id, path: arg }.into(),
        NO_SPACE => Explained::NoSpace { id, path: arg }.into(),
        EXISTS => Explained::Exists { id, path: arg }.into(),
        NOT_A_DIRECTORY => Explained::NotADirectory { id, path: arg }.into(),
        WATCH_LIMIT => Explained::WatchLimit { id, path: arg }.into(),
        _ => {
            let doing = doing(argv);
            let detail = if code == UNKNOWN_COMMAND && stderr.contains("unknown command") {
                "its helper is from another sbx version; recreate the sandbox".to_string()
            } else {
                let line = stderr.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
                crate::docker::explain::printable(line.strip_prefix("sbx-helper: ").unwrap_or(line), 200)
            };
            Explained::Helper { id, doing, code, detail }.into()
        }
    }
}

/// The helper call's verb and first argument (a path or a handle).
fn verb_arg(argv: &[OsString]) -> (String, String) {
    let words: Vec<String> = argv.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let at = words.iter().position(|w| w == HELPER).map(|i| i + 1).unwrap_or(words.len());
    (words.get(at).cloned().unwrap_or_default(), words.get(at + 1).cloned().unwrap_or_default())
}

/// What the helper call `argv` was doing, for messages.
fn doing(argv: &[OsString]) -> String {
    let (verb, arg) = verb_arg(argv);
    match verb.as_str() {
        "receive" => format!("writing {arg}"),
        "send" => format!("reading {arg}"),
        "kill" => format!("signalling {arg}"),
        "logs" => format!("reading the output of {arg}"),
        "ps" => "listing background processes".to_string(),
        "bg" => format!("starting background process {arg}"),
        "list" => format!("listing {arg}"),
        "mkdir" => format!("creating {arg}"),
        "watch" => format!("watching {arg}"),
        "wait-port" => format!("waiting for port {arg}"),
        "which" => format!("looking up {arg}"),
        "find-shell" => "looking for a shell".to_string(),
        v => format!("running {v:?}"),
    }
}

/// A helper call cut off at its deadline (docker/deadline.rs) is the
/// helper's silence, not the engine's: a process in the sandbox (its user)
/// can stop it with SIGSTOP at will, and blaming the engine sent operators
/// off to restart dockerd. Anything else stays as it was.
pub(crate) fn silent(e: crate::docker::DockerError, t: &Target, argv: &[OsString]) -> Error {
    match e {
        crate::docker::DockerError::Timeout { after, .. } => Explained::HelperTimeout {
            id: t.sandbox.to_string(),
            doing: doing(argv),
            waited: humantime::format_duration(after).to_string(),
        }
        .into(),
        e => e.into(),
    }
}

/// `exec.run` of helper call `argv`, its deadline the helper's ([`silent`]).
pub(crate) fn run(t: &Target, argv: &[OsString]) -> Result<Output> {
    t.docker.run(argv).map_err(|e| silent(e, t, argv))
}

/// `exec.run_stream` of helper call `argv`, its idle deadline the helper's ([`silent`]).
pub(crate) fn run_stream(
    t: &Target,
    argv: &[OsString],
    input: Option<&mut crate::docker::StreamIn<'_>>,
    output: &mut crate::docker::StreamOut<'_>,
) -> Result<crate::docker::Streamed> {
    t.docker.run_stream(argv, input, output).map_err(|e| silent(e, t, argv))
}

/// Whether sandbox `t` still runs, as docker says, after a stream into it
/// ended abnormally. Asked every 250 ms for up to 3 s: `docker rm -f` or
/// `docker kill` kills the stream's process (exit 137) well before the
/// container stops reading as running on a loaded engine (a full CI run saw
/// "running" right after the kill; four gVisor sandboxes going at once,
/// for over a second).
pub(crate) fn still_runs(t: &Target) -> Result<bool> {
    for i in 0..STILL_RUNS_ASKS {
        if i > 0 {
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        let out = t.docker.run(&crate::docker::argv::state(&t.container))?;
        if out.status != 0 || !out.stdout_str().starts_with("running") {
            return Ok(false);
        }
    }
    Ok(true)
}

/// How many times [`still_runs`] asks.
pub(crate) const STILL_RUNS_ASKS: usize = 12;

/// A stream into sandbox `t` that failed with `e` for no reason sbx could
/// name (the helper or docker exec killed, its stream cut, a relay gone):
/// the sandbox's end (`not_running`) when docker says it no longer runs,
/// else `e`. Asked only on such failures: a stream that ends well, or
/// with the helper's own word, costs nothing.
pub(crate) fn or_ended(t: &Target, e: Error) -> Error {
    let unexplained = matches!(
        &e,
        Error::Explained(Explained::Helper { .. })
            | Error::Host(crate::error::HostError::Io { .. })
            | Error::Socket(crate::error::SocketError::Relay { .. })
            | Error::Docker(crate::docker::DockerError::Status { .. })
    );
    match unexplained && matches!(still_runs(t), Ok(false)) {
        true => ended(t),
        false => e,
    }
}

/// Sandbox `t` stopped or was removed under a stream (`not_running`).
pub(crate) fn ended(t: &Target) -> Error {
    SandboxError::NotRunning { id: t.sandbox.to_string(), state: crate::error::ENDED.into() }.into()
}

/// Run a helper command and require success.
pub(crate) fn helper(t: &Target, args: &[&str]) -> Result<Output> {
    let argv = helper_argv(t, false, args);
    let out = run(t, &argv)?;
    check_helper(t, &argv, &out)?;
    Ok(out)
}

pub(crate) fn check_helper(t: &Target, argv: &[OsString], out: &Output) -> Result<()> {
    if out.status == 0 {
        return Ok(());
    }
    if let Some(e) = sandbox_error(t, &out.stderr_str()) {
        return Err(e);
    }
    Err(helper_failure(t, argv, out.status, &out.stderr_str()))
}

/// Read and drop a helper's stdout (it prints nothing on success).
pub(crate) fn drain(r: &mut dyn std::io::Read) -> std::io::Result<()> {
    std::io::copy(&mut std::io::Read::take(r, 1 << 20), &mut std::io::sink()).map(drop)
}

/// The outcome of a streamed helper call: the sandbox's own failure first
/// (no helper, no sandbox), then what sbx refused in the stream, then the
/// helper's exit status. A helper that did not exit well, failing for no
/// reason sbx can name, was cut off by its sandbox's end if that has
/// ended ([`or_ended`]); one that exited 0 answers for its own output.
pub(crate) fn streamed(
    t: &Target,
    argv: &[OsString],
    r: crate::docker::Streamed,
    what: impl Fn() -> String,
) -> Result<()> {
    let killed = r.status != 0;
    streamed_status(t, argv, r, what).map_err(|e| if killed { or_ended(t, e) } else { e })
}

fn streamed_status(t: &Target, argv: &[OsString], r: crate::docker::Streamed, what: impl Fn() -> String) -> Result<()> {
    let stderr = r.stderr_str();
    if r.status != 0 {
        if let Some(e) = sandbox_error(t, &stderr) {
            return Err(e);
        }
    }
    if let Err(e) = r.output {
        // A stream cut short is the helper's failure when it says so.
        if !(e.kind() == std::io::ErrorKind::UnexpectedEof && r.status != 0) {
            return Err(transfer_failure(what(), e));
        }
    }
    if r.status != 0 {
        return Err(helper_failure(t, argv, r.status, &stderr));
    }
    Ok(())
}

/// A failed transfer as an sbx error: what sbx refused of the stream (or
/// of a host path) is a [`TransferError::Refused`], the rest a failed
/// system call. Either says `context: ` and the same text as before.
pub(crate) fn transfer_failure(context: String, e: std::io::Error) -> Error {
    match refusal(&e) {
        Some(r) => TransferError::Refused { context, reason: r.0.clone() }.into(),
        None => Error::io(context, e),
    }
}

#[cfg(test)]
mod tests;

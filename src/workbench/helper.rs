//! Calls of the in-sandbox helper (`helper/sbx_helper.rs`, mounted at
//! [`HELPER`]) and what their failures mean in sbx's words: the argv, the
//! exit-code table both sides share, the sandbox's own failures (no helper,
//! no sandbox, stopped) and the outcome of a streamed call.

use std::ffi::OsString;

use crate::docker::argv::{self, ExecOpts};
use crate::docker::{DockerExec, Output};
use crate::error::SandboxError;
use crate::error::{Error, Explained, Result, TransferError};
use crate::host::helper::SANDBOX_PATH as HELPER;
use crate::workbench::transfer::refusal;

/// `docker exec [-i] -- ID HELPER ARGS...`: a call of the in-sandbox helper.
pub(crate) fn helper_argv(id: &str, interactive: bool, args: &[&str]) -> Vec<OsString> {
    let mut cmd = vec![HELPER.to_string()];
    cmd.extend(args.iter().map(|a| a.to_string()));
    argv::exec(id, &ExecOpts { interactive, ..ExecOpts::default() }, &cmd)
}

/// What a failed `docker exec` said about the sandbox itself: no helper in
/// it, or no such sandbox. `None`: the command itself failed.
pub(crate) fn sandbox_error(id: &str, stderr: &str) -> Option<Error> {
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
/// text as its own: that text comes from the sandbox (issue 10 item 5).
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
pub(crate) fn helper_failure(id: &str, argv: &[OsString], code: i32, stderr: &str) -> Error {
    let words: Vec<String> = argv.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let at = words.iter().position(|w| w == HELPER).map(|i| i + 1).unwrap_or(words.len());
    let verb = words.get(at).map(String::as_str).unwrap_or("");
    let arg = words.get(at + 1).cloned().unwrap_or_default();
    let id = id.to_string();
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
            let doing = match verb {
                "receive" => format!("writing {arg}"),
                "send" => format!("reading {arg}"),
                "kill" => format!("signalling {arg}"),
                "logs" => format!("reading the output of {arg}"),
                "ps" => "listing background processes".to_string(),
                "list" => format!("listing {arg}"),
                "mkdir" => format!("creating {arg}"),
                "watch" => format!("watching {arg}"),
                "wait-port" => format!("waiting for port {arg}"),
                v => format!("running {v:?}"),
            };
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

/// Whether sandbox `id` still runs, as docker says, after a stream into it
/// ended abnormally. Asked every 250 ms for up to 3 s: `docker rm -f` or
/// `docker kill` kills the stream's process (exit 137) well before the
/// container stops reading as running on a loaded engine (a full CI run saw
/// "running" right after the kill; four gVisor sandboxes going at once,
/// for over a second).
pub(crate) fn still_runs(exec: &dyn DockerExec, id: &str) -> Result<bool> {
    for i in 0..STILL_RUNS_ASKS {
        if i > 0 {
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        let out = exec.run(&crate::docker::argv::state(id))?;
        if out.status != 0 || !out.stdout_str().starts_with("running") {
            return Ok(false);
        }
    }
    Ok(true)
}

/// How many times [`still_runs`] asks.
pub(crate) const STILL_RUNS_ASKS: usize = 12;

/// A stream into sandbox `id` that failed with `e` for no reason sbx could
/// name (the helper or docker exec killed, its stream cut, a relay gone):
/// the sandbox's end (`not_running`) when docker says it no longer runs,
/// else `e`. Asked only on such failures: a stream that ends well, or
/// with the helper's own word, costs nothing.
pub(crate) fn or_ended(exec: &dyn DockerExec, id: &str, e: Error) -> Error {
    let unexplained = matches!(
        &e,
        Error::Explained(Explained::Helper { .. })
            | Error::Host(crate::error::HostError::Io { .. })
            | Error::Socket(crate::error::SocketError::Relay { .. })
            | Error::Docker(crate::docker::DockerError::Status { .. })
    );
    match unexplained && matches!(still_runs(exec, id), Ok(false)) {
        true => ended(id),
        false => e,
    }
}

/// Sandbox `id` stopped or was removed under a stream (`not_running`).
pub(crate) fn ended(id: &str) -> Error {
    SandboxError::NotRunning { id: id.to_string(), state: crate::error::ENDED.into() }.into()
}

/// Run a helper command and require success.
pub(crate) fn helper(exec: &dyn DockerExec, id: &str, args: &[&str]) -> Result<Output> {
    let argv = helper_argv(id, false, args);
    let out = exec.run(&argv)?;
    check_helper(id, &argv, &out)?;
    Ok(out)
}

pub(crate) fn check_helper(id: &str, argv: &[OsString], out: &Output) -> Result<()> {
    if out.status == 0 {
        return Ok(());
    }
    if let Some(e) = sandbox_error(id, &out.stderr_str()) {
        return Err(e);
    }
    Err(helper_failure(id, argv, out.status, &out.stderr_str()))
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
    exec: &dyn DockerExec,
    id: &str,
    argv: &[OsString],
    r: crate::docker::Streamed,
    what: impl Fn() -> String,
) -> Result<()> {
    let killed = r.status != 0;
    streamed_status(id, argv, r, what).map_err(|e| if killed { or_ended(exec, id, e) } else { e })
}

fn streamed_status(id: &str, argv: &[OsString], r: crate::docker::Streamed, what: impl Fn() -> String) -> Result<()> {
    let stderr = r.stderr_str();
    if r.status != 0 {
        if let Some(e) = sandbox_error(id, &stderr) {
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
        return Err(helper_failure(id, argv, r.status, &stderr));
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
mod tests {
    use super::*;
    use crate::docker::fake::FakeDocker;
    use crate::workbench::transfer::Limits;
    use crate::workbench::{backup, cp, kill, logs, CpSide};

    /// A stream into a sandbox that goes under it ends in sbx's words
    /// (`not_running`), whichever way it ends: cut by the runner's watch
    /// (runsc: the exec never returned), or killed (runc: exit 137) with
    /// docker then saying the sandbox is gone. One that fails while its
    /// sandbox runs keeps its own error or code.
    #[test]
    fn a_stream_whose_sandbox_went_says_so() {
        use crate::workbench::{exec, ps, wait_port, ExecOpts};
        let id = "sbx-0123456789ab";
        let gone = |f: &FakeDocker| {
            f.push(Output::fail(1, &format!("Error: No such object: {id}")));
        };
        let not_running = |r: Result<()>, what: &str| match r {
            Err(Error::Sandbox(SandboxError::NotRunning { id: got, state })) => {
                assert_eq!((got.as_str(), state.as_str()), (id, crate::error::ENDED), "{what}")
            }
            other => panic!("{what}: {other:?}"),
        };
        let f = FakeDocker::new();
        let o = ExecOpts::default();
        let cmd = ["sleep".to_string()];
        f.push_ended("", id);
        not_running(exec(&f, id, &o, &cmd).map(drop), "exec cut");
        f.push(Output::fail(137, ""));
        gone(&f);
        not_running(exec(&f, id, &o, &cmd).map(drop), "exec killed");
        f.push(Output::fail(137, ""));
        f.push(Output::ok("exited 137"));
        not_running(logs(&f, id, Some("p0000abcd"), true, None).map(drop), "logs -f HANDLE killed");
        f.push_ended("", id);
        assert_eq!(ps::logs(&f, id, None, true, None).unwrap(), 0, "the sandbox's own output ends with it");
        f.push(Output::fail(137, ""));
        gone(&f);
        not_running(wait_port(&f, id, 80, std::time::Duration::from_secs(60)).map(drop), "wait-port");
        let to = std::env::temp_dir();
        let src = CpSide::Sandbox { id: id.into(), path: "/tmp/big".into() };
        f.push(Output::fail(137, ""));
        gone(&f);
        not_running(cp(&f, &src, &CpSide::Host(to), &Limits::default()), "cp out");
        f.push(Output::fail(137, ""));
        gone(&f);
        not_running(backup(&f, id, std::io::sink(), &Limits::default()), "backup");
        // A listing killed mid-line: the cut-off line is the sandbox's end too.
        f.push(Output { status: 137, stdout: b"ROOT d\nE f 644 3 1".to_vec(), stderr: vec![] });
        gone(&f);
        let opts = crate::workbench::ListOpts { max_depth: 1, limit: 10 };
        not_running(crate::workbench::list(&f, id, "/tmp", opts, &mut |_| Ok(())).map(drop), "files");
        assert_eq!(f.remaining(), 0);
        // The sandbox runs: the command's own death by signal keeps its code,
        // after docker said `running` each time it was asked.
        f.push(Output::fail(137, ""));
        for _ in 0..STILL_RUNS_ASKS {
            f.push(Output::ok("running 0"));
        }
        assert_eq!(exec(&f, id, &o, &cmd).unwrap(), 137);
        // A helper's own word is not second-guessed: no look-up.
        f.push(Output::fail(helper_exit::NO_SUCH_PATH, ""));
        assert_eq!(backup(&f, id, std::io::sink(), &Limits::default()).unwrap_err().kind(), "no_such_path");
        assert_eq!(f.remaining(), 0);
    }

    /// A refusal inside an io::Error is a transfer error; a failed system
    /// call stays one. Both say the context and the same text.
    #[test]
    fn transfer_failures_tell_refusals_from_io() {
        use crate::error::HostError;
        use crate::workbench::transfer::wire::refused;
        let e = transfer_failure("copying x".into(), refused(std::io::ErrorKind::InvalidData, "refusing entry \"..\""));
        assert!(
            matches!(&e, Error::Transfer(TransferError::Refused { reason, .. }) if reason == "refusing entry \"..\"")
        );
        assert_eq!(e.to_string(), "copying x: refusing entry \"..\"");
        let e = transfer_failure("copying x".into(), std::io::Error::from_raw_os_error(28));
        assert!(matches!(&e, Error::Host(HostError::Io { source, .. }) if source.raw_os_error() == Some(28)), "{e}");
        assert_eq!(e.to_string(), "copying x: No space left on device (os error 28)");
    }

    /// Issue 10 item 5: the helper's exit codes become sbx's words; its
    /// text (the sandbox's) and docker's argv never make the message.
    #[test]
    fn helper_failures_are_said_in_sbx_words() {
        let f = FakeDocker::new();
        let id = "sbx-0123456789ab";
        f.push(Output::fail(helper_exit::EXITED, ""));
        let e = kill(&f, id, "p0000abcd", 15).unwrap_err();
        assert_eq!(e.to_string(), "background process p0000abcd in sandbox sbx-0123456789ab has already exited");
        assert_eq!(e.kind(), "process_exited");
        f.push(Output::fail(helper_exit::NO_PROCESS, ""));
        let e = kill(&f, id, "p0000abcd", 15).unwrap_err();
        assert_eq!(e.kind(), "no_such_process");
        assert!(e.hint().unwrap().contains("sbx ps sbx-0123456789ab"));
        f.push(Output::fail(helper_exit::NO_PROCESS, ""));
        assert_eq!(logs(&f, id, Some("p00000000"), false, None).unwrap_err().kind(), "no_such_process");
        f.push(Output::fail(helper_exit::READ_ONLY, ""));
        let e = cp(
            &f,
            &CpSide::Host("/dev/null".into()),
            &CpSide::Sandbox { id: id.into(), path: "/etc/a.txt".into() },
            &Limits::default(),
        )
        .unwrap_err();
        assert_eq!(e.kind(), "read_only");
        assert!(e.to_string().contains("/etc/a.txt") && e.to_string().contains("read-only"), "{e}");
        assert!(e.hint().unwrap().contains("/tmp"), "{:?}", e.hint());
        f.push(Output::fail(helper_exit::NO_SUCH_PATH, ""));
        let e = backup(&f, id, std::io::sink(), &Limits::default()).unwrap_err();
        assert_eq!(e.to_string(), "sandbox sbx-0123456789ab has no /state/workspace");
        // Docker's own answer for an exited sandbox.
        f.push(Output::fail(1, "Error response from daemon: Container 0123abcd is not running"));
        let e = kill(&f, id, "p0000abcd", 15).unwrap_err();
        assert_eq!((e.kind(), e.to_string().contains("Error response")), ("not_running", false), "{e}");
        // Anything else: what sbx was doing, the sandbox's words labelled and made printable.
        f.push(Output::fail(1, "sbx-helper: weird \x1b[2Jthing"));
        let e = kill(&f, id, "p0000abcd", 15).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("signalling p0000abcd") && msg.contains("the sandbox said: weird"), "{msg}");
        assert!(!msg.contains("docker exec") && !msg.contains('\x1b'), "{msg}");
    }
}

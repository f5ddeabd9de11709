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
/// helper's exit status.
pub(crate) fn streamed(
    id: &str,
    argv: &[OsString],
    r: crate::docker::Streamed,
    what: impl Fn() -> String,
) -> Result<()> {
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

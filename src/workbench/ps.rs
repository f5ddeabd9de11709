//! Background processes (`sbx exec -d`, `ps`, `kill`) run by the helper's
//! supervisor, and `sbx logs`: the sandbox's own or one process's.

use serde::{Deserialize, Serialize};

use crate::docker::argv::{self, ExecOpts};
use crate::docker::Attach;
use crate::error::{Error, Explained, Invalid, Result, SandboxError};
use crate::host::helper::SANDBOX_PATH as HELPER;

use super::helper::{ended, helper, helper_argv, helper_exit, helper_failure, run, sandbox_error, still_runs};
use super::Target;

pub fn new_handle() -> String {
    format!("p{:08x}", rand::random::<u32>())
}

/// `sbx exec -d`: start CMD under the helper's supervisor; returns the handle.
pub fn exec_detached(t: &Target, o: &ExecOpts, handle: &str, cmd: &[String]) -> Result<(String, i32)> {
    let mut inner = vec![HELPER.to_string(), "bg".into(), handle.to_string(), "--".into()];
    inner.extend(cmd.iter().cloned());
    let argv = argv::exec(&t.container, &ExecOpts { interactive: false, tty: false, ..o.clone() }, &inner);
    let out = run(t, &argv)?;
    if out.status != 0 {
        if let Some(e) = sandbox_error(t, &out.stderr_str()) {
            return Err(e);
        }
        // The helper's `bg` exits 127/126 when the command cannot start.
        if matches!(out.status, 126 | 127) && !cmd.is_empty() {
            let not_found = out.status == 127;
            return Err(Explained::CannotRun {
                id: t.sandbox.to_string(),
                command: cmd[0].clone(),
                not_found,
                background: true,
            }
            .into());
        }
        return Err(helper_failure(t, &argv, out.status, &out.stderr_str()));
    }
    Ok((handle.to_string(), out.stdout_str().trim().parse().unwrap_or(0)))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BgProcess {
    pub handle: String,
    pub pid: Option<i64>,
    pub command: Vec<String>,
    pub running: bool,
    pub exit_code: Option<i64>,
    /// The signal that ended it (then `exit_code` is null): TERM is 15,
    /// not "exit 143".
    #[serde(default)]
    pub signal: Option<i64>,
}

impl BgProcess {
    /// `running`, `exit N`, or `killed by TERM`.
    pub fn status(&self) -> String {
        match (self.running, self.exit_code, self.signal) {
            (true, _, _) => "running".into(),
            (false, _, Some(sig)) => format!("killed by {}", signal_name(sig)),
            (false, Some(c), None) => format!("exit {c}"),
            (false, None, None) => "gone".into(),
        }
    }
}

/// What `ps` found: the background processes, and how many records it
/// dropped because their handle is not one sbx makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PsList {
    pub processes: Vec<BgProcess>,
    pub foreign: usize,
}

/// The background processes the helper lists from the sandbox's
/// `/run/sbx-bg`, where every directory name is the sandbox's to choose: a
/// record whose handle is not of the shape [`new_handle`] makes (one named
/// with escape sequences and newlines set the terminal's title, erased a
/// line and printed a forged row) is no process `exec -d` started, and is
/// dropped, in `--json` too.
pub fn ps(t: &Target) -> Result<PsList> {
    let out = helper(t, &["ps"])?;
    let all: Vec<BgProcess> = out
        .stdout_str()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .map_err(|source| Error::Sandbox(SandboxError::HelperOutput { what: "ps", line: l.into(), source }))
        })
        .collect::<Result<_>>()?;
    let total = all.len();
    let processes: Vec<BgProcess> = all.into_iter().filter(|p| is_handle(&p.handle)).collect();
    Ok(PsList { foreign: total - processes.len(), processes })
}

/// Signal names and numbers `kill` accepts.
pub fn parse_signal(s: &str) -> std::result::Result<i32, Invalid> {
    let up = s.to_ascii_uppercase();
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    if let Some((_, n)) = SIGNALS.iter().find(|(n, _)| *n == name) {
        return Ok(*n);
    }
    match s.parse::<i32>() {
        Ok(n) if (1..=64).contains(&n) => Ok(n),
        _ => Err(Invalid::new(
            "signal",
            s,
            "not a signal: use a name such as TERM, KILL, INT, HUP, USR1, or a number 1-64",
        )),
    }
}

/// "TERM" for 15; a signal without a name here as its number.
pub fn signal_name(n: i64) -> String {
    SIGNALS.iter().find(|(_, k)| i64::from(*k) == n).map_or_else(|| format!("signal {n}"), |(s, _)| s.to_string())
}

const SIGNALS: &[(&str, i32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("KILL", 9),
    ("USR1", 10),
    ("USR2", 12),
    ("TERM", 15),
    ("CONT", 18),
    ("STOP", 19),
    ("WINCH", 28),
];

/// Whether `h` has the shape of a handle [`new_handle`] makes: `p` and 8 hex digits.
pub fn is_handle(h: &str) -> bool {
    h.len() == 9 && h.starts_with('p') && h[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

pub fn validate_handle(h: &str) -> std::result::Result<(), Invalid> {
    if is_handle(h) {
        Ok(())
    } else {
        Err(Invalid::new("process handle", h, "handles look like p0123abcd, as `sbx exec -d` printed them")
            .hint("`sbx ps ID` lists them"))
    }
}

pub fn kill(t: &Target, handle: &str, signal: i32) -> Result<()> {
    helper(t, &["kill", handle, &signal.to_string()]).map(|_| ())
}

/// Logs: the sandbox's own (docker logs), or a background process's.
pub fn logs(t: &Target, handle: Option<&str>, follow: bool, tail: Option<u64>) -> Result<i32> {
    let tail_s = tail.map(|t| t.to_string());
    let argv = match handle {
        None => argv::logs(&t.container, follow, tail_s.as_deref()),
        Some(h) => {
            let mut args = vec!["logs", h];
            if follow {
                args.push("-f");
            }
            args.push(tail_s.as_deref().unwrap_or("-1"));
            helper_argv(t, false, &args)
        }
    };
    let (code, stderr) = match t.docker.run_attached(&argv, Attach { stdin: false, capture_stderr: true }) {
        // The sandbox's own output ends with the sandbox: cut by the
        // runner's watch (docker/real/watch.rs) where docker did not end it.
        Err(crate::docker::DockerError::Ended { .. }) if handle.is_none() => return Ok(0),
        other => other?,
    };
    if code != 0 {
        if let Some(e) = sandbox_error(t, &stderr) {
            return Err(e);
        }
        if handle.is_some() && code == helper_exit::NO_PROCESS {
            return Err(helper_failure(t, &argv, code, &stderr));
        }
        // A follow killed or cut off: by its sandbox's end?
        if handle.is_some() && follow && !still_runs(t)? {
            return Err(ended(t));
        }
    }
    // Held back as if docker's, but it was the sandbox's own output.
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), stderr.as_bytes());
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::fake::FakeDocker;
    use crate::docker::Output;

    /// What the helper prints is only quoted, and the error is the `Io` one it was.
    #[test]
    fn ps_output_that_is_not_json_is_named() {
        let f = FakeDocker::new();
        f.push(Output::ok("{\"handle\":\"p1\"}x\n"));
        let e = ps(&Target::test(&f, "sbx-0123456789ab")).unwrap_err();
        assert!(matches!(&e, Error::Sandbox(SandboxError::HelperOutput { what: "ps", .. })), "{e}");
        assert_eq!(
            e.to_string(),
            r#"reading the helper's ps output "{\"handle\":\"p1\"}x": missing field `command` at line 1 column 15"#
        );
        assert_eq!((e.kind(), e.exit_code(), e.hint()), ("io", 1, None));
        assert_eq!(f.calls(), [["exec", "--", "sbx-0123456789ab", "/run/sbx/helper", "ps"]]);
    }

    #[test]
    fn background_processes_through_the_fake() {
        let f = FakeDocker::new();
        f.push(Output::ok("42\n"));
        let t = Target::test(&f, "sbx-0123456789ab");
        let (h, pid) = exec_detached(&t, &ExecOpts::default(), "p0000abcd", &["srv".into(), "--port".into()]).unwrap();
        assert_eq!((h.as_str(), pid), ("p0000abcd", 42));
        assert_eq!(
            f.calls()[0],
            ["exec", "--", "sbx-0123456789ab", "/run/sbx/helper", "bg", "p0000abcd", "--", "srv", "--port"]
        );
        f.push(Output::ok(
            "{\"handle\":\"p0000abcd\",\"pid\":42,\"command\":[\"srv\"],\"running\":true,\"exit_code\":null}\n",
        ));
        let list = ps(&Target::test(&f, "sbx-0123456789ab")).unwrap().processes;
        assert_eq!(list[0].pid, Some(42));
        assert!(list[0].running);
        // Ended by TERM is not "exit 143".
        f.push(Output::ok(
            "{\"handle\":\"p0000abcd\",\"pid\":42,\"command\":[\"srv\"],\"running\":false,\"exit_code\":null,\"signal\":15}\n\
             {\"handle\":\"p0000abce\",\"pid\":43,\"command\":[\"x\"],\"running\":false,\"exit_code\":3,\"signal\":null}\n",
        ));
        let list = ps(&Target::test(&f, "sbx-0123456789ab")).unwrap().processes;
        assert_eq!((list[0].signal, list[0].exit_code, list[0].status()), (Some(15), None, "killed by TERM".into()));
        assert_eq!(list[1].status(), "exit 3");
        f.push(Output::fail(
            126,
            "OCI runtime exec failed: exec: \"/run/sbx/helper\": stat /run/sbx/helper: no such file or directory",
        ));
        assert!(matches!(
            ps(&Target::test(&f, "sbx-0123456789ab")),
            Err(Error::Sandbox(crate::error::SandboxError::HelperMissing { .. }))
        ));
        f.push(Output::fail(127, "sbx-helper: cannot run \"nope\": No such file or directory"));
        match exec_detached(&Target::test(&f, "sbx-0123456789ab"), &ExecOpts::default(), "p1", &["nope".into()]) {
            Err(e @ Error::Explained(Explained::CannotRun { not_found: true, .. })) => {
                assert_eq!(e.exit_code(), 1, "exec -d exits 1");
                assert!(!e.to_string().contains("sbx-helper"), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn signals_and_handles() {
        assert_eq!(parse_signal("TERM").unwrap(), 15);
        assert_eq!(parse_signal("sigkill").unwrap(), 9);
        assert_eq!(parse_signal("2").unwrap(), 2);
        for bad in ["", "TERMX", "0", "65", "-9", "9; rm"] {
            assert!(parse_signal(bad).is_err(), "{bad}");
        }
        assert!(validate_handle("p0123abcd").is_ok());
        for bad in ["p1", "../p0123abc", "q0123abcd", "p0123abcz"] {
            assert!(validate_handle(bad).is_err(), "{bad}");
        }
    }
}

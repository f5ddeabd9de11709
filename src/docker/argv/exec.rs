//! Running things in a sandbox and reading it: `docker exec` (commands
//! and the in-sandbox helper), `docker logs`, `docker stats`.

use std::ffi::OsString;

use super::{os, with_tail};
use crate::model::paths::SANDBOX_SOCKET;

/// `docker exec -i -- CID HELPER connect /run/sandbox/sandbox.sock MILLIS`:
/// the relayed channel (`helper` is the in-sandbox helper's path).
pub fn helper_connect(container: &str, helper: &str, timeout: std::time::Duration) -> Vec<OsString> {
    let ms = timeout.as_millis().max(1).to_string();
    os(&["exec", "-i", "--", container, helper, "connect", SANDBOX_SOCKET, &ms])
}

/// `docker exec -- CID HELPER probe-socket /run/sandbox/sandbox.sock MILLIS`.
pub fn helper_probe_socket(container: &str, helper: &str, wait: std::time::Duration) -> Vec<OsString> {
    let ms = wait.as_millis().to_string();
    os(&["exec", "--", container, helper, "probe-socket", SANDBOX_SOCKET, &ms])
}

/// How `docker exec` runs a command: attached stdin and terminal, extra
/// environment, working directory and user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOpts {
    pub interactive: bool,
    pub tty: bool,
    pub env: Vec<(String, String)>,
    pub workdir: Option<String>,
    pub user: Option<String>,
}

/// `docker exec [-i] [-t] [-e K=V]... [-w DIR] [-u USER] -- ID CMD...`:
/// the command's argv passes through untouched, after `--`.
pub fn exec(id: &str, o: &ExecOpts, cmd: &[String]) -> Vec<OsString> {
    let mut a = os(&["exec"]);
    if o.interactive {
        a.push("-i".into());
    }
    if o.tty {
        a.push("-t".into());
    }
    for (k, v) in &o.env {
        a.push("-e".into());
        a.push(format!("{k}={v}").into());
    }
    if let Some(w) = &o.workdir {
        a.push("-w".into());
        a.push(w.into());
    }
    if let Some(u) = &o.user {
        a.push("-u".into());
        a.push(u.into());
    }
    a.push("--".into());
    a.push(id.into());
    a.extend(cmd.iter().map(OsString::from));
    a
}

/// `docker logs [--follow] [--tail N] -- ID`: the sandbox's own output.
pub fn logs(id: &str, follow: bool, tail: Option<&str>) -> Vec<OsString> {
    let mut a = os(&["logs"]);
    if follow {
        a.push("--follow".into());
    }
    if let Some(t) = tail {
        a.push("--tail".into());
        a.push(t.into());
    }
    a.push("--".into());
    a.push(id.into());
    a
}

/// `docker stats --no-stream --format '{{json .}}' -- IDS`: one JSON object
/// per sandbox (see `parse::stats`).
pub fn stats<S: AsRef<str>>(ids: &[S]) -> Vec<OsString> {
    with_tail(&["stats", "--no-stream", "--format", "{{json .}}", "--"], ids)
}

#[cfg(test)]
mod tests {
    use super::super::strs;
    use super::*;

    #[test]
    fn helper_builders() {
        let t = std::time::Duration::from_millis(1500);
        assert_eq!(
            strs(helper_connect("c0ffee", "/run/sbx/helper", t)),
            ["exec", "-i", "--", "c0ffee", "/run/sbx/helper", "connect", "/run/sandbox/sandbox.sock", "1500"]
        );
        assert_eq!(strs(helper_connect("c", "/h", std::time::Duration::ZERO))[7], "1");
        assert_eq!(
            strs(helper_probe_socket("c0ffee", "/run/sbx/helper", t)),
            ["exec", "--", "c0ffee", "/run/sbx/helper", "probe-socket", "/run/sandbox/sandbox.sock", "1500"]
        );
    }

    #[test]
    fn exec_argv_passes_the_command_through_after_dashes() {
        let o = ExecOpts {
            interactive: true,
            tty: true,
            env: vec![("A".into(), "1 2".into())],
            workdir: Some("/tmp".into()),
            user: Some("1000:1000".into()),
        };
        let cmd: Vec<String> = ["sh", "-c", "echo $A; rm -rf /"].map(String::from).to_vec();
        assert_eq!(
            strs(exec("sbx-0123456789ab", &o, &cmd)),
            [
                "exec",
                "-i",
                "-t",
                "-e",
                "A=1 2",
                "-w",
                "/tmp",
                "-u",
                "1000:1000",
                "--",
                "sbx-0123456789ab",
                "sh",
                "-c",
                "echo $A; rm -rf /"
            ]
        );
    }

    #[test]
    fn logs_and_stats() {
        assert_eq!(strs(logs("sbx-1", false, None)), ["logs", "--", "sbx-1"]);
        assert_eq!(strs(logs("sbx-1", true, Some("5"))), ["logs", "--follow", "--tail", "5", "--", "sbx-1"]);
        assert_eq!(strs(stats(&["a", "b"])), ["stats", "--no-stream", "--format", "{{json .}}", "--", "a", "b"]);
    }
}

//! `sbx exec` in the foreground (with signals passed on) and `sbx shell`:
//! docker's own failures told apart from the command's exit code.

use crate::docker::argv::{self, ExecOpts};
use crate::docker::Attach;
use crate::error::SandboxError;
use crate::error::{Error, Explained, Result};
use crate::host::helper::SANDBOX_PATH as HELPER;

use super::helper::{ended, helper_argv, run, sandbox_error, still_runs};
use super::Target;

/// `sbx exec` in the foreground: the command's exit code. Its output goes
/// straight to sbx's own stdout and stderr (no copy through sbx). docker
/// answers 126 both for "cannot run" and "not found"; only then does sbx ask
/// the helper, with the same environment, whether the command exists (127).
pub fn exec(t: &Target, o: &ExecOpts, cmd: &[String]) -> Result<i32> {
    let argv = argv::exec(&t.container, o, cmd);
    let (code, held) = t.docker.run_attached(&argv, Attach { stdin: o.interactive, capture_stderr: !o.tty })?;
    exec_code(t, o, cmd, code, &held)
}

/// What `sbx exec` exits with, given docker exec's status and what docker
/// itself said (`held`, kept from sbx's streams): docker's failures become
/// sbx's errors; text that turns out to be the
/// command's own is written out after all.
fn exec_code(t: &Target, o: &ExecOpts, cmd: &[String], code: i32, held: &str) -> Result<i32> {
    if !held.is_empty() {
        if let Some(e) = sandbox_error(t, held) {
            return Err(e);
        }
        let oci = held.starts_with("OCI runtime exec failed");
        if oci && (code == 126 || code == 127) && !cmd.is_empty() {
            let not_found = exec_code(t, o, cmd, 126, "")? == 127;
            return Err(Explained::CannotRun {
                id: t.sandbox.to_string(),
                command: cmd[0].clone(),
                not_found,
                background: false,
            }
            .into());
        }
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), held.as_bytes());
    }
    if code != 126 || cmd.is_empty() {
        // Killed (128+N): by its sandbox's end, if that has ended (the
        // command's own death by signal keeps its code).
        if code > 128 && !still_runs(t)? {
            return Err(ended(t));
        }
        if code == 1 && !container_exists(t)? {
            return Err(Error::Sandbox(SandboxError::NotFound { id: t.sandbox.to_string() }));
        }
        return Ok(code);
    }
    let check = ExecOpts { interactive: false, tty: false, ..o.clone() };
    let probe = argv::exec(&t.container, &check, &[HELPER.to_string(), "which".into(), cmd[0].clone()]);
    match t.docker.run(&probe) {
        Ok(out) if out.status == 1 && out.stderr.is_empty() => Ok(127),
        _ => Ok(126),
    }
}

/// What a command run through the helper's `run` says as it runs.
#[derive(Debug, PartialEq, Eq)]
pub enum RunEvent<'a> {
    /// Its pid inside the sandbox: first.
    Started(u32),
    Stdout(&'a [u8]),
    Stderr(&'a [u8]),
}

/// How a command run through the helper ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    Code(i32),
    Signal(i32),
}

/// What is sent to a command run through the helper while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunInput {
    /// Bytes for its stdin or terminal (any length: sent in frames).
    Data(Vec<u8>),
    /// End of its stdin.
    Close,
    /// Its terminal's new size: columns, rows.
    Resize(u16, u16),
}

/// How a command runs through the helper beyond its argv. With `input`
/// docker exec keeps its stdin open and the helper ends the command if
/// that stdin ends first (sbx gone); what comes on `input` goes to the
/// command's stdin when `stdin` (otherwise /dev/null), or to its terminal
/// of `pty` columns and rows (whose output comes as stdout).
#[derive(Debug, Default)]
pub struct RunIo {
    pub input: Option<std::sync::mpsc::Receiver<RunInput>>,
    pub stdin: bool,
    pub pty: Option<(u16, u16)>,
}

/// The helper's argv for `run`: `HELPER run [--stdin|--hold] [--pty C R] -- CMD...`.
fn run_argv(cmd: &[String], io: &RunIo) -> Vec<String> {
    let mut full = vec![HELPER.to_string(), "run".into()];
    match io.pty {
        Some((c, r)) => full.extend(["--pty".into(), c.to_string(), r.to_string()]),
        None if io.stdin => full.push("--stdin".into()),
        None if io.input.is_some() => full.push("--hold".into()),
        None => {}
    }
    full.push("--".into());
    full.extend(cmd.iter().cloned());
    full
}

/// A command through `docker exec ... helper run -- CMD` (`sbx serve`'s
/// process API): its pid, stdout and stderr handed to `on` as they come,
/// then how it ended. An error from `on` (the client went away) kills
/// docker exec. docker's own failures (no such sandbox, not running, no
/// helper) are errors, as for `sbx exec`; so is a stream the helper did
/// not write. With `io.input` docker exec keeps its stdin (`-i`) and
/// what comes on `input` goes to the helper as frames, until the sender
/// is dropped or the command's output ends.
pub fn exec_streamed(
    t: &Target,
    o: &ExecOpts,
    cmd: &[String],
    io: RunIo,
    on: &mut dyn FnMut(RunEvent<'_>) -> std::io::Result<()>,
) -> Result<RunEnd> {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let interactive = io.input.is_some() || io.pty.is_some();
    let full = run_argv(cmd, &io);
    let argv = argv::exec(&t.container, &ExecOpts { interactive, tty: false, ..o.clone() }, &full);
    let mut end = None;
    let out_done = AtomicBool::new(false);
    let mut relay = |r: &mut dyn std::io::Read| -> std::io::Result<()> {
        let relayed = (|| {
            while let Some((tag, payload)) = super::mux::read_frame(r)? {
                match tag {
                    super::mux::PID => on(RunEvent::Started(number(&payload)? as u32))?,
                    super::mux::STDOUT => on(RunEvent::Stdout(&payload))?,
                    super::mux::STDERR => on(RunEvent::Stderr(&payload))?,
                    _ => {
                        end = Some(run_end(&payload)?);
                        break;
                    }
                }
            }
            Ok(())
        })();
        out_done.store(true, SeqCst);
        relayed
    };
    let mut feed = io.input.map(|rx| {
        let out_done = &out_done;
        move |w: &mut dyn std::io::Write| -> std::io::Result<()> { feed_input(&rx, out_done, w) }
    });
    let input = feed.as_mut().map(|f| f as &mut crate::docker::StreamIn<'_>);
    let done = t.docker.run_stream(&argv, input, &mut relay)?;
    let held = String::from_utf8_lossy(&done.stderr).to_string();
    if let Some(e) = sandbox_error(t, &held) {
        return Err(e);
    }
    if done.status == 1 && held.starts_with("Error response from daemon") && !container_exists(t)? {
        return Err(Error::Sandbox(SandboxError::NotFound { id: t.sandbox.to_string() }));
    }
    done.output.map_err(|e| Error::io("relaying a command's output", e))?;
    match end {
        Some(end) => Ok(end),
        None if !still_runs(t)? => Err(ended(t)),
        None => Err(Error::io(
            "running a command",
            std::io::Error::other(format!("the helper ended without saying how the command did: {held}")),
        )),
    }
}

/// `run`'s input, written to the helper as frames until the sender is
/// gone or the output has ended (polled: the sender may outlive it).
fn feed_input(
    rx: &std::sync::mpsc::Receiver<RunInput>,
    out_done: &std::sync::atomic::AtomicBool,
    w: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    use super::mux::{write_frame, CLOSE, INPUT, MAX_FRAME, RESIZE};
    use std::sync::mpsc::RecvTimeoutError;
    loop {
        match rx.recv_timeout(std::time::Duration::from_millis(100)) {
            Ok(RunInput::Data(b)) => {
                for chunk in b.chunks(MAX_FRAME) {
                    write_frame(w, INPUT, chunk)?;
                }
            }
            Ok(RunInput::Close) => write_frame(w, CLOSE, b"")?,
            Ok(RunInput::Resize(c, r)) => write_frame(w, RESIZE, format!("{c} {r}").as_bytes())?,
            Err(RecvTimeoutError::Timeout) if !out_done.load(std::sync::atomic::Ordering::SeqCst) => {}
            Err(_) => return Ok(()),
        }
    }
}

/// Signal one process of the sandbox (a pid [`RunEvent::Started`] named),
/// through the helper, as the sandbox's own user; false when there is no
/// such process.
pub fn signal_pid(t: &Target, pid: u32, sig: i32) -> Result<bool> {
    let out = run(t, &helper_argv(t, false, &["signal-pid", &pid.to_string(), &sig.to_string()]))?;
    if let Some(e) = sandbox_error(t, &out.stderr_str()) {
        return Err(e);
    }
    match out.status {
        0 => Ok(true),
        3 => Ok(false),
        _ => Err(Error::io(format!("signalling process {pid}"), std::io::Error::other(out.stderr_str()))),
    }
}

/// The environment variable that tags a command and all it starts, so
/// [`kill_tagged`] reaches its whole tree (what `exec_watched` uses).
pub const TAG_VAR: &str = "SBX_EXEC";

/// Signal every process of the sandbox whose environment carries
/// `TAG_VAR=token` (a command run with it, and whatever it started), then
/// SIGKILL what is left after `grace`; false when none was found.
pub fn kill_tagged(t: &Target, token: &str, sig: i32, grace: std::time::Duration) -> Result<bool> {
    let args = [HELPER, "kill-exec", token, &sig.to_string(), &grace.as_millis().to_string()].map(String::from);
    let out = run(t, &argv::exec(&t.container, &ExecOpts::default(), &args))?;
    if let Some(e) = sandbox_error(t, &out.stderr_str()) {
        return Err(e);
    }
    Ok(out.status == 0)
}

fn number(b: &[u8]) -> std::io::Result<i32> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "the helper's run stream: not a number"))
}

/// `N` or `signal N`.
fn run_end(b: &[u8]) -> std::io::Result<RunEnd> {
    match b.strip_prefix(b"signal ") {
        Some(sig) => number(sig).map(RunEnd::Signal),
        None => number(b).map(RunEnd::Code),
    }
}

/// How long a command gets to end after a signal sbx passed on, before SIGKILL.
pub const SIGNAL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// [`exec`], passing on a SIGINT/SIGTERM/SIGHUP that reaches sbx while the
/// command runs: without a terminal `docker exec` forwards no
/// signal, so sbx used to die and leave the command running. The command
/// carries SBX_EXEC=TOKEN in its environment; on a signal the helper finds
/// it by that token, signals its process group, waits [`SIGNAL_GRACE`],
/// then SIGKILLs what is left, and sbx exits 128+signal. Without a signal
/// this costs one `-e` argument and a thread blocked on a pipe: no docker call.
pub fn exec_watched(t: &Target, o: &ExecOpts, cmd: &[String], watch: &crate::host::interrupt::Watch) -> Result<i32> {
    let token = format!("{:016x}", rand::random::<u64>());
    let mut tagged = o.clone();
    tagged.env.push((TAG_VAR.into(), token.clone()));
    let argv = argv::exec(&t.container, &tagged, cmd);
    let (attached, signal) = std::thread::scope(|s| {
        let forwarder = s.spawn(|| {
            let sig = watch.next()?;
            forward_signal(t, o, &token, sig);
            // docker exec ends with the command; should it not, end sbx anyway.
            if !watch.finished_within(std::time::Duration::from_secs(5)) {
                std::process::exit(128 + sig);
            }
            Some(sig)
        });
        let attached = t.docker.run_attached(&argv, Attach { stdin: o.interactive, capture_stderr: !o.tty });
        watch.finish();
        (attached, forwarder.join().unwrap_or(None))
    });
    if let Some(sig) = signal {
        return Ok(128 + sig);
    }
    let (code, held) = attached?;
    exec_code(t, o, cmd, code, &held)
}

/// `docker exec [-u USER] CONTAINER helper kill-exec TOKEN SIG GRACE`, as the
/// command's own user (only that user may signal it), bounded in time.
fn forward_signal(t: &Target, o: &ExecOpts, token: &str, sig: i32) {
    let as_user = ExecOpts { user: o.user.clone(), ..ExecOpts::default() };
    let grace = SIGNAL_GRACE.as_millis().to_string();
    let args = [HELPER, "kill-exec", token, &sig.to_string(), &grace].map(String::from);
    let Ok(bg) = t.docker.spawn(&argv::exec(&t.container, &as_user, &args)) else { return };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(bg.wait());
    });
    let _ = rx.recv_timeout(SIGNAL_GRACE + std::time::Duration::from_secs(8));
}

/// Whether docker knows the container (after a failed exec: "no such container" or the command's own 1?).
fn container_exists(t: &Target) -> Result<bool> {
    let out = t.docker.run(&crate::docker::argv::state(&t.container))?;
    Ok(!(out.status != 0 && crate::docker::parse::no_such_container(&out.stderr_str())))
}

/// An interactive terminal with the image's own shell.
pub fn shell(t: &Target, tty: bool) -> Result<i32> {
    let out = run(t, &helper_argv(t, false, &["find-shell"]))?;
    if let Some(e) = sandbox_error(t, &out.stderr_str()) {
        return Err(e);
    }
    let sh = out.stdout_str().trim().to_string();
    if out.status != 0 || sh.is_empty() {
        return Err(Error::Sandbox(SandboxError::NoShell {
            id: t.sandbox.to_string(),
            tried: "/bin/bash, /bin/sh, /usr/bin/bash, /usr/bin/sh, /bin/ash, /bin/zsh".into(),
        }));
    }
    exec_tty(t, tty, &[sh])
}

fn exec_tty(t: &Target, tty: bool, cmd: &[String]) -> Result<i32> {
    let o = ExecOpts { interactive: true, tty, ..Default::default() };
    self::exec(t, &o, cmd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::fake::FakeDocker;
    use crate::docker::Output;

    #[test]
    fn exec_through_the_fake() {
        let f = FakeDocker::new();
        let id = "sbx-0123456789ab";
        // Not found: docker says 126, the helper finds no such command.
        f.push(Output::fail(126, ""));
        f.push(Output { status: 1, stdout: vec![], stderr: vec![] });
        assert_eq!(exec(&Target::test(&f, id), &ExecOpts::default(), &["nope".into()]).unwrap(), 127);
        assert_eq!(f.calls()[1], ["exec", "--", id, "/run/sbx/helper", "which", "nope"]);
        // Exists but cannot run: 126 stays.
        f.push(Output::fail(126, ""));
        f.push(Output::ok(""));
        assert_eq!(exec(&Target::test(&f, id), &ExecOpts::default(), &["/tmp".into()]).unwrap(), 126);
        // The command's own codes pass straight through, with one docker call.
        f.push(Output::fail(3, ""));
        assert_eq!(exec(&Target::test(&f, id), &ExecOpts::default(), &["x".into()]).unwrap(), 3);
        assert_eq!(f.calls().len(), 5);
        // Exit 1: the command's, or docker's "no such container"?
        f.push(Output::fail(1, ""));
        f.push(Output::fail(1, "Error: No such container: sbx-0123456789ab"));
        assert!(matches!(
            exec(&Target::test(&f, id), &ExecOpts::default(), &["x".into()]),
            Err(Error::Sandbox(SandboxError::NotFound { .. }))
        ));
        f.push(Output::fail(1, ""));
        f.push(Output::ok("running 0"));
        assert_eq!(exec(&Target::test(&f, id), &ExecOpts::default(), &["x".into()]).unwrap(), 1);
    }

    #[test]
    fn a_signal_during_exec_is_passed_to_the_command() {
        let f = FakeDocker::new();
        let id = "sbx-0123456789ab";
        let o = ExecOpts { user: Some("1000:1000".into()), ..ExecOpts::default() };
        let watch = std::sync::Arc::new(crate::host::interrupt::Watch::manual().unwrap());
        // No signal: one docker call, the command's own code.
        f.push(Output::fail(3, ""));
        assert_eq!(exec_watched(&Target::test(&f, id), &o, &["x".into()], &watch).unwrap(), 3);
        assert_eq!(f.calls().len(), 1);
        let tag = f.calls()[0].iter().find(|a| a.starts_with("SBX_EXEC=")).cloned().expect("the command is tagged");
        // SIGTERM while it runs: the helper passes it on, sbx exits 143.
        let w = watch.clone();
        f.push_with(Output::fail(143, ""), move |_| w.raise(15));
        f.push(Output::ok(""));
        assert_eq!(exec_watched(&Target::test(&f, id), &o, &["x".into()], &watch).unwrap(), 143);
        let calls = f.calls();
        let token = calls[1].iter().find_map(|a| a.strip_prefix("SBX_EXEC=")).unwrap().to_string();
        assert_ne!(format!("SBX_EXEC={token}"), tag, "a new token per exec");
        assert_eq!(calls[2], ["exec", "-u", "1000:1000", "--", id, HELPER, "kill-exec", &token, "15", "2000"]);
        assert_eq!(f.remaining(), 0);
    }

    #[test]
    fn input_goes_to_the_helper_as_frames_never_raw() {
        use super::super::mux::{write_frame, CLOSE, EXIT, INPUT, MAX_FRAME, PID, RESIZE, STDOUT};
        let f = FakeDocker::new();
        let id = "sbx-0123456789ab";
        let mut out = Vec::new();
        write_frame(&mut out, PID, b"12").unwrap();
        write_frame(&mut out, STDOUT, b"\x1b]0;x\x07\xff").unwrap();
        write_frame(&mut out, EXIT, b"0").unwrap();
        // Past its end nothing is relayed.
        write_frame(&mut out, STDOUT, b"late").unwrap();
        f.push(Output { status: 0, stdout: out, stderr: vec![] });
        let (tx, rx) = std::sync::mpsc::sync_channel(8);
        let big = vec![b'a'; MAX_FRAME + 3];
        tx.send(RunInput::Data(big.clone())).unwrap();
        tx.send(RunInput::Resize(100, 30)).unwrap();
        tx.send(RunInput::Close).unwrap();
        drop(tx);
        let mut seen = Vec::new();
        let io = RunIo { input: Some(rx), stdin: false, pty: Some((80, 24)) };
        let end = exec_streamed(&Target::test(&f, id), &ExecOpts::default(), &["/bin/bash".into()], io, &mut |e| {
            seen.push(format!("{e:?}"));
            Ok(())
        })
        .unwrap();
        assert_eq!(end, RunEnd::Code(0));
        assert_eq!(seen, ["Started(12)", "Stdout([27, 93, 48, 59, 120, 7, 255])"]);
        let call = &f.invocations()[0];
        assert_eq!(call.args, ["exec", "-i", "--", id, HELPER, "run", "--pty", "80", "24", "--", "/bin/bash"]);
        let mut want = Vec::new();
        write_frame(&mut want, INPUT, &big[..MAX_FRAME]).unwrap();
        write_frame(&mut want, INPUT, &big[MAX_FRAME..]).unwrap();
        write_frame(&mut want, RESIZE, b"100 30").unwrap();
        write_frame(&mut want, CLOSE, b"").unwrap();
        assert_eq!(call.stdin.as_deref(), Some(&want[..]));
        // Without input or a terminal: no -i, stdin stays /dev/null.
        f.push(Output { status: 0, stdout: b"p\0\0\0\x012x\0\0\0\x010".to_vec(), stderr: vec![] });
        exec_streamed(&Target::test(&f, id), &ExecOpts::default(), &["true".into()], RunIo::default(), &mut |_| Ok(()))
            .unwrap();
        let call = &f.invocations()[1];
        assert_eq!(call.args, ["exec", "--", id, HELPER, "run", "--", "true"]);
        assert_eq!(call.stdin, None);
        // Input held open without a stdin for the command: --hold.
        f.push(Output { status: 0, stdout: b"p\0\0\0\x012x\0\0\0\x010".to_vec(), stderr: vec![] });
        let io = RunIo { input: Some(std::sync::mpsc::channel().1), ..RunIo::default() };
        exec_streamed(&Target::test(&f, id), &ExecOpts::default(), &["true".into()], io, &mut |_| Ok(())).unwrap();
        assert_eq!(f.invocations()[2].args, ["exec", "-i", "--", id, HELPER, "run", "--hold", "--", "true"]);
        assert_eq!(f.invocations()[2].stdin.as_deref(), Some(&b""[..]));
    }
}

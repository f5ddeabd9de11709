//! The seam between sbx and the `docker` CLI.
//!
//! Everything sbx asks of docker goes through [`DockerExec`]: an argv in,
//! exit status and both output streams out. [`RealDocker`] spawns the CLI
//! (never a shell); [`fake::FakeDocker`] records each argv and replays
//! scripted answers, so every path, faults included, is testable without a
//! daemon.

pub mod argv;
pub mod explain;
pub mod fake;
pub mod pace;
pub mod parse;

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::DockerError;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    pub status: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Output {
    pub fn ok(stdout: &str) -> Self {
        Output { status: 0, stdout: stdout.as_bytes().to_vec(), stderr: Vec::new() }
    }

    pub fn fail(status: i32, stderr: &str) -> Self {
        Output { status, stdout: Vec::new(), stderr: stderr.as_bytes().to_vec() }
    }

    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim().to_string()
    }
}

/// How an attached docker command shares sbx's terminal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attach {
    /// Pass sbx's stdin through (`exec -i`); otherwise /dev/null.
    pub stdin: bool,
    /// Forward docker's stdout and stderr as they come, but hold back a
    /// stream that starts with docker's own message (see `forward`) and
    /// return it, so sbx can tell "docker could not start the command" from
    /// the command's own failure and say so itself. Off for a TTY, where
    /// both streams are the terminal.
    pub capture_stderr: bool,
}

/// A docker process left running while sbx does other work (two
/// independent look-ups at once). Dropping the handle kills it.
pub trait Background: Send {
    /// Wait for it to finish.
    fn wait(self: Box<Self>) -> Result<Output, DockerError>;
}

pub trait DockerExec: Send + Sync {
    /// Run `docker ARGS...` to completion. Errors only when it could not be
    /// started; a non-zero exit is an `Output` with that status.
    fn run(&self, args: &[OsString]) -> Result<Output, DockerError>;
    /// Like `run`, with `input` on docker's stdin (`docker import -`).
    fn run_input(&self, args: &[OsString], input: &[u8]) -> Result<Output, DockerError>;
    /// Start `docker ARGS...` and return at once.
    fn spawn(&self, args: &[OsString]) -> Result<Box<dyn Background>, DockerError>;
    /// Run with sbx's stdout (and stdin, stderr as `attach` says), in sbx's
    /// own process group so a TTY works; returns the exit status and, when
    /// captured, docker's own message, which was held back from sbx's streams.
    fn run_attached(&self, args: &[OsString], attach: Attach) -> Result<(i32, String), DockerError>;
    /// Run with `input` (if any) writing docker's stdin from a thread and
    /// `output` reading its stdout as it comes: nothing is held whole (a
    /// sandbox can send far more than fits in memory, issue 9 finding 6).
    /// When `output` fails, docker is killed.
    fn run_stream(
        &self,
        args: &[OsString],
        input: Option<&mut StreamIn<'_>>,
        output: &mut StreamOut<'_>,
    ) -> Result<Streamed, DockerError>;
    /// Start `docker ARGS` with its stdin and stdout handed to sbx, for a
    /// channel relayed through it (`docker exec -i ... helper connect`,
    /// issue 10 item 7); stderr is kept for the error.
    fn open_pipe(&self, args: &[OsString]) -> Result<Piped, DockerError>;
}

/// A docker process sbx relays through: write its stdin (dropping it is
/// EOF, the half-close), read its stdout, then `wait` for how it ended.
pub struct Piped {
    pub stdin: Box<dyn std::io::Write + Send>,
    pub stdout: Box<dyn Read + Send>,
    /// Its exit status and the first 64 KiB of its stderr.
    pub wait: Box<dyn FnOnce() -> Result<(i32, String), DockerError> + Send>,
}

/// Writes a streamed command's stdin.
pub type StreamIn<'a> = dyn FnMut(&mut dyn std::io::Write) -> std::io::Result<()> + Send + 'a;
/// Reads a streamed command's stdout.
pub type StreamOut<'a> = dyn FnMut(&mut dyn Read) -> std::io::Result<()> + 'a;

/// How a streamed command ended.
#[derive(Debug)]
pub struct Streamed {
    pub status: i32,
    /// Its first 64 KiB.
    pub stderr: Vec<u8>,
    /// What the input writer returned (Ok without one).
    pub input: std::io::Result<()>,
    pub output: std::io::Result<()>,
}

impl Streamed {
    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim().to_string()
    }
}

/// Run and require exit 0.
pub fn run_ok(exec: &dyn DockerExec, args: &[OsString]) -> Result<Output, DockerError> {
    let out = exec.run(args)?;
    if out.status != 0 {
        return Err(status_error(args, &out));
    }
    Ok(out)
}

/// The error for `docker ARGS` that ran and exited non-zero.
pub fn status_error(args: &[OsString], out: &Output) -> DockerError {
    // The argv and docker's whole answer are for `-v` only (issue 10 item 5);
    // the error says what sbx was doing (see `explain`).
    tracing::debug!(command = %render(args), status = out.status, stderr = %out.stderr_str(), "docker failed");
    DockerError::Status { command: explain::doing(args), status: out.status, stderr: out.stderr_str() }
}

/// `docker ARGS` quoted for messages only; never executed.
pub fn render(args: &[OsString]) -> String {
    let mut s = String::from("docker");
    for a in args {
        let a = a.to_string_lossy();
        s.push(' ');
        if !a.is_empty() && a.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:=@,+%".contains(&b)) {
            s.push_str(&a);
        } else {
            s.push('\'');
            s.push_str(&a.replace('\'', "'\\''"));
            s.push('\'');
        }
    }
    s
}

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
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines::scaled(Duration::from_secs(30))
    }
}

impl Deadlines {
    fn scaled(quick: Duration) -> Self {
        Deadlines { quick, change: quick * 4 }
    }

    /// From `SBX_DOCKER_TIMEOUT` (a duration such as `30s` or `2m`: the
    /// look-ups' deadline; changes get four times as long).
    pub fn from_env(value: Option<&str>) -> Result<Self, crate::error::Invalid> {
        let Some(v) = value else { return Ok(Deadlines::default()) };
        match humantime::parse_duration(v.trim()) {
            Ok(d) if d >= Duration::from_millis(100) => Ok(Deadlines::scaled(d)),
            _ => Err(crate::error::Invalid::new("SBX_DOCKER_TIMEOUT", v, "it must be a duration of at least 100ms")
                .hint("e.g. SBX_DOCKER_TIMEOUT=30s (look-ups; engine changes get 4x that)")),
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
        match verb {
            "exec" | "logs" | "attach" | "cp" | "stats" | "events" | "wait" | "pull" | "push" | "load" | "save"
            | "export" | "build" | "prune" => None,
            "run" | "create" | "start" | "stop" | "restart" | "rm" | "kill" | "pause" | "unpause" | "import"
            | "connect" | "disconnect" | "rmi" | "update" => Some(self.change),
            _ if sub == "network" || sub == "volume" => {
                Some(if verb == "inspect" || verb == "ls" { self.quick } else { self.change })
            }
            _ => Some(self.quick),
        }
    }
}

/// Spawns the real docker CLI (`$SBX_DOCKER` or `docker` on PATH).
pub struct RealDocker {
    program: OsString,
    deadlines: Deadlines,
}

impl RealDocker {
    pub fn new(program: Option<OsString>) -> Self {
        RealDocker { program: program.unwrap_or_else(|| OsString::from("docker")), deadlines: Deadlines::default() }
    }

    pub fn with_deadlines(mut self, deadlines: Deadlines) -> Self {
        self.deadlines = deadlines;
        self
    }

    /// A docker command with piped stdio, for relays that manage the process themselves.
    pub fn piped(&self, args: &[OsString]) -> Command {
        let mut cmd = self.command(args);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd
    }

    fn finish(&self, args: &[OsString], child: Child) -> Result<std::process::Output, DockerError> {
        let Some(watch) = self.watch_start(args, &child, true) else {
            return finish(&self.program_name(), args, self.deadlines.of(args), child);
        };
        // A stream run to completion (a helper call such as `sbx ps`, `docker
        // exec` of a setup command): its output is read whole, within
        // MAX_OUTPUT like every call read whole (a sandbox writes it), and its
        // start watched.
        match bounded_output(child, |c| watch.reap(c)).map_err(|e| self.spawn_err(e))? {
            Bounded::Whole { status, stdout, stderr } => Ok(std::process::Output { status: status?, stdout, stderr }),
            Bounded::Cut => Err(output_cut(args)),
        }
    }

    /// Watch the start of `docker ARGS` (just spawned as `child`) when it
    /// has no deadline of its own and names a container; see [`StartWatch`].
    /// `group`: the child leads its own process group (kill the group).
    pub fn watch_start(&self, args: &[OsString], child: &Child, group: bool) -> Option<StartWatch> {
        if self.deadlines.of(args).is_some() {
            return None;
        }
        let probe = start_probe(args)?;
        Some(StartWatch::new(self.program.clone(), probe, child.id() as i32, group, self.deadlines.quick, verb(args)))
    }

    fn program_name(&self) -> String {
        OsStr::new(&self.program).to_string_lossy().into_owned()
    }

    fn command(&self, args: &[OsString]) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(args).stdin(Stdio::null());
        // Its own process group: a Ctrl-C at the terminal reaches sbx alone,
        // which finishes the step in flight and then tears down what it made,
        // instead of docker dying half-way through a create or a cleanup.
        cmd.process_group(0);
        cmd
    }

    fn spawn_err(&self, source: std::io::Error) -> DockerError {
        DockerError::Spawn { program: OsStr::new(&self.program).to_string_lossy().into_owned(), source }
    }
}

impl DockerExec for RealDocker {
    fn run(&self, args: &[OsString]) -> Result<Output, DockerError> {
        tracing::debug!(command = %render(args), "docker");
        let child =
            self.command(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| self.spawn_err(e))?;
        let out = self.finish(args, child)?;
        let status = out
            .status
            .code()
            .unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&out.status).unwrap_or(0));
        tracing::debug!(status, "docker done");
        Ok(Output { status, stdout: out.stdout, stderr: out.stderr })
    }

    fn run_input(&self, args: &[OsString], input: &[u8]) -> Result<Output, DockerError> {
        use std::io::Write;
        tracing::debug!(command = %render(args), bytes = input.len(), "docker (with input)");
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| self.spawn_err(e))?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let data = input.to_vec();
        // Write from a thread: docker may fill its output pipes before it has read all input.
        let writer = std::thread::spawn(move || stdin.write_all(&data));
        let out = self.finish(args, child)?;
        let _ = writer.join();
        let status = out.status.code().unwrap_or(-1);
        Ok(Output { status, stdout: out.stdout, stderr: out.stderr })
    }

    fn run_attached(&self, args: &[OsString], attach: Attach) -> Result<(i32, String), DockerError> {
        tracing::debug!(command = %render(args), "docker (attached)");
        let mut cmd = Command::new(&self.program);
        cmd.args(args);
        cmd.stdin(if attach.stdin { Stdio::inherit() } else { Stdio::null() });
        if attach.capture_stderr {
            // docker exec reports "could not start" on stdout or stderr
            // depending on the version: watch both, pass both through.
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        let mut child = cmd.spawn().map_err(|e| self.spawn_err(e))?;
        // In sbx's process group (for the terminal): only the CLI is killed.
        let watch = self.watch_start(args, &child, false);
        let out = child.stdout.take().map(|s| forward(s, std::io::stdout));
        let err = child.stderr.take().map(|s| forward(s, std::io::stderr));
        let status = match watch {
            Some(w) => w.reap(&mut child).map_err(|e| self.spawn_err(e))?,
            None => Ok(child.wait().map_err(|e| self.spawn_err(e))?),
        };
        let status = match status {
            Ok(s) => s,
            Err(timeout) => {
                for t in [out, err].into_iter().flatten() {
                    let _ = t.join();
                }
                return Err(timeout);
            }
        };
        let mut head = String::new();
        for t in [out, err].into_iter().flatten() {
            head.push_str(&t.join().unwrap_or_default());
        }
        let code =
            status.code().unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0));
        Ok((code, head))
    }

    fn run_stream(
        &self,
        args: &[OsString],
        input: Option<&mut StreamIn<'_>>,
        output: &mut StreamOut<'_>,
    ) -> Result<Streamed, DockerError> {
        tracing::debug!(command = %render(args), "docker (streamed)");
        let mut cmd = self.command(args);
        cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| self.spawn_err(e))?;
        let watch = self.watch_start(args, &child, true);
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let (input_r, output_r, err, status) = std::thread::scope(|s| {
            let err = s.spawn(move || {
                let mut head = Vec::new();
                let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut head);
                let _ = std::io::copy(&mut stderr, &mut std::io::sink());
                head
            });
            let writer = match (input, stdin) {
                (Some(f), Some(mut w)) => Some(s.spawn(move || f(&mut w))),
                _ => None,
            };
            let output_r = output(&mut stdout);
            if output_r.is_err() {
                let _ = child.kill();
            }
            drop(stdout);
            let status = match watch {
                Some(w) => w.reap(&mut child),
                None => child.wait().map(Ok),
            };
            let input_r = writer.map(|t| t.join().unwrap_or_else(|_| Err(std::io::Error::other("writer panicked"))));
            (input_r.unwrap_or(Ok(())), output_r, err.join().unwrap_or_default(), status)
        });
        let status = status.map_err(|e| self.spawn_err(e))??;
        let status =
            status.code().unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0));
        tracing::debug!(status, "docker done");
        Ok(Streamed { status, stderr: err, input: input_r, output: output_r })
    }

    fn open_pipe(&self, args: &[OsString]) -> Result<Piped, DockerError> {
        tracing::debug!(command = %render(args), "docker (piped)");
        let mut child = self.piped(args).spawn().map_err(|e| self.spawn_err(e))?;
        // A hung engine ends the relayed channel at the start deadline, as other streams.
        let watch = self.watch_start(args, &child, true);
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let err = std::thread::spawn(move || {
            let mut head = Vec::new();
            let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut head);
            let _ = std::io::copy(&mut stderr, &mut std::io::sink());
            String::from_utf8_lossy(&head).trim().to_string()
        });
        let program = self.program_name();
        let wait = Box::new(move || {
            let spawn_err = |source| DockerError::Spawn { program: program.clone(), source };
            let status = match watch {
                Some(w) => w.reap(&mut child).map_err(spawn_err)??,
                None => child.wait().map_err(spawn_err)?,
            };
            let code = status
                .code()
                .unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0));
            Ok((code, err.join().unwrap_or_default()))
        });
        Ok(Piped { stdin: Box::new(stdin), stdout: Box::new(stdout), wait })
    }

    fn spawn(&self, args: &[OsString]) -> Result<Box<dyn Background>, DockerError> {
        tracing::debug!(command = %render(args), "docker (background)");
        let child =
            self.command(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| self.spawn_err(e))?;
        Ok(Box::new(RealBackground {
            child: Some(child),
            program: self.program_name(),
            args: args.to_vec(),
            limit: self.deadlines.of(args),
        }))
    }
}

/// `docker ps`, `docker network rm`: what a call is, for messages that must
/// not drown the reader in its whole argv (that is under `-v`).
pub(crate) fn verb(args: &[OsString]) -> String {
    let words: Vec<String> =
        args.iter().map(|a| a.to_string_lossy().into_owned()).take_while(|a| !a.starts_with('-')).take(2).collect();
    let words = if matches!(words.first().map(String::as_str), Some("container" | "image" | "network" | "volume")) {
        words
    } else {
        words.into_iter().take(1).collect()
    };
    format!("docker {}", words.join(" "))
}

/// Wait for a spawned call within its deadline; past it, kill the CLI's
/// process group and report the engine as not answering.
fn finish(
    program: &str,
    args: &[OsString],
    limit: Option<Duration>,
    child: Child,
) -> Result<std::process::Output, DockerError> {
    let spawn_err = |source| DockerError::Spawn { program: program.to_string(), source };
    let cut = |out: std::io::Result<Bounded<std::process::ExitStatus>>| match out {
        Ok(Bounded::Whole { status, stdout, stderr }) => Ok(std::process::Output { status, stdout, stderr }),
        Ok(Bounded::Cut) => Err(output_cut(args)),
        Err(e) => Err(spawn_err(e)),
    };
    let Some(limit) = limit else {
        return cut(bounded_output(child, Child::wait));
    };
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(bounded_output(child, Child::wait));
    });
    match rx.recv_timeout(limit) {
        Ok(out) => cut(out),
        Err(_) => {
            // Its own process group (see `RealDocker::command`): the CLI and anything it started.
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            tracing::debug!(command = %render(args), "docker call past its deadline, killed");
            Err(DockerError::Timeout { command: verb(args), after: limit })
        }
    }
}

/// How long a streaming call may run before sbx asks the engine whether it
/// answers at all (see [`StartWatch`]); calls that end sooner cost nothing.
pub const START_GRACE: Duration = Duration::from_secs(1);

/// The prompt look-up that tells a working engine from a hung one while a
/// stream starts: the state of the stream's container, the word after `--`
/// in every argv sbx builds for exec, logs and stats. None: nothing to ask.
fn start_probe(args: &[OsString]) -> Option<Vec<OsString>> {
    let target = args.iter().skip_while(|a| *a != "--").nth(1)?;
    let mut probe: Vec<OsString> =
        ["container", "inspect", "--format", "{{.State.Status}}", "--"].map(OsString::from).into();
    probe.push(target.clone());
    Some(probe)
}

/// A deadline on the start of a streaming call (exec, logs -f, the helper's
/// relays and transfers): issue 10 asks that no sbx command hangs forever on
/// a hung engine, but a stream as a whole runs as long as its user wants.
///
/// docker gives no sign that an exec has started (the command's output goes
/// straight to the caller, and may never come), so sbx asks the engine
/// instead. When the call is still running after [`START_GRACE`], one
/// `docker container inspect` of its container runs beside it under the
/// look-up deadline. An engine that answers is working, and the stream is
/// the command's own business from then on; one that does not is hung
/// (20.10's network-controller deadlock also blocks the calls on a
/// container), so the stream is killed and sbx says the engine did not
/// answer. A call that ends within the grace costs no extra docker call.
pub struct StartWatch {
    done: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    state: std::sync::Arc<std::sync::Mutex<WatchState>>,
    /// What the call is and how long the engine had, for the error.
    failure: (String, Duration),
}

#[derive(Default)]
struct WatchState {
    /// The call has exited (not yet reaped): its pid must not be signalled.
    exited: bool,
    killed: bool,
}

impl StartWatch {
    fn new(program: OsString, probe: Vec<OsString>, pid: i32, group: bool, quick: Duration, what: String) -> Self {
        use std::sync::mpsc::RecvTimeoutError;
        let (done, rx) = std::sync::mpsc::channel::<()>();
        let state = std::sync::Arc::new(std::sync::Mutex::new(WatchState::default()));
        let shared = state.clone();
        let thread = std::thread::spawn(move || {
            if !matches!(rx.recv_timeout(START_GRACE), Err(RecvTimeoutError::Timeout)) {
                return;
            }
            tracing::debug!(command = %render(&probe), "stream still running: is the engine answering?");
            let mut cmd = Command::new(&program);
            cmd.args(&probe).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
            let Ok(mut p) = cmd.spawn() else { return };
            let killpg = |pid: i32| {
                let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            };
            let until = Instant::now() + quick;
            loop {
                match p.try_wait() {
                    Ok(None) => {}
                    // It answered (whatever it said): the engine works.
                    _ => return,
                }
                if Instant::now() >= until {
                    break;
                }
                if !matches!(rx.recv_timeout(Duration::from_millis(20)), Err(RecvTimeoutError::Timeout)) {
                    // The stream ended first.
                    killpg(p.id() as i32);
                    let _ = p.wait();
                    return;
                }
            }
            killpg(p.id() as i32);
            let _ = p.wait();
            let mut st = shared.lock().unwrap_or_else(|e| e.into_inner());
            if !st.exited {
                tracing::debug!(pid, "the engine did not answer while a stream started; killing it");
                if group {
                    killpg(pid);
                } else {
                    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
                }
                st.killed = true;
            }
        });
        StartWatch { done: Some(done), thread: Some(thread), state, failure: (what, START_GRACE + quick) }
    }

    /// Wait for the call and reap it; Err(timeout) when the watch killed it.
    pub fn reap(mut self, child: &mut Child) -> std::io::Result<Result<std::process::ExitStatus, DockerError>> {
        use nix::sys::wait::{waitid, Id, WaitPidFlag};
        // Exited but not reaped: until `exited` is set the pid stays this
        // child's, so the watcher can never signal a recycled one.
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        while let Err(nix::errno::Errno::EINTR) = waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {}
        let killed = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.exited = true;
            st.killed
        };
        let status = child.wait()?;
        self.finish();
        let (command, after) = self.failure.clone();
        Ok(if killed { Err(DockerError::Timeout { command, after }) } else { Ok(status) })
    }

    fn finish(&mut self) {
        drop(self.done.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for StartWatch {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Most a non-streaming docker call may print on stdout or on stderr.
/// Some carry what a sandbox wrote (`sbx ps` lists the command lines the
/// helper finds in the sandbox's /tmp, `--setup` and `exec -d` output): one
/// file hard-linked many times there made `sbx ps` print gigabytes, all held
/// (issue 9 finding 6, re-checked). Engine answers are far smaller.
pub const MAX_OUTPUT: usize = 64 << 20;

/// The error for a call read whole that printed more than [`MAX_OUTPUT`].
fn output_cut(args: &[OsString]) -> DockerError {
    DockerError::Parse {
        command: render(args),
        reason: format!(
            "it printed more than {} MiB, which sbx does not hold; stopped (output a sandbox can write to?)",
            MAX_OUTPUT >> 20
        ),
    }
}

enum Bounded<S> {
    Whole {
        status: S,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    },
    /// Past [`MAX_OUTPUT`]: the call was killed.
    Cut,
}

/// Wait for `child` with `wait` while reading both its streams, holding at
/// most [`MAX_OUTPUT`] of each; past it the CLI's process group is killed.
fn bounded_output<S>(
    mut child: Child,
    wait: impl FnOnce(&mut Child) -> std::io::Result<S>,
) -> std::io::Result<Bounded<S>> {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let over = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let read = |r: Option<Box<dyn Read + Send>>| {
        let over = over.clone();
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(r) = r {
                let _ = r.take(MAX_OUTPUT as u64 + 1).read_to_end(&mut v);
            }
            if v.len() > MAX_OUTPUT {
                over.store(true, std::sync::atomic::Ordering::SeqCst);
                // Its own process group (see `RealDocker::command`).
                let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
                v = Vec::new();
            }
            v
        })
    };
    let out = read(child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let err = read(child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let status = wait(&mut child)?;
    let (stdout, stderr) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    if over.load(std::sync::atomic::Ordering::SeqCst) {
        return Ok(Bounded::Cut);
    }
    Ok(Bounded::Whole { status, stdout, stderr })
}

/// How docker's own messages begin when `docker exec` or `docker logs`
/// could not do its job (engine 20.10 prints the OCI one on stdout).
const DOCKER_SAYS: &[&[u8]] =
    &[b"Error response from daemon: ", b"OCI runtime exec failed", b"Error: No such container"];
/// Docker's messages are short; a longer stream is the command's own output.
const HOLD_MAX: usize = 4096;

#[derive(Debug, PartialEq, Eq)]
enum Head {
    /// Could still become one of docker's messages.
    Undecided,
    Docker,
    Other,
}

fn head_of(held: &[u8]) -> Head {
    if DOCKER_SAYS.iter().any(|p| held.starts_with(p)) {
        Head::Docker
    } else if DOCKER_SAYS.iter().any(|p| p.starts_with(held)) {
        Head::Undecided
    } else {
        Head::Other
    }
}

/// Copy a child's stream to ours as it comes (binary-safe, flushed per
/// read), except a stream that begins with one of docker's own messages:
/// that is held back and returned, so sbx can say it in its own words
/// (issue 10 item 6); the caller writes it out should it be the command's.
fn forward<R, W, F>(mut from: R, to: F) -> std::thread::JoinHandle<String>
where
    R: Read + Send + 'static,
    W: std::io::Write,
    F: FnOnce() -> W + Send + 'static,
{
    std::thread::spawn(move || {
        let mut to = to();
        let mut held = Vec::new();
        let mut deciding = true;
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            let chunk = if deciding {
                held.extend_from_slice(&buf[..n]);
                match head_of(&held) {
                    Head::Docker if held.len() <= HOLD_MAX => continue,
                    Head::Undecided => continue,
                    _ => {
                        deciding = false;
                        std::mem::take(&mut held)
                    }
                }
            } else {
                buf[..n].to_vec()
            };
            if to.write_all(&chunk).and_then(|()| to.flush()).is_err() {
                break;
            }
        }
        if deciding && head_of(&held) != Head::Docker {
            let _ = to.write_all(&held).and_then(|()| to.flush());
            held.clear();
        }
        String::from_utf8_lossy(&held).into_owned()
    })
}

struct RealBackground {
    child: Option<Child>,
    program: String,
    args: Vec<OsString>,
    limit: Option<Duration>,
}

impl Background for RealBackground {
    fn wait(mut self: Box<Self>) -> Result<Output, DockerError> {
        let child = self.child.take().expect("waited once");
        let out = finish(&self.program, &self.args, self.limit, child)?;
        let status = out
            .status
            .code()
            .unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&out.status).unwrap_or(0));
        Ok(Output { status, stdout: out.stdout, stderr: out.stderr })
    }
}

impl Drop for RealBackground {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_quotes_only_for_humans() {
        let args: Vec<OsString> = ["rm", "-f", "a b", "it's"].iter().map(OsString::from).collect();
        assert_eq!(render(&args), "docker rm -f 'a b' 'it'\\''s'");
    }

    fn argv(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
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
        assert_eq!(d.of(&argv(&["exec", "-i", "x"])), None);
        let probe = argv(&["exec", "--", "c", "/run/sbx/helper", "probe-socket", "/run/sandbox/sandbox.sock", "500"]);
        assert_eq!(d.of(&probe), Some(Duration::from_secs(5)));
        assert_eq!(d.of(&argv(&["logs", "-f", "x"])), None);
        assert_eq!(Deadlines::from_env(None).unwrap(), Deadlines::default());
        assert!(Deadlines::from_env(Some("soon")).is_err());
        assert!(Deadlines::from_env(Some("0s")).is_err());
    }

    #[test]
    fn an_engine_that_never_answers_is_cut_off_at_the_deadline() {
        // A stand-in CLI that hangs like `docker ps` on a deadlocked engine.
        let d = RealDocker::new(Some("sleep".into()))
            .with_deadlines(Deadlines { quick: Duration::from_millis(300), change: Duration::from_millis(300) });
        let started = std::time::Instant::now();
        match d.run(&argv(&["30"])) {
            Err(DockerError::Timeout { command, after }) => {
                assert_eq!(command, "docker 30");
                assert_eq!(verb(&argv(&["network", "rm", "--", "x"])), "docker network rm");
                assert_eq!(verb(&argv(&["ps", "-a", "--no-trunc"])), "docker ps");
                assert_eq!(after, Duration::from_millis(300));
            }
            other => panic!("{other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(10), "returned at the deadline, not when sleep ended");
    }

    /// A stand-in CLI: `exec -- ID SECS` and `logs -- ID SECS` run SECS;
    /// `container inspect ... -- ID` answers at once, except for `c-hung`,
    /// where it hangs like every call on a deadlocked engine. Logs its verbs.
    fn stand_in(dir: &std::path::Path) -> RealDocker {
        std::fs::create_dir_all(dir).unwrap();
        let script = format!(
            "#!/bin/sh\necho \"$1\" >> '{log}'\n\
             case \"$1\" in\n\
             exec|logs) exec sleep \"$4\" ;;\n\
             container) [ \"$6\" = c-hung ] && exec sleep 30; echo running ;;\n\
             esac\n",
            log = dir.join("calls").display()
        );
        let path = dir.join("docker");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        RealDocker::new(Some(path.into()))
            .with_deadlines(Deadlines { quick: Duration::from_millis(300), change: Duration::from_millis(300) })
    }

    #[test]
    fn a_stream_on_a_hung_engine_is_cut_off_at_its_start_deadline() {
        let dir = std::env::temp_dir().join(format!("sbx-startwatch-{}", rand::random::<u64>()));
        let d = stand_in(&dir);
        let started = std::time::Instant::now();
        let hung = |r: Result<(), DockerError>, what: &str| match r {
            Err(DockerError::Timeout { command, after }) => {
                assert_eq!(command, what);
                assert_eq!(after, START_GRACE + Duration::from_millis(300));
            }
            other => panic!("{what}: {other:?}"),
        };
        // Attached (exec), streamed (logs -f, cp), and run whole (helper calls).
        let attach = Attach { stdin: false, capture_stderr: true };
        hung(d.run_attached(&argv(&["exec", "--", "c-hung", "30"]), attach).map(drop), "docker exec");
        hung(d.run_stream(&argv(&["logs", "--", "c-hung", "30"]), None, &mut |r| drain(r)).map(drop), "docker logs");
        hung(d.run(&argv(&["exec", "--", "c-hung", "30"])).map(drop), "docker exec");
        assert!(started.elapsed() < Duration::from_secs(15), "cut off at the start deadline, not after 30 s");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_stream_on_a_working_engine_runs_as_long_as_it_likes_and_a_short_one_costs_no_call() {
        let dir = std::env::temp_dir().join(format!("sbx-startwatch-{}", rand::random::<u64>()));
        let d = stand_in(&dir);
        let calls = || std::fs::read_to_string(dir.join("calls")).unwrap_or_default();
        let attach = Attach { stdin: false, capture_stderr: false };
        assert_eq!(d.run_attached(&argv(&["exec", "--", "c-ok", "0"]), attach).unwrap().0, 0);
        assert_eq!(calls(), "exec\n", "no look-up for a call that ended within the grace");
        let started = std::time::Instant::now();
        assert_eq!(d.run_attached(&argv(&["exec", "--", "c-ok", "2"]), attach).unwrap().0, 0);
        assert!(started.elapsed() >= Duration::from_secs(2));
        assert_eq!(calls(), "exec\nexec\ncontainer\n", "one look-up; the engine answered, the stream went on");
        let r = d.run_stream(&argv(&["logs", "--", "c-ok", "2"]), None, &mut |r| drain(r)).unwrap();
        assert_eq!(r.status, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn drain(r: &mut dyn Read) -> std::io::Result<()> {
        std::io::copy(r, &mut std::io::sink()).map(drop)
    }

    #[test]
    fn start_probes_name_the_stream_s_container() {
        let p = start_probe(&argv(&["exec", "-i", "-e", "A=--", "--", "sbx-0123", "cat"])).unwrap();
        assert_eq!(p, argv(&["container", "inspect", "--format", "{{.State.Status}}", "--", "sbx-0123"]));
        assert!(start_probe(&argv(&["events"])).is_none());
        let d = RealDocker::new(None);
        let mut child = Command::new("true").spawn().unwrap();
        assert!(
            d.watch_start(&argv(&["ps", "--", "x"]), &child, true).is_none(),
            "prompt calls have their own deadline"
        );
        child.wait().unwrap();
    }

    /// A call whose output never ends (what a sandbox can make `sbx ps`
    /// print) is stopped past MAX_OUTPUT, with and without a deadline.
    #[test]
    fn endless_output_is_cut_off_at_the_cap() {
        for d in [
            RealDocker::new(Some("yes".into())),
            RealDocker::new(Some("yes".into()))
                .with_deadlines(Deadlines { quick: Duration::from_secs(60), change: Duration::from_secs(60) }),
        ] {
            // `exec x` has no deadline and no container to watch; `exec -- ID`
            // (how `sbx ps` asks the helper) is watched at its start.
            for call in [&["exec", "x"][..], &["exec", "--", "sbx-000000000001", "ps"][..]] {
                match d.run(&argv(call)) {
                    Err(DockerError::Parse { reason, .. }) => assert!(reason.contains("more than 64 MiB"), "{reason}"),
                    other => panic!("{call:?}: {other:?}"),
                }
            }
        }
        // Short output is whole.
        let out = RealDocker::new(Some("echo".into())).run(&argv(&["hi"])).unwrap();
        assert_eq!(out.stdout, b"hi\n");
    }

    #[test]
    fn real_docker_reports_spawn_failure() {
        let d = RealDocker::new(Some("/nonexistent/docker".into()));
        match d.run(&[]) {
            Err(DockerError::Spawn { program, .. }) => assert_eq!(program, "/nonexistent/docker"),
            other => panic!("{other:?}"),
        }
    }
}

//! [`RealDocker`]: runs an [`Invocation`] as the docker CLI (never a
//! shell), in its own process group, within its deadline (`deadline`), its
//! start watched when it streams (`watch`), its captured output bounded
//! (`capture`), its terminal streams forwarded (`forward`).

mod capture;
mod forward;
mod guard;
mod watch;

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

pub use capture::MAX_OUTPUT;
use capture::{bounded_output, finish, output_cut, Bounded, RealBackground};
use forward::forward;
pub use guard::Stop;
use guard::{Guard, Timed, TimedWrite, Waiting};
use watch::{end_wait, start_probe, StartWatch};

use super::{
    exit_code, render, verb, Attach, Background, Deadlines, DockerError, DockerExec, Invocation, Mode, Outcome, Output,
    Piped, StreamIn, StreamOut, Streamed,
};

/// Spawns the real docker CLI (`$SBX_DOCKER` or `docker` on PATH).
pub struct RealDocker {
    program: OsString,
    deadlines: Deadlines,
    /// Polled while a streamed call with a deadline runs (see [`Guard`]).
    stop: Stop,
    /// Options before every subcommand: `--context NAME`.
    global: Vec<OsString>,
}

impl RealDocker {
    pub fn new(program: Option<OsString>) -> Self {
        let program = program.unwrap_or_else(|| OsString::from("docker"));
        RealDocker { program, deadlines: Deadlines::default(), stop: std::sync::Arc::new(|| false), global: Vec::new() }
    }

    /// Every call as `docker --context NAME ...` (`--context`/`SBX_CONTEXT`).
    /// Added when the command is built, so deadlines and start watches still
    /// read the subcommand first.
    pub fn with_context(mut self, context: Option<&str>) -> Self {
        self.global = context.map(|c| vec!["--context".into(), c.into()]).unwrap_or_default();
        self
    }

    pub fn with_deadlines(mut self, deadlines: Deadlines) -> Self {
        self.deadlines = deadlines;
        self
    }

    /// `stop` returning true ends a long streamed call (a pull) at once.
    pub fn with_stop(mut self, stop: Stop) -> Self {
        self.stop = stop;
        self
    }

    fn finish(&self, args: &[OsString], child: Child) -> Result<std::process::Output, DockerError> {
        let Some(watch) = self.watch_start(args, &child, true, true) else {
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
    /// has no deadline of its own and names a container, and the end of
    /// its sandbox when it is an exec; see [`StartWatch`]. `group`: the
    /// child leads its own process group (kill the group). `probe`: false
    /// when another bound covers its start (an idle deadline).
    fn watch_start(&self, args: &[OsString], child: &Child, group: bool, probe: bool) -> Option<StartWatch> {
        if self.deadlines.of(args).is_some() {
            return None;
        }
        let global = |argv: Vec<OsString>| self.global.iter().cloned().chain(argv).collect::<Vec<_>>();
        let probe = if probe { Some(global(start_probe(args)?)) } else { None };
        let end = end_wait(args).map(|(wait, container)| (global(wait), container));
        if probe.is_none() && end.is_none() {
            return None;
        }
        let (program, quick) = (self.program.clone(), self.deadlines.quick);
        Some(StartWatch::new(program, probe, end, child.id() as i32, group, quick, verb(args)))
    }

    fn program_name(&self) -> String {
        OsStr::new(&self.program).to_string_lossy().into_owned()
    }

    fn command(&self, args: &[OsString]) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.global).args(args).stdin(Stdio::null());
        // Its own process group: a Ctrl-C at the terminal reaches sbx alone,
        // which finishes the step in flight and then tears down what it made,
        // instead of docker dying half-way through a create or a cleanup.
        cmd.process_group(0);
        cmd
    }

    fn spawn_err(&self, source: std::io::Error) -> DockerError {
        DockerError::Spawn { program: self.program_name(), source }
    }

    fn captured(&self, args: &[OsString], input: Option<&[u8]>) -> Result<Output, DockerError> {
        use std::io::Write;
        tracing::debug!(command = %render(args), bytes = input.map(<[u8]>::len), "docker");
        let mut cmd = self.command(args);
        if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| self.spawn_err(e))?;
        // Write from a thread: docker may fill its output pipes before it has read all input.
        let writer = match (input, child.stdin.take()) {
            (Some(data), Some(mut stdin)) => {
                let data = data.to_vec();
                Some(std::thread::spawn(move || stdin.write_all(&data)))
            }
            _ => None,
        };
        let out = self.finish(args, child)?;
        if let Some(w) = writer {
            let _ = w.join();
        }
        let status = exit_code(out.status);
        tracing::debug!(status, "docker done");
        Ok(Output { status, stdout: out.stdout, stderr: out.stderr })
    }

    fn background(&self, args: Vec<OsString>) -> Result<Box<dyn Background>, DockerError> {
        tracing::debug!(command = %render(&args), "docker (background)");
        let child =
            self.command(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| self.spawn_err(e))?;
        let limit = self.deadlines.of(&args);
        Ok(Box::new(RealBackground { child: Some(child), program: self.program_name(), args, limit }))
    }

    fn terminal(&self, args: &[OsString], attach: Attach) -> Result<(i32, String), DockerError> {
        tracing::debug!(command = %render(args), "docker (attached)");
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.global).args(args);
        cmd.stdin(if attach.stdin { Stdio::inherit() } else { Stdio::null() });
        if attach.capture_stderr {
            // docker exec reports "could not start" on stdout or stderr
            // depending on the version: watch both, pass both through.
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        // A TTY exec cut by its watch (its sandbox ended) dies by SIGKILL
        // with the terminal still raw: it is put back as it was.
        let saved = nix::sys::termios::tcgetattr(std::io::stdin()).ok();
        let mut child = cmd.spawn().map_err(|e| self.spawn_err(e))?;
        // In sbx's process group (for the terminal): only the CLI is killed.
        let watch = self.watch_start(args, &child, false, true);
        let out = child.stdout.take().map(|s| forward(s, std::io::stdout));
        let err = child.stderr.take().map(|s| forward(s, std::io::stderr));
        let status = match watch {
            Some(w) => w.reap(&mut child).map_err(|e| self.spawn_err(e))?,
            None => Ok(child.wait().map_err(|e| self.spawn_err(e))?),
        };
        if let (Err(DockerError::Ended { .. }), Some(t)) = (&status, &saved) {
            let _ = nix::sys::termios::tcsetattr(std::io::stdin(), nix::sys::termios::SetArg::TCSANOW, t);
        }
        let status = match status {
            Ok(s) => s,
            Err(cut) => {
                for t in [out, err].into_iter().flatten() {
                    let _ = t.join();
                }
                return Err(cut);
            }
        };
        let mut held = String::new();
        for t in [out, err].into_iter().flatten() {
            held.push_str(&t.join().unwrap_or_default());
        }
        Ok((exit_code(status), held))
    }

    fn streamed(
        &self,
        args: &[OsString],
        input: Option<&mut StreamIn<'_>>,
        output: &mut StreamOut<'_>,
    ) -> Result<Streamed, DockerError> {
        tracing::debug!(command = %render(args), "docker (streamed)");
        let mut cmd = self.command(args);
        cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| self.spawn_err(e))?;
        // A stream with a deadline of its own (a pull): bounded as a whole;
        // one with an idle deadline (a helper's listing): bounded per read,
        // which also bounds a hung start. Ctrl-C ends either.
        let idle = self.deadlines.idle(args);
        let waiting = idle.map(|_| Waiting::new());
        // What is written in counts too: a helper that takes no input (a
        // `receive` its sandbox stopped) is as silent as one that sends none.
        let in_wait = waiting.clone().filter(|_| input.is_some());
        if let Some(w) = &in_wait {
            w.input_opened();
        }
        let watch = self.watch_start(args, &child, true, idle.is_none());
        let guard = idle
            .or(self.deadlines.of(args))
            .map(|limit| Guard::new(child.id() as i32, limit, self.stop.clone(), verb(args), waiting.clone()));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut stdout = Timed { inner: stdout, waiting: waiting.unwrap_or_else(Waiting::new) };
        let stderr = child.stderr.take().expect("stderr is piped");
        let (input_r, output_r, err, status) = std::thread::scope(|s| {
            let err = s.spawn(move || stderr_head(stderr));
            let writer = match (input, stdin) {
                (Some(f), Some(w)) => Some(s.spawn(move || match in_wait {
                    Some(waiting) => {
                        let mut w = TimedWrite { inner: w, waiting: waiting.clone() };
                        let r = f(&mut w);
                        drop(w);
                        waiting.input_closed();
                        r
                    }
                    None => {
                        let mut w = w;
                        f(&mut w)
                    }
                })),
                _ => None,
            };
            let output_r = output(&mut stdout);
            if output_r.is_err() {
                let _ = child.kill();
            }
            drop(stdout);
            let status = reap(&mut child, watch, guard);
            let input_r = writer.map(|t| t.join().unwrap_or_else(|_| Err(std::io::Error::other("writer panicked"))));
            (input_r.unwrap_or(Ok(())), output_r, err.join().unwrap_or_default(), status)
        });
        let status = exit_code(status.map_err(|e| self.spawn_err(e))??);
        tracing::debug!(status, "docker done");
        Ok(Streamed { status, stderr: err, input: input_r, output: output_r })
    }

    fn piped(&self, args: &[OsString]) -> Result<Piped, DockerError> {
        tracing::debug!(command = %render(args), "docker (piped)");
        let mut cmd = self.command(args);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| self.spawn_err(e))?;
        // A hung engine ends the relayed channel at the start deadline, as other streams.
        let watch = self.watch_start(args, &child, true, true);
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let err = std::thread::spawn(move || String::from_utf8_lossy(&stderr_head(stderr)).trim().to_string());
        let program = self.program_name();
        // Set once the child has exited but before it is reaped: until then
        // its pid (the leader of its own group) cannot be another process's.
        let exited = std::sync::Arc::new(std::sync::Mutex::new(false));
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let seen = exited.clone();
        let stop = Box::new(move || {
            let gone = seen.lock().unwrap_or_else(|e| e.into_inner());
            if !*gone {
                let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
            }
        });
        let wait = Box::new(move || {
            use nix::sys::wait::{waitid, Id, WaitPidFlag};
            let spawn_err = |source| DockerError::Spawn { program: program.clone(), source };
            while let Err(nix::errno::Errno::EINTR) = waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT)
            {
            }
            *exited.lock().unwrap_or_else(|e| e.into_inner()) = true;
            let status = match watch {
                Some(w) => w.reap(&mut child).map_err(spawn_err)??,
                None => child.wait().map_err(spawn_err)?,
            };
            Ok((exit_code(status), err.join().unwrap_or_default()))
        });
        Ok(Piped { stdin: Box::new(stdin), stdout: Box::new(stdout), wait, stop })
    }
}

/// Wait for `child` and reap it, after telling its watch and guard it has
/// exited (so neither signals a recycled pid); Err when one of them killed it.
fn reap(
    child: &mut Child,
    watch: Option<StartWatch>,
    guard: Option<Guard>,
) -> std::io::Result<Result<std::process::ExitStatus, DockerError>> {
    use nix::sys::wait::{waitid, Id, WaitPidFlag};
    if watch.is_some() || guard.is_some() {
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        while let Err(nix::errno::Errno::EINTR) = waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {}
    }
    let failed = [guard.as_ref().and_then(Guard::exited), watch.as_ref().and_then(StartWatch::exited)];
    let status = child.wait()?;
    drop((watch, guard));
    Ok(match failed.into_iter().flatten().next() {
        Some(e) => Err(e),
        None => Ok(status),
    })
}

/// The first 64 KiB of a stream's stderr; the rest is drained so docker never blocks on it.
fn stderr_head(mut stderr: impl Read) -> Vec<u8> {
    let mut head = Vec::new();
    let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut head);
    let _ = std::io::copy(&mut stderr, &mut std::io::sink());
    head
}

impl DockerExec for RealDocker {
    fn execute(&self, inv: Invocation<'_>) -> Result<Outcome, DockerError> {
        let Invocation { args, mode } = inv;
        match mode {
            Mode::Captured { input } => self.captured(&args, input).map(Outcome::Output),
            Mode::Background => self.background(args).map(Outcome::Background),
            Mode::Terminal(attach) => {
                self.terminal(&args, attach).map(|(status, held)| Outcome::Terminal { status, held })
            }
            Mode::Streamed { input, output } => self.streamed(&args, input, output).map(Outcome::Streamed),
            Mode::Piped => self.piped(&args).map(Outcome::Piped),
        }
    }
}

#[cfg(test)]
mod tests;

//! The seam between sbx and the `docker` CLI, and everything that speaks it.
//!
//! Every docker call is one [`Invocation`]: the argv and how the process's
//! streams are attached ([`Mode`]: captured whole, in the background, on
//! sbx's terminal, streamed, or piped to a relay). [`DockerExec::execute`]
//! runs it; [`RealDocker`] spawns the CLI (never a shell) and the fake
//! (`fake::FakeDocker`, tests only) records each invocation whole and replays
//! scripted answers, so every path, faults included, is testable without a
//! daemon. Callers use the provided shorthands (`run`, `run_input`, `spawn`,
//! `run_attached`, `run_stream`, `open_pipe`), which build the invocation.
//!
//! The rest of the folder: `argv` builds every argv sbx runs, `parse` reads
//! every answer, `explain` turns the engine's known failures into sbx's
//! words, `pace` splits bulk removals, `deadline` says how long a call may
//! take. Nothing else in the crate spawns docker.

pub mod argv;
mod deadline;
mod error;
pub mod explain;
#[cfg(test)]
pub mod fake;
pub mod pace;
pub mod parse;
mod real;

use std::ffi::OsString;
use std::io::Read;

pub use deadline::Deadlines;
pub use error::DockerError;
pub use real::{RealDocker, Stop, MAX_OUTPUT};

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
    /// stream that starts with docker's own message (see `real::forward`)
    /// and return it, so sbx can tell "docker could not start the command"
    /// from the command's own failure and say so itself. Off for a TTY,
    /// where both streams are the terminal.
    pub capture_stderr: bool,
}

/// How a docker process's streams are attached, and so what its caller
/// gets back (the matching [`Outcome`]).
pub enum Mode<'a> {
    /// Run to completion, stdout and stderr read whole (at most
    /// [`MAX_OUTPUT`] each); `input` on stdin (`docker import -`), else
    /// /dev/null. Outcome: [`Outcome::Output`].
    Captured { input: Option<&'a [u8]> },
    /// Like `Captured`, but started now and waited for later (two look-ups
    /// at once). Outcome: [`Outcome::Background`].
    Background,
    /// On sbx's terminal, as [`Attach`] says, in sbx's own process group so
    /// a TTY works. Outcome: [`Outcome::Terminal`].
    Terminal(Attach),
    /// `input` (if any) writes stdin from a thread and `output` reads stdout
    /// as it comes: nothing is held whole (a sandbox can send far more than
    /// fits in memory). Outcome: [`Outcome::Streamed`].
    Streamed { input: Option<&'a mut StreamIn<'a>>, output: &'a mut StreamOut<'a> },
    /// stdin and stdout handed to the caller, for a channel relayed through
    /// sbx (`docker exec -i ... helper connect`).
    /// Outcome: [`Outcome::Piped`].
    Piped,
}

/// [`Mode`] without its data: what the fake records and tests compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeKind {
    Captured,
    Background,
    Terminal(Attach),
    Streamed,
    Piped,
}

impl Mode<'_> {
    pub fn kind(&self) -> ModeKind {
        match self {
            Mode::Captured { .. } => ModeKind::Captured,
            Mode::Background => ModeKind::Background,
            Mode::Terminal(a) => ModeKind::Terminal(*a),
            Mode::Streamed { .. } => ModeKind::Streamed,
            Mode::Piped => ModeKind::Piped,
        }
    }
}

/// One docker call: `docker ARGS...` with its streams attached as `mode` says.
pub struct Invocation<'a> {
    pub args: Vec<OsString>,
    pub mode: Mode<'a>,
}

impl<'a> Invocation<'a> {
    pub fn new(args: &[OsString], mode: Mode<'a>) -> Self {
        Invocation { args: args.to_vec(), mode }
    }
}

/// What running an [`Invocation`] gave, one variant per [`Mode`].
pub enum Outcome {
    Output(Output),
    Background(Box<dyn Background>),
    /// The exit status and, when captured, docker's own message, which was
    /// held back from sbx's streams.
    Terminal {
        status: i32,
        held: String,
    },
    Streamed(Streamed),
    Piped(Piped),
}

/// A docker process left running while sbx does other work (two
/// independent look-ups at once). Dropping the handle kills it.
pub trait Background: Send {
    /// Wait for it to finish.
    fn wait(self: Box<Self>) -> Result<Output, DockerError>;
}

/// The one way sbx runs docker.
pub trait DockerExec: Send + Sync {
    /// Run `inv`. Errors when docker could not be started, the engine did
    /// not answer in time or a captured call printed too much; a non-zero
    /// exit is an outcome with that status. The outcome matches the mode.
    fn execute(&self, inv: Invocation<'_>) -> Result<Outcome, DockerError>;

    /// Run `docker ARGS...` to completion, both streams captured.
    fn run(&self, args: &[OsString]) -> Result<Output, DockerError> {
        match self.execute(Invocation::new(args, Mode::Captured { input: None }))? {
            Outcome::Output(out) => Ok(out),
            _ => mismatch("captured"),
        }
    }

    /// Like `run`, with `input` on docker's stdin (`docker import -`).
    fn run_input(&self, args: &[OsString], input: &[u8]) -> Result<Output, DockerError> {
        match self.execute(Invocation::new(args, Mode::Captured { input: Some(input) }))? {
            Outcome::Output(out) => Ok(out),
            _ => mismatch("captured"),
        }
    }

    /// Start `docker ARGS...` and return at once.
    fn spawn(&self, args: &[OsString]) -> Result<Box<dyn Background>, DockerError> {
        match self.execute(Invocation::new(args, Mode::Background))? {
            Outcome::Background(b) => Ok(b),
            _ => mismatch("background"),
        }
    }

    /// Run on sbx's terminal (see [`Mode::Terminal`]); returns the exit
    /// status and docker's own message if it was held back.
    fn run_attached(&self, args: &[OsString], attach: Attach) -> Result<(i32, String), DockerError> {
        match self.execute(Invocation::new(args, Mode::Terminal(attach)))? {
            Outcome::Terminal { status, held } => Ok((status, held)),
            _ => mismatch("terminal"),
        }
    }

    /// Run streamed (see [`Mode::Streamed`]). When `output` fails, docker is killed.
    fn run_stream(
        &self,
        args: &[OsString],
        input: Option<&mut StreamIn<'_>>,
        output: &mut StreamOut<'_>,
    ) -> Result<Streamed, DockerError> {
        // Coerced one by one: a `dyn` lifetime cannot shorten inside the Option.
        let input = input.map(|f| -> &mut StreamIn<'_> { f });
        match self.execute(Invocation::new(args, Mode::Streamed { input, output }))? {
            Outcome::Streamed(s) => Ok(s),
            _ => mismatch("streamed"),
        }
    }

    /// Start `docker ARGS` with its stdin and stdout handed to sbx (see
    /// [`Mode::Piped`]); stderr is kept for the error.
    fn open_pipe(&self, args: &[OsString]) -> Result<Piped, DockerError> {
        match self.execute(Invocation::new(args, Mode::Piped))? {
            Outcome::Piped(p) => Ok(p),
            _ => mismatch("piped"),
        }
    }
}

/// A runner that answers a mode with another's outcome is broken, not the engine.
fn mismatch(mode: &str) -> ! {
    unreachable!("DockerExec::execute answered a {mode} invocation with another mode's outcome")
}

/// A docker process sbx relays through: write its stdin (dropping it is
/// EOF, the half-close), read its stdout, then `wait` for how it ended.
pub struct Piped {
    pub stdin: Box<dyn std::io::Write + Send>,
    pub stdout: Box<dyn Read + Send>,
    /// Its exit status and the first 64 KiB of its stderr.
    pub wait: Box<dyn FnOnce() -> Result<(i32, String), DockerError> + Send>,
    /// Kill it now (a stream that never ends on its own, such as `docker
    /// events`, whose reader is done); a no-op once it has exited. Its
    /// stdout then ends, and `wait` reports the kill.
    pub stop: Box<dyn Fn() + Send + Sync>,
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

/// The one conversion of how a docker process ended to a status: its exit
/// code, or 128+N for a death by signal N, as a shell reports it (137 is
/// SIGKILL, usually the OOM killer).
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
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
    // The argv and docker's whole answer are for `-v` only;
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

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn display_quotes_only_for_humans() {
        let args: Vec<OsString> = ["rm", "-f", "a b", "it's"].iter().map(OsString::from).collect();
        assert_eq!(render(&args), "docker rm -f 'a b' 'it'\\''s'");
    }

    #[test]
    fn a_signal_death_is_128_plus_the_signal_everywhere() {
        use std::os::unix::process::ExitStatusExt;
        // Raw wait statuses: exit code in the high byte, a signal in the low bits.
        assert_eq!(exit_code(std::process::ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(std::process::ExitStatus::from_raw(9)), 137);
        assert_eq!(exit_code(std::process::ExitStatus::from_raw(15)), 143);
    }

    /// Every shorthand is one invocation, recorded whole by the fake:
    /// argv, what went to stdin, and how the streams were attached.
    #[test]
    fn each_shorthand_is_one_invocation_with_its_mode() {
        use fake::{Call, FakeDocker};
        let fake = FakeDocker::new();
        for _ in 0..6 {
            fake.push(Output::ok("out"));
        }
        let a = |w: &str| vec![OsString::from(w)];
        let exec: &dyn DockerExec = &fake;
        assert_eq!(exec.run(&a("ps")).unwrap().stdout, b"out");
        exec.run_input(&a("import"), b"tar").unwrap();
        assert_eq!(exec.spawn(&a("info")).unwrap().wait().unwrap().stdout, b"out");
        let attach = Attach { stdin: true, capture_stderr: false };
        assert_eq!(exec.run_attached(&a("exec"), attach).unwrap(), (0, String::new()));
        let mut got = Vec::new();
        let s = exec
            .run_stream(&a("cp"), Some(&mut |w| w.write_all(b"in")), &mut |r| r.read_to_end(&mut got).map(drop))
            .unwrap();
        assert_eq!((s.status, got.as_slice()), (0, &b"out"[..]));
        let p = exec.open_pipe(&a("relay")).unwrap();
        let (mut stdin, wait) = (p.stdin, p.wait);
        stdin.write_all(b"up").unwrap();
        assert_eq!(wait().unwrap(), (0, String::new()));
        let call =
            |w: &str, stdin: Option<&[u8]>, mode| Call { args: vec![w.into()], stdin: stdin.map(<[u8]>::to_vec), mode };
        assert_eq!(
            fake.invocations(),
            vec![
                call("ps", None, ModeKind::Captured),
                call("import", Some(b"tar"), ModeKind::Captured),
                call("info", None, ModeKind::Background),
                call("exec", None, ModeKind::Terminal(attach)),
                call("cp", Some(b"in"), ModeKind::Streamed),
                call("relay", Some(b"up"), ModeKind::Piped),
            ]
        );
        assert_eq!(fake.inputs(), vec![(1, b"tar".to_vec()), (4, b"in".to_vec()), (5, b"up".to_vec())]);
    }
}

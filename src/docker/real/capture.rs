//! Calls read whole: within their deadline and at most [`MAX_OUTPUT`] of
//! each stream, run now or in the background.

use std::ffi::OsString;
use std::io::Read;
use std::process::Child;
use std::time::Duration;

use crate::docker::{exit_code, render, verb, Background, DockerError, Output};

/// Wait for a spawned call within its deadline; past it, kill the CLI's
/// process group and report the engine as not answering.
pub(super) fn finish(
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

/// Most a non-streaming docker call may print on stdout or on stderr.
/// Some carry what a sandbox wrote (`sbx ps` lists the command lines the
/// helper finds in the sandbox's /tmp, `--setup` and `exec -d` output): one
/// file hard-linked many times there made `sbx ps` print gigabytes, all held.
/// Engine answers are far smaller.
pub const MAX_OUTPUT: usize = 64 << 20;

/// The error for a call read whole that printed more than [`MAX_OUTPUT`].
pub(super) fn output_cut(args: &[OsString]) -> DockerError {
    DockerError::Parse {
        command: render(args),
        reason: format!(
            "it printed more than {} MiB, which sbx does not hold; stopped (output a sandbox can write to?)",
            MAX_OUTPUT >> 20
        ),
    }
}

pub(super) enum Bounded<S> {
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
pub(super) fn bounded_output<S>(
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

/// A call started now and read whole when waited for.
pub(super) struct RealBackground {
    pub(super) child: Option<Child>,
    pub(super) program: String,
    pub(super) args: Vec<OsString>,
    pub(super) limit: Option<Duration>,
}

impl Background for RealBackground {
    fn wait(mut self: Box<Self>) -> Result<Output, DockerError> {
        let child = self.child.take().expect("waited once");
        let out = finish(&self.program, &self.args, self.limit, child)?;
        Ok(Output { status: exit_code(out.status), stdout: out.stdout, stderr: out.stderr })
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

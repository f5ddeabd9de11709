//! The start deadline of streaming calls (see [`StartWatch`]).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::docker::{render, DockerError};

/// How long a streaming call may run before sbx asks the engine whether it
/// answers at all (see [`StartWatch`]); calls that end sooner cost nothing.
pub const START_GRACE: Duration = Duration::from_secs(1);

/// The prompt look-up that tells a working engine from a hung one while a
/// stream starts: the state of the stream's container, the word after `--`
/// in every argv sbx builds for exec, logs and stats. None: nothing to ask.
pub(super) fn start_probe(args: &[OsString]) -> Option<Vec<OsString>> {
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
    pub(super) fn new(
        program: OsString,
        probe: Vec<OsString>,
        pid: i32,
        group: bool,
        quick: Duration,
        what: String,
    ) -> Self {
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

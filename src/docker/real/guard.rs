//! The deadline of a streamed call that has one (a pull), and Ctrl-C (see
//! [`Guard`]).

use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::docker::DockerError;

/// Whether sbx was asked to stop (a pending SIGINT/SIGTERM/SIGHUP).
pub type Stop = Arc<dyn Fn() -> bool + Send + Sync>;

/// Watches a streamed call (its own process group) for its deadline and
/// for `stop`: a registry or engine that stops answering mid-pull must not
/// hang sbx, and Ctrl-C must end the pull at once rather than when it
/// finishes. Either kills the group; [`Guard::reap`] says which.
pub struct Guard {
    done: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    state: Arc<Mutex<State>>,
    what: String,
    limit: Duration,
}

#[derive(Default)]
struct State {
    /// Exited but not yet reaped: its pid must not be signalled any more.
    exited: bool,
    timed_out: bool,
}

/// How often the stop check is polled.
const POLL: Duration = Duration::from_millis(50);

impl Guard {
    pub(super) fn new(pid: i32, limit: Duration, stop: Stop, what: String) -> Self {
        use std::sync::mpsc::RecvTimeoutError;
        let (done, rx) = std::sync::mpsc::channel::<()>();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let thread = std::thread::spawn(move || {
            let until = Instant::now() + limit;
            loop {
                if !matches!(rx.recv_timeout(POLL), Err(RecvTimeoutError::Timeout)) {
                    return;
                }
                let late = Instant::now() >= until;
                if late || stop() {
                    let mut st = shared.lock().unwrap_or_else(|e| e.into_inner());
                    if !st.exited {
                        let group = nix::unistd::Pid::from_raw(pid);
                        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
                        st.timed_out = late;
                    }
                    return;
                }
            }
        });
        Guard { done: Some(done), thread: Some(thread), state, what, limit }
    }

    /// Wait for the call and reap it; Err(timeout) when its deadline killed
    /// it (a stop only kills it: the caller checks for the signal itself).
    pub fn reap(mut self, child: &mut Child) -> std::io::Result<Result<std::process::ExitStatus, DockerError>> {
        use nix::sys::wait::{waitid, Id, WaitPidFlag};
        // As `StartWatch::reap`: not reaped until `exited` is set, so the
        // guard never signals a recycled pid.
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        while let Err(nix::errno::Errno::EINTR) = waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {}
        let timed_out = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.exited = true;
            st.timed_out
        };
        let status = child.wait()?;
        self.finish();
        Ok(if timed_out {
            Err(DockerError::Timeout { command: self.what.clone(), after: self.limit })
        } else {
            Ok(status)
        })
    }

    fn finish(&mut self) {
        drop(self.done.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.finish();
    }
}

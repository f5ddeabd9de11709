//! The start deadline of streaming calls, and the end of their sandbox
//! (see [`StartWatch`]).

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
    let target = target(args)?;
    let mut probe: Vec<OsString> =
        ["container", "inspect", "--format", "{{.State.Status}}", "--"].map(OsString::from).into();
    probe.push(target.clone());
    Some(probe)
}

/// The container a stream runs in: the word after `--`.
fn target(args: &[OsString]) -> Option<&OsString> {
    args.iter().skip_while(|a| *a != "--").nth(1)
}

/// `docker wait -- CONTAINER` for a `docker exec` or `docker logs -f`
/// stream: it returns when the container stops or is gone. (`docker logs
/// -f` ends by itself then under runc, with its last lines; under runsc
/// on 20.10 it hung after a destroy. Without -f it ends by itself.)
pub(super) fn end_wait(args: &[OsString]) -> Option<(Vec<OsString>, String)> {
    let options = args.iter().take_while(|a| *a != "--");
    let follows =
        args.first().is_some_and(|a| a == "logs") && options.into_iter().any(|a| a == "-f" || a == "--follow");
    if !follows && args.first().is_none_or(|a| a != "exec") {
        return None;
    }
    let target = target(args)?;
    Some((crate::docker::argv::wait_exit(&target.to_string_lossy()), target.to_string_lossy().into_owned()))
}

/// How long a stream whose sandbox ended may take to end by itself (with
/// its last output) before the watch cuts it.
pub const END_GRACE: Duration = Duration::from_millis(500);

/// A deadline on the start of a streaming call (exec, logs -f, the helper's
/// relays and transfers): no sbx command may hang forever on
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
///
/// An exec stream is then watched to its end: `docker wait` runs beside it
/// and, once its sandbox stops or is gone, the stream gets [`END_GRACE`]
/// to end and is then cut ([`DockerError::Ended`]). Under gVisor on engine
/// 20.10 a `docker exec` need not return when its container is removed:
/// `connect`, `exec`, `port-forward` relays and transfers hung so.
pub struct StartWatch {
    done: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    state: std::sync::Arc<std::sync::Mutex<WatchState>>,
    /// What the call is and how long the engine had, for the error.
    failure: (String, Duration),
    /// The exec stream's container, for [`DockerError::Ended`].
    container: String,
}

#[derive(Default)]
struct WatchState {
    /// The call has exited (not yet reaped): its pid must not be signalled.
    exited: bool,
    killed: bool,
    /// Cut because its sandbox ended.
    ended: bool,
}

impl StartWatch {
    /// `probe`: the start look-up (None: the call's start has another
    /// bound); `end`: the `docker wait` and container of an exec stream.
    pub(super) fn new(
        program: OsString,
        probe: Option<Vec<OsString>>,
        end: Option<(Vec<OsString>, String)>,
        pid: i32,
        group: bool,
        quick: Duration,
        what: String,
    ) -> Self {
        use std::sync::mpsc::RecvTimeoutError;
        let (done, rx) = std::sync::mpsc::channel::<()>();
        let state = std::sync::Arc::new(std::sync::Mutex::new(WatchState::default()));
        let shared = state.clone();
        let container = end.as_ref().map(|(_, c)| c.clone()).unwrap_or_default();
        let thread = std::thread::spawn(move || {
            if !matches!(rx.recv_timeout(START_GRACE), Err(RecvTimeoutError::Timeout)) {
                return;
            }
            let killpg = |pid: i32| {
                let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            };
            let spawn = |argv: &[OsString]| {
                let mut cmd = Command::new(&program);
                cmd.args(argv).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
                cmd.spawn()
            };
            // Ok(true): `p` ended; Ok(false): the stream did first; Err: `until` passed.
            let watch = |p: &mut Child, until: Option<Instant>, tick: Duration| -> Result<bool, ()> {
                loop {
                    if !matches!(p.try_wait(), Ok(None)) {
                        return Ok(true);
                    }
                    if until.is_some_and(|u| Instant::now() >= u) {
                        return Err(());
                    }
                    if !matches!(rx.recv_timeout(tick), Err(RecvTimeoutError::Timeout)) {
                        killpg(p.id() as i32);
                        let _ = p.wait();
                        return Ok(false);
                    }
                }
            };
            let cut = |why: fn(&mut WatchState)| {
                let mut st = shared.lock().unwrap_or_else(|e| e.into_inner());
                if !st.exited {
                    if group {
                        killpg(pid);
                    } else {
                        let _ =
                            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
                    }
                    why(&mut st);
                }
            };
            if let Some(probe) = probe {
                tracing::debug!(command = %render(&probe), "stream still running: is the engine answering?");
                let Ok(mut p) = spawn(&probe) else { return };
                match watch(&mut p, Some(Instant::now() + quick), Duration::from_millis(20)) {
                    // It answered (whatever it said): the engine works.
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(()) => {
                        killpg(p.id() as i32);
                        let _ = p.wait();
                        tracing::debug!(pid, "the engine did not answer while a stream started; killing it");
                        return cut(|st| st.killed = true);
                    }
                }
            }
            let Some((wait, _)) = end else { return };
            tracing::debug!(command = %render(&wait), "watching the stream's sandbox");
            let Ok(mut w) = spawn(&wait) else { return };
            // Polled more slowly: it runs as long as the stream does.
            if watch(&mut w, None, Duration::from_millis(100)) != Ok(true) {
                return;
            }
            // Its sandbox stopped or is gone: a stream that does not end by
            // itself within the grace is cut.
            if !matches!(rx.recv_timeout(END_GRACE), Err(RecvTimeoutError::Timeout)) {
                return;
            }
            tracing::debug!(pid, "the stream's sandbox ended and the stream did not; cutting it");
            cut(|st| st.ended = true);
        });
        StartWatch { done: Some(done), thread: Some(thread), state, failure: (what, START_GRACE + quick), container }
    }

    /// Wait for the call and reap it; Err(timeout) when the watch killed
    /// it on a hung engine, Err(ended) when it cut it after its sandbox's end.
    pub fn reap(self, child: &mut Child) -> std::io::Result<Result<std::process::ExitStatus, DockerError>> {
        super::reap(child, Some(self), None)
    }

    /// The call has exited (not yet reaped): from now on its pid is not
    /// signalled; why the watch killed it, if it did.
    pub(super) fn exited(&self) -> Option<DockerError> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.exited = true;
        let (command, after) = self.failure.clone();
        if st.killed {
            Some(DockerError::Timeout { command, after })
        } else if st.ended {
            Some(DockerError::Ended { container: self.container.clone() })
        } else {
            None
        }
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

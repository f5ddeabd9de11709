//! The deadline of a streamed call that has one (a pull; a helper's
//! listing: no answer for too long), and Ctrl-C (see [`Guard`]).

use std::sync::atomic::{AtomicU64, Ordering};
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
    /// `waiting`: the limit is on one read of its output (an idle
    /// deadline) rather than on the whole call.
    pub(super) fn new(pid: i32, limit: Duration, stop: Stop, what: String, waiting: Option<Arc<Waiting>>) -> Self {
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
                let late = match &waiting {
                    Some(w) => w.waited() >= limit,
                    None => Instant::now() >= until,
                };
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

    /// The call has exited (not yet reaped): from now on its pid is not
    /// signalled; Some(timeout) when its deadline killed it.
    pub(super) fn exited(&self) -> Option<DockerError> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.exited = true;
        st.timed_out.then(|| DockerError::Timeout { command: self.what.clone(), after: self.limit })
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

/// How long the current read of a stream has waited: a helper that a
/// process in its sandbox stopped (SIGSTOP) sends nothing and never ends,
/// while one that is slow only because sbx's own reader is (a pager) is
/// not waited on at all.
pub struct Waiting {
    base: Instant,
    /// When the pending read began, in ms since `base`, plus one; 0: none.
    since: AtomicU64,
}

impl Waiting {
    pub fn new() -> Arc<Self> {
        Arc::new(Waiting { base: Instant::now(), since: AtomicU64::new(0) })
    }

    fn waited(&self) -> Duration {
        match self.since.load(Ordering::Relaxed) {
            0 => Duration::ZERO,
            t => self.base.elapsed().saturating_sub(Duration::from_millis(t - 1)),
        }
    }
}

/// A reader that tells its [`Waiting`] while a read is pending.
pub struct Timed<R> {
    pub inner: R,
    pub waiting: Arc<Waiting>,
}

impl<R: std::io::Read> std::io::Read for Timed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let now = self.waiting.base.elapsed().as_millis() as u64 + 1;
        self.waiting.since.store(now, Ordering::Relaxed);
        let r = self.inner.read(buf);
        self.waiting.since.store(0, Ordering::Relaxed);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_pending_read_counts() {
        let w = Waiting::new();
        assert_eq!(w.waited(), Duration::ZERO);
        let mut r = Timed { inner: std::io::Cursor::new(vec![1u8; 4]), waiting: w.clone() };
        let mut b = [0u8; 4];
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(std::io::Read::read(&mut r, &mut b).unwrap(), 4);
        assert_eq!(w.waited(), Duration::ZERO, "nothing pending after the read");
        w.since.store(1, Ordering::Relaxed); // a read pending since the start
        assert!(w.waited() >= Duration::from_millis(30));
    }
}

//! The deadline of a streamed call that has one (a pull; a helper's
//! listing: no answer for too long), and Ctrl-C (see [`Guard`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

/// How long the current read of a stream (or write into it) has waited: a
/// helper that a process in its sandbox stopped (SIGSTOP) sends nothing,
/// takes nothing and never ends, while one that is slow only because sbx's
/// own side is (a pager, a slow source disk) is not waited on at all.
pub struct Waiting {
    base: Instant,
    /// When the pending read began, in ms since `base`, plus one; 0: none.
    since: AtomicU64,
    /// The same for a pending write of the stream's input.
    write_since: AtomicU64,
    /// The input is still being written: a read pending meanwhile (the
    /// helper's `receive` answers only at the end) is not waiting on it.
    input_open: AtomicBool,
}

impl Waiting {
    pub fn new() -> Arc<Self> {
        Arc::new(Waiting {
            base: Instant::now(),
            since: AtomicU64::new(0),
            write_since: AtomicU64::new(0),
            input_open: AtomicBool::new(false),
        })
    }

    fn pending(&self, slot: &AtomicU64) -> Duration {
        match slot.load(Ordering::Relaxed) {
            0 => Duration::ZERO,
            t => self.base.elapsed().saturating_sub(Duration::from_millis(t - 1)),
        }
    }

    fn waited(&self) -> Duration {
        let read = if self.input_open.load(Ordering::Relaxed) { Duration::ZERO } else { self.pending(&self.since) };
        read.max(self.pending(&self.write_since))
    }

    fn mark(&self, slot: &AtomicU64) {
        slot.store(self.base.elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
    }

    /// Input is being written (until [`Waiting::input_closed`]).
    pub fn input_opened(&self) {
        self.input_open.store(true, Ordering::Relaxed);
    }

    /// The input is written whole and closed: from now on the reply is
    /// awaited. A read of it pending since before is timed from now: timed
    /// from its start, a `receive` that took its input for longer than the
    /// idle deadline was cut off in the moment it had to answer (the guard
    /// polled before its exit; a loaded CI run caught it).
    pub fn input_closed(&self) {
        let t = self.since.load(Ordering::Relaxed);
        if t != 0 {
            // Unless that read has ended (or another began) meanwhile.
            let now = self.base.elapsed().as_millis() as u64 + 1;
            let _ = self.since.compare_exchange(t, now.max(t), Ordering::Relaxed, Ordering::Relaxed);
        }
        self.write_since.store(0, Ordering::Relaxed);
        self.input_open.store(false, Ordering::Relaxed);
    }
}

/// A reader that tells its [`Waiting`] while a read is pending.
pub struct Timed<R> {
    pub inner: R,
    pub waiting: Arc<Waiting>,
}

impl<R: std::io::Read> std::io::Read for Timed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.waiting.mark(&self.waiting.since);
        let r = self.inner.read(buf);
        self.waiting.since.store(0, Ordering::Relaxed);
        r
    }
}

/// The most [`TimedWrite`] writes at once.
const WRITE_CHUNK: usize = 16 * 1024;

/// A writer (a stream's input) that tells its [`Waiting`] while a write is
/// pending: one the other side does not take for too long is as silent as
/// a read that gets nothing.
pub struct TimedWrite<W> {
    pub inner: W,
    pub waiting: Arc<Waiting>,
}

impl<W: std::io::Write> std::io::Write for TimedWrite<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.waiting.mark(&self.waiting.write_since);
        // A pipe write returns only once all of it is in: a big one would
        // look idle however steadily the other side takes it.
        let r = self.inner.write(&buf[..buf.len().min(WRITE_CHUNK)]);
        self.waiting.write_since.store(0, Ordering::Relaxed);
        r
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.waiting.mark(&self.waiting.write_since);
        let r = self.inner.flush();
        self.waiting.write_since.store(0, Ordering::Relaxed);
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

    /// `receive` answers only once its input is whole: while sbx still
    /// writes, the pending read of its answer is not waiting; a write the
    /// helper does not take is.
    #[test]
    fn while_input_is_written_only_a_pending_write_counts() {
        let w = Waiting::new();
        w.input_opened();
        w.since.store(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(w.waited(), Duration::ZERO, "the answer is not due yet");
        let mut t = TimedWrite { inner: Vec::new(), waiting: w.clone() };
        std::io::Write::write_all(&mut t, b"taken").unwrap();
        assert_eq!(w.waited(), Duration::ZERO, "a write taken at once");
        w.write_since.store(1, Ordering::Relaxed); // a write pending since the start
        assert!(w.waited() >= Duration::from_millis(30));
        w.input_closed();
        assert!(w.waited() < Duration::from_millis(30), "the answer is awaited from the close, not the read's start");
        std::thread::sleep(Duration::from_millis(30));
        assert!(w.waited() >= Duration::from_millis(30), "now the answer is awaited");
        w.since.store(0, Ordering::Relaxed);
        assert_eq!(w.waited(), Duration::ZERO);
    }
}

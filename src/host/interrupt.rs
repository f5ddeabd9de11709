//! Deferred SIGINT/SIGTERM/SIGHUP for commands that must clean up.
//!
//! The handler only records the signal; `create` checks between steps and
//! while waiting, then tears down what it made and exits 128+signal. Docker
//! children run in their own process group (see `RealDocker`), so a Ctrl-C
//! at the terminal does not kill a cleanup call half-way, and a second
//! Ctrl-C only records the signal again: it cannot skip the cleanup.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

static PENDING: AtomicI32 = AtomicI32::new(0);
/// The write end of the installed [`Watch`]'s pipe, or -1.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn record(sig: nix::libc::c_int) {
    // Only an atomic store and write(2): async-signal-safe.
    PENDING.store(sig, Ordering::SeqCst);
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = sig as u8;
        // SAFETY: a one-byte write from a live buffer to a descriptor that is never closed.
        unsafe { nix::libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
}

/// Install the recording handler. Handlers reset to default across exec, so
/// docker children are unaffected.
pub fn install() {
    let action = SigAction::new(SigHandler::Handler(record), SaFlags::SA_RESTART, SigSet::empty());
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only performs an atomic store.
        let _ = unsafe { sigaction(sig, &action) };
    }
}

/// The signal received since `install`, if any.
pub fn pending() -> Option<i32> {
    match PENDING.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The reader of sbx's stdout has gone (`sbx events | grep -m1 died`
/// ended): a follower that prints only now and then would otherwise notice
/// only at its next line, which may never come.
pub fn stdout_gone() -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let out = std::io::stdout();
    let mut fds = [PollFd::new(out.as_fd(), PollFlags::empty())];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0].revents().is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP))
}

/// Wakes a thread blocked in [`Watch::next`] when a signal arrives, or when
/// the watched work is [`Watch::finish`]ed: a self-pipe, since a thread
/// cannot block on an atomic. `sbx exec` uses it to pass SIGINT/SIGTERM/
/// SIGHUP on to its command without polling, so the exec
/// itself pays nothing when no signal comes.
pub struct Watch {
    read: OwnedFd,
    write: std::mem::ManuallyDrop<OwnedFd>,
    installed: bool,
    /// Set by `finish`, whose wake-up byte `next` may already have taken.
    done: std::sync::atomic::AtomicBool,
}

impl Watch {
    /// Install the recording handler and route signals to this watch.
    /// Its write end then stays open for the life of the process: a handler
    /// that loaded it just before a drop must never write to a reused descriptor.
    pub fn install() -> std::io::Result<Watch> {
        let mut w = Watch::manual()?;
        w.installed = true;
        WAKE_FD.store(w.write.as_raw_fd(), Ordering::SeqCst);
        install();
        Ok(w)
    }

    /// A watch no signal reaches; [`Watch::raise`] stands in for one (tests).
    pub fn manual() -> std::io::Result<Watch> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        Ok(Watch { read, write: std::mem::ManuallyDrop::new(write), installed: false, done: Default::default() })
    }

    /// As if `sig` had arrived.
    pub fn raise(&self, sig: i32) {
        let _ = nix::unistd::write(&*self.write, &[sig as u8]);
    }

    /// The work is over: wake [`Watch::next`] with `None`.
    pub fn finish(&self) {
        self.done.store(true, Ordering::SeqCst);
        let _ = nix::unistd::write(&*self.write, &[0]);
    }

    /// Block until a signal (`Some`) or [`Watch::finish`] (`None`), whichever
    /// came first; a signal that raced with the finish still counts.
    pub fn next(&self) -> Option<i32> {
        let mut b = [0u8; 1];
        loop {
            match nix::unistd::read(self.read.as_raw_fd(), &mut b) {
                Ok(1) if b[0] != 0 => return Some(b[0] as i32),
                Ok(_) => return if self.installed { pending() } else { None },
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return None,
            }
        }
    }

    /// Wait up to `timeout` for [`Watch::finish`]; true if it came.
    pub fn finished_within(&self, timeout: std::time::Duration) -> bool {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use std::os::fd::AsFd;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if self.done.load(Ordering::SeqCst) {
                return true;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            let ms = PollTimeout::from(left.as_millis().min(60_000) as u16);
            let mut fds = [PollFd::new(self.read.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, ms) {
                Ok(0) => return false,
                Ok(_) => {
                    let mut b = [0u8; 1];
                    // A 0 is the finish; another signal while forwarding
                    // changes nothing: the first one decides.
                    let _ = nix::unistd::read(self.read.as_raw_fd(), &mut b);
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return false,
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if !self.installed {
            // SAFETY: dropped once, here; no signal handler knows this descriptor.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.write) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_watch_wakes_on_a_signal_or_on_finish() {
        let w = Watch::manual().unwrap();
        w.raise(15);
        assert_eq!(w.next(), Some(15));
        assert!(!w.finished_within(Duration::from_millis(50)), "not finished yet");
        w.raise(2);
        assert!(!w.finished_within(Duration::from_millis(50)), "a second signal is not a finish");
        w.finish();
        assert!(w.finished_within(Duration::from_secs(5)));
        let w = Watch::manual().unwrap();
        w.finish();
        assert_eq!(w.next(), None);
        assert!(w.finished_within(Duration::ZERO), "the finish that next() took still counts");
    }
}

//! Deferred SIGINT/SIGTERM/SIGHUP for commands that must clean up.
//!
//! The handler only records the signal; `create` checks between steps and
//! while waiting, then tears down what it made and exits 128+signal. Docker
//! children run in their own process group (see `RealDocker`), so a Ctrl-C
//! at the terminal does not kill a cleanup call half-way, and a second
//! Ctrl-C only records the signal again: it cannot skip the cleanup.

use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn record(sig: nix::libc::c_int) {
    // Only an atomic store: async-signal-safe.
    PENDING.store(sig, Ordering::SeqCst);
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

//! [`Progress`]: one status line for a long operation (a pull, `--clone`,
//! doctor's probe image, a pool fill), rewritten in place on stderr.
//!
//! Shown only when stderr is a terminal (see [`Printer::stdio`]); piped,
//! under `--json` or under `-v` it prints nothing, so scripts and logs see
//! only sbx's messages. A warning or error printed meanwhile clears the
//! line first; the line is cleared when the operation ends.

use std::io::Write;
use std::sync::atomic::Ordering;

use super::Printer;
use crate::model::text::for_terminal;

/// Back to the start of the line and erase it.
pub(super) const CLEAR: &str = "\r\x1b[2K";

/// Wider lines would wrap, and `CLEAR` erases only the last row.
const WIDTH: usize = 78;

/// A status line on the terminal; cleared when dropped.
pub struct Progress {
    printer: Printer,
    last: String,
}

impl Printer {
    /// A progress line (nothing is shown until [`Progress::update`]).
    pub fn progress(&self) -> Progress {
        Progress { printer: self.clone(), last: String::new() }
    }

    /// Progress lines are shown on this printer.
    pub fn shows_progress(&self) -> bool {
        self.progress
    }
}

impl Progress {
    /// Show `message` (e.g. `pulling IMAGE: 2/5 layers`) in place of the last one.
    pub fn update(&mut self, message: &str) {
        // The same text again is skipped unless something cleared it meanwhile
        // (a message, or a nested operation's own line ending).
        if !self.printer.progress || (message == self.last && self.printer.live.load(Ordering::SeqCst)) {
            return;
        }
        self.last = message.to_string();
        self.write(&line(message));
        self.printer.live.store(true, Ordering::SeqCst);
    }

    fn write(&self, text: &str) {
        let mut e = self.printer.err.lock().unwrap_or_else(|p| p.into_inner());
        let _ = write!(e, "{text}");
        let _ = e.flush();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.printer.live.swap(false, Ordering::SeqCst) {
            self.write(CLEAR);
        }
    }
}

/// What one update writes: clear, then `sbx: MESSAGE` cut to the width,
/// with no newline (the next update or message replaces it).
pub fn line(message: &str) -> String {
    // Names quoted here may come from a registry or a repository.
    let text = for_terminal(&format!("sbx: {message}"));
    let cut: String = if text.chars().count() > WIDTH {
        text.chars().take(WIDTH - 1).chain(std::iter::once('…')).collect()
    } else {
        text
    };
    format!("{CLEAR}{cut}")
}

//! Everything sbx itself prints: data on stdout, messages (warnings, notes,
//! the final error) on stderr, as cargo's `Shell` and uv's `Printer` do.
//!
//! One [`Printer`] per run, built by `run` from `--json` and handed to each
//! command in its `commands::Context`. Under `--json` every message is one
//! JSON object per line (`{"warning":{"kind":..,"message":..}}`,
//! `{"note":{..}}`, `{"error":{"kind":..,"message":..,"hint":..}}`) so no
//! plain prose mixes into a machine-read stream.
//! The writers are injectable: unit tests capture both streams.
//!
//! Library code below the commands (the driver) warns with [`warn`], which
//! ends in the printer the running command installed with [`Printer::scope`].
//! A command's own output (`exec`, `logs`, `backup`'s tar stream) is not
//! sbx's and does not go through here.
//!
//! Long operations (a pull, `--clone`, doctor's probe image, a pool fill)
//! show a [`Progress`] line, on a terminal only (see `progress`).

use std::cell::RefCell;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, HostError, Result};
use crate::model::text::for_terminal;

/// A stream the printer writes to (the process's stdout/stderr, or a buffer).
pub type Stream = Box<dyn Write + Send>;

/// Where sbx's output goes, and whether it is JSON. Cheap to clone: clones
/// share the streams, so a clone is the handle a thread or the driver keeps.
#[derive(Clone)]
pub struct Printer {
    json: bool,
    out: Arc<Mutex<Stream>>,
    err: Arc<Mutex<Stream>>,
    /// Progress lines are shown (stderr is a terminal, no `--json`, no `-v` log).
    progress: bool,
    /// A progress line is on the terminal now: the next message clears it first.
    live: Arc<AtomicBool>,
}

impl std::fmt::Debug for Printer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Printer").field("json", &self.json).field("progress", &self.progress).finish_non_exhaustive()
    }
}

impl Printer {
    pub fn new(json: bool, out: Stream, err: Stream) -> Self {
        let (out, err) = (Arc::new(Mutex::new(out)), Arc::new(Mutex::new(err)));
        Printer { json, out, err, progress: false, live: Arc::new(AtomicBool::new(false)) }
    }

    /// The process's stdout and stderr; progress when stderr is a terminal
    /// and the output is not `--json` (which prints no progress at all).
    pub fn stdio(json: bool) -> Self {
        let tty = nix::unistd::isatty(2).unwrap_or(false);
        Self::new(json, Box::new(std::io::stdout()), Box::new(std::io::stderr())).with_progress(tty && !json)
    }

    /// Show progress lines or not (`run` turns them off under `-v`, whose
    /// log lines would interleave with a line rewritten in place).
    pub fn with_progress(mut self, on: bool) -> Self {
        self.progress = on;
        self
    }

    /// `--json`: results and messages as JSON lines.
    pub fn json(&self) -> bool {
        self.json
    }

    /// Data on stdout; a closed pipe (`sbx ls | head -1`) is not an error.
    pub fn data(&self, text: &str) -> Result<()> {
        let mut o = self.out.lock().unwrap_or_else(|p| p.into_inner());
        match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Err(e) => Err(Error::io("writing to stdout", e)),
        }
    }

    /// Data on stdout for a command that streams until its reader goes
    /// (`sbx watch ... | head -3`): a closed pipe is returned, so it stops.
    pub fn stream(&self, text: &str) -> std::io::Result<()> {
        let mut o = self.out.lock().unwrap_or_else(|p| p.into_inner());
        o.write_all(text.as_bytes()).and_then(|()| o.flush())
    }

    /// One JSON value as a line on stdout.
    pub fn json_line<T: serde::Serialize>(&self, v: &T) -> Result<()> {
        self.data(&format!("{}\n", serde_json::to_string(v).map_err(json_error)?))
    }

    /// Something the user should know; the command goes on.
    pub fn warn(&self, kind: &str, message: &str) {
        self.line(&render("warning", kind, message, self.json));
    }

    /// Progress or a remark (not a problem).
    pub fn note(&self, kind: &str, message: &str) {
        self.line(&render("note", kind, message, self.json));
    }

    /// The error a command ended with, and its hint.
    pub fn error(&self, e: &Error) {
        let hint = e.hint();
        if self.json {
            self.json_error(e.kind(), &e.to_string(), hint.as_deref());
        } else {
            // Messages quote what the sandbox wrote: never raw to the terminal.
            let mut text = format!("sbx: error: {}", for_terminal(&e.to_string()));
            if let Some(h) = hint {
                text.push_str(&format!("\nsbx: hint: {}", for_terminal(&h)));
            }
            self.line(&text);
        }
    }

    /// `{"error":{..}}` on stderr, also for errors that are not an [`Error`]
    /// (clap's, before the command line is understood).
    pub fn json_error(&self, kind: &str, message: &str, hint: Option<&str>) {
        let v = serde_json::json!({ "error": { "kind": kind, "message": message, "hint": hint } });
        self.line(&v.to_string());
    }

    /// Library warnings ([`warn`]) made on this thread while `f` runs go to
    /// this printer.
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<Printer>);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| *c.borrow_mut() = self.0.take());
            }
        }
        let _restore = Restore(CURRENT.with(|c| c.borrow_mut().replace(self.clone())));
        f()
    }

    fn line(&self, text: &str) {
        let mut e = self.err.lock().unwrap_or_else(|p| p.into_inner());
        if self.live.swap(false, Ordering::SeqCst) {
            let _ = write!(e, "{}", progress::CLEAR);
        }
        let _ = writeln!(e, "{text}");
        let _ = e.flush();
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Printer>> = const { RefCell::new(None) };
}

/// A warning from library code: to the printer of the running command (see
/// [`Printer::scope`]), else plain on stderr.
pub fn warn(kind: &str, message: &str) {
    current().warn(kind, message);
}

/// A note from library code, like [`warn`].
pub fn note(kind: &str, message: &str) {
    current().note(kind, message);
}

/// A progress line from library code, on the running command's printer
/// (none outside one: a thread of its own shows no progress).
pub fn progress() -> Progress {
    CURRENT.with(|c| c.borrow().clone()).unwrap_or_else(|| Printer::stdio(false).with_progress(false)).progress()
}

fn current() -> Printer {
    CURRENT.with(|c| c.borrow().clone()).unwrap_or_else(|| Printer::stdio(false))
}

/// The line a warning or note prints, as a pure function for tests.
pub fn render(level: &str, kind: &str, message: &str, json: bool) -> String {
    if json {
        serde_json::json!({ level: { "kind": kind, "message": message } }).to_string()
    } else if level == "warning" {
        // Messages may quote what a sandbox wrote: never raw to the terminal.
        format!("sbx: warning: {}", for_terminal(message))
    } else {
        format!("sbx: {}", for_terminal(message))
    }
}

/// A value that would not encode as JSON; the text and kind are those of
/// the `Io` error this once was.
pub fn json_error(source: serde_json::Error) -> Error {
    HostError::Json { context: "encoding JSON".into(), source }.into()
}

/// What a printer from [`capture`] wrote.
#[cfg(test)]
#[derive(Clone, Default)]
pub struct Captured {
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
}

#[cfg(test)]
impl Captured {
    pub fn stdout(&self) -> String {
        String::from_utf8(self.out.lock().unwrap().clone()).unwrap()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8(self.err.lock().unwrap().clone()).unwrap()
    }
}

/// A printer that writes into buffers the test reads back (no progress:
/// see [`Printer::with_progress`]).
#[cfg(test)]
pub fn capture(json: bool) -> (Printer, Captured) {
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let c = Captured::default();
    (Printer::new(json, Box::new(Buf(c.out.clone())), Box::new(Buf(c.err.clone()))), c)
}

mod progress;
pub use progress::Progress;

#[cfg(test)]
mod tests;

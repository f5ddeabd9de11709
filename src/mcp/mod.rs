//! `sbx mcp`: a third front end beside `commands` and `serve`, serving
//! sbx to an agent as MCP tools over stdio (JSON-RPC 2.0, one message a
//! line). Each tool calls the operations the CLI and `sbx serve` call:
//! create is serve's own (`serve::make`, with its TTL watchdog), the rest
//! `Driver` and `workbench` functions; nothing here shells out to sbx or
//! builds a shell string from input.
//!
//! Shape: `rpc` reads and answers the protocol (the handshake, tools/list,
//! tools/call), `catalog` says what each tool does and cannot do,
//! `tools` does it, `output` bounds and renders what a sandbox sends back.
//! The tools reach only the sandboxes this session made. The session ends
//! at the end of stdin or on SIGTERM/SIGINT/SIGHUP: every sandbox it made
//! is destroyed then, but those created with `keep`; each has a TTL, so
//! one left by a session killed outright is reaped all the same.

mod catalog;
mod output;
mod rpc;
mod tools;

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;
use std::time::Duration;

use crate::cli::{McpArgs, ServeArgs};
use crate::error::Result;
use crate::host::interrupt::Watch;
use crate::output::Printer;
use crate::sandbox::Driver;
use crate::serve::{Config, Hooks, Ops, Shared};

/// Each sandbox's time to live unless `--ttl` or the create says another.
const DEFAULT_TTL: &str = "1h";

/// The longest request line taken (a write_file of its largest file, in base64, fits).
pub const MAX_LINE: usize = 32 * 1024 * 1024;
/// Calls running at once; past it a call is refused, not queued.
pub const MAX_CALLS: usize = 16;

/// How long calls in flight at the end of stdin get to answer.
pub const DRAIN: Duration = Duration::from_secs(5);

/// A sandbox this session made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    pub template: String,
    /// Left running (until its TTL) when the session ends.
    pub keep: bool,
}

/// One MCP session: what every call shares.
pub struct Session<'a> {
    pub ops: Ops<'a>,
    shared: Shared,
    templates: BTreeMap<String, crate::spec::ImageRef>,
    ttl: Duration,
    made: Mutex<BTreeMap<String, Made>>,
    /// Held while the session ends: a signal during the end waits for it
    /// instead of exiting half-way through the destroy.
    ended: Mutex<bool>,
    calls: AtomicUsize,
    /// The protocol version the handshake settled on.
    version: Mutex<Option<String>>,
}

impl<'a> Session<'a> {
    /// The flags checked as `sbx serve` checks them (templates, and the
    /// create defaults serve takes), before anything is read or made.
    pub fn new(args: &McpArgs, docker_host: Option<&str>, driver: &'a Driver, hooks: Hooks<'a>) -> Result<Self> {
        // serve's own checks, through serve's own flags; mcp has no listener or keys.
        let ttl = crate::spec::parse_ttl(args.defaults.ttl.as_deref().unwrap_or(DEFAULT_TTL))?;
        let serve = ServeArgs {
            listen: "127.0.0.1:0".into(),
            api_key_file: None,
            templates: args.templates.clone(),
            tls_cert: None,
            tls_key: None,
            allow_internet: args.allow_internet,
            defaults: crate::spec::CreateRequest { ttl: None, ..args.defaults.clone() },
        };
        let config = Config::from_args(&serve, docker_host)?;
        let templates = config.templates.clone();
        Ok(Session {
            ops: Ops { driver, watchdog: hooks.watchdog, refill: hooks.refill },
            shared: Shared::local(config),
            templates,
            ttl,
            made: Mutex::default(),
            ended: Mutex::new(false),
            calls: AtomicUsize::new(0),
            version: Mutex::default(),
        })
    }

    fn made(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Made>> {
        self.made.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this session made sandbox `id` (and has not destroyed it).
    pub fn owns(&self, id: &str) -> bool {
        self.made().contains_key(id)
    }

    /// The end of the session, once: every sandbox it made but those kept
    /// is destroyed. Returns the ids destroyed.
    pub fn end(&self, out: &Printer) -> Vec<String> {
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        if std::mem::replace(&mut *ended, true) {
            return Vec::new();
        }
        let ids: Vec<String> = {
            let mut made = self.made();
            let gone: Vec<String> = made.iter().filter(|(_, m)| !m.keep).map(|(id, _)| id.clone()).collect();
            made.retain(|_, m| m.keep);
            gone
        };
        if ids.is_empty() {
            return ids;
        }
        match self.ops.driver.destroy(&ids) {
            Ok(_) => out.note("destroyed", &format!("session over: destroyed {}", ids.join(" "))),
            Err(e) => out.warn(
                "not_destroyed",
                &format!("session over, but destroying {} failed: {e}; their TTL still reaps them", ids.join(" ")),
            ),
        }
        ids
    }
}

/// Where JSON-RPC goes: one message a line, whole, from any call's thread.
pub struct Replies<'w>(Mutex<Box<dyn Write + Send + 'w>>);

impl<'w> Replies<'w> {
    pub fn new(w: impl Write + Send + 'w) -> Self {
        Replies(Mutex::new(Box::new(w)))
    }

    /// One message; false when the reader has gone.
    pub fn send(&self, msg: &serde_json::Value) -> bool {
        // serde_json escapes every control character: a message is one line.
        let mut line = serde_json::to_vec(msg).expect("JSON serializes");
        line.push(b'\n');
        let mut w = self.0.lock().unwrap_or_else(|p| p.into_inner());
        w.write_all(&line).and_then(|()| w.flush()).is_ok()
    }
}

/// One line of input, at most [`MAX_LINE`] bytes; None at the end of input.
pub fn read_line(r: &mut dyn BufRead, max: usize) -> std::io::Result<Option<Result<Vec<u8>, usize>>> {
    use std::io::Read;
    let mut buf = Vec::new();
    let n = Read::take(&mut *r, max as u64 + 1).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.len() > max && !buf.ends_with(b"\n") {
        // Over-long: the rest of it is skipped, in bounded pieces.
        let mut skipped = buf.len();
        loop {
            buf.clear();
            let n = Read::take(&mut *r, 1 << 20).read_until(b'\n', &mut buf)?;
            skipped += n;
            if n == 0 || buf.ends_with(b"\n") {
                return Ok(Some(Err(skipped)));
            }
        }
    }
    Ok(Some(Ok(buf)))
}

/// `sbx mcp`: serve the session on `input`/`replies` until the input ends
/// or a signal comes (`watch`), then end it and exit.
pub fn run(
    args: &McpArgs,
    docker_host: Option<&str>,
    driver: &Driver,
    hooks: Hooks<'_>,
    io: (&mut dyn BufRead, Replies<'_>),
    watch: &Watch,
    out: &Printer,
) -> Result<()> {
    let session = Session::new(args, docker_host, driver, hooks)?;
    let (input, replies) = io;
    let names: Vec<String> = session.templates.keys().cloned().collect();
    let names = if names.is_empty() { "none (--template NAME=IMAGE)".to_string() } else { names.join(", ") };
    out.note("mcp", &format!("serving MCP on stdio; templates: {names}"));
    std::thread::scope(|s| {
        let session = &session;
        let replies = &replies;
        s.spawn(move || {
            if let Some(sig) = watch.next() {
                out.note("signal", &format!("signal {sig}: ending the session"));
                session.end(out);
                std::process::exit(0);
            }
        });
        loop {
            let line = match read_line(input, MAX_LINE) {
                Ok(Some(l)) => l,
                Ok(None) => break,
                Err(e) => {
                    out.warn("stdin", &format!("reading stdin failed: {e}; ending the session"));
                    break;
                }
            };
            match line {
                Ok(l) => rpc::serve_line(session, &l, replies, s),
                Err(n) => {
                    replies.send(&rpc::error(
                        serde_json::Value::Null,
                        rpc::INVALID_REQUEST,
                        &format!("a request of {n} bytes, over {MAX_LINE}"),
                    ));
                }
            }
        }
        // Calls in flight get a moment to answer; a signal still ends them at once.
        let deadline = std::time::Instant::now() + DRAIN;
        while session.calls.load(std::sync::atomic::Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        session.end(out);
        watch.finish();
        // Calls still running are cut: their sandboxes are gone, or kept with their TTL.
        std::process::exit(0)
    })
}

#[cfg(test)]
mod tests;

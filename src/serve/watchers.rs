//! The sync SDK's watchers (CreateWatcher, GetWatcherEvents, RemoveWatcher):
//! one helper `watch` each, running on a worker thread, its events kept
//! here until the client takes them.
//!
//! Bounded on every side, since neither the sandbox nor the client is to
//! be trusted: at most [`MAX_PER_SANDBOX`] watchers a sandbox; at most
//! [`MAX_EVENTS`] events and [`MAX_BYTES`] of them kept between two
//! GetWatcherEvents. Past either, the events since the last take are
//! dropped, the helper is stopped, and every GetWatcherEvents answers
//! `data_loss` until the watcher is removed (a client must not take a
//! stream with a hole in it for the whole story). A watcher nobody asked
//! for its events in [`IDLE`] is removed and its helper stopped, and one
//! whose sandbox ended is removed at once: a client that never calls
//! RemoveWatcher leaks no docker exec.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::fs::{code_of, Refused};
use super::watch_events::{end_of, events_of, fatal, Asked, STOP};
use super::{Ops, Shared};
use crate::host::interrupt::Watch;
use crate::workbench::lines::WatchLine;
use crate::workbench::{WatchEnd, WatchOpts};

pub const MAX_PER_SANDBOX: usize = 16;
pub const MAX_EVENTS: usize = 10_000;
/// Of the events as JSON.
pub const MAX_BYTES: usize = 4 * 1024 * 1024;
/// How long a watcher lives without a GetWatcherEvents.
pub const IDLE: Duration = Duration::from_secs(10 * 60);
/// How often each watcher is checked for idling.
const REAP_EVERY: Duration = Duration::from_secs(30);
/// How long CreateWatcher waits for the helper's watch to be in place.
const START_WITHIN: Duration = Duration::from_secs(30);

/// A watcher's events between two takes, and how it stands.
#[derive(Debug)]
pub struct Buffer {
    events: Vec<Value>,
    bytes: usize,
    /// What every take answers from now on (events were lost, the watch failed).
    failed: Option<Refused>,
    polled: Instant,
}

impl Buffer {
    pub fn new(now: Instant) -> Self {
        Buffer { events: Vec::new(), bytes: 0, failed: None, polled: now }
    }

    /// Keep `ev`; false when that overflowed the buffer (it is then failed).
    pub fn push(&mut self, ev: Value) -> bool {
        if self.failed.is_some() {
            return false;
        }
        let size = serde_json::to_vec(&ev).map_or(usize::MAX, |v| v.len());
        if self.events.len() >= MAX_EVENTS || self.bytes.saturating_add(size) > MAX_BYTES {
            self.fail((
                "data_loss",
                format!(
                    "more than {MAX_EVENTS} events (or {} MiB of them) came between two get_new_events: \
                     some were lost, so the watcher was stopped; stop() it, and watch again",
                    MAX_BYTES >> 20
                ),
            ));
            return false;
        }
        self.bytes += size;
        self.events.push(ev);
        true
    }

    /// From now on, every take answers `r` (the events kept are dropped).
    pub fn fail(&mut self, r: Refused) {
        self.events = Vec::new();
        self.bytes = 0;
        self.failed.get_or_insert(r);
    }

    /// The events since the last take (GetWatcherEvents).
    pub fn take(&mut self, now: Instant) -> Result<Vec<Value>, Refused> {
        self.polled = now;
        if let Some(r) = &self.failed {
            return Err(r.clone());
        }
        self.bytes = 0;
        Ok(std::mem::take(&mut self.events))
    }

    pub fn idle(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.polled) >= IDLE
    }
}

/// One watcher: its sandbox, its stopper, its events.
pub struct Watcher {
    sandbox: String,
    stop: Watch,
    buffer: Mutex<Buffer>,
}

impl Watcher {
    fn buffer(&self) -> std::sync::MutexGuard<'_, Buffer> {
        self.buffer.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Every watcher of the server, by id.
#[derive(Default)]
pub struct Watchers(Mutex<HashMap<String, Arc<Watcher>>>);

/// What a watcher id in an answer is shown as (the request's own, bounded).
fn shown(wid: &str) -> String {
    let s: String = wid.chars().take(64).collect();
    format!("{s:?}")
}

fn not_found(wid: &str) -> Refused {
    (
        "not_found",
        format!(
            "watcher {} not found: it was removed, idle for {} minutes, or its sandbox ended",
            shown(wid),
            IDLE.as_secs() / 60
        ),
    )
}

impl Watchers {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Watcher>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Add `w` as `wid`, unless its sandbox has [`MAX_PER_SANDBOX`] already.
    fn add(&self, wid: &str, w: Arc<Watcher>) -> Result<(), Refused> {
        let mut t = self.table();
        if t.values().filter(|o| o.sandbox == w.sandbox).count() >= MAX_PER_SANDBOX {
            return Err((
                "resource_exhausted",
                format!("sandbox {} has {MAX_PER_SANDBOX} watchers already: stop() one first", w.sandbox),
            ));
        }
        t.insert(wid.to_string(), w);
        Ok(())
    }

    /// Sandbox `id`'s watcher `wid` (another sandbox's is not found).
    fn get(&self, id: &str, wid: &str) -> Result<Arc<Watcher>, Refused> {
        self.table().get(wid).filter(|w| w.sandbox == id).cloned().ok_or_else(|| not_found(wid))
    }

    /// Take `wid` out, if it is still `w`; stop its helper.
    fn drop_watcher(&self, wid: &str, w: &Arc<Watcher>) {
        let mut t = self.table();
        if t.get(wid).is_some_and(|o| Arc::ptr_eq(o, w)) {
            t.remove(wid);
        }
        drop(t);
        w.stop.raise(STOP);
    }

    /// GetWatcherEvents: `{"events": [...]}` since the last.
    pub fn events(&self, id: &str, wid: &str) -> Result<Value, Refused> {
        let w = self.get(id, wid)?;
        let events = w.buffer().take(Instant::now())?;
        Ok(json!({ "events": events }))
    }

    /// RemoveWatcher.
    pub fn remove(&self, id: &str, wid: &str) -> Result<(), Refused> {
        let w = self.get(id, wid)?;
        self.drop_watcher(wid, &w);
        Ok(())
    }

    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.table().len()
    }
}

/// CreateWatcher: start the watch, answer once it is in place (so a
/// change made right after is seen) with `{"watcherId"}`.
pub async fn create(shared: &Arc<Shared>, id: String, asked: Asked) -> Result<Value, Refused> {
    let wid = format!("w{}", super::config::random_hex(12));
    let stop = Watch::manual().map_err(|e| ("internal", format!("making the watcher's stopper failed: {e}")))?;
    let w = Arc::new(Watcher { sandbox: id.clone(), stop, buffer: Mutex::new(Buffer::new(Instant::now())) });
    shared.watchers.add(&wid, w.clone())?;
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (s2, w2, wid2) = (shared.clone(), w.clone(), wid.clone());
    shared.spawn(move |ops| run(ops, &s2, &wid2, &w2, asked, ready_tx));
    let started = match tokio::time::timeout(START_WITHIN, ready_rx).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => Err(("unavailable", "sbx serve is shutting down".into())),
        Err(_) => {
            Err(("deadline_exceeded", format!("the watch did not start within {}s; try again", START_WITHIN.as_secs())))
        }
    };
    if let Err(r) = started {
        shared.watchers.drop_watcher(&wid, &w);
        return Err(r);
    }
    tokio::spawn(reap(shared.clone(), wid.clone(), w));
    Ok(json!({ "watcherId": wid }))
}

/// Remove `w` once idle for [`IDLE`], or end when it was removed.
async fn reap(shared: Arc<Shared>, wid: String, w: Arc<Watcher>) {
    loop {
        tokio::time::sleep(REAP_EVERY).await;
        if !shared.watchers.table().get(&wid).is_some_and(|o| Arc::ptr_eq(o, &w)) {
            return;
        }
        if w.buffer().idle(Instant::now()) {
            tracing::info!(watcher = %wid, sandbox = %w.sandbox, "a watcher idle too long was removed");
            shared.watchers.drop_watcher(&wid, &w);
            return;
        }
    }
}

type Ready = tokio::sync::oneshot::Sender<Result<(), Refused>>;

/// On a worker thread: the watch of watcher `wid`, its events into its buffer.
fn run(ops: &Ops, shared: &Shared, wid: &str, w: &Arc<Watcher>, asked: Asked, ready: Ready) {
    let target = match ops.open(&w.sandbox) {
        Ok(t) => t,
        Err(e) => {
            let _ = ready.send(Err(code_of(&e)));
            return;
        }
    };
    let mut ready = Some(ready);
    let mut sink = |l: &WatchLine| -> std::io::Result<()> {
        let stop = || Err(std::io::Error::other("the watcher stopped"));
        if let Some(r) = fatal(l, &asked.path) {
            match ready.take() {
                Some(tx) => drop(tx.send(Err(r))),
                None => w.buffer().fail(r),
            }
            return stop();
        }
        if let WatchLine::Ready = l {
            if let Some(tx) = ready.take() {
                let _ = tx.send(Ok(()));
            }
            return Ok(());
        }
        let mut b = w.buffer();
        for ev in events_of(l).into_iter().flatten() {
            if !b.push(ev) {
                return stop();
            }
        }
        Ok(())
    };
    let opts = WatchOpts { recursive: asked.recursive, attrib: true };
    let end = crate::workbench::watch_with(&target, &asked.path, opts, &w.stop, &mut sink);
    let sandbox_ended = matches!(end, Ok(WatchEnd::SandboxEnded));
    let failed = end_of(&w.sandbox, end);
    match ready.take() {
        Some(tx) => drop(tx.send(Err(failed.unwrap_or(("internal", "the watch ended before it began".into()))))),
        None if sandbox_ended => shared.watchers.drop_watcher(wid, w),
        None => {
            if let Some(r) = failed {
                w.buffer().fail(r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_keeps_events_until_taken_and_fails_past_its_bound() {
        let t0 = Instant::now();
        let mut b = Buffer::new(t0);
        assert!(b.push(json!({"name": "a", "type": "EVENT_TYPE_CREATE"})));
        assert_eq!(b.take(t0).unwrap().len(), 1);
        assert_eq!(b.take(t0).unwrap(), Vec::<Value>::new(), "taken once");
        for i in 0..MAX_EVENTS {
            assert!(b.push(json!({"name": i.to_string(), "type": "EVENT_TYPE_WRITE"})), "{i}");
        }
        assert!(!b.push(json!({"name": "one too many", "type": "EVENT_TYPE_WRITE"})));
        let (code, m) = b.take(t0).unwrap_err();
        assert_eq!(code, "data_loss");
        assert!(m.contains("some were lost") && m.contains("stop()"), "{m}");
        assert!(b.take(t0).is_err(), "it stays failed: a hole is never papered over");
        assert!(b.events.is_empty(), "what was kept is dropped, not held");
        // By bytes too: a few huge names fill it long before the count does.
        let mut b = Buffer::new(t0);
        let big = "\u{1}".repeat(200_000); // 6 bytes each as JSON
        let pushed = (0..100).take_while(|_| b.push(json!({"name": big, "type": "EVENT_TYPE_CREATE"}))).count();
        assert_eq!(pushed, MAX_BYTES / (6 * 200_000 + 40));
        assert!(b.take(t0).is_err());
    }

    #[test]
    fn a_watcher_idles_out_only_when_nobody_takes_its_events() {
        let t0 = Instant::now();
        let mut b = Buffer::new(t0);
        assert!(!b.idle(t0 + IDLE - Duration::from_secs(1)));
        assert!(b.idle(t0 + IDLE));
        b.take(t0 + IDLE - Duration::from_secs(1)).unwrap();
        assert!(!b.idle(t0 + IDLE), "a take keeps it");
        b.fail(("data_loss", "x".into()));
        let _ = b.take(t0 + 2 * IDLE);
        assert!(!b.idle(t0 + 2 * IDLE), "a take of a failed one keeps it too, until removed");
    }

    #[test]
    fn watchers_are_capped_per_sandbox_and_private_to_it() {
        let ws = Watchers::default();
        let mk = |s: &str| {
            Arc::new(Watcher {
                sandbox: s.into(),
                stop: Watch::manual().unwrap(),
                buffer: Mutex::new(Buffer::new(Instant::now())),
            })
        };
        for i in 0..MAX_PER_SANDBOX {
            ws.add(&format!("w{i}"), mk("sbx-a")).unwrap();
        }
        let (code, m) = ws.add("wx", mk("sbx-a")).unwrap_err();
        assert_eq!((code, m.contains("stop() one first")), ("resource_exhausted", true), "{m}");
        ws.add("wb", mk("sbx-b")).unwrap();
        assert_eq!(ws.events("sbx-b", "w0").unwrap_err().0, "not_found", "another sandbox's watcher");
        assert_eq!(ws.events("sbx-a", "w0").unwrap(), json!({"events": []}));
        ws.remove("sbx-a", "w0").unwrap();
        assert_eq!(ws.remove("sbx-a", "w0").unwrap_err().0, "not_found");
        let (_, m) = ws.events("sbx-a", &"\n".repeat(1000)).unwrap_err();
        assert!(m.len() < 300, "a hostile id is not echoed whole: {m}");
        assert_eq!(ws.count(), MAX_PER_SANDBOX);
    }
}

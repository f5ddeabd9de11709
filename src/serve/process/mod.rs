//! The commands `process.Process/Start` runs, while they run: what List
//! answers, where SendInput, StreamInput, CloseStdin and Update send their
//! input, and the streams (Start's own and Connect's) their events fan
//! out to.
//!
//! A command outlives its clients, as envd's do (the SDK's `disconnect()`
//! promises a later `connect(pid)`): when the last stream (its Start, or
//! a Connect to it) goes away, it runs on, its output read and dropped,
//! until it ends, is killed, or its sandbox ends (its TTL). Each such
//! command holds a docker exec on the host, so a sandbox has at most
//! [`MAX_UNWATCHED`]: one left unwatched past that is killed at once.
//! None outlives the server: its input channel holds docker exec's stdin
//! open, and the helper kills the command when that stdin ends first.

pub mod input;
pub mod stream;
pub mod wire;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::Value;

use crate::workbench::RunInput;

/// The most commands of one sandbox left running with nobody watching.
pub const MAX_UNWATCHED: usize = 16;
/// The most streams (a Start and its Connects) watching one command.
pub const MAX_WATCHERS: usize = 8;
/// Frames held for one stream before the command's output waits for it.
pub const WATCHER_BUFFER: usize = 32;
/// Input messages held for one command before a sender waits for room.
pub const INPUT_BUFFER: usize = 8;

/// The running commands, by sandbox then pid.
#[derive(Default)]
pub struct Procs {
    m: Mutex<BTreeMap<String, BTreeMap<u32, Arc<Proc>>>>,
}

impl Procs {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, BTreeMap<u32, Arc<Proc>>>> {
        self.m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sandbox `id`'s command `pid`, if this server started it and it runs.
    pub fn get(&self, id: &str, pid: u32) -> Option<Arc<Proc>> {
        self.lock().get(id).and_then(|m| m.get(&pid)).cloned()
    }

    /// Sandbox `id`'s running command tagged `tag`.
    pub fn by_tag(&self, id: &str, tag: &str) -> Option<Arc<Proc>> {
        let m = self.lock();
        let found = m.get(id)?.values().find(|p| p.info.lock().unwrap_or_else(|p| p.into_inner())["tag"] == tag);
        found.cloned()
    }

    /// List's `ProcessInfo`s of sandbox `id`.
    pub fn infos(&self, id: &str) -> Vec<Value> {
        let m = self.lock();
        let each = |p: &Arc<Proc>| p.info.lock().unwrap_or_else(|p| p.into_inner()).clone();
        m.get(id).map(|by| by.values().map(each).collect()).unwrap_or_default()
    }

    /// Whether sandbox `id` has more than [`MAX_UNWATCHED`] running
    /// commands nobody watches.
    pub fn too_many_unwatched(&self, id: &str) -> bool {
        let m = self.lock();
        let n = m.get(id).map(|by| by.values().filter(|p| p.unwatched()).count()).unwrap_or(0);
        n > MAX_UNWATCHED
    }

    fn insert(&self, id: &str, pid: u32, p: Arc<Proc>) {
        self.lock().entry(id.to_string()).or_default().insert(pid, p);
    }

    fn remove(&self, id: &str, pid: u32) {
        let mut m = self.lock();
        if let Some(by_pid) = m.get_mut(id) {
            by_pid.remove(&pid);
            if by_pid.is_empty() {
                m.remove(id);
            }
        }
    }
}

/// One command Start runs: made before its pid is known, in [`Procs`]
/// from its pid to its end.
pub struct Proc {
    pub sandbox: String,
    pid: AtomicU32,
    ended: AtomicBool,
    /// The streams alive; at 0 before the end the command is killed.
    watching: AtomicUsize,
    watchers: Mutex<Vec<tokio::sync::mpsc::Sender<Bytes>>>,
    info: Mutex<Value>,
    /// Where its input goes (open while it runs, so the helper knows sbx
    /// is there); taken with `stdin: true` or a PTY only.
    input: std::sync::mpsc::SyncSender<RunInput>,
    takes_input: bool,
    pub pty: bool,
}

impl Proc {
    /// A command about to start, watched by the Start stream `first`;
    /// and the receiving end of its input.
    pub fn new(
        sandbox: &str,
        info: Value,
        stdin: bool,
        pty: bool,
        first: tokio::sync::mpsc::Sender<Bytes>,
    ) -> (Arc<Proc>, std::sync::mpsc::Receiver<RunInput>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(INPUT_BUFFER);
        let p = Proc {
            sandbox: sandbox.to_string(),
            pid: AtomicU32::new(0),
            ended: AtomicBool::new(false),
            watching: AtomicUsize::new(1),
            watchers: Mutex::new(vec![first]),
            info: Mutex::new(info),
            input: tx,
            takes_input: stdin || pty,
            pty,
        };
        (Arc::new(p), rx)
    }

    pub fn pid(&self) -> u32 {
        self.pid.load(SeqCst)
    }

    /// Its pid came: in [`Procs`] from now on. False when every stream
    /// went away before.
    pub fn started(self: &Arc<Self>, procs: &Procs, pid: u32) -> bool {
        // The first pid the helper said is the command's; a second would
        // leave an entry `finished` never removes.
        if self.pid() != 0 {
            return self.watching.load(SeqCst) > 0;
        }
        self.pid.store(pid, SeqCst);
        self.info.lock().unwrap_or_else(|p| p.into_inner())["pid"] = pid.into();
        procs.insert(&self.sandbox, pid, self.clone());
        self.watching.load(SeqCst) > 0
    }

    /// Its end was seen (or it could not start): out of [`Procs`], no
    /// more input, and its streams end after what was sent.
    pub fn finished(&self, procs: &Procs) {
        self.ended.store(true, SeqCst);
        let pid = self.pid();
        if pid != 0 {
            procs.remove(&self.sandbox, pid);
        }
    }

    pub fn has_ended(&self) -> bool {
        self.ended.load(SeqCst)
    }

    /// Send `frame` to every stream, waiting for a slow one (as envd
    /// does: the command's output is held back, never dropped, while
    /// someone watches); a stream gone is forgotten. False when none is left.
    pub fn broadcast(&self, frame: &Bytes) -> bool {
        let watchers = self.watchers.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut gone = Vec::new();
        for w in &watchers {
            if w.blocking_send(frame.clone()).is_err() {
                gone.push(w.clone());
            }
        }
        let mut ws = self.watchers.lock().unwrap_or_else(|p| p.into_inner());
        ws.retain(|w| !gone.iter().any(|g| g.same_channel(w)));
        !ws.is_empty()
    }

    /// Stop sending: every stream ends once it has what was sent.
    pub fn close_streams(&self) {
        self.watchers.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// A Connect: a new stream, told the pid first; Err when it has
    /// [`MAX_WATCHERS`] already or has ended.
    pub fn watch(self: &Arc<Self>, tx: tokio::sync::mpsc::Sender<Bytes>, first: Bytes) -> Result<(), &'static str> {
        let mut ws = self.watchers.lock().unwrap_or_else(|p| p.into_inner());
        if self.has_ended() {
            return Err("ended");
        }
        // Streams whose client went are not counted: a command that prints
        // nothing would otherwise take no Connect after eight dropped ones.
        ws.retain(|w| !w.is_closed());
        if ws.len() >= MAX_WATCHERS {
            return Err("full");
        }
        let _ = tx.try_send(first);
        ws.push(tx);
        self.watching.fetch_add(1, SeqCst);
        Ok(())
    }

    /// Nobody watches it, and it runs.
    fn unwatched(&self) -> bool {
        self.watching.load(SeqCst) == 0 && !self.has_ended()
    }

    /// A stream's body was dropped: true when it was the last one and the
    /// command still runs.
    pub fn unwatch(&self) -> bool {
        let left = self.watching.fetch_sub(1, SeqCst) - 1;
        left == 0 && !self.has_ended() && self.pid() != 0
    }

    /// Hand `msg` to the command's input, waiting up to `patience` for
    /// room. Err: it takes no input, it ended, or it stays full.
    pub async fn send(&self, mut msg: RunInput, patience: std::time::Duration) -> Result<(), InputError> {
        use std::sync::mpsc::TrySendError;
        if !self.takes_input {
            return Err(InputError::NoInput);
        }
        let tx = &self.input;
        let until = std::time::Instant::now() + patience;
        loop {
            match tx.try_send(msg) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Disconnected(_)) => return Err(InputError::Ended),
                Err(TrySendError::Full(m)) if std::time::Instant::now() < until => {
                    msg = m;
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Err(TrySendError::Full(_)) => return Err(InputError::Full),
            }
        }
    }
}

/// Why input did not reach a command.
#[derive(Debug, PartialEq, Eq)]
pub enum InputError {
    NoInput,
    Ended,
    Full,
}

#[cfg(test)]
mod tests;

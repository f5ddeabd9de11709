//! `Idempotency-Key` on create: the SDK's retry of a create whose answer
//! was lost gets the sandbox that create made, not a second one. Kept in
//! the server's memory for a day; a key reused for another body is refused.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

const KEEP: Duration = Duration::from_secs(24 * 3600);

enum Slot {
    InFlight([u8; 32]),
    Done([u8; 32], Value, Instant),
}

/// What a create carrying a key may do.
#[derive(Debug, PartialEq)]
pub enum Claim {
    /// The first with this key: create, then [`Keys::finish`].
    New,
    /// Made already: answer this again.
    Replay(Value),
    /// The first with this key is still creating.
    Busy,
    /// The key came with another body.
    Mismatch,
}

#[derive(Default)]
pub struct Keys(Mutex<HashMap<String, Slot>>);

/// Whether `k` is a key as the SDK makes them: 1-255 of a-z, 0-9, '-'.
pub fn valid(k: &str) -> bool {
    (1..=255).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

pub fn digest(body: &[u8]) -> [u8; 32] {
    Sha256::digest(body).into()
}

impl Keys {
    pub fn claim(&self, key: &str, body: [u8; 32]) -> Claim {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.retain(|_, s| !matches!(s, Slot::Done(_, _, at) if at.elapsed() > KEEP));
        match m.get(key) {
            None => {
                m.insert(key.to_string(), Slot::InFlight(body));
                Claim::New
            }
            Some(Slot::InFlight(d) | Slot::Done(d, _, _)) if *d != body => Claim::Mismatch,
            Some(Slot::InFlight(_)) => Claim::Busy,
            Some(Slot::Done(_, v, _)) => Claim::Replay(v.clone()),
        }
    }

    /// The create ended: its answer kept for a replay, or, when it failed,
    /// the key free again (a failed create has rolled back).
    pub fn finish(&self, key: &str, body: [u8; 32], answer: Option<&Value>) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match answer {
            Some(v) => m.insert(key.to_string(), Slot::Done(body, v.clone(), Instant::now())),
            None => m.remove(key),
        };
    }
}

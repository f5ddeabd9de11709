//! The per-sandbox host state a listing shows (a moved TTL, sbx's stop and
//! hibernate marks, a pool member's claim), read in one pass: one directory
//! listing per kind, and a file read only for a sandbox a listing names.
//! `ls` then costs the same beyond its `docker ps` for 0 or 200 sandboxes,
//! instead of a lookup per sandbox and kind.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use super::{Mark, State};

#[derive(Debug, Default)]
pub struct View {
    expires: BTreeMap<String, SystemTime>,
    stopped: BTreeMap<String, String>,
    hibernated: BTreeSet<String>,
    sessions: BTreeMap<String, Option<String>>,
}

impl State {
    /// Every sandbox's state, for a listing.
    pub fn view(&self) -> View {
        let mut v = View { hibernated: self.ids(Mark::Hibernated.kind()).into_iter().collect(), ..View::default() };
        for id in self.expiring() {
            if let Some(t) = self.expiry(&id) {
                v.expires.insert(id, t);
            }
        }
        for id in self.ids(Mark::Stopped.kind()) {
            if let Some(run) = self.get(Mark::Stopped.kind(), &id) {
                v.stopped.insert(id, run);
            }
        }
        for id in self.claims() {
            if let Some(c) = self.claim(&id) {
                v.sessions.insert(id, c.session);
            }
        }
        v
    }

    /// Sandbox `id`'s state alone: its files, no listing.
    pub fn view_of(&self, id: &str) -> View {
        let mut v = View::default();
        if let Some(t) = self.expiry(id) {
            v.expires.insert(id.into(), t);
        }
        if let Some(run) = self.get(Mark::Stopped.kind(), id) {
            v.stopped.insert(id.into(), run);
        }
        if self.marked(id, Mark::Hibernated) {
            v.hibernated.insert(id.into());
        }
        if let Some(c) = self.claim(id) {
            v.sessions.insert(id.into(), c.session);
        }
        v
    }
}

impl View {
    /// The expiry `sbx ttl` moved it to, if it did.
    pub fn expiry(&self, id: &str) -> Option<SystemTime> {
        self.expires.get(id).copied()
    }

    pub fn hibernated(&self, id: &str) -> bool {
        self.hibernated.contains(id)
    }

    /// As [`State::stopped_by_sbx`].
    pub fn stopped_by_sbx(&self, id: &str, started_at: Option<&str>) -> bool {
        self.stopped.get(id).is_some_and(|run| super::mark::stopped_this_run(run, started_at))
    }

    /// As [`State::stopped_run`].
    pub fn stopped_run(&self, id: &str) -> Option<&str> {
        self.stopped.get(id).map(String::as_str).filter(|r| !r.is_empty())
    }

    /// A pool member's claim's session, if it was claimed (and gave one).
    pub fn claimed_session(&self, id: &str) -> Option<Option<&str>> {
        self.sessions.get(id).map(Option::as_deref)
    }
}

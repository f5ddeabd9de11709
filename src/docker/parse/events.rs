//! `docker events` as sbx reads it (`argv::event_format`, the shape of `{{json .}}`): one line into a
//! [`DockerEvent`], and the [`EventMapper`] that keeps the events of this
//! host's sandboxes and says what they mean (`model::event`).
//!
//! The attributes of a container event are its labels (the image's merged
//! in) with docker's own keys written over or under them: `name` and
//! `image` are set after the labels, but `exitCode` (die) and `signal`
//! (kill) before, so an image's `LABEL exitCode=0` replaces a die's real
//! code (seen on this engine, 20.10). Ownership is therefore the token over
//! the sbx labels (`RawContainer::is_sbx`, as `ls`), never `sbx.managed`
//! (which any image can carry), and a die's code is only taken from the
//! attributes when no other event of that container showed `exitCode` as a
//! label; the caller prefers the engine's own state (`container_state`).

use std::collections::{BTreeMap, HashSet};
use std::time::SystemTime;

use serde::Deserialize;

use super::RawContainer;
use crate::model::event::{self, Event, Kind};
use crate::model::record;

/// The longest event line read; a longer one (an image with megabytes of
/// labels) is skipped whole, and said so.
pub const MAX_EVENT_LINE: usize = 1024 * 1024;

/// The docker actions sbx asks for (`--filter event=...`): the others
/// (exec_*, attach, top, ...) are never sandbox lifecycle.
pub const ACTIONS: &[&str] = &["create", "start", "stop", "pause", "unpause", "die", "oom", "destroy"];

/// One container event, before sbx interprets it.
#[derive(Debug, Clone, PartialEq)]
pub struct DockerEvent {
    pub action: String,
    /// The full container id.
    pub container: String,
    pub attributes: BTreeMap<String, String>,
    pub at: SystemTime,
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "Type")]
    kind: String,
    #[serde(rename = "Action")]
    action: String,
    #[serde(rename = "Actor")]
    actor: Actor,
    #[serde(rename = "timeNano")]
    time_nano: u64,
}

#[derive(Deserialize)]
struct Actor {
    #[serde(rename = "ID")]
    id: String,
    #[serde(rename = "Attributes", default)]
    attributes: BTreeMap<String, String>,
}

/// One line of `docker events` in `argv::event_format` (the shape of
/// `{{json .}}`); None for anything that is not a well-formed container event.
pub fn parse_event(line: &[u8]) -> Option<DockerEvent> {
    if line.len() > MAX_EVENT_LINE {
        return None;
    }
    let l: Line = serde_json::from_slice(line).ok()?;
    let full_id = l.actor.id.len() == 64 && l.actor.id.bytes().all(|b| b.is_ascii_hexdigit());
    // sbx's format names every attribute it reads; an absent one comes as "".
    let mut attributes = l.actor.attributes;
    attributes.retain(|_, v| !v.is_empty());
    (l.kind == "container" && full_id).then(|| DockerEvent {
        action: l.action,
        container: l.actor.id,
        attributes,
        at: event::from_nanos(l.time_nano),
    })
}

/// `docker container inspect --format '{{json .State}}'`: what the engine
/// itself recorded of the last exit, for a die.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitState {
    pub running: bool,
    pub exit_code: i64,
    pub oom_killed: bool,
    pub finished_at: Option<SystemTime>,
}

pub fn container_state(stdout: &str) -> Option<ExitState> {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).ok()?;
    Some(ExitState {
        running: v["Running"] == true || v["Restarting"] == true,
        exit_code: v["ExitCode"].as_i64()?,
        oom_killed: v["OOMKilled"] == true,
        finished_at: v["FinishedAt"].as_str().and_then(|t| humantime::parse_rfc3339_weak(t).ok()),
    })
}

impl ExitState {
    /// This state is the one the die at `at` left (not a later run's).
    pub fn is_of(&self, at: SystemTime) -> bool {
        let near = |f: SystemTime| {
            let gap = f.duration_since(at).or_else(|_| at.duration_since(f)).unwrap_or_default();
            gap <= std::time::Duration::from_secs(2)
        };
        !self.running && self.finished_at.is_some_and(near)
    }
}

/// Keeps the events of this host's sandboxes and maps docker's actions to
/// sbx's: create→created, start→started, stop→stopped, pause→paused,
/// unpause→resumed, die→died, destroy→destroyed; `oom` marks the next die
/// of that container as OOM-killed. Bounded: a container's memory goes with
/// its destroy.
pub struct EventMapper {
    key: Vec<u8>,
    /// Containers with an `oom` since their last start.
    oom: HashSet<String>,
    /// Containers whose labels carry `exitCode` (seen on an event that has
    /// no exit code of docker's own): their die's attribute is the label's.
    forged_exit: HashSet<String>,
}

impl EventMapper {
    pub fn new(key: &[u8]) -> Self {
        EventMapper { key: key.to_vec(), oom: HashSet::new(), forged_exit: HashSet::new() }
    }

    /// The sandbox event `e` means, or None: not a sandbox of this host (no
    /// valid token: another host's, a gate, a probe, a forgery) or not a
    /// lifecycle action. A die's exit code is the attribute's (None when it
    /// is known to be a label); the caller may correct it from the engine.
    pub fn map(&mut self, e: &DockerEvent) -> Option<Event> {
        let name = e.attributes.get("name")?;
        let raw = RawContainer { name: name.clone(), labels: e.attributes.clone(), ..Default::default() };
        if crate::spec::parse_id(name).is_err() || !raw.is_sbx(&self.key) {
            return None;
        }
        // Doctor's probe: a real sandbox for a moment, but not the operator's.
        // Its session is one no `--session` may name, and the token covers
        // it: an image's label can no longer hide a sandbox from events.
        if e.attributes.get(record::SESSION).is_some_and(|s| s == record::PROBE_SESSION) {
            return None;
        }
        let c = &e.container;
        // Of the actions asked for, only die has an exit code of docker's own
        // (exec_die has one too, but is never asked for).
        if e.action != "die" && ACTIONS.contains(&e.action.as_str()) && e.attributes.contains_key("exitCode") {
            self.forged_exit.insert(c.clone());
        }
        let kind = match e.action.as_str() {
            "create" => Kind::Created,
            "start" => {
                self.oom.remove(c);
                Kind::Started
            }
            "stop" => Kind::Stopped,
            "pause" => Kind::Paused,
            "unpause" => Kind::Resumed,
            "oom" => {
                self.oom.insert(c.clone());
                return None;
            }
            "die" => Kind::Died,
            "destroy" => {
                self.oom.remove(c);
                self.forged_exit.remove(c);
                Kind::Destroyed
            }
            _ => return None,
        };
        let mut ev = Event::new(e.at, name, kind);
        ev.session = e.attributes.get(record::SESSION).filter(|s| !s.is_empty()).cloned();
        if kind == Kind::Died {
            ev.exit_code = if self.forged_exit.contains(c) {
                None
            } else {
                e.attributes.get("exitCode").and_then(|x| x.parse().ok())
            };
            ev.oom_killed = Some(self.oom.remove(c));
        }
        Some(ev)
    }
}

#[cfg(test)]
mod tests;

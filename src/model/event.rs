//! One lifecycle event of a sandbox, as `sbx events` prints it: from the
//! engine (`docker events`, mapped by `docker::parse::events`) or from sbx's
//! own journal (`host::journal`: what only sbx knows, a route revoked, a TTL
//! expired). The JSON field names are a stable interface (README "Events").

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// What happened. Lowercase in JSON and text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Created,
    Started,
    Stopped,
    Paused,
    Resumed,
    /// A route (or `egress`) cut by `sbx revoke`.
    Revoked,
    /// Its TTL ran out; the watchdog or `sbx gc` is removing it.
    Expired,
    Destroyed,
    /// Its main process ended (exit code, OOM-killed).
    Died,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::Created,
        Kind::Started,
        Kind::Stopped,
        Kind::Paused,
        Kind::Resumed,
        Kind::Revoked,
        Kind::Expired,
        Kind::Destroyed,
        Kind::Died,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Created => "created",
            Kind::Started => "started",
            Kind::Stopped => "stopped",
            Kind::Paused => "paused",
            Kind::Resumed => "resumed",
            Kind::Revoked => "revoked",
            Kind::Expired => "expired",
            Kind::Destroyed => "destroyed",
            Kind::Died => "died",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// One event. `time` is RFC 3339 UTC with milliseconds; the optional fields
/// are absent from JSON when they do not apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub time: String,
    /// The sandbox id (`sbx-<12 hex>`, its container's name).
    pub id: String,
    pub event: Kind,
    /// `died`: the main process's exit code (absent when it cannot be
    /// trusted: see `docker::parse::events`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// `died`: whether the kernel's OOM killer ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_killed: Option<bool>,
    /// `revoked`: the route kind cut (`egress` for the egress gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// The sandbox's session key, when the event's source knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl Event {
    pub fn new(at: SystemTime, id: &str, event: Kind) -> Self {
        Event {
            time: humantime::format_rfc3339_millis(at).to_string(),
            id: id.to_string(),
            event,
            exit_code: None,
            oom_killed: None,
            route: None,
            session: None,
        }
    }

    /// When it happened (the epoch when `time` does not parse).
    pub fn at(&self) -> SystemTime {
        humantime::parse_rfc3339(&self.time).unwrap_or(UNIX_EPOCH)
    }

    /// The text line's DETAIL column: what the event's optional fields say.
    pub fn detail(&self) -> String {
        let mut parts = Vec::new();
        if let Some(r) = &self.route {
            parts.push(format!("route={r}"));
        }
        if let Some(c) = self.exit_code {
            parts.push(format!("exit_code={c}"));
        }
        if self.oom_killed == Some(true) {
            parts.push("oom_killed".to_string());
        }
        if let Some(s) = &self.session {
            parts.push(format!("session={s}"));
        }
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(" ")
        }
    }
}

/// A time from docker's `timeNano` (nanoseconds since the epoch).
pub fn from_nanos(nanos: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(nanos)
}

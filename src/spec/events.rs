//! `sbx events`'s input: the time window and which sandboxes and events.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::model::event::Kind;
use crate::model::invalid::Invalid;

/// What `sbx events` was asked for, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventQuery {
    pub since: Option<SystemTime>,
    pub until: Option<SystemTime>,
    /// Only these sandboxes (all of this host's when empty).
    pub ids: Vec<String>,
    /// End after printing the first event of one of these kinds.
    pub until_event: Vec<Kind>,
}

impl EventQuery {
    pub fn wants(&self, id: &str) -> bool {
        self.ids.is_empty() || self.ids.iter().any(|i| i == id)
    }
}

/// A point in time for `--since`/`--until`: RFC 3339 (`2026-11-30T10:00:00Z`),
/// a duration meaning that long before `now` (`10m`, as docker reads it) or
/// after it (`+5m`: a deadline for a script), or unix seconds (`1796023803`,
/// `1796023803.5`).
pub fn parse_time(what: &'static str, s: &str, now: SystemTime) -> Result<SystemTime, Invalid> {
    let t = s.trim();
    if let Ok(at) = humantime::parse_rfc3339_weak(t) {
        return Ok(at);
    }
    if let Some(ahead) = t.strip_prefix('+').and_then(|d| humantime::parse_duration(d).ok()) {
        return now.checked_add(ahead).ok_or_else(|| Invalid::new(what, s, "that is too far ahead"));
    }
    if let Ok(ago) = humantime::parse_duration(t) {
        return now.checked_sub(ago).ok_or_else(|| Invalid::new(what, s, "that is before 1970"));
    }
    let unix = (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') && t.matches('.').count() <= 1)
        .then(|| t.parse::<f64>().ok())
        .flatten()
        .filter(|f| f.is_finite() && *f < 1e11);
    match unix {
        Some(secs) => Ok(UNIX_EPOCH + Duration::from_secs_f64(secs)),
        None => Err(Invalid::new(what, s, "it is not a time").hint(
            "give an RFC 3339 time (2026-11-30T10:00:00Z), a duration ago (10m, 2h) or ahead (+5m), or unix seconds (1796023803)",
        )),
    }
}

pub fn parse_event_kind(s: &str) -> Result<Kind, Invalid> {
    Kind::parse(s).ok_or_else(|| {
        let all: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        Invalid::new("event", s, format!("it must be one of {}", all.join(", ")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_three_forms() {
        let now = UNIX_EPOCH + Duration::from_secs(1_796_023_803);
        let t = |s| parse_time("--since", s, now);
        assert_eq!(t("10m").unwrap(), now - Duration::from_secs(600));
        assert_eq!(t("+10m").unwrap(), now + Duration::from_secs(600));
        assert_eq!(t("1796023803").unwrap(), now);
        assert_eq!(t("1796023803.5").unwrap(), now + Duration::from_millis(500));
        assert_eq!(t("2026-11-30T07:30:03Z").unwrap(), now);
        assert_eq!(t("2026-11-30T07:30:03.000+00:00").unwrap(), now);
        for bad in ["", "soon", "+", "+soon", "-5", "1.2.3", "1e5", "99999999999999", "2026-13-01T00:00:00Z"] {
            let e = t(bad).unwrap_err();
            assert_eq!((e.what, e.hint.is_some()), ("--since", true), "{bad}");
        }
        assert_eq!(parse_event_kind("died").unwrap(), Kind::Died);
        assert!(parse_event_kind("die").unwrap_err().reason.contains("created, started"));
    }
}

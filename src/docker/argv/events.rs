//! `docker events` for `sbx events`, and the look-up of a die's exit state.

use std::ffi::OsString;
use std::time::{SystemTime, UNIX_EPOCH};

use super::os;
use crate::docker::parse::ACTIONS;
use crate::model::record;

/// docker's own form of a time: seconds since the epoch with nanoseconds,
/// so no time zone or format question reaches the engine.
fn unix(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    format!("{}.{:09}", d.as_secs(), d.subsec_nanos())
}

/// Attributes an image can set and sbx only tests (`exitCode` on a non-die
/// event, the probe label) are cut to this many bytes.
const IMAGE_VALUE: usize = 64;

/// One event as a JSON object of the shape `{{json .}}` prints, but with
/// only the attributes sbx reads: docker puts every label in the
/// attributes, the image's too, and an image with a megabyte of labels made
/// each event of its sandbox a line too long to read, hiding its death from
/// `sbx events --until-event died`. An absent attribute comes as "" (see
/// `parse::parse_event`).
pub fn event_format() -> String {
    let mut attrs: Vec<String> = record::ALL
        .iter()
        .chain(&["name"])
        .map(|k| format!("{k:?}:{{{{json (index .Actor.Attributes {k:?})}}}}"))
        .collect();
    let k = "exitCode";
    attrs.push(format!("{k:?}:{{{{json (truncate (index .Actor.Attributes {k:?}) {IMAGE_VALUE})}}}}"));
    format!(
        "{{\"Type\":{{{{json .Type}}}},\"Action\":{{{{json .Action}}}},\"Actor\":{{\"ID\":{{{{json .Actor.ID}}}},\"Attributes\":{{{}}}}},\"timeNano\":{{{{json .TimeNano}}}}}}",
        attrs.join(",")
    )
}

/// Container lifecycle events of containers labelled `sbx.managed` (a
/// cheap pre-filter: the ownership token decides, see `parse::EventMapper`),
/// one JSON object per line, from `since` (else now) until `until` (else
/// until killed).
pub fn events(since: Option<SystemTime>, until: Option<SystemTime>) -> Vec<OsString> {
    let mut v = os(&["events", "--format", &event_format(), "--filter", "type=container"]);
    v.extend(os(&["--filter", &format!("label={}", record::MANAGED)]));
    for a in ACTIONS {
        v.extend(os(&["--filter", &format!("event={a}")]));
    }
    if let Some(t) = since {
        v.extend(os(&["--since", &unix(t)]));
    }
    if let Some(t) = until {
        v.extend(os(&["--until", &unix(t)]));
    }
    v
}

/// The engine's record of a container's last exit (`parse::container_state`).
pub fn exit_state(container: &str) -> Vec<OsString> {
    os(&["container", "inspect", "--format", "{{json .State}}", "--", container])
}

#[cfg(test)]
mod tests {
    use super::super::strs;
    use super::*;

    #[test]
    fn events_argv() {
        let since = UNIX_EPOCH + std::time::Duration::from_millis(1_796_023_803_152);
        let v = strs(events(Some(since), None));
        assert_eq!(
            v[..7],
            ["events", "--format", &event_format(), "--filter", "type=container", "--filter", "label=sbx.managed"]
        );
        assert!(v.contains(&"event=oom".to_string()) && v.contains(&"event=unpause".to_string()));
        assert_eq!(v[v.len() - 2..], ["--since", "1796023803.152000000"]);
        assert!(!strs(events(None, None)).iter().any(|a| a == "--since" || a == "--until"));
        let f = event_format();
        assert!(f.contains(r#""sbx.owner":{{json (index .Actor.Attributes "sbx.owner")}}"#), "{f}");
        assert!(f.contains(r#""exitCode":{{json (truncate (index .Actor.Attributes "exitCode") 64)}}"#), "{f}");
        assert!(f.starts_with(r#"{"Type":{{json .Type}},"Action":{{json .Action}},"Actor":{"ID":"#), "{f}");
        assert!(f.ends_with(r#"},"timeNano":{{json .TimeNano}}}"#), "{f}");
        assert!(!f.contains("{{json .Actor.Attributes}}"), "never every label");
        assert_eq!(strs(exit_state("abc")), ["container", "inspect", "--format", "{{json .State}}", "--", "abc"]);
    }
}

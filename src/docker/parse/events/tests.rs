//! The event mapper on `docker events --format '{{json .}}'` lines captured
//! from this engine (20.10): a sandbox made by sbx from an image carrying
//! `LABEL exitCode=0` (paused, resumed, `docker stop`, started, died,
//! destroyed), then one OOM-killed and destroyed. `KEY` is the throwaway
//! state dir's ownership key of that capture. Captured without sbx's
//! `--filter event=...`, so exec and kill events are in it too.

use super::*;
use crate::model::event::Kind;

pub const CAPTURED: &str = include_str!("captured.jsonl");
pub const KEY: &str = "a987585584713b262ff7c8d06529413be1e2e6df5d207236000869e6b0312661";
pub const FIRST: &str = "sbx-74b43358fcd1";
pub const SECOND: &str = "sbx-e328e88742e0";

pub fn key() -> Vec<u8> {
    (0..32).map(|i| u8::from_str_radix(&KEY[2 * i..2 * i + 2], 16).unwrap()).collect()
}

fn mapped(key: &[u8], lines: &str) -> Vec<Event> {
    let mut m = EventMapper::new(key);
    lines.lines().filter_map(|l| m.map(&parse_event(l.as_bytes()).expect(l))).collect()
}

/// As `docker events --filter event=...` (`ACTIONS`) would have given them.
fn asked(lines: &str) -> String {
    lines
        .lines()
        .filter(|l| ACTIONS.iter().any(|a| l.contains(&format!("\"Action\":\"{a}\""))))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn captured_lifecycle_maps_to_sandbox_events() {
    let got = mapped(&key(), &asked(CAPTURED));
    assert_eq!(got, mapped(&key(), CAPTURED), "the unasked actions change nothing");
    let brief: Vec<(&str, Kind, Option<i64>, Option<bool>)> =
        got.iter().map(|e| (e.id.as_str(), e.event, e.exit_code, e.oom_killed)).collect();
    assert_eq!(
        brief,
        vec![
            (FIRST, Kind::Created, None, None),
            (FIRST, Kind::Started, None, None),
            (FIRST, Kind::Paused, None, None),
            (FIRST, Kind::Resumed, None, None),
            // The image's `exitCode` label replaced docker's: not trusted.
            (FIRST, Kind::Died, None, Some(false)),
            (FIRST, Kind::Stopped, None, None),
            (FIRST, Kind::Started, None, None),
            (FIRST, Kind::Died, None, Some(false)),
            (FIRST, Kind::Destroyed, None, None),
            (SECOND, Kind::Created, None, None),
            (SECOND, Kind::Started, None, None),
            (SECOND, Kind::Died, Some(137), Some(true)),
            (SECOND, Kind::Destroyed, None, None),
        ]
    );
    assert_eq!(got[0].time, "2026-11-30T07:36:53.609Z");
    assert_eq!(got[0].session.as_deref(), Some(FIRST));
}

#[test]
fn only_this_hosts_sandboxes_with_a_valid_token() {
    assert_eq!(mapped(&[7u8; 32], CAPTURED), vec![], "another host's key");
    let line = CAPTURED.lines().next().unwrap();
    let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
    let attrs = |v: &mut serde_json::Value| v["Actor"]["Attributes"].as_object_mut().unwrap().clone();
    let forge = |f: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        let mut w = v.clone();
        let mut a = attrs(&mut w);
        f(&mut a);
        w["Actor"]["Attributes"] = a.into();
        mapped(&key(), &w.to_string())
    };
    assert_eq!(forge(&|_| {}).len(), 1, "the captured line itself");
    // Copied labels on another container name: the token is over the id.
    assert_eq!(forge(&|a| drop(a.insert("name".into(), "sbx-0000000000aa".into()))), vec![]);
    assert_eq!(
        forge(&|a| {
            a.insert("name".into(), "sbx-0000000000aa".into());
            a.insert("sbx.id".into(), "sbx-0000000000aa".into());
        }),
        vec![]
    );
    assert_eq!(forge(&|a| drop(a.insert("sbx.owner".into(), "0".repeat(32).into()))), vec![]);
    assert_eq!(forge(&|a| drop(a.insert("sbx.session".into(), "other".into()))), vec![], "a changed sbx label");
    assert_eq!(forge(&|a| drop(a.insert("sbx.extra".into(), "1".into()))), vec![], "an sbx label sbx never writes");
    assert_eq!(forge(&|a| drop(a.remove("sbx.managed"))), vec![]);
    // A gate: `sbx.gate-of`, never `sbx.managed`.
    assert_eq!(
        forge(&|a| {
            a.remove("sbx.managed");
            a.insert("sbx.gate-of".into(), FIRST.into());
        }),
        vec![]
    );
    v["Type"] = "network".into();
    assert_eq!(parse_event(v.to_string().as_bytes()), None);
}

#[test]
fn bounded_and_malformed_lines_are_no_events() {
    assert_eq!(parse_event(b"not json"), None);
    assert_eq!(parse_event(b"{\"Type\":\"container\"}"), None);
    let mut v: serde_json::Value = serde_json::from_str(CAPTURED.lines().next().unwrap()).unwrap();
    v["Actor"]["ID"] = "../x".into();
    assert_eq!(parse_event(v.to_string().as_bytes()), None, "not a container id");
    v["Actor"]["ID"] = "ab".repeat(32).into();
    v["Actor"]["Attributes"]["big"] = "x".repeat(MAX_EVENT_LINE).into();
    assert_eq!(parse_event(v.to_string().as_bytes()), None, "over the line limit");
    // An action sbx does not map (a future engine's) is no event.
    let mut m = EventMapper::new(&key());
    let mut e = parse_event(CAPTURED.lines().next().unwrap().as_bytes()).unwrap();
    e.action = "exec_start: sh".into();
    assert_eq!(m.map(&e), None);
}

#[test]
fn a_die_is_corrected_only_by_its_own_exit_state() {
    let st = container_state(
        r#"{"Status":"exited","Running":false,"Paused":false,"Restarting":false,"OOMKilled":true,"Dead":false,"Pid":0,"ExitCode":137,"Error":"","StartedAt":"2026-11-30T07:30:06.543458218Z","FinishedAt":"2026-11-30T07:30:06.582040664Z"}"#,
    )
    .unwrap();
    assert_eq!((st.running, st.exit_code, st.oom_killed), (false, 137, true));
    let at = humantime::parse_rfc3339("2026-11-30T07:30:06.626Z").unwrap();
    assert!(st.is_of(at));
    assert!(!st.is_of(at + std::time::Duration::from_secs(60)), "a later die");
    let running = ExitState { running: true, ..st.clone() };
    assert!(!running.is_of(at), "started again since");
    assert_eq!(container_state("garbage"), None);
}

#[test]
fn doctors_probe_is_no_sandbox_of_the_operators() {
    let mut e = parse_event(CAPTURED.lines().next().unwrap().as_bytes()).unwrap();
    let reseal = |e: &mut DockerEvent| {
        let owner = crate::model::token::record_token(&key(), FIRST, &e.attributes);
        e.attributes.insert("sbx.owner".into(), owner);
    };
    e.attributes.insert("sbx.session".into(), record::PROBE_SESSION.into());
    reseal(&mut e);
    // No `--session` may name it (`spec::parse_session`), and the token covers it.
    assert_eq!(EventMapper::new(&key()).map(&e), None);
    // An image's label (any image can carry one) hides nothing.
    e.attributes.insert("sbx.session".into(), "agent-7".into());
    e.attributes.insert("sbx-probe.hash".into(), "abc".into());
    reseal(&mut e);
    assert!(EventMapper::new(&key()).map(&e).is_some());
}

/// The captured lines as sbx's own format prints them (`argv::event_format`:
/// only the attributes sbx reads, an absent one as "") map to the same events.
#[test]
fn the_narrow_format_maps_like_every_label() {
    let keys: Vec<&str> = record::ALL.iter().copied().chain(["name", "exitCode"]).collect();
    let narrow: String = CAPTURED
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let all = v["Actor"]["Attributes"].clone();
            let some: serde_json::Map<String, serde_json::Value> =
                keys.iter().map(|k| (k.to_string(), all.get(*k).cloned().unwrap_or("".into()))).collect();
            v["Actor"]["Attributes"] = some.into();
            format!("{v}\n")
        })
        .collect();
    assert_eq!(mapped(&key(), &narrow), mapped(&key(), CAPTURED));
    assert!(!mapped(&key(), &narrow).is_empty());
    let e = parse_event(narrow.lines().next().unwrap().as_bytes()).unwrap();
    assert!(e.attributes.values().all(|v| !v.is_empty()), "an absent attribute is no attribute");
}

//! `sbx events` on the fake: docker's stream (lines captured from this
//! engine, see `docker::parse::events::tests`) kept by the ownership token,
//! merged with the journal, and how the stream's end is reported.

use super::*;
use crate::model::event::{Event, Kind};

const CAPTURED: &str = include_str!("../../docker/parse/events/captured.jsonl");
/// The ownership key of the capture's throwaway state dir.
const KEY: &str = "a987585584713b262ff7c8d06529413be1e2e6df5d207236000869e6b0312661";
const FIRST: &str = "sbx-74b43358fcd1";
const SECOND: &str = "sbx-e328e88742e0";

/// A rig whose host key is the capture's, so its sandboxes are this host's.
fn captured_host() -> Rig {
    let rig = Rig::new();
    std::fs::create_dir_all(&rig.state).unwrap();
    let key: Vec<u8> = (0..32).map(|i| u8::from_str_radix(&KEY[2 * i..2 * i + 2], 16).unwrap()).collect();
    std::fs::write(rig.state.join("key"), key).unwrap();
    rig
}

/// The capture as docker gives it to sbx's `--filter event=...`.
fn stream() -> String {
    let asked = crate::docker::parse::ACTIONS;
    CAPTURED
        .lines()
        .filter(|l| asked.iter().any(|a| l.contains(&format!("\"Action\":\"{a}\""))))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn events_of(stdout: &str) -> Vec<(String, Kind)> {
    stdout.lines().map(|l| serde_json::from_str::<Event>(l).unwrap()).map(|e| (e.id, e.event)).collect()
}

#[test]
fn an_engine_that_ends_the_stream_is_an_error_after_what_it_sent() {
    let rig = captured_host();
    rig.fake.push(Output { status: 1, stdout: stream().into_bytes(), stderr: b"unexpected EOF".to_vec() });
    // Each die asks the engine for its exit state; these containers are gone.
    for _ in 0..3 {
        rig.fake.push(Output::fail(1, "Error: No such container"));
    }
    let r = rig.sbx(&["--json", "events"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("following the engine's events") && r.stderr.contains("unexpected EOF"), "{}", r.stderr);
    let got = events_of(&r.stdout);
    assert_eq!(got.len(), 13, "{}", r.stdout);
    assert_eq!(got[12], (SECOND.to_string(), Kind::Destroyed));
    let calls = rig.fake.invocations();
    assert_eq!(calls[0].mode, crate::docker::ModeKind::Piped);
    assert_eq!(calls[0].args[..2], ["events", "--format"]);
    assert_eq!(calls[1].args[..3], ["container", "inspect", "--format"]);
}

#[test]
fn a_replay_merges_the_journal_in_time_order_and_filters_ids() {
    let rig = captured_host();
    let at = |s: &str| humantime::parse_rfc3339(s).unwrap();
    let mut revoked = Event::new(at("2026-11-30T07:36:54.000Z"), FIRST, Kind::Revoked);
    revoked.route = Some("inference".into());
    crate::host::journal::append(&rig.state, &revoked).unwrap();
    let expired = Event::new(at("2026-11-30T07:36:59.480Z"), SECOND, Kind::Expired);
    crate::host::journal::append(&rig.state, &expired).unwrap();
    let late = Event::new(at("2026-11-30T08:00:00Z"), SECOND, Kind::Expired);
    crate::host::journal::append(&rig.state, &late).unwrap();
    // `--until` passed: docker ends the replay with 0.
    rig.fake.push(Output::ok(&stream()));
    rig.fake.push(Output::ok(
        r#"{"Running":false,"Restarting":false,"OOMKilled":true,"ExitCode":137,"FinishedAt":"2026-11-30T07:36:59.400Z"}"#,
    ));
    let window = ["--since", "2026-11-30T07:36:00Z", "--until", "2026-11-30T07:37:00Z"];
    let r = rig.sbx(&[&["--json", "events"], &window[..], &[SECOND]].concat());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let got: Vec<Event> = r.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<Kind> = got.iter().map(|e| e.event).collect();
    assert_eq!(kinds, [Kind::Created, Kind::Started, Kind::Died, Kind::Expired, Kind::Destroyed]);
    assert_eq!((got[2].exit_code, got[2].oom_killed), (Some(137), Some(true)));
    assert!(r.stdout.contains("\"time\":\"2026-11-30T07:36:56.780Z\""));
    let args = &rig.fake.calls()[0];
    assert!(args.windows(2).any(|w| w == ["--since", "1796024160.000000000"]), "{args:?}");
    assert!(args.windows(2).any(|w| w == ["--until", "1796024220.000000000"]), "{args:?}");

    // All sandboxes, as text: the revoke sits between started and paused.
    rig.fake.push(Output::ok(&stream()));
    for _ in 0..3 {
        rig.fake.push(Output::fail(1, "Error: No such container"));
    }
    let r = rig.sbx(&[&["events"], &window[..]].concat());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 15, "{}", r.stdout);
    assert_eq!(lines[2], format!("2026-11-30T07:36:54.000Z  {FIRST}  revoked    route=inference"));
    assert!(lines[3].contains("paused"));
    assert!(lines.iter().any(|l| l.contains("died       exit_code=137 oom_killed session=")), "{}", r.stdout);
}

#[test]
fn bad_input_is_refused_before_docker() {
    let rig = captured_host();
    for args in [
        &["events", "--since", "soon"][..],
        &["events", "--until=-3"],
        &["events", "--since", "1h", "--until", "2h"],
        &["events", "--until-event", "die"],
        &["events", "not-an-id"],
    ] {
        let e = rig.refused(args);
        assert!(e.contains("sbx: error: invalid"), "{args:?}: {e}");
    }
}

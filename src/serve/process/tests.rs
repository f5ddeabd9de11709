use base64::Engine;
use bytes::BytesMut;
use serde_json::json;

use super::input::{next_envelope, parse_input, parse_selector, parse_size, parse_stream_msg, Selector, StreamMsg};
use super::wire::envelope;
use super::*;

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[test]
fn input_requests_name_a_pid_or_tag_and_carry_bounded_bytes() {
    assert_eq!(parse_selector(&json!({"pid": 42})), Ok(Selector::Pid(42)));
    assert_eq!(parse_selector(&json!({"tag": "web"})), Ok(Selector::Tag("web".into())));
    assert!(parse_selector(&json!({"pid": -1})).is_err());
    assert!(parse_selector(&json!({"pid": 1u64 << 33})).is_err());
    assert!(parse_selector(&json!({})).is_err());
    assert_eq!(parse_input(&json!({"stdin": b64(b"\x1b[A\0\xff")})).unwrap(), b"\x1b[A\0\xff");
    assert_eq!(parse_input(&json!({"pty": b64(b"ls\r")})).unwrap(), b"ls\r");
    assert!(parse_input(&json!({"stdin": "not base64!"})).is_err());
    assert!(parse_input(&json!({})).is_err());
    let max = parse_input(&json!({"stdin": b64(&vec![7u8; input::MAX_INPUT])})).unwrap();
    assert_eq!(max.len(), input::MAX_INPUT);
    let e = parse_input(&json!({"stdin": b64(&vec![7u8; input::MAX_INPUT + 1])})).unwrap_err();
    assert!(e.contains("over 256 KiB"), "{e}");
    assert_eq!(parse_size(&json!({"size": {"cols": 100, "rows": 30}})), Ok((100, 30)));
    for bad in [json!({"size": {"cols": 0, "rows": 30}}), json!({"size": {"cols": 80, "rows": 1001}}), json!({})] {
        assert!(parse_size(&bad).is_err(), "{bad}");
    }
}

#[test]
fn a_stream_input_is_read_envelope_by_envelope() {
    let start = envelope(0, &json!({"start": {"process": {"pid": 7}}}));
    let data = envelope(0, &json!({"data": {"input": {"stdin": b64(b"hi")}}}));
    let keep = envelope(0, &json!({"keepalive": {}}));
    let mut all = BytesMut::new();
    for e in [&start, &data, &keep] {
        all.extend_from_slice(e);
    }
    // Arriving a byte at a time, each message is whole or not yet there.
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    for b in all.iter() {
        buf.extend_from_slice(&[*b]);
        while let Some(m) = next_envelope(&mut buf, 1 << 20).unwrap() {
            got.push(parse_stream_msg(&m).unwrap());
        }
    }
    assert_eq!(got, [StreamMsg::Start(Selector::Pid(7)), StreamMsg::Data(b"hi".to_vec()), StreamMsg::Keepalive]);
    assert!(buf.is_empty());
    // Over the cap, compressed, not JSON, an end-stream from the client: refused.
    let mut big = BytesMut::from(&b"\0\x01\0\0\0"[..]);
    assert!(next_envelope(&mut big, 1000).unwrap_err().contains("over"));
    assert!(next_envelope(&mut BytesMut::from(&b"\x01\0\0\0\0"[..]), 1000).is_err());
    assert!(next_envelope(&mut BytesMut::from(&b"\0\0\0\0\x01x"[..]), 1000).is_err());
    assert!(next_envelope(&mut BytesMut::from(&envelope(2, &json!({}))[..]), 1000).is_err());
    assert!(parse_stream_msg(&json!({"other": 1})).is_err());
}

#[test]
fn a_command_is_found_only_in_its_sandbox_and_only_while_it_runs() {
    let procs = Procs::default();
    let (tx, _rx) = tokio::sync::mpsc::channel(4);
    let (p, input) = Proc::new("sbx-aaaaaaaaaaaa", json!({"pid": 0, "tag": "t"}), true, false, tx);
    assert!(procs.get("sbx-aaaaaaaaaaaa", 5).is_none(), "not before its pid");
    assert!(p.started(&procs, 5));
    assert!(procs.get("sbx-aaaaaaaaaaaa", 5).is_some());
    // A second pid frame is not another command.
    assert!(p.started(&procs, 6));
    assert!(procs.get("sbx-aaaaaaaaaaaa", 6).is_none());
    assert_eq!(p.pid(), 5);
    assert!(procs.get("sbx-bbbbbbbbbbbb", 5).is_none(), "another sandbox's pid");
    assert_eq!(procs.by_tag("sbx-aaaaaaaaaaaa", "t").map(|p| p.pid()), Some(5));
    assert_eq!(procs.infos("sbx-aaaaaaaaaaaa"), [json!({"pid": 5, "tag": "t"})]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // Input is bounded: past INPUT_BUFFER unread messages a sender is told so.
    for _ in 0..INPUT_BUFFER {
        rt.block_on(p.send(RunInput::Data(vec![1]), std::time::Duration::ZERO)).unwrap();
    }
    let full = rt.block_on(p.send(RunInput::Close, std::time::Duration::from_millis(30)));
    assert_eq!(full, Err(InputError::Full));
    drop(input);
    assert_eq!(rt.block_on(p.send(RunInput::Close, std::time::Duration::ZERO)), Err(InputError::Ended));
    p.finished(&procs);
    assert!(procs.get("sbx-aaaaaaaaaaaa", 5).is_none());
    assert!(procs.infos("sbx-aaaaaaaaaaaa").is_empty());
    // Without stdin: true there is nowhere for input to go.
    let (tx, _rx) = tokio::sync::mpsc::channel(4);
    let (q, _held) = Proc::new("sbx-aaaaaaaaaaaa", json!({}), false, false, tx);
    assert_eq!(rt.block_on(q.send(RunInput::Close, std::time::Duration::ZERO)), Err(InputError::NoInput));
}

#[test]
fn events_fan_out_and_the_last_stream_gone_is_told() {
    let procs = Procs::default();
    let (tx, mut first) = tokio::sync::mpsc::channel(4);
    let (p, _) = Proc::new("sbx-aaaaaaaaaaaa", json!({}), false, false, tx);
    assert!(p.started(&procs, 9));
    let (tx2, mut second) = tokio::sync::mpsc::channel(4);
    p.watch(tx2, bytes::Bytes::from_static(b"start")).unwrap();
    assert!(p.broadcast(&bytes::Bytes::from_static(b"out")));
    assert_eq!(first.try_recv().unwrap(), "out");
    assert_eq!(second.try_recv().unwrap(), "start");
    assert_eq!(second.try_recv().unwrap(), "out");
    // The Start's client goes: the Connect's stream keeps the command.
    drop(first);
    assert!(!p.unwatch());
    assert!(p.broadcast(&bytes::Bytes::from_static(b"more")));
    assert_eq!(second.try_recv().unwrap(), "more");
    let mut held = Vec::new();
    for _ in 1..MAX_WATCHERS {
        let (t, r) = tokio::sync::mpsc::channel(1);
        held.push(r);
        p.watch(t, bytes::Bytes::new()).unwrap();
    }
    let (t, _r) = tokio::sync::mpsc::channel(1);
    assert_eq!(p.watch(t, bytes::Bytes::new()), Err("full"));
    // A stream whose client went counts no more: the next Connect gets in.
    held.pop();
    let (t, _r2) = tokio::sync::mpsc::channel(1);
    p.watch(t, bytes::Bytes::new()).unwrap();
    for _ in 0..MAX_WATCHERS {
        assert!(!p.unwatch());
    }
    // The last one goes before the end: said, for the cap on unwatched ones.
    drop(second);
    assert!(p.unwatch());
    // Once ended, nothing to count and no new stream.
    let (tx, _keep) = tokio::sync::mpsc::channel(4);
    let (q, _) = Proc::new("sbx-aaaaaaaaaaaa", json!({}), false, false, tx);
    assert!(q.started(&procs, 10));
    q.finished(&procs);
    assert!(!q.unwatch());
    assert_eq!(q.watch(tokio::sync::mpsc::channel(1).0, bytes::Bytes::new()), Err("ended"));
    // Every stream gone before the pid came: started says so.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let (r, _) = Proc::new("sbx-aaaaaaaaaaaa", json!({}), false, false, tx);
    drop(rx);
    assert!(!r.unwatch(), "no pid to kill yet");
    assert!(!r.started(&procs, 11));
}

#[test]
fn at_most_max_unwatched_commands_run_with_nobody_watching() {
    let procs = Procs::default();
    let id = "sbx-aaaaaaaaaaaa";
    let mut keep = Vec::new();
    for pid in 1..=MAX_UNWATCHED as u32 + 1 {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let (p, _) = Proc::new(id, json!({}), false, false, tx);
        assert!(p.started(&procs, pid));
        assert!(!procs.too_many_unwatched(id), "watched ones do not count");
        drop(rx);
        assert!(p.unwatch());
        keep.push(p);
    }
    assert!(procs.too_many_unwatched(id), "one over the cap");
    assert!(!procs.too_many_unwatched("sbx-bbbbbbbbbbbb"), "counted per sandbox");
    // One watched again (a Connect), or ended: back under the cap.
    keep[0].watch(tokio::sync::mpsc::channel(1).0, bytes::Bytes::new()).unwrap();
    assert!(!procs.too_many_unwatched(id));
    assert!(keep[0].unwatch());
    assert!(procs.too_many_unwatched(id));
    keep[1].finished(&procs);
    assert!(!procs.too_many_unwatched(id));
}

use serde_json::{json, Value};

use super::output::{stream_fields, whole_chars, Capped, Encoding};
use super::rpc::{answer, parse, Message, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR};
use super::*;
use crate::sandbox::testing::{Rig, ID};

fn args(templates: &[&str]) -> McpArgs {
    McpArgs {
        templates: templates.iter().map(|s| s.to_string()).collect(),
        allow_internet: false,
        defaults: Default::default(),
    }
}

fn no_watchdog(_: &str, _: &std::path::Path) -> Result<()> {
    Ok(())
}

fn no_refill(_: &crate::host::pool::Pool) {}

fn hooks() -> Hooks<'static> {
    Hooks { watchdog: &no_watchdog, refill: &no_refill }
}

fn ask(s: &Session, line: &str) -> Value {
    match parse(line.as_bytes()) {
        Ok(m) => answer(s, m).expect("a request is answered"),
        Err(e) => e,
    }
}

#[test]
fn the_handshake_and_the_protocol_errors_need_no_docker_call() {
    let rig = Rig::new();
    let driver = rig.driver();
    let s = Session::new(&args(&[]), None, &driver, hooks()).unwrap();
    let init = ask(&s, r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#);
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    let newer = ask(&s, r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2999-01-01"}}"#);
    assert_eq!(newer["result"]["protocolVersion"], "2025-11-25", "an unknown version gets our newest");
    let tools = ask(&s, r#"{"jsonrpc":"2.0","id":"t","method":"tools/list"}"#);
    let names: Vec<&str> =
        tools["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, catalog::NAMES);
    for t in tools["result"]["tools"].as_array().unwrap() {
        assert!(t["description"].as_str().unwrap().contains("Cannot"), "{t}");
        assert_eq!(t["inputSchema"]["type"], "object");
    }
    assert_eq!(ask(&s, "not json")["error"]["code"], PARSE_ERROR);
    assert_eq!(ask(&s, "[]")["error"]["code"], INVALID_REQUEST);
    assert_eq!(ask(&s, r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#)["error"]["code"], INVALID_REQUEST);
    assert_eq!(ask(&s, r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#)["error"]["code"], INVALID_REQUEST);
    assert_eq!(ask(&s, r#"{"jsonrpc":"2.0","id":4,"method":"server/discover"}"#)["error"]["code"], METHOD_NOT_FOUND);
    let unknown = ask(&s, r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"rm_rf"}}"#);
    assert_eq!(unknown["error"]["code"], INVALID_PARAMS);
    assert_eq!(
        parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap(),
        Message::Notification { method: "notifications/initialized".into() }
    );
    assert_eq!(rig.fake.remaining(), 0);
    assert!(rig.fake.calls().is_empty(), "no docker call: {:?}", rig.fake.calls());
}

#[test]
fn arguments_and_foreign_sandboxes_are_refused_before_any_docker_call() {
    let rig = Rig::new();
    let driver = rig.driver();
    let s = Session::new(&args(&[]), None, &driver, hooks()).unwrap();
    let call = |name: &str, a: Value| tools::call(&s, name, &a).unwrap_err();
    assert!(call("run_command", json!({"sandbox_id": ID, "argv": ["true"]})).contains("not a sandbox of this session"));
    assert!(call("run_command", json!({"sandbox_id": "sbx-\n1", "argv": ["true"]})).contains("invalid sandbox id"));
    assert!(call("create_sandbox", json!({"template": "nope"})).contains("no template \"nope\""));
    assert!(call("create_sandbox", json!({"template": "x", "ttl": "0s"})).contains("between 1s and 366 days"));
    assert!(call("create_sandbox", json!({"template": "x", "env": {"A=B": "1"}})).contains("--env"));
    assert!(call("create_sandbox", json!({"template": "x", "allow": ["127.0.0.0/8:80"]})).contains("127.0.0.0/8"));
    assert!(call("list_dir", json!({"sandbox_id": ID, "path": "/", "user": "root"})).contains("no argument \"user\""));
    s.made().insert(ID.into(), Made { template: "t".into(), keep: false });
    assert!(call("run_command", json!({"sandbox_id": ID})).contains("give argv"));
    assert!(call("run_command", json!({"sandbox_id": ID, "argv": ["a"], "shell": "b"})).contains("not both"));
    assert!(call("run_command", json!({"sandbox_id": ID, "argv": ["a"], "timeout_secs": 0})).contains("from 1 to"));
    assert!(call("write_file", json!({"sandbox_id": ID, "path": "/tmp/x", "base64": "%%"})).contains("not base64"));
    assert!(call("write_file", json!({"sandbox_id": ID, "path": "tmp/x", "text": ""})).contains("absolute path"));
    assert!(call("read_file", json!({"sandbox_id": ID, "path": "/tmp/x", "encoding": "hex"})).contains("encoding"));
    assert!(rig.fake.calls().is_empty(), "no docker call: {:?}", rig.fake.calls());
}

#[test]
fn a_run_goes_through_the_helper_and_its_output_is_bounded_and_inert() {
    use crate::docker::Output;
    use crate::workbench::mux;
    let rig = Rig::new();
    let driver = rig.driver();
    rig.record_container(ID, &"cd".repeat(32));
    let s = Session::new(&args(&[]), None, &driver, hooks()).unwrap();
    s.made().insert(ID.into(), Made { template: "t".into(), keep: false });
    let mut frames = Vec::new();
    mux::write_frame(&mut frames, mux::PID, b"77").unwrap();
    mux::write_frame(&mut frames, mux::STDOUT, b"a\xff\x1b[2J").unwrap();
    mux::write_frame(&mut frames, mux::STDERR, &[b'e'; 100]).unwrap();
    mux::write_frame(&mut frames, mux::EXIT, b"4").unwrap();
    rig.fake.push(Output { status: 0, stdout: frames, stderr: Vec::new() });
    let r = tools::call(&s, "run_command", &json!({"sandbox_id": ID, "shell": "x", "max_output_bytes": 10})).unwrap();
    assert_eq!(r["exit_code"], 4);
    assert_eq!(r["stdout"], "a\u{fffd}\\u{1b}", "escaped, then cut to the cap: {r}");
    assert_eq!((r["stderr"].as_str().unwrap().len(), &r["stderr_bytes"]), (10, &json!(100)));
    let call = &rig.fake.calls()[0];
    let tail: Vec<&str> = call.iter().rev().take(5).rev().map(String::as_str).collect();
    assert_eq!(tail, ["run", "--", "/bin/sh", "-c", "x"], "{call:?}");
    assert!(call.iter().any(|a| a.starts_with("SBX_EXEC=")), "tagged for the timeout's kill: {call:?}");
    assert_eq!(rig.fake.remaining(), 0);
}

#[test]
fn output_is_capped_counted_and_cut_on_whole_characters() {
    let mut c = Capped::new(4);
    c.push(b"ab");
    c.push("é€".as_bytes());
    assert_eq!((c.kept.as_slice(), c.total, c.truncated()), ("abé".as_bytes(), 7, true));
    assert_eq!(whole_chars(&"ab€".as_bytes()[..4]), b"ab");
    assert_eq!(whole_chars("abé".as_bytes()), "abé".as_bytes());
    let mut m = serde_json::Map::new();
    let notes = stream_fields("stdout", &c, Encoding::Base64, &mut m);
    assert_eq!(m["stdout"], "YWLDqQ==");
    assert!(notes[0].contains("stdout was 7 bytes"), "{notes:?}");
}

#[test]
fn an_over_long_line_is_skipped_whole() {
    let input = format!("{}\n{{}}\n", "x".repeat(100));
    let mut r = std::io::BufReader::new(input.as_bytes());
    assert_eq!(read_line(&mut r, 10).unwrap(), Some(Err(101)));
    assert_eq!(read_line(&mut r, 10).unwrap(), Some(Ok(b"{}\n".to_vec())));
    assert_eq!(read_line(&mut r, 10).unwrap(), None);
}

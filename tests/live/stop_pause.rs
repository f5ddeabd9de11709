//! `sbx stop`/`start` and `pause`/`resume`: what stays (the
//! container, its id, labels, routes, a persistent /state), what starts
//! empty (/tmp), readiness again after start, the grace, the stall while
//! paused, TTL expiry and destroy in either state, wrong states, and the
//! last run's socket directory as the attacker left it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::*;

/// `sbx --json ls`'s record of `id`.
fn listed(w: &World, id: &str) -> serde_json::Value {
    let ls = json(&w.sbx(&["--json", "ls"]));
    ls.as_array().unwrap().iter().find(|r| r["id"] == id).cloned().unwrap_or_else(|| panic!("ls lacks {id}: {ls}"))
}

fn state(w: &World, id: &str) -> String {
    listed(w, id)["state"].as_str().unwrap().to_string()
}

fn connect_cmd(w: &World, id: &str) -> Command {
    let mut c = Command::new(SBX);
    c.args(w.dir_args()).args(["connect", id]);
    c
}

/// The fixture echoes each line back, line by line, over `sbx connect`.
fn round_trip(w: &World, id: &str) {
    line_by_line(connect_cmd(w, id), &["alpha", "beta"], str::to_string);
}

/// What the engine keeps of a container: its full id and labels.
fn identity(id: &str) -> String {
    docker_ok(&["inspect", "--format", "{{.Id}} {{json .Config.Labels}}", id])
}

/// A wrong-state request: exit 1 with sbx's words and hint, JSON kind
/// `wrong_state`, and the sandbox's state unchanged.
fn refused(w: &World, args: &[&str], id: &str, words: &str) {
    let before = state(w, id);
    let out = w.sbx(args);
    assert_exit(&out, 1, &format!("sbx {args:?} in state {before}"));
    assert!(stderr(&out).contains(words) && stderr(&out).contains("sbx: hint:"), "{}", stderr(&out));
    let mut j = vec!["--json"];
    j.extend_from_slice(args);
    let out = w.sbx(&j);
    assert_exit(&out, 1, "the same with --json");
    let err: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["kind"], "wrong_state", "{err}");
    assert_eq!(state(w, id), before, "{args:?} changed the state");
}

#[test]
fn stop_keeps_the_sandbox_and_start_brings_its_socket_back() {
    let w = World::new();
    let net = Network::new(true);
    let svc = Service::start(&net, &w.image);
    let session = format!("{}-s", w.case);
    let route = format!("inference:{}:8080", svc.name);
    let sb = w.create(&["--session", &session, "--persist", "--route", &route]);
    assert_success(&sb.exec(&["write", "/state/kept"]), "write to the persistent /state");
    assert_success(&sb.exec(&["write", "/tmp/scratch"]), "write to /tmp");
    let before = identity(&sb.id);
    let routes = listed(&w, &sb.id)["routes"].clone();

    let out = w.sbx(&["--json", "stop", "--grace", "1s", &sb.id]);
    assert_success(&out, "sbx stop");
    assert_eq!(json(&out), serde_json::json!({"id": sb.id, "state": "stopped", "already": false}));
    let rec = listed(&w, &sb.id);
    assert_eq!((rec["state"].as_str(), &rec["exit_code"]), (Some("stopped"), &serde_json::Value::Null), "{rec}");
    assert_eq!(json(&w.sbx(&["inspect", &sb.id]))["state"], "stopped");
    assert!(stdout(&w.sbx(&["ls"])).lines().any(|l| l.starts_with(&sb.id) && l.contains(" stopped ")));
    assert_eq!(identity(&sb.id), before, "the same container, labels and all");
    assert_eq!(rec["routes"], routes, "routes kept");
    // Idempotent, like `docker stop`.
    let again = w.sbx(&["--json", "stop", &sb.id]);
    assert_success(&again, "stop of a stopped sandbox");
    assert_eq!(json(&again)["already"], true);
    let out = w.sbx(&["exec", &sb.id, "--", "/bin/fixture", "status"]);
    assert_exit(&out, 1, "exec in a stopped sandbox");
    assert!(stderr(&out).contains(&format!("`sbx start {}`", sb.id)), "{}", stderr(&out));

    let started = Instant::now();
    let out = w.sbx(&["--json", "start", &sb.id]);
    assert_success(&out, "sbx start");
    eprintln!("start returned in {:?}", started.elapsed());
    assert_eq!(json(&out), serde_json::json!({"id": sb.id, "state": "running", "already": false}));
    // Returned once the socket was bound again: an ordinary client at once.
    round_trip(&w, &sb.id);
    assert_eq!(state(&w, &sb.id), "running");
    assert_eq!(identity(&sb.id), before);
    assert_success(&sb.exec(&["exists", "/state/kept"]), "the persistent /state is kept");
    assert_exit(&sb.exec(&["exists", "/tmp/scratch"]), 1, "/tmp starts empty");
    assert_success(&sb.exec(&["dial", &svc.addr()]), "the route reaches its service after start");
    drop(sb);
    w.assert_nothing_left();
}

/// `sbx stop` of a sandbox frozen outside sbx (`docker pause`, so no mark
/// of sbx's says so) and of one whose program had just exited: stopped,
/// the first not `already`, the second `already`, and both start again.
#[test]
fn stop_of_a_sandbox_paused_behind_sbx_s_back_or_just_exited_says_what_it_did() {
    let w = World::new();
    let frozen = w.create(&[]);
    docker_ok(&["pause", &frozen.id]);
    let out = w.sbx(&["--json", "stop", "--grace", "0s", &frozen.id]);
    assert_success(&out, "stop of a sandbox paused with docker pause");
    assert_eq!(json(&out), serde_json::json!({"id": frozen.id, "state": "stopped", "already": false}));
    assert_eq!(state(&w, &frozen.id), "stopped");
    let ended = w.create(&["--", "serve-for", "500", "3"]);
    until(Duration::from_secs(10), || state(&w, &ended.id) == "exited").expect("the program never exited");
    let out = w.sbx(&["--json", "stop", &ended.id]);
    assert_success(&out, "stop of an exited sandbox");
    assert_eq!(json(&out), serde_json::json!({"id": ended.id, "state": "stopped", "already": true}));
    for sb in [&frozen, &ended] {
        assert_success(&w.sbx(&["start", &sb.id]), "start after the stop");
        round_trip(&w, &sb.id);
    }
}

#[test]
fn ls_tells_a_stopped_sandbox_from_one_whose_program_exited_and_start_restarts_both() {
    let w = World::new();
    let ended = w.create(&["--", "serve-for", "1500", "7"]);
    let stopped = w.create(&[]);
    assert_success(&w.sbx(&["stop", "--grace", "1s", &stopped.id]), "sbx stop");
    until(Duration::from_secs(10), || state(&w, &ended.id) == "exited").expect("the program never exited");
    // `ls` is one `docker ps`, without exit codes; `inspect` has them.
    let rec = json(&w.sbx(&["inspect", &ended.id]));
    assert_eq!(rec["state"], "exited", "{rec}");
    assert_eq!((rec["exit_code"].as_i64(), rec["reason"].as_str()), (Some(7), Some("exited with code 7")), "{rec}");
    assert_eq!(state(&w, &stopped.id), "stopped");
    let rec = json(&w.sbx(&["inspect", &stopped.id]));
    assert_eq!((rec["state"].as_str(), &rec["exit_code"]), (Some("stopped"), &serde_json::Value::Null), "{rec}");
    assert!(rec["reason"].as_str().unwrap().contains("sbx stop"), "{rec}");

    // The exited one left its socket behind; start clears it (the fixture's
    // bind would fail on it) and waits for the new one.
    for sb in [&ended, &stopped] {
        assert_success(&w.sbx(&["start", &sb.id]), "start");
        round_trip(&w, &sb.id);
    }
    // `stop` of an exited sandbox marks it stopped (exit 0).
    until(Duration::from_secs(10), || state(&w, &ended.id) == "exited").expect("the program never exited again");
    let out = w.sbx(&["--json", "stop", &ended.id]);
    assert_success(&out, "stop of an exited sandbox");
    assert_eq!(json(&out)["already"], true);
    assert_eq!(state(&w, &ended.id), "stopped");

    // Started behind sbx's back (`docker start`): the mark names the run
    // sbx stopped, so its program's later death reads as `exited` with the
    // code, not as `stopped`, whether or not anything looked in between.
    let stubborn = w.create(&["--socket-wait", "0", "--", "stubborn"]);
    assert_success(&w.sbx(&["stop", "--grace", "0s", &stubborn.id]), "stop");
    assert_eq!(state(&w, &stubborn.id), "stopped");
    docker_ok(&["start", &stubborn.id]);
    assert_eq!(state(&w, &stubborn.id), "running");
    docker_ok(&["kill", &stubborn.id]);
    assert_eq!(state(&w, &stubborn.id), "exited");
    assert_eq!(json(&w.sbx(&["inspect", &stubborn.id]))["exit_code"], 137);
    assert_success(&w.sbx(&["start", "--socket-wait", "0", &stubborn.id]), "start");
    assert_success(&w.sbx(&["stop", "--grace", "0s", &stubborn.id]), "stop");
    docker_ok(&["start", &stubborn.id]);
    docker_ok(&["kill", &stubborn.id]);
    assert_eq!(state(&w, &stubborn.id), "exited", "never looked at while it ran");
    assert_eq!(json(&w.sbx(&["inspect", &stubborn.id]))["state"], "exited");
}

#[test]
fn stop_honours_the_grace_and_refuses_a_bad_one() {
    let w = World::new();
    // Ignores SIGTERM: only the SIGKILL after the grace ends it.
    let sb = w.create(&["--socket-wait", "0", "--", "stubborn"]);
    until(Duration::from_secs(10), || stdout(&docker(&["logs", &sb.id])).contains("stubborn")).expect("never started");
    for bad in ["soon", "1x", "25h"] {
        let out = w.sbx(&["stop", "--grace", bad, &sb.id]);
        assert_exit(&out, 2, &format!("--grace {bad}"));
        assert!(stderr(&out).contains("--grace"), "{}", stderr(&out));
    }
    assert_eq!(state(&w, &sb.id), "running", "a refused stop changed nothing");
    let started = Instant::now();
    // 1500ms rounds up to docker's whole 2 s.
    assert_success(&w.sbx(&["stop", "--grace", "1500ms", &sb.id]), "stop --grace 1500ms");
    let took = started.elapsed();
    eprintln!("stop --grace 1500ms took {took:?}");
    assert!(took >= Duration::from_millis(1900) && took < Duration::from_secs(8), "took {took:?}");
    assert_eq!(docker_ok(&["inspect", "--format", "{{.State.ExitCode}}", &sb.id]), "137", "SIGKILLed");
    assert_eq!(state(&w, &sb.id), "stopped");
}

/// A line sent over `sbx connect` while the sandbox is paused gets no
/// answer; the same connection gets it once the sandbox is resumed.
#[test]
fn pause_stalls_the_socket_until_resume_and_wrong_states_change_nothing() {
    let w = World::new();
    let sb = w.create(&[]);
    let other = w.create(&["--socket-wait", "0", "--", "sleep"]);
    assert_success(&w.sbx(&["stop", "--grace", "0", &other.id]), "stop the other");

    let out = w.sbx(&["--json", "pause", &sb.id]);
    assert_success(&out, "sbx pause");
    assert_eq!(json(&out), serde_json::json!({"id": sb.id, "state": "paused", "already": false}));
    assert_eq!(state(&w, &sb.id), "paused");
    assert_eq!(json(&w.sbx(&["inspect", &sb.id]))["state"], "paused");
    assert!(stdout(&w.sbx(&["ls"])).lines().any(|l| l.starts_with(&sb.id) && l.contains(" paused ")));

    let mut child =
        connect_cmd(&w, &sb.id).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut to = child.stdin.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let from = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in from.lines() {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    writeln!(to, "frozen").and_then(|()| to.flush()).unwrap();
    let stalled = rx.recv_timeout(Duration::from_millis(1500));
    assert!(stalled.is_err(), "a paused sandbox answered: {stalled:?}");

    // Wrong states: clear errors, exit 1, nothing changed.
    refused(&w, &["resume", &other.id], &other.id, "it is stopped");
    refused(&w, &["pause", &other.id], &other.id, "it is stopped");
    refused(&w, &["start", &sb.id], &sb.id, "it is paused");
    let out = w.sbx(&["exec", &sb.id, "--", "/bin/fixture", "status"]);
    assert_exit(&out, 1, "exec in a paused sandbox");
    assert!(stderr(&out).contains("is paused") && stderr(&out).contains("sbx resume"), "{}", stderr(&out));
    let again = w.sbx(&["--json", "pause", &sb.id]);
    assert_success(&again, "pause of a paused sandbox");
    assert_eq!(json(&again)["already"], true);

    assert_success(&w.sbx(&["resume", &sb.id]), "sbx resume");
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(line)) => assert_eq!(line, "frozen"),
        other => panic!("no answer after resume: {other:?}"),
    }
    drop(to);
    let out = child.wait_with_output().unwrap();
    assert_success(&out, "sbx connect across pause and resume");
    assert!(stderr(&out).contains(&format!("sandbox {} is paused", sb.id)), "connect says so: {}", stderr(&out));
    assert_eq!(state(&w, &sb.id), "running");
    refused(&w, &["resume", &sb.id], &sb.id, "it is running");
    refused(&w, &["start", &sb.id], &sb.id, "it is running");

    let missing = "sbx-000000000000";
    for verb in ["stop", "start", "pause", "resume"] {
        let out = w.sbx(&[verb, missing]);
        assert_exit(&out, 1, &format!("{verb} of a missing sandbox"));
        assert!(stderr(&out).contains(&format!("no sandbox {missing}")), "{}", stderr(&out));
        assert_exit(&w.sbx(&[verb, "not-an-id"]), 2, &format!("{verb} of a malformed id"));
    }

    // Destroy of a paused sandbox.
    assert_success(&w.sbx(&["pause", &sb.id]), "pause again");
    let started = Instant::now();
    assert_success(&w.sbx(&["destroy", &sb.id, &other.id]), "destroy a paused and a stopped sandbox");
    assert!(started.elapsed() < Duration::from_secs(8), "destroy took {:?}", started.elapsed());
    drop((sb, other));
    w.assert_nothing_left();
}

#[test]
fn ttl_expiry_removes_a_stopped_and_a_paused_sandbox() {
    let w = World::new();
    // The watchdogs destroy them at expiry.
    let stopped = w.create(&["--ttl", "4s"]);
    let paused = w.create(&["--ttl", "4s"]);
    assert_success(&w.sbx(&["stop", "--grace", "0", &stopped.id]), "stop");
    assert_success(&w.sbx(&["pause", &paused.id]), "pause");
    until(Duration::from_secs(20), || w.containers().is_empty()).expect("the TTL never removed them");
    drop((stopped, paused));
    w.assert_nothing_left();

    // No watchdog (a reboot killed it): ls shows them expired and gc reaps them.
    let stopped = w.create(&["--ttl", "3s"]);
    let paused = w.create(&["--ttl", "3s"]);
    assert_success(&w.sbx(&["stop", "--grace", "0", &stopped.id]), "stop");
    assert_success(&w.sbx(&["pause", &paused.id]), "pause");
    kill_watchdog_until_expired(&w, &stopped.id);
    kill_watchdog_until_expired(&w, &paused.id);
    assert!(stdout(&w.sbx(&["ls"])).lines().filter(|l| l.contains(" expired ")).count() == 2);
    assert_success(&w.sbx(&["gc"]), "gc");
    drop((stopped, paused));
    w.assert_nothing_left();
}

/// The sandbox had its socket directory to itself: what it left at the
/// socket's path is refused at start, never followed, never removed.
#[test]
fn start_refuses_what_the_sandbox_planted_at_its_socket_path() {
    let w = World::new();
    let target = w.socket_root.join("host-file");
    std::fs::write(&target, b"the host's").unwrap();
    let sb = w.create(&["--socket-wait", "0", "--", "symlink", target.to_str().unwrap()]);
    let link = w.socket_root.join(&sb.id).join("sandbox.sock");
    until(Duration::from_secs(10), || link.symlink_metadata().is_ok()).expect("the sandbox never planted its link");
    assert_success(&w.sbx(&["stop", "--grace", "0", &sb.id]), "stop");

    let out = w.sbx(&["start", &sb.id]);
    assert_exit(&out, 1, "start over a planted symlink");
    assert!(stderr(&out).contains("a symlink, not a unix socket"), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("sbx destroy {}", sb.id)), "{}", stderr(&out));
    assert_eq!(std::fs::read(&target).unwrap(), b"the host's", "the link's target is untouched");
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink(), "left for the operator to see");
    assert_eq!(state(&w, &sb.id), "stopped", "never started");
    let out = w.sbx(&["--json", "start", &sb.id]);
    let err: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["kind"], "hostile_socket", "{err}");
}

/// Where the mounts land is checked again at start: while it ran, the
/// sandbox moved a directory of a writable mount kept across a restart (an
/// operator's `--rw`; an image VOLUME is sbx's tmpfs, emptied at each start)
/// aside and put a symlink to /run in its place, so runc now follows it and
/// the operator's second `--rw` under the first lands on /run/sbx, over
/// sbx's helper.
#[test]
fn start_refuses_a_mount_the_sandbox_redirected_while_it_ran() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let img = ImageTree::new(&["v"]).for_case(&w).import();
    let base = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("redirect-{}", w.case));
    let (outer, host) = (base.join("outer"), base.join("inner"));
    std::fs::create_dir_all(outer.join("a")).unwrap();
    std::fs::create_dir_all(&host).unwrap();
    for d in [outer.clone(), outer.join("a")] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let (rw_outer, rw) = (format!("{}:/v", outer.display()), format!("{}:/v/a/sbx", host.display()));
    let label = w.case_label();
    let out = w.sbx(&["create", "--image", &img.0, "--label", &label, "--rw", &rw_outer, "--rw", &rw]);
    assert_success(&out, "create with a --rw under another");
    let sb = w.adopt(stdout(&out).trim());
    assert_success(&sb.exec(&["mv", "/v/a", "/v/b"]), "move the mount's parent aside");
    assert_success(&sb.exec(&["ln", "/run", "/v/a"]), "link /run in its place");
    assert_success(&w.sbx(&["stop", "--grace", "0", &sb.id]), "stop");

    let out = w.sbx(&["start", &sb.id]);
    assert_exit(&out, 1, "start with a mount redirected over the helper");
    let err = stderr(&out);
    assert!(err.contains("redirects /run/sbx") && err.contains("stopped again"), "{err}");
    assert_eq!(state(&w, &sb.id), "stopped");
    drop(sb);
    let _ = std::fs::remove_dir_all(&base);
}

/// Readiness after start fails closed: stopped again (its /state may be
/// all the work there is), never destroyed, and exit 1 with the reason.
#[test]
fn a_start_that_never_binds_is_stopped_again_not_destroyed() {
    let w = World::new();
    let sb = w.create(&["--socket-wait", "0", "--", "sleep"]);
    assert_success(&w.sbx(&["stop", "--grace", "0", &sb.id]), "stop");
    let out = w.sbx(&["start", "--socket-wait", "1s", &sb.id]);
    assert_exit(&out, 1, "start of a program that never binds");
    let err = stderr(&out);
    assert!(err.contains("did not bind") && err.contains("was stopped again"), "{err}");
    assert_eq!(state(&w, &sb.id), "stopped");
    assert_eq!(w.containers().len(), 1, "kept");
    // --socket-wait 0 returns once it runs.
    assert_success(&w.sbx(&["start", "--socket-wait", "0", &sb.id]), "start --socket-wait 0");
    assert_eq!(state(&w, &sb.id), "running");
}

/// The relayed channel (`--channel exec`): its socket is in a tmpfs of the
/// container's, and start's readiness goes through the helper.
#[test]
fn a_relayed_sandbox_starts_again_and_answers_through_the_helper() {
    let w = World::new();
    let sb = w.create(&["--channel", "exec"]);
    assert_success(&w.sbx(&["stop", "--grace", "0", &sb.id]), "stop");
    assert_eq!(state(&w, &sb.id), "stopped");
    assert_success(&w.sbx(&["start", &sb.id]), "start a relayed sandbox");
    round_trip(&w, &sb.id);
    // `docker exec` refuses a frozen container: connect says so at once.
    assert_success(&w.sbx(&["pause", &sb.id]), "pause");
    let out = w.sbx(&["connect", &sb.id]);
    assert_exit(&out, 1, "connect to a paused relayed sandbox");
    assert!(stderr(&out).contains(&format!("`sbx resume {}`", sb.id)), "{}", stderr(&out));
    assert_success(&w.sbx(&["resume", &sb.id]), "resume");
    round_trip(&w, &sb.id);
    let never = w.create(&["--channel", "exec", "--socket-wait", "0", "--", "sleep"]);
    assert_success(&w.sbx(&["stop", "--grace", "0", &never.id]), "stop");
    let out = w.sbx(&["start", "--socket-wait", "1s", &never.id]);
    assert_exit(&out, 1, "a relayed start that never binds");
    assert!(stderr(&out).contains("inside the sandbox") && stderr(&out).contains("stopped again"), "{}", stderr(&out));
    assert_eq!(state(&w, &never.id), "stopped");
}

fn runsc_create(w: &World, args: &[&str]) -> Output {
    let info = docker_ok(&["info", "--format", "{{json .Runtimes}}"]);
    assert!(info.contains("\"runsc\""), "the engine has no runsc (register it with `sudo .ci/register-runsc`): {info}");
    let mut full = vec!["--runtime", "runsc"];
    full.extend_from_slice(args);
    w.try_create(&full)
}

#[test]
fn under_gvisor_stop_start_pause_resume() {
    let w = World::new();
    let out = runsc_create(&w, &[]);
    assert_success(&out, "create --runtime runsc");
    let sb = w.adopt(stdout(&out).trim());
    assert_success(&sb.exec(&["write", "/tmp/scratch"]), "write to /tmp");
    assert_success(&w.sbx(&["stop", "--grace", "1s", &sb.id]), "stop");
    assert_eq!(state(&w, &sb.id), "stopped");
    assert_success(&w.sbx(&["start", &sb.id]), "start under gVisor (the gofer's mounts checked again)");
    round_trip(&w, &sb.id);
    assert_exit(&sb.exec(&["exists", "/tmp/scratch"]), 1, "/tmp starts empty");
    assert_success(&w.sbx(&["pause", &sb.id]), "pause");
    assert_eq!(state(&w, &sb.id), "paused");
    assert_success(&w.sbx(&["resume", &sb.id]), "resume");
    round_trip(&w, &sb.id);
    // runsc's `docker rm -f` of a paused container waits out 10 s; sbx thaws it first.
    assert_success(&w.sbx(&["pause", &sb.id]), "pause again");
    let started = Instant::now();
    assert_success(&w.sbx(&["destroy", &sb.id]), "destroy a paused gVisor sandbox");
    assert!(started.elapsed() < Duration::from_secs(6), "destroy took {:?}", started.elapsed());
    drop(sb);
    w.assert_nothing_left();
}

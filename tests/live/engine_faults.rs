//! `sbx doctor` on this engine and without one, and what sbx does when the
//! engine hangs: every command fails at its deadline with a clear error (a
//! stream at its start deadline), never hangs.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

#[test]
fn doctor_passes_here_and_checks_routes() {
    let w = World::new();
    let net = Network::new(true);
    let _svc = Service::start(&net, &w.image);
    let route = format!("inference:{}:8080", net.host);
    let out = w.sbx(&["doctor", "--json", "--route", &route]);
    assert_success(&out, "sbx doctor");
    let report = json(&out);
    assert_eq!(report["ok"], true, "{report}");
    let status = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["status"].as_str().unwrap().to_string())
    };
    for name in [
        "docker",
        "probe",
        "channel",
        "capabilities",
        "no-new-privileges",
        "seccomp",
        "read-only root",
        "user",
        "scratch",
        "network",
        "route inference",
    ] {
        assert_eq!(status(name).as_deref(), Some("ok"), "{name}: {report}");
    }
    assert!(status("runc").is_some());
    // The probe sandbox is gone again.
    w.assert_nothing_left();
    assert!(stdout(&w.sbx(&["ls"])).lines().count() <= 1);

    let out = w.sbx(&["doctor", "--route", &format!("inference:{}:9", net.host)]);
    assert_exit(&out, 1, "doctor with an unreachable route target");
    assert!(stdout(&out).contains("FAIL  route inference") && stdout(&out).contains("fix:"), "{}", stdout(&out));
}

#[test]
fn doctor_fails_clearly_without_a_daemon() {
    let w = World::new();
    let out = w.sbx_env(&["doctor"], &[("DOCKER_HOST", "unix:///nonexistent/docker.sock")]);
    assert_exit(&out, 1, "doctor with no daemon");
    let text = stdout(&out);
    assert!(text.contains("FAIL  docker") && text.contains("does not answer"), "{text}");
    assert!(text.contains("fix: start dockerd"), "{text}");
}

#[test]
fn a_hung_engine_gets_a_clear_error_at_the_deadline_never_a_hang() {
    let w = World::new();
    let sb = w.create(&[]);
    // (command, the docker verb that hangs, what the error names)
    let cases: [(&[&str], &str, &str); 4] = [
        (&["ls"], "ps", "docker ps"),
        (&["--json", "ls"], "ps", "docker ps"),
        (&["destroy", &sb.id], "rm", "docker rm"),
        (&["doctor"], "info", "docker info"),
    ];
    for (args, verb, names) in cases {
        let shim = Shim::new(&w, verb, false);
        let shim_path = shim.path();
        let started = Instant::now();
        let out = w.sbx_env(args, &[("SBX_DOCKER", shim_path.to_str().unwrap()), ("SBX_DOCKER_TIMEOUT", "1s")]);
        let took = started.elapsed();
        assert!(shim.reached(), "{args:?}: the shim was never asked for {verb}");
        assert_exit(&out, 1, &format!("{args:?} on an engine that hangs at {verb}"));
        // The deadline is 1 s for look-ups and 4 s for changes; generous
        // headroom, but far from the shim's forever.
        assert!(took < Duration::from_secs(30), "{args:?} took {took:?}");
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(text.contains(&format!("did not answer `{names}` within")), "{args:?}: {text}");
        if args[0] == "--json" {
            let line = stderr(&out);
            let v: serde_json::Value = serde_json::from_str(line.trim()).expect("one JSON error object");
            assert_eq!(v["error"]["kind"], "engine_timeout", "{v}");
        }
        if args[0] == "doctor" {
            assert!(stdout(&out).contains("FAIL  engine"), "{}", stdout(&out));
        }
    }
    // The engine answers again: the sandbox the hung destroy could not remove goes now.
    assert_success(&w.sbx(&["destroy", &sb.id]), "destroy once the engine answers");
    w.assert_nothing_left();
}

#[test]
fn a_stream_on_a_hung_engine_fails_at_its_start_deadline_never_hangs() {
    let w = World::new();
    let sb = w.create(&[]);
    // On a hung engine the stream's own call and the look-up beside it both
    // block (the shim passes everything else through).
    for args in [vec!["exec", sb.id.as_str(), "--", "/bin/fixture", "exists", "/"], vec!["logs", "-f", sb.id.as_str()]]
    {
        for json in [false, true] {
            let shim = Shim::blocking(&w, &["exec", "logs", "container"]);
            let mut all = if json { vec!["--json"] } else { vec![] };
            all.extend(&args);
            let started = Instant::now();
            let out = w.sbx_env(&all, &[("SBX_DOCKER", shim.path().to_str().unwrap()), ("SBX_DOCKER_TIMEOUT", "1s")]);
            let took = started.elapsed();
            assert!(shim.reached(), "{all:?}: never reached the engine");
            assert_exit(&out, 1, &format!("{all:?} on a hung engine"));
            // 1 s of grace, then the 1 s look-up deadline; far from the shim's forever.
            assert!(took < Duration::from_secs(30), "{all:?} took {took:?}");
            let verb = format!("docker {}", args[0]);
            let text = stderr(&out);
            assert!(text.contains(&format!("did not answer `{verb}` within 2s")), "{all:?}: {text}");
            if json {
                let v: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON error object");
                assert_eq!(v["error"]["kind"], "engine_timeout", "{v}");
            }
        }
    }
    // On the engine that answers, a stream longer than the 1 s grace goes on
    // after the look-up: its input comes 2.5 s in.
    let mut child = Command::new(SBX)
        .args(w.dir_args())
        .args(["exec", "-i", &sb.id, "--", "/bin/fixture", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let mut input = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut input, b"late\n").unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert_success(&out, "a long exec on a working engine");
    assert_eq!(stdout(&out), "late\n");
}

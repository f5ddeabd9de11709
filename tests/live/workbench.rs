//! The workbench commands on hardened sandboxes made from the fixture image
//! (no shell, no coreutils, no tar; read-only root, no network, no
//! capabilities, a non-root user): exec and its exit codes and streams,
//! background processes and their logs, shell, stats.

use std::process::{Command, Stdio};

use crate::support::*;

#[test]
fn exec_passes_exit_codes_and_keeps_streams_apart() {
    let w = World::new();
    let sb = w.create(&[]);
    let out = w.sbx(&["exec", &sb.id, "--", "/bin/fixture", "both"]);
    assert_exit(&out, 5, "the command's own exit code");
    assert_eq!(stdout(&out), "to stdout\n");
    assert_eq!(stderr(&out), "to stderr\n");
    assert_exit(&w.sbx(&["exec", &sb.id, "--", "/bin/fixture", "write", "/tmp/x"]), 0, "success");
    assert_exit(&w.sbx(&["exec", &sb.id, "--", "/no/such/program"]), 127, "not found");
    assert_exit(&w.sbx(&["exec", &sb.id, "--", "/tmp"]), 126, "not executable");
    // argv passes through unchanged: no shell anywhere.
    let out = w.sbx(&["exec", "-e", "A=1", "-w", "/tmp", &sb.id, "--", "/bin/fixture", "write", "$(reboot); x"]);
    assert_success(&out, "odd argv");
    assert_success(&sb.exec(&["exists", "/tmp/$(reboot); x"]), "the file with the literal name");
    assert!(stdout(&w.sbx(&["exec", "-u", "1000", &sb.id, "--", "/bin/fixture", "status"])).contains("Uid:\t1000"));
    // Binary stdin and stdout, byte for byte.
    let data = blob(3 << 20);
    let out = w.sbx_stdin(&["exec", "-i", &sb.id, "--", "/bin/fixture", "cat"], &data);
    assert_success(&out, "exec -i cat");
    assert!(out.stdout == data, "exec -i changed the bytes ({} of {})", out.stdout.len(), data.len());
    assert_exit(&w.sbx(&["exec", "sbx-000000000000", "--", "/bin/fixture", "status"]), 1, "no such sandbox");
}

#[test]
fn background_processes_are_listed_logged_and_killed_with_their_children() {
    let w = World::new();
    let sb = w.create(&[]);
    let out = w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", "spawn-children"]);
    assert_success(&out, "exec -d");
    let handle = stdout(&out).trim().to_string();
    assert!(handle.starts_with('p') && handle.len() == 9, "{handle}");
    let top = || docker_ok(&["top", &sb.id]).lines().filter(|l| l.contains("fixture sleep")).count();
    let mut started = false;
    for _ in 0..100 {
        if stdout(&w.sbx(&["logs", &sb.id, &handle])).contains("started") {
            started = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(started, "the background process's output never showed");
    assert_eq!(top(), 2, "two children running");
    let ps: serde_json::Value = serde_json::from_slice(&w.sbx(&["ps", "--json", &sb.id]).stdout).unwrap();
    let me = ps.as_array().unwrap().iter().find(|p| p["handle"] == handle.as_str()).expect("ps lists it");
    assert_eq!(me["running"], true);
    assert_eq!(me["command"], serde_json::json!(["/bin/fixture", "spawn-children"]));
    assert_exit(&w.sbx(&["kill", &sb.id, &handle, "--signal", "BOGUS"]), 2, "bad signal name");
    assert_success(&w.sbx(&["kill", &sb.id, &handle]), "kill");
    let mut exited = serde_json::Value::Null;
    for _ in 0..100 {
        let ps: serde_json::Value = serde_json::from_slice(&w.sbx(&["ps", "--json", &sb.id]).stdout).unwrap();
        exited = ps.as_array().unwrap().iter().find(|p| p["handle"] == handle.as_str()).unwrap().clone();
        if exited["running"] == false {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Ended by TERM, not "exit 143".
    assert_eq!(
        (&exited["exit_code"], &exited["signal"]),
        (&serde_json::Value::Null, &serde_json::json!(15)),
        "{exited}"
    );
    let table = stdout(&w.sbx(&["ps", &sb.id]));
    assert!(table.lines().any(|l| l.contains(&handle) && l.contains("killed by TERM")), "{table}");
    // ... and its state is not in the sandbox's /tmp.
    assert_exit(&sb.exec(&["exists", "/tmp/.sbx-bg"]), 1, "no .sbx-bg in /tmp");
    assert_success(&sb.exec(&["exists", &format!("/run/sbx-bg/{handle}/log")]), "the state in /run/sbx-bg");
    assert_eq!(top(), 0, "the children died with it");
    // A command that cannot start says so at once.
    let out = w.sbx(&["exec", "-d", &sb.id, "--", "/no/such/program"]);
    assert_exit(&out, 1, "exec -d of a missing program");
    assert!(stderr(&out).contains("cannot run"), "{}", stderr(&out));
    // The sandbox's own output.
    assert!(stderr(&w.sbx(&["logs", &sb.id])).contains("listening on /run/sandbox/sandbox.sock"));
}

#[test]
fn stopping_exec_ends_the_command_in_the_sandbox() {
    // SIGINT/SIGTERM/SIGHUP ended sbx at once and left the
    // command running. Now sbx passes the signal on, waits briefly, then
    // SIGKILLs it ("stubborn" ignores all three), and exits 128+n.
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};
    let w = World::new();
    let sb = w.create(&[]);
    let running = |what: &str| docker_ok(&["top", &sb.id]).lines().filter(|l| l.contains(what)).count();
    let cases = [
        (Signal::SIGTERM, 143, "sleep", false),
        // As a terminal's Ctrl-C: the whole foreground group, docker CLI included.
        (Signal::SIGINT, 130, "stubborn", true),
        (Signal::SIGHUP, 129, "stubborn", false),
        (Signal::SIGINT, 130, "sleep", false),
    ];
    for (sig, code, mode, group) in cases {
        let what = format!("fixture {mode}");
        let mut child = Command::new(SBX)
            .args(w.dir_args())
            .args(["exec", &sb.id, "--", "/bin/fixture", mode])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let started = Instant::now();
        while running(&what) == 0 {
            assert!(started.elapsed() < Duration::from_secs(15), "{what} never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        let pid = child.id() as i32;
        kill(Pid::from_raw(if group { -pid } else { pid }), sig).unwrap();
        let sent = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if sent.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                panic!("sbx exec did not end within 20s of {sig}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(code), "sbx exec after {sig} ({what}): {status:?}");
        let mut left = running(&what);
        while left > 0 && sent.elapsed() < Duration::from_secs(8) {
            std::thread::sleep(Duration::from_millis(100));
            left = running(&what);
        }
        assert_eq!(left, 0, "{what} still runs in the sandbox after {sig}");
    }
}

#[test]
fn logs_follow_ends_when_the_process_does() {
    let w = World::new();
    let sb = w.create(&[]);
    let out = w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", "both"]);
    let handle = stdout(&out).trim().to_string();
    let out = w.sbx(&["logs", "-f", &sb.id, &handle]);
    assert_success(&out, "logs -f");
    let text = stdout(&out);
    assert!(text.contains("to stdout") && text.contains("to stderr"), "combined output: {text}");
    let out = w.sbx(&["logs", "--tail", "1", &sb.id, &handle]);
    assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
}

#[test]
fn shell_says_plainly_when_the_image_has_none() {
    let w = World::new();
    let sb = w.create(&[]);
    let out = w.sbx(&["shell", &sb.id]);
    assert_exit(&out, 1, "shell on an image without one");
    assert!(stderr(&out).contains("has no shell") && stderr(&out).contains("sbx exec"), "{}", stderr(&out));
}

#[test]
fn shell_uses_the_image_shell_and_exec_t_gets_a_terminal() {
    let w = World::new();
    // An image whose /bin/sh is the fixture acting as a shell.
    let ctx = std::path::PathBuf::from("/tmp").join(format!("sbxt-{}-ctx", w.case));
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::copy(fixture_binary(), ctx.join("sh")).unwrap();
    std::fs::write(ctx.join("Dockerfile"), format!("FROM {}\nCOPY sh /bin/sh\nLABEL {}\n", w.image, w.case_label()))
        .unwrap();
    let out = Command::new("docker").args(["build", "-q", ctx.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let image = String::from_utf8_lossy(&out.stdout).trim().to_string();
    std::fs::remove_dir_all(&ctx).unwrap();
    let label = w.case_label();
    let out = w.sbx(&["create", "--image", &image, "--label", &label]);
    assert_success(&out, "create from the image with a shell");
    let sb = w.adopt(stdout(&out).trim());

    let out = w.sbx_stdin(&["shell", &sb.id], b"echo hi\n");
    assert_success(&out, "sbx shell");
    assert_eq!(stdout(&out), "fixture-shell tty=false\necho hi\n");

    // exec -t under a real terminal (script(1) provides one).
    let cmd = format!(
        "{SBX} --socket-dir {} --data-dir {} exec -t {} -- /bin/fixture tty",
        w.socket_root.display(),
        w.state_dir.display(),
        sb.id
    );
    let out = Command::new("timeout")
        .args(["30", "script", "-qec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("tty=true"), "{}", String::from_utf8_lossy(&out.stdout));
    let out = w.sbx(&["exec", &sb.id, "--", "/bin/fixture", "tty"]);
    assert_eq!(stdout(&out), "tty=false\n", "no terminal without -t");
    drop(sb);
    // --no-prune: the untagged fixture image it was built from stays.
    let _ = docker(&["rmi", "--no-prune", &image]);
}

#[test]
fn stats_move_when_the_sandbox_allocates() {
    let w = World::new();
    let sb = w.create(&["--memory", "256"]);
    let read = || -> serde_json::Value { serde_json::from_slice(&w.sbx(&["stats", "--json", &sb.id]).stdout).unwrap() };
    let before = read()[0].clone();
    assert_eq!(before["memory_limit_bytes"], 256u64 << 20);
    assert!(before["pids"].as_u64().unwrap() >= 1);
    assert_success(&w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", "alloc", "100"]), "allocate");
    let mut after = before.clone();
    for _ in 0..50 {
        after = read()[0].clone();
        if after["memory_bytes"].as_u64().unwrap() > before["memory_bytes"].as_u64().unwrap() + (80 << 20) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        after["memory_bytes"].as_u64().unwrap() > before["memory_bytes"].as_u64().unwrap() + (80 << 20),
        "{before} -> {after}"
    );
    assert!(after["pids"].as_u64().unwrap() > before["pids"].as_u64().unwrap());
    assert!(stdout(&w.sbx(&["stats", &sb.id])).contains(&sb.id));
}

#[test]
fn stats_watch_refreshes_until_ctrl_c() {
    let w = World::new();
    let sb = w.create(&[]);
    let mut child = Command::new(SBX)
        .args(w.dir_args())
        .args(["stats", "--watch", "--json", &sb.id])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    for _ in 0..2 {
        let line = lines.next().unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v[0]["id"], sb.id.as_str());
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0), "ends cleanly on Ctrl-C");
}

/// `sbx stats MISSING LIVE` named the live sandbox as
/// missing too (and showed nothing). The live one is shown; only the
/// missing ones are reported (exit 1), whether never made or removed
/// behind sbx's back.
#[test]
fn stats_of_missing_and_live_sandboxes_reports_only_the_missing() {
    let w = World::new();
    let live = w.create(&[]);
    let gone = w.create(&[]);
    docker_ok(&["rm", "-f", "-v", &gone.id]);
    let never = "sbx-0000deadbeef";
    for missing in [never, gone.id.as_str()] {
        let out = w.sbx(&["stats", "--json", missing, &live.id]);
        assert_exit(&out, 1, "stats with a missing sandbox");
        let shown: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the live one as JSON");
        assert_eq!(shown.as_array().map(Vec::len), Some(1), "{shown}");
        assert_eq!(shown[0]["id"], live.id.as_str(), "{shown}");
        let err = stderr(&out);
        assert!(err.contains(missing), "{err}");
        assert!(!err.contains(&live.id), "the live sandbox is not missing: {err}");
    }
}

/// `sbx ps` printed the handle (a directory name in the sandbox's
/// `/run/sbx-bg`, the sandbox's to choose) raw: a name set the terminal's
/// title, erased a line, printed a forged row and concealed the rest. Only
/// records with a handle of the shape `exec -d` makes are listed (table and
/// `--json`), and nothing in the table is a control byte.
#[test]
fn ps_shows_no_record_the_sandbox_forged_in_its_process_list() {
    let w = World::new();
    let sb = w.create(&[]);
    let out = w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", "sleep"]);
    assert_success(&out, "exec -d");
    let handle = stdout(&out).trim().to_string();
    let forged = "p0000dead  1       running         innocent --quiet";
    let names = [
        "\u{1b}]0;owned\u{7}title".to_string(),
        "\u{1b}[2K\u{1b}[1A\rerase".to_string(),
        format!("x\n{forged}\n"),
        format!("p0000beef\u{1b}[8m{forged}"),
        "p0000cafe\n".to_string(),
        "P0000CAFE0".to_string(),
    ];
    for n in &names {
        assert_success(&sb.exec(&["mkdir", &format!("/run/sbx-bg/{n}")]), "mkdir a hostile name in /run/sbx-bg");
        assert_success(&sb.exec(&["write", &format!("/run/sbx-bg/{n}/cmd")]), "its command");
    }
    let out = w.sbx(&["ps", &sb.id]);
    assert_success(&out, "sbx ps");
    let table = stdout(&out);
    let bad: Vec<u8> = table.bytes().filter(|b| (*b < 0x20 && *b != b'\n') || *b == 0x7f).collect();
    assert!(bad.is_empty(), "control bytes {bad:?} in {table:?}");
    assert!(!table.contains("innocent") && !table.contains("title") && !table.contains("erase"), "{table:?}");
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{table:?}");
    assert!(rows[0].starts_with(&format!("{handle} ")) && rows[0].ends_with("/bin/fixture sleep"), "{table:?}");
    assert!(stderr(&out).contains("left out 6 record(s)"), "{}", stderr(&out));
    let list = json(&w.sbx(&["--json", "ps", &sb.id]));
    let handles: Vec<&str> = list.as_array().unwrap().iter().map(|p| p["handle"].as_str().unwrap()).collect();
    assert_eq!(handles, [handle.as_str()], "{list}");
}

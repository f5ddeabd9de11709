//! `sbx files`, `sbx mkdir` and `sbx watch` against a hostile sandbox: it
//! runs programs as the helper's own user while the helper works, so it can
//! signal, stop or trace it, and build trees no path can name. What it must
//! never get: sbx hanging for ever, a forged line, a helper left behind.
//! The sandbox side is `attack_files/helperatk.c`, copied in with `sbx cp`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// A sandbox with the attacker program at /tmp/atk.
fn armed(w: &World, args: &[&str]) -> Sandbox {
    armed_with(w, args, "attack_files/helperatk.c", "/tmp/atk")
}

fn atk(w: &World, sb: &Sandbox, args: &[&str]) -> std::process::Output {
    let mut full = vec!["exec", sb.id.as_str(), "--", "/tmp/atk"];
    full.extend_from_slice(args);
    w.sbx(&full)
}

/// `sbx ARGS` with env, killed (and reported as None) after `limit`.
fn sbx_within(w: &World, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Option<std::process::Output> {
    sbx_within_fed(w, args, env, b"", limit)
}

fn kind_of(out: &std::process::Output) -> String {
    let last = stderr(out).lines().last().unwrap_or("{}").to_string();
    let v: serde_json::Value = serde_json::from_str(&last).unwrap_or_default();
    v["error"]["kind"].as_str().unwrap_or("").to_string()
}

/// The helper runs as the sandbox's user, so the sandbox can SIGSTOP it
/// mid-call. sbx must not wait for ever: a listing that sends nothing for
/// SBX_DOCKER_TIMEOUT, or a mkdir that does not answer within it, ends with
/// `helper_timeout` (exit 1). Before: both hung until killed.
#[test]
fn a_helper_stopped_by_its_sandbox_never_hangs_sbx() {
    let w = World::new();
    let sb = armed(&w, &[]);
    assert_success(&w.sbx(&["mkdir", &sb.id, "/tmp/big"]), "mkdir");
    assert_success(&atk(&w, &sb, &["many", "/tmp/big", "20000"]), "many");
    let out = w.sbx(&["exec", "-d", &sb.id, "--", "/tmp/atk", "stopper", "/run/sbx/helper", "120"]);
    assert_success(&out, "the stopper");
    std::thread::sleep(Duration::from_millis(500));
    let env = [("SBX_DOCKER_TIMEOUT", "3s")];
    let began = Instant::now();
    let out = sbx_within(&w, &["--json", "files", &sb.id, "/tmp/big"], &env, Duration::from_secs(40))
        .expect("sbx files hung on a stopped helper");
    assert_exit(&out, 1, "files of a stopped helper");
    assert_eq!(kind_of(&out), "helper_timeout", "{}", stderr(&out));
    assert!(began.elapsed() < Duration::from_secs(30), "took {:?}", began.elapsed());
    let out = sbx_within(&w, &["files", &sb.id, "/tmp/big"], &env, Duration::from_secs(40)).expect("hung");
    assert!(stderr(&out).contains("did not answer for 3s while listing /tmp/big"), "{}", stderr(&out));
    // mkdir: a plain one is over in a millisecond or two, so the stopper
    // (polling /proc) may miss it, most of all under load (a CI run missed
    // four in a row): none may hang. `mkdir -p` of a path 1500 levels deep
    // keeps its helper busy for a while (create_dir_all walks the path once
    // per missing level), so the stopper catches that one every time.
    for i in 0..2 {
        let p = format!("/tmp/m{i}");
        let out = sbx_within(&w, &["--json", "mkdir", &sb.id, &p], &env, Duration::from_secs(40))
            .unwrap_or_else(|| panic!("sbx mkdir hung on a stopped helper"));
        if out.status.code() == Some(1) {
            assert_eq!(kind_of(&out), "helper_timeout", "{}", stderr(&out));
        } else {
            assert_success(&out, "mkdir");
        }
    }
    let deep = format!("/tmp/deep{}", "/d".repeat(1500));
    let out = sbx_within(&w, &["--json", "mkdir", "-p", &sb.id, &deep], &env, Duration::from_secs(40))
        .unwrap_or_else(|| panic!("sbx mkdir -p hung on a stopped helper"));
    assert_exit(&out, 1, "mkdir -p of a deep path, its helper stopped");
    assert_eq!(kind_of(&out), "helper_timeout", "{}", stderr(&out));
}

/// `sbx wait-port` had no deadline of its own (its `--timeout` is kept by
/// the helper, inside): a helper its sandbox stopped hung it for ever. It
/// now gets that wait plus a look-up's, and ends with `helper_timeout`.
#[test]
fn a_wait_port_helper_stopped_by_its_sandbox_never_hangs_sbx() {
    let w = World::new();
    let sb = armed(&w, &[]);
    let out = w.sbx(&["exec", "-d", &sb.id, "--", "/tmp/atk", "stopper", "/run/sbx/helper wait-port", "120"]);
    assert_success(&out, "the stopper");
    std::thread::sleep(Duration::from_millis(500));
    let env = [("SBX_DOCKER_TIMEOUT", "2s")];
    let began = Instant::now();
    let out =
        sbx_within(&w, &["--json", "wait-port", "--timeout", "1s", &sb.id, "8123"], &env, Duration::from_secs(40))
            .expect("sbx wait-port hung on a stopped helper");
    assert_exit(&out, 1, "wait-port of a stopped helper");
    assert_eq!(kind_of(&out), "helper_timeout", "{}", stderr(&out));
    assert!(began.elapsed() < Duration::from_secs(20), "took {:?}", began.elapsed());
}

fn watch_child(w: &World, args: &[&str]) -> (std::process::Child, std::io::BufReader<std::process::ChildStderr>) {
    use std::io::BufRead;
    let mut child = Command::new(SBX)
        .args(w.dir_args())
        .arg("watch")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut ready = String::new();
    err.read_line(&mut ready).unwrap();
    assert!(ready.contains("watching"), "{ready}");
    (child, err)
}

fn helpers_in(w: &World, sb: &Sandbox, pat: &str) -> usize {
    let out = atk(w, sb, &["count", pat]);
    assert_success(&out, "count");
    stdout(&out).trim().parse().unwrap()
}

/// What the sandbox cannot do to a running helper: trace it, open its
/// stdout to forge a line, or its memory (it is non-dumpable); and what
/// ends it whatever the sandbox does: sbx killed with SIGKILL (its stdin
/// closes), Ctrl-C of a watch whose helper the sandbox stopped.
///
/// Under gVisor the sandbox CAN open the helper's stdout through
/// /proc/PID/fd/1 (gVisor does not apply non-dumpable there) and write a
/// line: what holds is the host's strict parse, so a forged line is at
/// most a well-formed change of this sandbox, one escaped line.
fn helper_holds(runtime: &[&str], gvisor: bool) {
    use std::io::BufRead;
    let w = World::new();
    let sb = armed(&w, runtime);
    let (mut wt, _err) = watch_child(&w, &[&sb.id, "/tmp"]);
    let out = atk(&w, &sb, &["probe", "/run/sbx/helper watch"]);
    let said = stdout(&out);
    assert!(said.contains("ptrace=") && !said.contains("attached"), "the sandbox traced the helper: {said}");
    assert!(said.contains("mem=") && !said.contains("opened"), "the sandbox opened its memory: {said}");
    if gvisor {
        if said.contains("stdout=written") {
            let mut line = String::new();
            std::io::BufReader::new(wt.stdout.take().unwrap()).read_line(&mut line).unwrap();
            assert_eq!(line, "created   /tmp/forged\n", "a forged line is one well-formed change at most");
        }
    } else {
        assert!(said.contains("stdout=") && !said.contains("written"), "the sandbox wrote to its stdout: {said}");
    }
    // kill -9 of sbx: no helper is left watching.
    wt.kill().unwrap();
    wt.wait().unwrap();
    let gone = until(Duration::from_secs(10), || helpers_in(&w, &sb, "/run/sbx/helper watch") == 0);
    assert!(gone.is_some(), "a watch helper outlived sbx's SIGKILL");
    // A watch helper the sandbox stopped: Ctrl-C still ends sbx.
    let (mut wt, _err) = watch_child(&w, &[&sb.id, "/tmp"]);
    let out = w.sbx(&["exec", "-d", &sb.id, "--", "/tmp/atk", "stopper", "/run/sbx/helper watch", "5"]);
    assert_success(&out, "the stopper");
    std::thread::sleep(Duration::from_secs(2));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(wt.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let ended = until(Duration::from_secs(15), || wt.try_wait().unwrap().is_some());
    let _ = wt.kill();
    assert!(ended.is_some(), "Ctrl-C did not end a watch whose helper was stopped");
    assert_eq!(wt.wait().unwrap().code(), Some(130));
}

#[test]
fn the_helper_resists_its_sandbox_and_ends_with_sbx() {
    helper_holds(&[], false);
}

#[test]
fn the_helper_resists_its_sandbox_under_runsc() {
    helper_holds(&["--runtime", "runsc"], true);
}

//! Warm pools: `sbx pool create`, claims with `create --pool`
//! (no docker call in the claiming process), the refiller, fallback, gc.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

fn pool_dir(w: &World, name: &str) -> PathBuf {
    w.state_dir.join("pools").join(name)
}

fn ready(w: &World, name: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(pool_dir(w, name).join("ready"))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.retain(|n| n.starts_with("sbx-"));
    v.sort();
    v
}

/// Whether a refiller holds the pool's lock.
fn filling(w: &World, name: &str) -> bool {
    use nix::libc;
    use std::os::fd::AsRawFd;
    let Ok(f) = std::fs::File::open(pool_dir(w, name).join("fill.lock")) else { return false };
    // Tested, never taken (an OFD lock, as sbx takes it).
    // SAFETY: flock is plain old data; all-zero is a valid value of it.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = libc::F_WRLCK as libc::c_short;
    nix::fcntl::fcntl(f.as_raw_fd(), nix::fcntl::FcntlArg::F_OFD_GETLK(&mut l)).is_ok()
        && l.l_type != libc::F_UNLCK as libc::c_short
}

/// Wait for the pool's refiller to be done, so nothing is made after the test.
fn settle(w: &World, name: &str) {
    let done = until(Duration::from_secs(60), || !filling(w, name));
    assert!(done.is_some(), "the refiller of {name} did not finish within 60s");
}

fn make_pool(w: &World, name: &str, size: u32, extra: &[&str]) {
    let label = w.case_label();
    let size = size.to_string();
    let mut args = vec!["pool", "create", name, "--size", &size, "--image", &w.image, "--label", &label];
    args.extend_from_slice(extra);
    let out = w.sbx(&args);
    assert_success(&out, "sbx pool create");
    assert_eq!(stdout(&out).trim(), name);
}

/// A `docker` that logs `PPID ARGS` of every call and runs the real one.
fn logging_shim(w: &World) -> (PathBuf, PathBuf) {
    let dir = Path::new("/tmp").join(format!("sbxt-{}-log", w.case));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("calls");
    let script = format!("#!/bin/sh\necho \"$PPID $*\" >> '{}'\nexec docker \"$@\"\n", log.display());
    let path = dir.join("docker");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (path, log)
}

fn finish(w: &World, name: &str, claimed: &[String]) {
    settle(w, name);
    let out = w.sbx(&["pool", "rm", name]);
    assert_success(&out, "sbx pool rm");
    let mut args = vec!["destroy"];
    args.extend(claimed.iter().map(String::as_str));
    if !claimed.is_empty() {
        assert_success(&w.sbx(&args), "destroy the claimed");
    }
    assert_success(&w.sbx(&["gc"]), "gc");
    w.assert_nothing_left();
    assert!(!pool_dir(w, name).exists(), "pool directory left behind");
}

#[test]
fn a_claim_makes_no_docker_call_answers_carries_session_and_ttl_and_the_pool_refills() {
    let w = World::new();
    make_pool(&w, "p", 2, &["--memory", "64"]);
    assert_eq!(ready(&w, "p").len(), 2, "pool create fills to --size");
    let members = ready(&w, "p");

    let (shim, log) = logging_shim(&w);
    let mut cmd = Command::new(SBX);
    cmd.args(w.dir_args()).args(["--json", "create", "--pool", "p", "--session", "task-1", "--ttl", "10m"]);
    cmd.env("SBX_DOCKER", &shim).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let claimer = child.id();
    let out = child.wait_with_output().unwrap();
    assert_success(&out, "create --pool");
    let j = json(&out);
    let id = j["id"].as_str().unwrap().to_string();
    assert!(members.contains(&id), "a claim hands out a ready member");
    assert_eq!(j["session"], "task-1");
    assert!(j["expires_at"].is_string(), "{j}");
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    let own: Vec<&str> = calls.lines().filter(|l| l.split(' ').next() == Some(&claimer.to_string())).collect();
    assert!(own.is_empty(), "the claiming process called docker: {own:?}");

    let answer = w.sbx_stdin(&["connect", &id], b"hello\n");
    assert_success(&answer, "connect to a claimed member");
    assert_eq!(stdout(&answer), "hello\n", "the fixture echoes");
    let inspect = json(&w.sbx(&["inspect", &id]));
    assert_eq!(inspect["session"], "task-1");
    assert!(inspect["expires_at"].is_string(), "{inspect}");
    let ls = stdout(&w.sbx(&["ls"]));
    assert!(ls.lines().any(|l| l.starts_with(&id) && l.contains("task-1")), "{ls}");

    assert!(until(Duration::from_secs(30), || ready(&w, "p").len() == 2).is_some(), "the pool refills to 2");
    settle(&w, "p");
    let pools = json(&w.sbx(&["--json", "pool", "ls"]));
    assert_eq!(pools[0]["name"], "p");
    assert_eq!(pools[0]["ready"], 2);
    assert!(pools[0]["idle_memory_bytes"].as_u64().unwrap() > 0, "{pools}");

    // An unclaimed member is handed out without a docker call: stopped or
    // frozen it would be handed out dead or stalled, so both are refused.
    let idle = ready(&w, "p")[0].clone();
    for verb in ["stop", "pause"] {
        let out = w.sbx(&["--json", verb, &idle]);
        assert_exit(&out, 1, &format!("{verb} of a ready member"));
        assert!(stderr(&out).contains("wrong_state") && stderr(&out).contains("pool p"), "{}", stderr(&out));
    }
    assert_eq!(docker_ok(&["inspect", "--format", "{{.State.Status}}", &idle]).trim(), "running");
    assert_success(&w.sbx(&["pause", &id]), "pause of a claimed member");
    assert_success(&w.sbx(&["resume", &id]), "resume of a claimed member");

    // pool rm leaves the claimed member alone.
    assert_success(&w.sbx(&["pool", "rm", "p"]), "pool rm");
    assert_eq!(w.containers().len(), 1, "only the claimed member stays");
    assert_success(&w.sbx_stdin(&["connect", &id], b"x\n"), "the claimed member still answers");
    assert_success(&w.sbx(&["destroy", &id]), "destroy");
    assert_success(&w.sbx(&["gc"]), "gc");
    w.assert_nothing_left();
}

#[test]
fn twenty_concurrent_claims_get_twenty_distinct_sandboxes() {
    let _load = loading_the_engine();
    let w = World::new();
    make_pool(&w, "p20", 20, &["--memory", "32"]);
    assert_eq!(ready(&w, "p20").len(), 20);
    let children: Vec<_> = (0..20)
        .map(|_| {
            Command::new(SBX)
                .args(w.dir_args())
                .args(["create", "--pool", "p20", "--no-fallback"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ids: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert_success(&out, "concurrent claim");
            stdout(&out).trim().to_string()
        })
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 20, "20 claims, 20 distinct sandboxes");
    finish(&w, "p20", &ids);
}

#[test]
fn an_empty_pool_falls_back_to_a_cold_create_or_fails_with_no_fallback() {
    let w = World::new();
    make_pool(&w, "p1", 1, &["--memory", "64"]);
    // The refiller the first claim starts blocks at `docker run` until released.
    let shim = Shim::blocking(&w, &["run"]);
    let shim_path = shim.path();
    let first = w.sbx_env(&["create", "--pool", "p1"], &[("SBX_DOCKER", shim_path.to_str().unwrap())]);
    assert_success(&first, "first claim");
    let first = stdout(&first).trim().to_string();
    assert!(until(Duration::from_secs(10), || shim.reached()).is_some(), "the refiller started");

    let none = w.sbx(&["create", "--pool", "p1", "--no-fallback"]);
    assert_exit(&none, 1, "--no-fallback on an empty pool");
    assert!(stderr(&none).contains("no ready sandbox"), "{}", stderr(&none));

    let cold = w.sbx(&["create", "--pool", "p1", "--session", "cold-1"]);
    assert_success(&cold, "fallback");
    assert!(stderr(&cold).contains("pool p1 has no ready sandbox; creating one from its spec"), "{}", stderr(&cold));
    let cold = stdout(&cold).trim().to_string();
    assert_ne!(cold, first);
    assert_eq!(json(&w.sbx(&["inspect", &cold]))["session"], "cold-1");

    std::fs::write(shim_path.parent().unwrap().join("release"), "").unwrap();
    finish(&w, "p1", &[first, cold]);
}

#[test]
fn a_member_killed_behind_sbxs_back_is_never_handed_out_and_gc_reaps_it() {
    let w = World::new();
    make_pool(&w, "pk", 2, &["--memory", "64"]);
    let members = ready(&w, "pk");
    docker_ok(&["kill", &members[0]]);
    let mut got = Vec::new();
    for _ in 0..2 {
        let out = w.sbx(&["create", "--pool", "pk"]);
        assert_success(&out, "claim");
        let id = stdout(&out).trim().to_string();
        assert_ne!(id, members[0], "a dead member was handed out");
        assert_success(&w.sbx_stdin(&["connect", &id], b"ok\n"), "the member handed out answers");
        got.push(id);
    }
    finish(&w, "pk", &got);
}

#[test]
fn pool_flags_are_checked_before_anything_is_made() {
    let w = World::new();
    for (args, what) in [
        (vec!["pool", "create", "bad/name", "--size", "1", "--image", &w.image], "bad name"),
        (vec!["pool", "create", "q", "--size", "0", "--image", &w.image], "size 0"),
        (vec!["pool", "create", "q", "--size", "1", "--image", &w.image, "--session", "s"], "--session"),
        (vec!["pool", "create", "q", "--size", "1", "--image", &w.image, "--ttl", "1m"], "--ttl"),
        (vec!["pool", "create", "q", "--size", "1", "--image", &w.image, "--setup", "true"], "--setup"),
        (vec!["create", "--pool", "q", "--image", &w.image], "--image with --pool"),
        (vec!["create", "--pool", "q", "--route", "a:b:1"], "--route with --pool"),
    ] {
        assert_exit(&w.sbx(&args), 2, what);
    }
    make_pool(&w, "q", 1, &["--memory", "64"]);
    assert_exit(&w.sbx(&["pool", "create", "q", "--size", "1", "--image", &w.image]), 2, "duplicate name");
    assert_exit(&w.sbx(&["create", "--pool", "nosuch"]), 1, "unknown pool");
    finish(&w, "q", &[]);
}

/// A process that is gone, as a killed claimer leaves its identity behind.
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

#[test]
fn kill_9_during_a_claim_or_a_refill_then_gc_leaves_nothing() {
    let w = World::new();
    make_pool(&w, "pz", 2, &["--memory", "64"]);
    let members = ready(&w, "pz");
    let dir = pool_dir(&w, "pz");
    // A claimer killed right after winning its rename.
    let pid = dead_pid();
    std::fs::create_dir_all(dir.join("claimed")).unwrap();
    std::fs::rename(dir.join("ready").join(&members[0]), dir.join("claimed").join(format!("{}.{pid}.1", members[0])))
        .unwrap();
    // A claimer killed after writing its claim, before printing the id.
    std::fs::rename(dir.join("ready").join(&members[1]), dir.join("claimed").join(format!("{}.{pid}.1", members[1])))
        .unwrap();
    std::fs::create_dir_all(w.state_dir.join("claims")).unwrap();
    std::fs::write(
        w.state_dir.join("claims").join(&members[1]),
        format!("{{\"pool\":\"pz\",\"session\":null,\"pid\":{pid},\"start\":1,\"complete\":false}}"),
    )
    .unwrap();
    let gc = w.sbx(&["--json", "gc"]);
    assert_success(&gc, "gc after killed claims");
    let reaped: Vec<String> =
        json(&gc)["containers"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    assert!(members.iter().all(|m| reaped.contains(m)), "both half-claimed members reaped: {reaped:?}");

    // A refiller (`pool fill`) killed after `docker run`, and after its create returned.
    for verb in ["run", "container"] {
        let shim = Shim::new(&w, verb, true);
        let mut child = Command::new(SBX)
            .args(w.dir_args())
            .args(["pool", "fill", "pz"])
            .env("SBX_DOCKER", shim.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(until(Duration::from_secs(30), || shim.reached()).is_some(), "the fill reached {verb}");
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::write(shim.path().parent().unwrap().join("release"), "").unwrap();
        assert!(until(Duration::from_secs(30), || !shim.busy()).is_some());
        let gc = w.sbx(&["gc"]);
        assert_success(&gc, &format!("gc after a fill killed at {verb}"));
        let left: Vec<String> = w.containers();
        assert!(left.is_empty(), "a killed fill at {verb} left {left:?} after gc");
        drop(shim);
    }
    finish(&w, "pz", &[]);
}

/// Real claims killed with SIGKILL at every point of their few
/// milliseconds, then gc: every member left is either ready and alive or
/// claimed by a claim that completed (its id was printed: the caller owns
/// it); nothing half-claimed survives gc, and nothing is lost.
#[test]
fn claims_killed_at_random_points_leave_only_ready_or_completed_members_after_gc() {
    let w = World::new();
    make_pool(&w, "pk", 3, &["--memory", "64"]);
    for i in 0..12u64 {
        let mut child = Command::new(SBX)
            .args(w.dir_args())
            .args(["create", "--pool", "pk", "--no-fallback"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // 0-11 ms: from before the claim's rename to after its id is printed.
        std::thread::sleep(Duration::from_micros(i * 1000));
        let _ = child.kill();
        child.wait().unwrap();
        settle(&w, "pk");
        if ready(&w, "pk").is_empty() {
            assert_success(&w.sbx(&["pool", "fill", "pk"]), "refill");
        }
    }
    // A refiller a killed claimer started may not hold its lock yet.
    std::thread::sleep(Duration::from_millis(500));
    settle(&w, "pk");
    assert_success(&w.sbx(&["gc"]), "gc after killed claims");
    settle(&w, "pk");
    let label = format!("label={}", w.case_label());
    let members: Vec<String> =
        docker_ok(&["ps", "-a", "--filter", &label, "--format", "{{.Names}}"]).lines().map(str::to_string).collect();
    assert!(!members.is_empty(), "the pool has members");
    let ready_now = ready(&w, "pk");
    let mut completed = Vec::new();
    for id in &members {
        if ready_now.contains(id) {
            continue;
        }
        let claim = std::fs::read_to_string(w.state_dir.join("claims").join(id)).unwrap_or_default();
        let claim: serde_json::Value = serde_json::from_str(&claim).unwrap_or_default();
        assert_eq!(claim["complete"], true, "{id} is neither ready nor a completed claim after gc: {claim}");
        completed.push(id.clone());
    }
    let stray: Vec<String> = std::fs::read_dir(pool_dir(&w, "pk").join("claimed"))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert!(stray.is_empty(), "half-claimed files survive gc: {stray:?}");
    finish(&w, "pk", &completed);
}

/// The sandbox is the attacker: a member that replaces its socket after
/// fill (with a symlink to the docker socket, a regular file, a FIFO; what
/// it can do through its /run/sandbox) is never handed out, never followed,
/// and gc reaps it.
#[test]
fn a_member_that_swaps_its_socket_after_fill_is_never_handed_out() {
    let w = World::new();
    make_pool(&w, "ph", 3, &["--memory", "64"]);
    // No refiller may top up while the members are tampered with.
    settle(&w, "ph");
    let members = ready(&w, "ph");
    assert_eq!(members.len(), 3);
    for (m, what) in members.iter().zip(["symlink", "regular", "fifo"]) {
        let sock = w.socket_root.join(m).join("sandbox.sock");
        std::fs::remove_file(&sock).unwrap();
        match what {
            "symlink" => std::os::unix::fs::symlink("/var/run/docker.sock", &sock).unwrap(),
            "regular" => std::fs::write(&sock, "not a socket").unwrap(),
            _ => nix::unistd::mkfifo(&sock, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap(),
        }
    }
    let out = w.sbx(&["create", "--pool", "ph", "--no-fallback"]);
    assert_exit(&out, 1, "a claim from a pool whose members all swapped their sockets");
    assert!(stdout(&out).is_empty(), "a tampered member was handed out: {}", stdout(&out));
    assert!(stderr(&out).contains("no ready sandbox"), "{}", stderr(&out));
    // The FIFO was never opened for writing by the claim (a blocked open would have hung it).
    settle(&w, "ph");
    let gc = w.sbx(&["--json", "gc"]);
    assert_success(&gc, "gc");
    let reaped: Vec<String> =
        json(&gc)["containers"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    // The claim's refiller recycles dead members before it fills, so under
    // load it may reap them before this gc does: gone is what matters.
    let gone = |m: &String| !docker(&["container", "inspect", "--format", "x", m]).status.success();
    assert!(members.iter().all(gone), "the tampered members are still there (gc reaped {reaped:?})");
    finish(&w, "ph", &[]);
}

//! The lifecycle promises: TTLs that hold after the shell is gone, `gc`
//! finding every leak (including creates killed at each step) without touching
//! foreign containers, interrupts, and concurrency.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::support::*;

fn expires_at(w: &World, id: &str) -> SystemTime {
    let rec = json(&w.sbx(&["inspect", id]));
    humantime::parse_rfc3339(rec["expires_at"].as_str().expect("expires_at")).unwrap()
}

#[test]
fn ttl_destroys_the_sandbox_after_the_shell_is_gone() {
    let _alone = engine_alone();
    let w = World::new();
    let label = w.case_label();
    // The creating shell exits at once: $(...) must not wait for the watchdog.
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg("\"$@\"").arg("sh").arg(SBX).args(w.dir_args());
    cmd.args(["create", "--image", &w.image, "--label", &label, "--ttl", "3s"]);
    let started = Instant::now();
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert_success(&out, "sh -c 'sbx create --ttl 3s'");
    assert!(started.elapsed() < Duration::from_secs(3), "create waited for the watchdog");
    let id = stdout(&out).trim().to_string();
    let _guard = w.adopt(&id);
    let exp = expires_at(&w, &id);
    let rec = json(&w.sbx(&["inspect", &id]));
    assert!(rec["time_left"].as_str().unwrap().ends_with('s'), "{rec}");

    // The socket directory goes right after the container: a check that
    // costs no docker call, so the moment is measured, not the polling.
    let dir = w.socket_root.join(&id);
    let gone = until(Duration::from_secs(15), || !dir.exists()).expect("the TTL never fired");
    let gone_at = SystemTime::now() - gone.elapsed();
    let late = gone_at.duration_since(exp).unwrap_or_default();
    eprintln!("TTL: destroyed {late:?} after expiry");
    assert!(late <= Duration::from_secs(2), "destroyed {late:?} after expiry");
    assert!(gone_at + Duration::from_millis(1000) >= exp, "destroyed before expiry");
    w.assert_nothing_left();
}

#[test]
fn ttl_command_moves_the_expiry_both_ways() {
    let w = World::new();
    let sb = w.create(&["--ttl", "1h"]);
    let first = expires_at(&w, &sb.id);
    let out = w.sbx(&["ttl", &sb.id, "2h"]);
    assert_success(&out, "sbx ttl 2h");
    assert!(expires_at(&w, &sb.id) > first + Duration::from_secs(3000));
    assert_success(&w.sbx(&["ttl", &sb.id, "2s"]), "sbx ttl 2s");
    until(Duration::from_secs(10), || w.containers().is_empty()).expect("shortened TTL never fired");
    w.assert_nothing_left();

    // A sandbox created without a TTL gets a watchdog from `sbx ttl`.
    let sb = w.create(&[]);
    assert_success(&w.sbx(&["ttl", &sb.id, "1s"]), "sbx ttl on a sandbox without one");
    until(Duration::from_secs(10), || w.containers().is_empty()).expect("TTL set later never fired");
    w.assert_nothing_left();
    assert_exit(&w.sbx(&["ttl", &sb.id, "soon"]), 2, "bad duration");
    assert_exit(&w.sbx(&["ttl", &sb.id, "1m"]), 1, "ttl of a destroyed sandbox");
}

#[test]
fn a_killed_watchdog_leaves_an_expired_sandbox_that_ls_shows_and_gc_reaps() {
    let w = World::new();
    let sb = w.create(&["--ttl", "2s"]);
    kill_watchdog_until_expired(&w, &sb.id);
    assert!(stdout(&w.sbx(&["ls"])).lines().any(|l| l.starts_with(&sb.id) && l.contains(" expired ")));
    assert!(!w.containers().is_empty(), "nothing but gc should have removed it");
    let dry = w.sbx(&["gc", "--dry-run"]);
    assert_success(&dry, "gc --dry-run");
    assert!(stdout(&dry).contains(&format!("would remove {} (expired at", sb.id)), "{}", stdout(&dry));
    assert!(!w.containers().is_empty(), "--dry-run removed something");
    let out = w.sbx(&["gc", "--json"]);
    assert_success(&out, "gc");
    let report = json(&out);
    assert_eq!(report["containers"][0]["id"], sb.id.as_str());
    w.assert_nothing_left();
}

#[test]
fn create_killed_at_each_step_leaves_nothing_after_gc() {
    let _load = loading_the_engine();
    // (docker subcommand to stop at, after doing it?, sandbox command)
    // The last one: the state check while waiting for a socket that never comes.
    let steps =
        [("image", false, "serve"), ("run", false, "serve"), ("run", true, "serve"), ("container", false, "sleep")];
    for (verb, after, program) in steps {
        let w = World::new();
        let shim = Shim::new(&w, verb, after);
        let label = w.case_label();
        let mut child = Command::new(SBX)
            .args(w.dir_args())
            .args(["create", "--image", &w.image, "--label", &label, "--", program])
            .env("SBX_DOCKER", shim.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        until(Duration::from_secs(20), || shim.reached()).unwrap_or_else(|| panic!("create never reached {verb}"));
        // `ls` tells a create in flight from one whose
        // process was killed (it showed `running` until gc).
        let ls_state = || -> Vec<String> {
            let out = w.sbx(&["ls", "--json"]);
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ls --json");
            v.as_array().unwrap().iter().map(|r| r["state"].as_str().unwrap_or_default().to_string()).collect()
        };
        let running = after || verb == "container";
        if running {
            assert_eq!(ls_state(), ["creating"], "a create in flight, at {verb} (after={after})");
        }
        child.kill().unwrap();
        child.wait().unwrap();
        if running {
            assert_eq!(ls_state(), ["abandoned"], "a killed create, at {verb} (after={after})");
        }
        shim.release();
        if verb == "run" && !after {
            // The blocked `docker run` goes on after its creator died: wait for it.
            until(Duration::from_secs(20), || !w.containers().is_empty()).expect("docker run never finished");
        }
        let out = w.sbx(&["gc"]);
        assert_success(&out, &format!("gc after kill -9 at {verb} (after={after})"));
        w.assert_nothing_left();
        let creating = w.state_dir.join("creating");
        let left: Vec<_> =
            std::fs::read_dir(&creating).map(|d| d.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();
        assert!(left.is_empty(), "state of the killed create left behind: {left:?}");
    }
}

#[test]
fn gc_leaves_running_creates_and_foreign_containers_alone() {
    let w = World::new();
    // A foreign container from an image that carries sbx's labels, an
    // expiry long past and a name in sbx's format.
    let name = format!("sbx-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
    let dockerfile = format!(
        "FROM {}\nLABEL sbx.managed=1 sbx.id={name} sbx.owner=0123456789abcdef0123456789abcdef sbx.expires=2000-01-01T00:00:00Z {}\n",
        w.image,
        w.case_label()
    );
    let mut build = Command::new("docker")
        .args(["build", "-q", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut build.stdin.take().unwrap(), dockerfile.as_bytes()).unwrap();
    let out = build.wait_with_output().unwrap();
    assert_success(&out, "docker build of the label-forging image");
    let forged_image = stdout(&out).trim().to_string();
    docker_ok(&["run", "-d", "--name", &name, "--network", "none", &forged_image, "sleep"]);
    // A directory in the socket root named like that container is not an orphan of ours to keep,
    // but the container itself must survive.
    let sb = w.create(&["--ttl", "1h"]);
    let out = w.sbx(&["gc"]);
    assert_success(&out, "gc");
    assert!(!stdout(&out).contains(&name), "gc touched a foreign container: {}", stdout(&out));
    assert!(!stdout(&w.sbx(&["ls"])).contains(&name), "ls adopted a foreign container");
    assert_eq!(
        docker_ok(&["inspect", "--format", "{{.State.Running}}", &name]),
        "true",
        "the foreign container survives"
    );
    assert_eq!(sb.inspect("{{.State.Running}}"), "true", "gc removed an unexpired sandbox");
    docker_ok(&["rm", "-f", &name]);
    // --no-prune: the untagged fixture image it was built from stays.
    let _ = docker(&["rmi", "--no-prune", &forged_image]);
}

#[test]
fn gc_spares_a_create_that_is_still_running() {
    let w = World::new();
    let label = w.case_label();
    let child = Command::new(SBX)
        .args(w.dir_args())
        .args(["create", "--image", &w.image, "--label", &label, "--socket-wait", "60s", "--", "sleep"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    until(Duration::from_secs(20), || !w.containers().is_empty()).expect("create never started its container");
    let out = w.sbx(&["gc"]);
    assert_success(&out, "gc during a create");
    assert!(stdout(&out).trim().is_empty(), "gc removed part of a running create: {}", stdout(&out));
    assert_eq!(w.containers().len(), 1);
    assert_eq!(w.socket_dirs().len(), 1);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143));
    w.assert_nothing_left();
}

/// sbx SIGKILLed while its `docker run` is still in the docker CLI, and a
/// gc before that call ends: the sandbox it makes afterwards is still
/// reaped by the next gc. Before, the first gc forgot the dead create
/// (no container had its name yet) and the container ran on, nobody's.
#[test]
fn a_gc_during_a_killed_create_s_docker_run_still_reaps_what_it_makes() {
    let w = World::new();
    let shim = Shim::new(&w, "run", false);
    let label = w.case_label();
    let mut child = Command::new(SBX)
        .args(w.dir_args())
        .args(["create", "--image", &w.image, "--label", &label, "--", "serve"])
        .env("SBX_DOCKER", shim.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    until(Duration::from_secs(20), || shim.reached()).expect("create never reached docker run");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_success(&w.sbx(&["gc"]), "gc while the killed create's docker run is in flight");
    assert!(w.containers().is_empty(), "gc ran before the container existed");
    shim.release();
    until(Duration::from_secs(30), || !w.containers().is_empty())
        .expect("the killed create's docker run never made its container (its socket directory went?)");
    assert_success(&w.sbx(&["gc"]), "gc once the docker run ended");
    w.assert_nothing_left();
}

/// A sandbox `docker create` made and nothing started, with no create
/// marked for it: what a killed fork's or remote create's `docker create`
/// leaves when it ends after the gc that forgot the create. The next gc
/// reaps it; before, it stayed until its TTL (without one, for ever).
#[test]
fn gc_reaps_a_sandbox_never_started_that_no_create_is_making() {
    let w = World::new();
    let sb = w.create(&[]);
    let labels: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&sb.inspect("{{json .Config.Labels}}")).unwrap();
    let image = sb.inspect("{{.Image}}");
    docker_ok(&["rm", "-f", &sb.id]);
    assert_success(&w.sbx(&["gc"]), "gc after a removal behind sbx's back");
    // The same name and labels: sbx's own record, ownership token included.
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut args = vec!["create", "--name", sb.id.as_str(), "--network", "none"];
    for l in &labels {
        args.extend(["--label", l.as_str()]);
    }
    args.extend([image.as_str(), "sleep"]);
    docker_ok(&args);
    assert!(stdout(&w.sbx(&["ls"])).contains(&sb.id), "sbx does not take the copy for its own: this proves nothing");
    let out = w.sbx(&["gc", "--json"]);
    assert_success(&out, "gc");
    let report = json(&out);
    assert_eq!(report["containers"][0]["id"], sb.id.as_str(), "{report}");
    assert!(report["containers"][0]["reason"].as_str().unwrap().contains("never started"), "{report}");
    w.assert_nothing_left();
}

#[test]
fn a_second_ctrl_c_does_not_skip_the_cleanup() {
    let w = World::new();
    let label = w.case_label();
    let mut child = Command::new(SBX)
        .args(w.dir_args())
        .args(["create", "--image", &w.image, "--label", &label, "--", "sleep"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    until(Duration::from_secs(20), || !w.containers().is_empty()).expect("create never started its container");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    w.assert_nothing_left();
}

#[test]
fn twenty_creates_and_destroys_at_once() {
    let _load = loading_the_engine();
    let w = World::new();
    let ids: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..20).map(|_| s.spawn(|| w.try_create(&["--session", "shared", "--json"]))).collect();
        hs.into_iter()
            .map(|h| {
                let out = h.join().unwrap();
                assert_success(&out, "one of 20 parallel creates");
                json(&out)["id"].as_str().unwrap().to_string()
            })
            .collect()
    });
    let _guards: Vec<_> = ids.iter().map(|id| w.adopt(id)).collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 20, "ids collide");
    assert_eq!(w.socket_dirs().len(), 20, "one socket directory each");
    let w = &w;
    std::thread::scope(|s| {
        let hs: Vec<_> = ids.iter().map(|id| s.spawn(move || w.sbx(&["destroy", id]))).collect();
        for h in hs {
            assert_success(&h.join().unwrap(), "one of 20 parallel destroys");
        }
    });
    w.assert_nothing_left();
}

#[test]
fn destroy_racing_the_watchdog_and_gc_never_errors() {
    let _load = loading_the_engine();
    let w = World::new();
    let ids: Vec<String> = (0..4).map(|_| stdout(&w.try_create(&["--ttl", "2s"])).trim().to_string()).collect();
    let _guards: Vec<_> = ids.iter().map(|id| w.adopt(id)).collect();
    let exp = expires_at(&w, &ids[3]);
    while SystemTime::now() < exp {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Now the watchdogs fire; destroy and gc race them and each other.
    let w = &w;
    std::thread::scope(|s| {
        let mut hs = Vec::new();
        for id in &ids {
            hs.push(s.spawn(move || w.sbx(&["destroy", id])));
        }
        hs.push(s.spawn(move || w.sbx(&["gc"])));
        hs.push(s.spawn(move || w.sbx(&["gc"])));
        for h in hs {
            assert_success(&h.join().unwrap(), "destroy/gc racing the watchdog");
        }
    });
    until(Duration::from_secs(10), || w.containers().is_empty()).expect("sandboxes left");
    w.assert_nothing_left();
}

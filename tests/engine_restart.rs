//! A hibernated sandbox across a restart of the engine: its own test
//! binary, so nothing else runs while dockerd is down (cargo runs test
//! binaries one after another; this one holds a single test), and no
//! other test's sandbox sees the restart. Restarting stops every running
//! container: this engine has no live-restore. Never skipped: it fails
//! without root or an engine, as the live suite does.

#[path = "live/support/mod.rs"]
mod support;

use std::process::Command;

use support::*;

/// The counter's next number, over `sbx connect` (the relayed channel).
fn next(w: &World, id: &str) -> u64 {
    let out = w.sbx_stdin(&["connect", id], b"");
    assert_success(&out, "sbx connect");
    let text = stdout(&out);
    text.trim().parse().unwrap_or_else(|_| panic!("not a number from the counter: {text:?}"))
}

#[test]
fn a_hibernated_sandbox_resumes_where_it_was_after_the_engine_restarts() {
    let w = World::new();
    let sb = w.create(&["--snapshots", "--ttl", "30m", "--", "count"]);
    assert_eq!((next(&w, &sb.id), next(&w, &sb.id)), (1, 2));
    let kept = w.create(&["--snapshots", "--", "count"]);
    assert_eq!(next(&w, &kept.id), 1);
    assert_success(&w.sbx(&["checkpoint", &kept.id, "--name", "before"]), "checkpoint");
    assert_success(&w.sbx(&["hibernate", &sb.id]), "hibernate");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/restart-dockerd");
    let restarted = Command::new("bash").arg(script).output().expect("spawn .ci/restart-dockerd");
    assert_success(&restarted, ".ci/restart-dockerd");

    // The hibernated one comes back with its memory and its TTL watched again.
    let ls = json(&w.sbx(&["--json", "ls"]));
    let state = |id: &str| ls.as_array().unwrap().iter().find(|r| r["id"] == id).map(|r| r["state"].clone());
    assert_eq!(state(&sb.id), Some(serde_json::json!("hibernated")), "{ls}");
    assert_success(&w.sbx(&["resume", &sb.id]), "resume after the engine restarted");
    assert_eq!(next(&w, &sb.id), 3, "the counter comes back from memory");
    let watchdog = w.state_dir.join("watchdog").join(&sb.id);
    assert!(until(std::time::Duration::from_secs(5), || watchdog.exists()).is_some(), "no TTL watchdog after resume");

    // The one that was running is stopped by the restart; a fork of its
    // checkpoint carries on from it all the same.
    let fork = w.sbx(&["fork", &kept.id, "--from", "before"]);
    assert_success(&fork, "fork --from after the engine restarted");
    let child = stdout(&fork).trim().to_string();
    assert_eq!(next(&w, &child), 2);
    assert_success(&w.sbx(&["checkpoints", "rm", &kept.id, "before"]), "checkpoints rm");
    assert_success(&w.sbx(&["destroy", &sb.id, &kept.id, &child]), "destroy");
    w.assert_nothing_left();
}

//! Red-team re-check of issue 9's fixes (part 2): a hostile sandbox or image
//! against persistent volumes, ownership, and the host-side walks.

use crate::support::*;

fn state_opts(sb: &Sandbox) -> Vec<String> {
    let mountinfo = String::from_utf8_lossy(&sb.exec(&["read", "/proc/self/mountinfo"]).stdout).into_owned();
    let line = mountinfo
        .lines()
        .find(|l| l.split(' ').nth(4) == Some("/state"))
        .unwrap_or_else(|| panic!("no /state mount: {mountinfo}"))
        .to_string();
    line.split(' ').nth(5).unwrap().split(',').map(str::to_string).collect()
}

/// A stopped sandbox started again (`docker start`, by anyone who may, or
/// the engine after a daemon restart) must get /state nosuid,nodev again.
#[test]
fn a_restarted_persistent_sandbox_keeps_state_nosuid_nodev() {
    let w = World::new();
    let session = format!("{}-s", w.case);
    let sb = w.create(&["--session", &session, "--persist", "--socket-wait", "0", "--", "sleep"]);
    let opts = state_opts(&sb);
    assert!(opts.contains(&"nosuid".to_string()) && opts.contains(&"nodev".to_string()), "{opts:?}");
    docker_ok(&["stop", "-t", "1", &sb.id]);
    docker_ok(&["start", &sb.id]);
    let opts = state_opts(&sb);
    assert!(
        opts.contains(&"nosuid".to_string()) && opts.contains(&"nodev".to_string()),
        "after docker start: {opts:?}"
    );
    assert_success(&w.sbx(&["destroy", "--purge", &sb.id]), "purge");
}

/// Issue 9 finding 8 again, in the persistent volume: a sandbox nests
/// thousands of directories in /state, then `destroy --purge` used std's
/// `remove_dir_all` (one descriptor per level): EMFILE, exit 1, and the
/// session's host directory stayed. The sandbox user owns the volume, so
/// the nesting is the sandbox's to make (done here on the host directory
/// behind /state, the same bytes, without 5,000 docker execs).
#[test]
fn purge_removes_a_deep_tree_the_sandbox_left_in_state() {
    let w = World::new();
    let session = format!("{}-s", w.case);
    let host = w.state_dir.join("volumes").join(&session);
    let sb = w.create(&["--session", &session, "--persist"]);
    assert_success(&sb.exec(&["mkdir", "/state/top"]), "the sandbox writes /state");
    nest(&host.join("top"), 5_000);
    let out = sbx_limited(&w, &["destroy", "--purge", &sb.id], 64);
    assert_success(&out, "destroy --purge of a session whose /state is 5,000 levels deep");
    assert!(!host.exists(), "the session's host directory is left");
    assert!(!docker(&["volume", "inspect", &format!("sbx-state-{session}")]).status.success(), "the volume is left");
    w.assert_nothing_left();
}

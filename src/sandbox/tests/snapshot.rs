//! checkpoint, hibernate and resume through the fake: what is refused
//! before any docker call that changes anything, and how a hibernated
//! sandbox is shown.

use super::*;
use crate::host::state::Mark;

const SNAP: &str =
    r#"{"runc":{"path":"runc"},"runsc-snap":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none"]}}"#;

/// `docker container inspect` of [`ID`] in `status` under `runtime`, with `execs` exec sessions.
fn under(rig: &Rig, status: &str, runtime: &str, execs: usize) -> Output {
    let mut v: serde_json::Value = serde_json::from_slice(&rig.in_state(status).stdout).unwrap();
    v["HostConfig"]["Runtime"] = runtime.into();
    v["ExecIDs"] = (0..execs).map(|i| format!("{i:064x}")).collect::<Vec<_>>().into();
    Output::ok(&format!("{v}\n"))
}

#[test]
fn a_sandbox_under_runc_is_never_checkpointed_and_nothing_is_called_but_the_look_ups() {
    let rig = Rig::new();
    rig.fake.push(under(&rig, "running", "runc", 0)).push(Output::ok(SNAP));
    let e = rig.driver().checkpoint(ID, "c1", Default::default()).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(e.hint().unwrap().contains("--snapshots"), "{:?}", e.hint());
    assert_eq!(rig.fake.verbs(), ["container inspect", "info"]);

    // The same for hibernate, and for a gVisor with a network.
    let rig = Rig::new();
    let networked = r#"{"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=host","--host-uds=create"]}}"#;
    rig.fake.push(under(&rig, "running", "runsc", 0)).push(Output::ok(networked));
    let e = rig.driver().hibernate(ID, Default::default()).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("network"), "{e}");
    assert_eq!(rig.fake.verbs(), ["container inspect", "info"]);
}

#[test]
fn only_a_running_sandbox_is_saved() {
    for status in ["paused", "exited"] {
        let rig = Rig::new();
        rig.fake.push(under(&rig, status, "runsc-snap", 0));
        let e = rig.driver().checkpoint(ID, "c1", Default::default()).unwrap_err();
        assert_eq!(e.kind(), "wrong_state", "{status}: {e}");
        assert_eq!(rig.fake.verbs(), ["container inspect"], "{status}");
    }
}

#[test]
fn a_live_exec_session_refuses_the_checkpoint_before_docker_checkpoint() {
    let rig = Rig::new();
    rig.fake.push(under(&rig, "running", "runsc-snap", 2)).push(Output::ok(SNAP));
    let e = rig.driver().checkpoint(ID, "c1", Default::default()).unwrap_err();
    // As root the exec session is what refuses; as anyone else, the engine's directory.
    if nix::unistd::geteuid().is_root() {
        assert_eq!(e.kind(), "exec_live", "{e}");
        assert!(e.to_string().contains("2 docker exec session(s)"), "{e}");
    } else {
        assert_eq!(e.exit_code(), 2, "{e}");
    }
    assert!(!rig.fake.verbs().iter().any(|v| v.starts_with("checkpoint")), "{:?}", rig.fake.verbs());
}

#[test]
fn a_hibernated_sandbox_is_shown_as_such_and_start_or_pause_say_resume() {
    let rig = Rig::new();
    rig.state().mark(ID, Mark::Hibernated).unwrap();
    rig.fake.push(under(&rig, "exited", "runsc-snap", 0));
    let r = rig.driver().inspect(ID).unwrap();
    assert_eq!((r.state.as_str(), r.exit_code), ("hibernated", None));
    assert!(r.reason.unwrap().contains(&format!("`sbx resume {ID}`")));

    rig.fake.push(under(&rig, "exited", "runsc-snap", 0));
    let e = rig.driver().pause(ID).unwrap_err();
    assert!(e.to_string().contains("hibernated"), "{e}");
    assert!(e.hint().unwrap().contains("sbx resume"), "{:?}", e.hint());
}

#[test]
fn a_fork_of_a_runc_sandbox_or_of_no_count_calls_nothing_but_the_look_ups() {
    let rig = Rig::new();
    for count in [0, crate::sandbox::ops::lifecycle::fork::MAX_COUNT + 1] {
        let e = rig.driver().fork(ID, count, None, Default::default(), None).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{count}: {e}");
    }
    assert_eq!(rig.fake.verbs(), Vec::<String>::new(), "a bad count is refused before docker");
    rig.fake.push(under(&rig, "running", "runc", 0)).push(Output::ok(SNAP));
    let e = rig.driver().fork(ID, 3, None, Default::default(), None).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(e.hint().unwrap().contains("--snapshots"), "{:?}", e.hint());
    assert_eq!(rig.fake.verbs(), ["container inspect", "info"], "nothing made");
}

/// `--from` a checkpoint that is not there, of a sandbox that may be gone:
/// no docker call at all.
#[test]
fn a_fork_from_a_missing_checkpoint_calls_no_docker() {
    let rig = Rig::new();
    let e = rig.driver().fork(ID, 2, Some("nothing"), Default::default(), None).unwrap_err();
    assert_eq!(e.kind(), "no_checkpoint", "{e}");
    let e = rig.driver().fork(ID, 2, Some("../x"), Default::default(), None).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert_eq!(rig.fake.verbs(), Vec::<String>::new());
}

/// A checkpoint of [`ID`] named `name` in the rig's data dir, recording
/// a --snapshots request as `sbx.remake`, as create labels one.
fn kept_checkpoint(rig: &Rig, name: &str) {
    let image = rig.root.with_extension("engine-image");
    std::fs::create_dir_all(&image).unwrap();
    std::fs::write(image.join("checkpoint.img"), b"memory").unwrap();
    let request = CreateRequest { image: IMG.into(), snapshots: true, ..Default::default() };
    let remake = serde_json::json!({ "request": request, "idle": false }).to_string();
    let labels = std::collections::BTreeMap::from([
        (record::REMAKE.to_string(), remake),
        (record::RUNTIME.to_string(), "runsc-snap".to_string()),
        (record::USER.to_string(), "2000100:2000100".to_string()),
    ]);
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700).create(&rig.state).unwrap();
    let store = crate::host::checkpoints::Store::at(&rig.state);
    store.save(ID, name, &image, &labels, Default::default()).unwrap();
}

/// `fork --from` on a remote engine: the engine's checkpoint directory is
/// not on this machine, so it is refused (exit 2) before any container is
/// made or any local path named by the engine is written.
#[test]
fn a_fork_from_a_checkpoint_on_a_remote_engine_is_refused_before_anything_is_made() {
    let rig = Rig::new();
    kept_checkpoint(&rig, "kept");
    let d = super::remote::remote(&rig);
    rig.fake.push(Output::ok(SNAP));
    let e = d.fork(ID, 2, Some("kept"), Default::default(), None).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(e.to_string().contains("remote engine"), "{e}");
    let verbs = rig.fake.verbs();
    assert!(!verbs.iter().any(|v| v.starts_with("create") || v.starts_with("run")), "{verbs:?}");
}

/// Restores from a saved image run at most `MAX_RESTORES` at once in one
/// process (each holds about three copies of an image on disk while it
/// runs): one more waits until a slot is given back.
#[test]
fn one_restore_more_than_the_cap_waits_for_a_slot() {
    use crate::sandbox::shared::restore::MAX_RESTORES;
    let rig = Rig::new();
    let driver = rig.driver();
    let held: Vec<_> = (0..MAX_RESTORES).map(|_| driver.restore_slot().unwrap()).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let slot = driver.restore_slot().unwrap();
            tx.send(()).unwrap();
            drop(slot);
        });
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "a restore beyond the cap did not wait");
        drop(held);
        rx.recv_timeout(Duration::from_secs(5)).expect("a freed slot was never taken");
    });
}

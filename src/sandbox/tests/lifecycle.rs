//! stop, start, pause, resume: the exact docker calls, the marks in the
//! state dir, and what start does with the last run's socket directory.

use super::*;
use crate::error::SandboxError;
use crate::host::state::Mark;

/// The container id docker reports for [`ID`].
pub(super) fn cid() -> String {
    "ab".repeat(32)
}

impl Rig {
    /// `docker container inspect` of sandbox [`ID`] in docker state `status`,
    /// with sbx's helper mounted.
    pub(super) fn in_state(&self, status: &str) -> Output {
        let mut v: serde_json::Value = serde_json::from_str(&self.inspect_line(ID, ID, &[])).unwrap();
        v["State"]["Status"] = status.into();
        v["Id"] = cid().into();
        v["HostConfig"] = serde_json::json!({"Runtime": "runc", "Mounts": [{"Target": "/run/sbx", "ReadOnly": true}]});
        Output::ok(&format!("{v}\n"))
    }

    /// The answer to `docker start`: the "sandbox" binds its socket again,
    /// which fails if the last run's socket is still there.
    pub(super) fn start_binds(&self) {
        let dir = self.sock_dir();
        self.fake.push_with(Output::ok(""), move |_| {
            std::mem::forget(UnixListener::bind(dir.join("sandbox.sock")).unwrap())
        });
    }
}

#[test]
fn stop_marks_it_stopped_before_docker_stop_and_rounds_the_grace_up() {
    let rig = Rig::new();
    rig.fake.push(rig.in_state("running"));
    let marked = rig.state();
    // The mark is written before `docker stop` runs.
    rig.fake.push_with(Output::ok(""), move |_| assert!(marked.marked(ID, Mark::Stopped)));
    let done = rig.driver().stop(ID, Duration::from_millis(1500)).unwrap();
    assert_eq!((done.state, done.already), ("stopped", false));
    assert_eq!(rig.fake.calls()[1], ["stop", "--time", "2", "--", &cid()]);

    // ls and inspect say `stopped`, not `exited`, and no exit code: it is the stop's.
    let mut exited: serde_json::Value = serde_json::from_slice(&rig.in_state("exited").stdout).unwrap();
    exited["State"]["ExitCode"] = 137.into();
    rig.fake.push(Output::ok(&exited.to_string()));
    let r = rig.driver().inspect(ID).unwrap();
    assert_eq!((r.state.as_str(), r.exit_code), ("stopped", None));
    assert!(r.reason.unwrap().contains(&format!("`sbx start {ID}`")));

    // Again: idempotent, one inspect and no docker stop.
    rig.fake.push(rig.in_state("exited"));
    assert!(rig.driver().stop(ID, Duration::from_secs(10)).unwrap().already);
    assert_eq!(rig.fake.verbs().len(), 4);
}

#[test]
fn an_exited_program_without_the_mark_stays_exited() {
    let rig = Rig::new();
    let mut exited: serde_json::Value = serde_json::from_slice(&rig.in_state("exited").stdout).unwrap();
    exited["State"]["ExitCode"] = 3.into();
    rig.fake.push(Output::ok(&exited.to_string()));
    let r = rig.driver().inspect(ID).unwrap();
    assert_eq!((r.state.as_str(), r.exit_code, r.reason.as_deref()), ("exited", Some(3), Some("exited with code 3")));
    assert_eq!(rig.fake.verbs(), ["container inspect"]);
    assert_eq!(rig.fake.calls()[0].last().unwrap(), ID);
}

#[test]
fn stop_of_a_paused_sandbox_thaws_it_first() {
    let rig = Rig::new();
    rig.state().mark(ID, Mark::Paused).unwrap();
    rig.fake.push(rig.in_state("paused")).push(Output::ok("")).push(Output::ok(""));
    rig.driver().stop(ID, Duration::ZERO).unwrap();
    let c = cid();
    assert_eq!(rig.fake.calls()[1..], [vec!["unpause", "--", &c], vec!["stop", "--time", "0", "--", &c]]);
    assert!(!rig.state().marked(ID, Mark::Paused) && rig.state().marked(ID, Mark::Stopped));
}

#[test]
fn start_clears_the_old_socket_starts_checks_mounts_and_waits() {
    let rig = Rig::new();
    rig.state().mark(ID, Mark::Stopped).unwrap();
    std::fs::create_dir_all(rig.sock_dir()).unwrap();
    let old = UnixListener::bind(rig.sock_dir().join("sandbox.sock")).unwrap();
    drop(old);
    rig.fake.push(rig.in_state("exited"));
    rig.start_binds();
    rig.running();
    let done = rig.driver().start(ID, Duration::from_secs(5)).unwrap();
    assert_eq!((done.state, done.already, done.unwatched), ("running", false, None));
    assert_eq!(rig.fake.verbs(), ["container inspect", "start", "container inspect"]);
    assert_eq!(rig.fake.calls()[1], ["start", "--", &cid()]);
    assert!(!rig.state().marked(ID, Mark::Stopped));
}

#[test]
fn a_start_that_never_binds_is_stopped_again() {
    let rig = Rig::new();
    rig.fake.push(rig.in_state("exited")).push(Output::ok(""));
    rig.running();
    rig.fake.push(Output::ok("no socket today\n")).push(Output::ok(""));
    let err = rig.driver().start(ID, Duration::from_millis(50)).unwrap_err();
    assert!(matches!(err, Error::Sandbox(SandboxError::SocketTimeout { .. })), "{err}");
    assert_eq!(rig.fake.verbs(), ["container inspect", "start", "container inspect", "logs", "stop"]);
    assert_eq!(rig.fake.calls()[4], ["stop", "--time", "0", "--", &cid()]);
    assert!(rig.state().marked(ID, Mark::Stopped), "stopped again, never destroyed");
}

#[test]
fn start_refuses_a_planted_entry_before_docker_start() {
    let rig = Rig::new();
    std::fs::create_dir_all(rig.sock_dir()).unwrap();
    let target = rig.root.join("host-file");
    std::fs::write(&target, b"keep").unwrap();
    std::os::unix::fs::symlink(&target, rig.sock_dir().join("sandbox.sock")).unwrap();
    rig.fake.push(rig.in_state("exited"));
    let err = rig.driver().start(ID, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(err, Error::Socket(SocketError::Stale { .. })), "{err}");
    assert_eq!(err.kind(), "hostile_socket");
    assert_eq!(rig.fake.verbs(), ["container inspect"], "never started");
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
}

#[test]
fn a_gone_socket_directory_is_made_again() {
    let rig = Rig::new();
    rig.fake.push(rig.in_state("exited"));
    rig.start_binds();
    rig.running();
    rig.driver().start(ID, Duration::from_secs(5)).unwrap();
    assert!(rig.sock_dir().is_dir());
    assert_eq!(rig.fake.verbs(), ["container inspect", "start", "container inspect"]);
    assert_eq!(rig.fake.calls()[1], ["start", "--", &cid()]);
    assert_eq!(rig.fake.calls()[2].last().unwrap(), ID);
}

#[test]
fn wrong_states_are_refused_with_one_inspect() {
    let cases = [
        ("start", "running", "running"),
        ("start", "paused", "paused"),
        ("resume", "running", "running"),
        ("pause", "exited", "stopped"),
        ("resume", "exited", "exited"),
    ];
    for (action, docker_state, shown) in cases {
        let rig = Rig::new();
        if shown == "stopped" {
            rig.state().mark(ID, Mark::Stopped).unwrap();
        }
        rig.fake.push(rig.in_state(docker_state));
        let d = rig.driver();
        let err = match action {
            "start" => d.start(ID, Duration::ZERO),
            "resume" => d.resume(ID),
            _ => d.pause(ID),
        }
        .unwrap_err();
        match &err {
            Error::Sandbox(SandboxError::WrongState { state, action: a, .. }) => {
                assert_eq!((state.as_str(), *a), (shown, action))
            }
            other => panic!("{action} in {docker_state}: {other:?}"),
        }
        assert_eq!(err.exit_code(), 1);
        assert_eq!(rig.fake.verbs(), ["container inspect"], "{action} in {docker_state} changed something");
    }
}

#[test]
fn pause_and_resume_mark_and_destroy_thaws_a_paused_sandbox() {
    let rig = Rig::new();
    rig.fake.push(rig.in_state("running")).push(Output::ok(""));
    assert_eq!(rig.driver().pause(ID).unwrap().state, "paused");
    assert_eq!(rig.fake.calls()[1], ["pause", "--", &cid()]);
    assert!(rig.state().marked(ID, Mark::Paused));
    rig.fake.push(rig.in_state("paused"));
    assert!(rig.driver().pause(ID).unwrap().already);

    rig.fake.push(rig.in_state("paused")).push(Output::ok(""));
    assert_eq!(rig.driver().resume(ID).unwrap().state, "running");
    assert_eq!(rig.fake.calls()[4], ["unpause", "--", &cid()]);
    assert!(!rig.state().marked(ID, Mark::Paused));

    // A failed pause leaves no mark.
    rig.fake.push(rig.in_state("running")).push(Output::fail(1, "Error response from daemon: cgroup trouble"));
    assert!(rig.driver().pause(ID).is_err());
    assert!(!rig.state().marked(ID, Mark::Paused));

    // Destroy: thawed first, then removed, both on the id the inspect gave.
    rig.state().mark(ID, Mark::Paused).unwrap();
    rig.fake.push(rig.in_state("paused")).push(Output::ok("")).push(Output::ok(""));
    rig.driver().destroy(&[ID.to_string()]).unwrap();
    let calls = rig.fake.calls();
    assert_eq!(calls[calls.len() - 2..], [vec!["unpause", "--", &cid()], vec!["rm", "-f", "-v", "--", &cid()]]);
    assert!(!rig.state().marked(ID, Mark::Paused), "destroy forgets the marks");
}

#[test]
fn gc_thaws_an_expired_paused_sandbox_and_forgets_marks_of_gone_ones() {
    let rig = Rig::new();
    let st = rig.state();
    std::fs::create_dir_all(rig.sock_dir()).unwrap();
    st.mark(ID, Mark::Paused).unwrap();
    // Removed with docker itself: only its mark is left.
    let gone = "sbx-0000000000ee";
    st.mark(gone, Mark::Stopped).unwrap();
    let ps = serde_json::json!({"name": ID, "state": "paused", "networks": "", "labels": rig.seal(serde_json::json!({
        "sbx.managed": "1", "sbx.id": ID, "sbx.expires": "2000-01-01T00:00:00Z",
        "sbx.socket": rig.sock_dir().join("sandbox.sock").display().to_string()}))});
    rig.fake.push(Output::ok("")).push(Output::ok(&format!("{ps}\n"))).push(Output::ok("")).push(Output::ok(""));
    let r = rig.driver().gc(false).unwrap();
    assert_eq!(r.containers.len(), 1);
    assert_eq!(rig.fake.calls()[2..], [vec!["unpause", "--", ID], vec!["rm", "-f", "-v", "--", ID]]);
    assert!(!st.marked(ID, Mark::Paused) && !st.marked(gone, Mark::Stopped));
}

/// Start re-runs create's placement check: a writable mount that now lands
/// over the helper (a `--rw` under an image VOLUME the sandbox rearranged
/// through a symlink) is refused, and the sandbox stopped again.
#[test]
fn start_checks_where_the_mounts_landed_again() {
    let rig = Rig::new();
    rig.fake.push(rig.in_state("exited"));
    rig.start_binds();
    rig.running();
    let d = rig.driver();
    let covered = format!("{MOUNTINFO}613 600 8:1 /home/op/data /run/sbx rw,relatime - ext4 /dev/sda1 rw\n");
    std::fs::write(rig.root.with_extension("proc").join("4242/mountinfo"), covered).unwrap();
    rig.running();
    rig.fake.push(Output::ok(""));
    let err = d.start(ID, Duration::from_secs(5)).unwrap_err();
    assert!(matches!(err, Error::Image(crate::error::ImageError::Redirected { .. })), "{err}");
    assert_eq!(rig.fake.verbs(), ["container inspect", "start", "container inspect", "container inspect", "stop"]);
    assert!(rig.state().marked(ID, Mark::Stopped));
}

/// A sandbox seen running with a stopped mark was started outside sbx (or
/// its `docker stop` failed): the mark names the run `sbx stop` ended, so a
/// later death of its program reads as `exited` with its code, not as
/// `stopped`, and no look writes anything to tell.
#[test]
fn a_stale_stopped_mark_is_dropped_once_the_sandbox_is_seen_running() {
    let rig = Rig::new();
    let run = |status: &str, started: &str| {
        let mut v: serde_json::Value = serde_json::from_str(&rig.in_state(status).stdout_str()).unwrap();
        v["State"]["StartedAt"] = started.into();
        Output::ok(&format!("{v}\n"))
    };
    rig.state().mark_stopped_run(ID, "2026-12-01T10:00:00Z").unwrap();
    let mark = std::fs::read(rig.state().dir.join("stopped").join(ID)).unwrap();
    rig.fake.push(run("running", "2026-12-01T11:00:00Z"));
    assert_eq!(rig.driver().inspect(ID).unwrap().state, "running");
    rig.fake.push(run("exited", "2026-12-01T11:00:00Z"));
    assert_eq!(rig.driver().inspect(ID).unwrap().state, "exited", "the stale mark does not hide the exit");
    assert_eq!(std::fs::read(rig.state().dir.join("stopped").join(ID)).unwrap(), mark, "a look writes nothing");
    // The run sbx stopped, and a mark that names none (an older sbx's): stopped.
    rig.fake.push(run("exited", "2026-12-01T10:00:00Z"));
    assert_eq!(rig.driver().inspect(ID).unwrap().state, "stopped");
    rig.state().mark(ID, Mark::Stopped).unwrap();
    rig.fake.push(run("exited", "2026-12-01T11:00:00Z"));
    assert_eq!(rig.driver().inspect(ID).unwrap().state, "stopped");
    assert_eq!(rig.fake.verbs(), ["container inspect"; 4]);
    assert!(rig.fake.calls().iter().all(|c| c.last().unwrap() == ID), "{:?}", rig.fake.calls());
}

/// `ls` reads `docker ps`, which has no start time: only a sandbox that
/// exited with a mark naming a run costs one inspect, of all such at once.
#[test]
fn ls_judges_a_stopped_mark_by_one_inspect_of_the_marked_only() {
    let rig = Rig::new();
    let ps = |status: &str| {
        let labels = rig.seal(serde_json::json!({"sbx.managed": "1", "sbx.id": ID, "sbx.tier": "2"}));
        serde_json::json!({"name": ID, "state": status, "networks": "", "labels": labels}).to_string()
    };
    let inspected = |started: &str| {
        let mut v: serde_json::Value = serde_json::from_str(&rig.in_state("exited").stdout_str()).unwrap();
        v["State"]["StartedAt"] = started.into();
        Output::ok(&format!("{v}\n"))
    };
    rig.fake.push(Output::ok(&ps("exited")));
    assert_eq!(rig.driver().list().unwrap()[0].state, "exited", "no mark: no inspect");
    rig.state().mark_stopped_run(ID, "2026-12-01T10:00:00Z").unwrap();
    rig.fake.push(Output::ok(&ps("running")));
    assert_eq!(rig.driver().list().unwrap()[0].state, "running", "running: no inspect");
    rig.fake.push(Output::ok(&ps("exited"))).push(inspected("2026-12-01T10:00:00Z"));
    assert_eq!(rig.driver().list().unwrap()[0].state, "stopped");
    rig.fake.push(Output::ok(&ps("exited"))).push(inspected("2026-12-01T11:00:00Z"));
    assert_eq!(rig.driver().list().unwrap()[0].state, "exited", "started again outside sbx since");
    assert_eq!(rig.fake.verbs(), ["ps", "ps", "ps", "container inspect", "ps", "container inspect"]);
    assert_eq!(rig.fake.calls()[3].last().unwrap(), ID);
}

/// A sandbox this data dir recorded: `docker pause`/`unpause` on the
/// recorded container id, no inspect; any refusal is said by the
/// inspecting path, and a pool's unclaimed member still goes there.
#[test]
fn pause_and_resume_of_a_recorded_sandbox_make_one_docker_call() {
    let rig = Rig::new();
    rig.record_container(ID, &cid());
    rig.fake.push(Output::ok(""));
    assert_eq!(rig.driver().pause(ID).unwrap(), Changed::new(ID, "paused", false));
    assert_eq!(rig.fake.calls(), [vec!["pause", "--", &cid()]]);
    assert!(rig.state().marked(ID, Mark::Paused));
    rig.fake.push(Output::ok(""));
    assert_eq!(rig.driver().resume(ID).unwrap(), Changed::new(ID, "running", false));
    assert_eq!(rig.fake.calls()[1], ["unpause", "--", &cid()]);
    assert!(!rig.state().marked(ID, Mark::Paused));

    // Refused by docker: the inspecting path says why, the mark as it was.
    let not_running = format!("Error response from daemon: Container {} is not running", cid());
    rig.fake.push(Output::fail(1, &not_running)).push(rig.in_state("exited"));
    let err = rig.driver().pause(ID).unwrap_err();
    assert!(matches!(err, Error::Sandbox(SandboxError::WrongState { action: "pause", .. })), "{err:?}");
    assert!(!rig.state().marked(ID, Mark::Paused));
    rig.state().mark(ID, Mark::Paused).unwrap();
    let already = format!("Error response from daemon: Container {} is already paused", cid());
    rig.fake.push(Output::fail(1, &already)).push(rig.in_state("paused"));
    assert!(rig.driver().pause(ID).unwrap().already);
    assert!(rig.state().marked(ID, Mark::Paused), "a paused sandbox keeps its mark");
    let not_paused = format!("Error response from daemon: Container {} is not paused", cid());
    rig.fake.push(Output::fail(1, &not_paused)).push(rig.in_state("running"));
    let err = rig.driver().resume(ID).unwrap_err();
    assert!(matches!(err, Error::Sandbox(SandboxError::WrongState { action: "resume", .. })), "{err:?}");
    let n = rig.fake.calls().len();

    // A pool's unclaimed member: refused after the inspect, never paused.
    let ready = rig.state().dir.join("pools").join("p").join("ready");
    std::fs::create_dir_all(&ready).unwrap();
    std::fs::write(ready.join(ID), "{}").unwrap();
    let mut member: serde_json::Value = serde_json::from_slice(&rig.in_state("running").stdout).unwrap();
    let mut labels = member["Config"]["Labels"].take();
    labels.as_object_mut().unwrap().remove("sbx.owner");
    labels[crate::model::record::POOL] = "p".into();
    member["Config"]["Labels"] = rig.seal(labels);
    rig.fake.push(Output::ok(&format!("{member}\n")));
    let err = rig.driver().pause(ID).unwrap_err();
    assert!(err.to_string().contains("a ready member of pool p"), "{err}");
    assert_eq!(rig.fake.verbs()[n..], ["container inspect"]);
}

/// `checkpoints rm` checks every name before anything: one that is
/// hibernate's own or no checkpoint's name at all is refused (exit 2) with
/// no docker call and nothing removed, not after the names before it went.
#[test]
fn checkpoints_rm_checks_every_name_before_it_removes_one() {
    let rig = Rig::new();
    let from = rig.root.with_extension("engine-image");
    std::fs::create_dir_all(&from).unwrap();
    std::fs::write(from.join("checkpoint.img"), b"memory").unwrap();
    std::fs::create_dir_all(&rig.state().dir).unwrap();
    let store = crate::host::checkpoints::Store::at(&rig.state().dir);
    store.save(ID, "c1", &from, &std::collections::BTreeMap::new(), Default::default()).unwrap();
    for bad in ["hibernated", "../../../x", ""] {
        let e = rig.driver().checkpoints_rm(ID, &["c1".into(), bad.into()]).unwrap_err();
        assert_eq!(e.kind(), "invalid_input", "{bad:?}: {e}");
        assert_eq!(store.list(Some(ID)).len(), 1, "{bad:?}: c1 was removed");
    }
    assert!(rig.fake.calls().is_empty());
    let _ = std::fs::remove_dir_all(from);
}

/// A sandbox seen running with a hibernated mark ran after its hibernation
/// (a `resume` killed after the restore, before it dropped the mark; a
/// `docker start` outside sbx): a stop drops the mark and the stale image,
/// so it reads as `stopped` and a later start does not roll it back to
/// what it was when it was hibernated.
#[test]
fn a_stop_of_a_running_sandbox_drops_a_stale_hibernation() {
    let rig = Rig::new();
    let st = rig.state();
    std::fs::create_dir_all(&st.dir).unwrap();
    let from = rig.root.with_extension("engine-image");
    std::fs::create_dir_all(&from).unwrap();
    std::fs::write(from.join("checkpoint.img"), b"memory").unwrap();
    let store = crate::host::checkpoints::Store::at(&st.dir);
    let hibernated = crate::host::checkpoints::HIBERNATED;
    store.save(ID, hibernated, &from, &std::collections::BTreeMap::new(), Default::default()).unwrap();
    st.mark(ID, Mark::Hibernated).unwrap();
    rig.fake.push(rig.in_state("running")).push(Output::ok(""));
    rig.driver().stop(ID, Duration::from_secs(1)).unwrap();
    assert!(!st.marked(ID, Mark::Hibernated), "the stale mark stays");
    assert!(store.get(ID, hibernated).is_none(), "the stale image stays");
    rig.fake.push(rig.in_state("exited"));
    assert_eq!(rig.driver().inspect(ID).unwrap().state, "stopped");
    let _ = std::fs::remove_dir_all(from);
}

/// A sandbox this data dir recorded: `docker stop` on the recorded
/// container id with its inspect beside it, not before it. The mark is
/// there before the stop and names the run it ended after; one that had
/// finished before the stop was sent was stopped already; a refusal
/// (docker's answer for a paused sandbox, say) takes the inspecting path.
#[test]
fn stop_of_a_recorded_sandbox_looks_while_it_stops() {
    let rig = Rig::new();
    rig.record_container(ID, &cid());
    let run = |status: &str, finished: &str| {
        let mut v: serde_json::Value = serde_json::from_str(&rig.in_state(status).stdout_str()).unwrap();
        v["State"]["StartedAt"] = "2026-12-07T10:00:00.5Z".into();
        v["State"]["FinishedAt"] = finished.into();
        Output::ok(&format!("{v}\n"))
    };
    rig.fake.push(run("running", "0001-01-01T00:00:00Z"));
    let marked = rig.state();
    rig.fake.push_with(Output::ok(""), move |_| assert!(marked.marked(ID, Mark::Stopped), "no mark before the stop"));
    assert_eq!(rig.driver().stop(ID, Duration::ZERO).unwrap(), Changed::new(ID, "stopped", false));
    assert_eq!(rig.fake.brief(), [format!("container inspect -- {}", cid()), format!("stop --time 0 -- {}", cid())]);
    assert_eq!(rig.state().stopped_run(ID).as_deref(), Some("2026-12-07T10:00:00.5Z"));

    // Its program had ended before: stopped already (the mark, by the inspecting path now).
    rig.state().unmark(ID, Mark::Stopped);
    rig.fake.push(run("exited", "2026-12-07T10:00:01Z")).push(Output::ok(""));
    assert!(rig.driver().stop(ID, Duration::ZERO).unwrap().already);
    assert!(rig.state().stopped_by_sbx(ID, Some("2026-12-07T10:00:00.5Z")));

    // Docker refuses: the mark goes, and the inspecting path thaws and stops.
    rig.state().unmark(ID, Mark::Stopped);
    let paused = format!("Error response from daemon: Container {} is paused", cid());
    rig.fake.push(run("paused", "0001-01-01T00:00:00Z")).push(Output::fail(1, &paused));
    rig.fake.push(rig.in_state("paused")).push(Output::ok("")).push(Output::ok(""));
    assert_eq!(rig.driver().stop(ID, Duration::ZERO).unwrap(), Changed::new(ID, "stopped", false));
    assert_eq!(rig.fake.verbs()[4..], ["container inspect", "stop", "container inspect", "unpause", "stop"]);
    assert!(rig.state().marked(ID, Mark::Stopped));
}

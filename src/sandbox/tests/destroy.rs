//! Destroy: by record or by inspect, already gone, foreign, racing, and paced batches.

use super::*;
use crate::error::SandboxError;

#[test]
fn destroy_removes_present_and_accepts_gone() {
    let rig = Rig::new();
    std::fs::create_dir_all(rig.sock_dir()).unwrap();
    let gone = "sbx-0000000000aa";
    std::fs::create_dir_all(rig.root.join(gone)).unwrap();
    rig.fake.push(Output {
        status: 1,
        stdout: format!("{}\n", rig.inspect_line(ID, ID, &[])).into_bytes(),
        stderr: format!("Error: No such container: {gone}\n").into_bytes(),
    });
    rig.removed();
    let d = rig.driver().destroy(&[ID.to_string(), gone.to_string()]).unwrap();
    assert_eq!(d, Destroyed { removed: vec![ID.into()], already_gone: vec![gone.into()] });
    assert_eq!(rig.fake.calls()[1], ["rm", "-f", "-v", "--", ID]);
    assert!(!rig.sock_dir().exists() && !rig.root.join(gone).exists());

    // All gone: one call, success.
    rig.fake.push(Output::fail(1, &format!("Error: No such container: {ID}")));
    rig.driver().destroy(&[ID.to_string()]).unwrap();

    // Removed by a racing destroy between inspect and rm: still success.
    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &[])));
    rig.fake.push(Output::fail(1, &format!("Error response from daemon: No such container: {ID}")));
    rig.driver().destroy(&[ID.to_string()]).unwrap();
}

#[test]
fn destroy_refuses_foreign_containers_and_reports_daemon_errors() {
    let rig = Rig::new();
    rig.fake.push(Output::ok(&rig.inspect_line(ID, "sbx-0000000000bb", &[])));
    let err = rig.driver().destroy(&[ID.to_string()]).unwrap_err();
    assert!(matches!(err, Error::Sandbox(SandboxError::Foreign { .. })));
    assert_eq!(rig.fake.verbs(), ["container inspect"], "nothing removed");

    rig.fake.push(Output::fail(1, "Cannot connect to the Docker daemon at unix:///var/run/docker.sock."));
    let err = rig.driver().destroy(&[ID.to_string()]).unwrap_err();
    assert!(matches!(err, Error::Docker(DockerError::Status { .. })));
}

#[test]
fn destroy_waits_out_a_removal_already_in_progress() {
    let rig = Rig::new();
    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &[])));
    rig.fake.push(Output::fail(
        1,
        &format!("Error response from daemon: removal of container {ID} is already in progress"),
    ));
    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &[])));
    rig.fake.push(Output::fail(1, &format!("Error: No such container: {ID}")));
    rig.driver().destroy(&[ID.to_string()]).unwrap();
    assert_eq!(rig.fake.verbs(), ["container inspect", "rm", "container inspect", "container inspect"]);
}

#[test]
fn a_recorded_sandbox_is_destroyed_with_one_docker_call() {
    let rig = Rig::new();
    rig.image("");
    let cid = "c".repeat(64);
    let dir = rig.sock_dir();
    rig.fake.push_with(Output::ok(&format!("{cid}\n")), move |_| {
        std::mem::forget(UnixListener::bind(dir.join("sandbox.sock")).unwrap());
    });
    rig.running();
    rig.driver().create(&spec(CreateRequest::default())).unwrap();
    let rec = rig.state().record(ID).expect("create writes a record");
    assert_eq!(rec.container, cid);
    rig.fake.push(Output::ok(&format!("{cid}\n")));
    let d = rig.driver().destroy(&[ID.to_string()]).unwrap();
    assert_eq!(d.removed, [ID]);
    assert_eq!(rig.fake.calls().last().unwrap(), &["rm", "-f", "-v", "--", cid.as_str()]);
    assert_eq!(
        rig.fake.verbs(),
        ["image inspect", "run", "container inspect", "rm"],
        "no inspect at destroy: the container id proves ownership"
    );
    assert!(!rig.sock_dir().exists() && rig.state().record(ID).is_none());
    // A record that is not a container id is ignored (the inspect path runs).
    std::fs::create_dir_all(rig.state.join("records")).unwrap();
    std::fs::write(rig.state.join("records").join(ID), r#"{"container":"../x","socket_dir":"/tmp"}"#).unwrap();
    assert!(rig.state().record(ID).is_none());
}

#[test]
fn destroy_of_many_removes_in_paced_batches_and_a_failed_batch_stops_nothing_else() {
    let rig = Rig::new();
    let ids = many(&rig, 25);
    let lines: String = ids.iter().map(|id| format!("{}\n", rig.inspect_line(id, id, &[]))).collect();
    rig.fake.push(Output::ok(&lines));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::fail(1, "Error response from daemon: driver failed removing the container"));
    rig.fake.push(Output::ok(""));
    let err = rig.driver().with_pace(Pace::sequential(10)).destroy(&ids).unwrap_err();
    assert!(err.to_string().contains("driver failed removing"), "{err}");
    let calls = rig.fake.calls();
    assert_eq!(rig.fake.verbs(), ["container inspect", "rm", "rm", "rm"], "one docker rm per batch, never one of 25");
    for (call, batch) in calls[1..].iter().zip(ids.chunks(10)) {
        assert_eq!(call[..4], ["rm", "-f", "-v", "--"]);
        assert_eq!(call[4..], *batch, "batches in order");
    }
    // The failed batch's sandboxes keep their directories; the others' go.
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(rig.root.join(id).exists(), (10..20).contains(&i), "{id}");
    }
}

#[test]
fn destroy_of_many_recorded_sandboxes_is_paced_and_stops_once_the_engine_hangs() {
    let rig = Rig::new();
    let ids = many(&rig, 7);
    let st = rig.state();
    std::fs::create_dir_all(&rig.state).unwrap();
    for (i, id) in ids.iter().enumerate() {
        rig.record_container(id, &format!("{i:064x}"));
    }
    rig.fake.push(Output::ok(""));
    rig.fake.push_timeout(Duration::from_secs(120));
    let err = rig.driver().with_pace(Pace::sequential(3)).destroy(&ids).unwrap_err();
    assert_eq!(err.kind(), "engine_timeout", "{err}");
    assert_eq!(rig.fake.verbs(), ["rm", "rm"], "no batch starts after the engine stopped answering");
    assert_eq!(rig.fake.calls()[0][4..], [format!("{:064x}", 0), format!("{:064x}", 1), format!("{:064x}", 2)]);
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(st.record(id).is_some(), i >= 3, "{id}: only the removed are forgotten");
        assert_eq!(rig.root.join(id).exists(), i >= 3, "{id}");
    }
}

//! Look-ups: list, channel (direct and relayed), and the proof of ownership every command needs.

use super::*;
use crate::error::SandboxError;

#[test]
fn list_is_one_call_and_skips_foreign_containers() {
    let rig = Rig::new();
    let t = rig.seal(serde_json::json!({"sbx.managed": "1", "sbx.id": ID, "sbx.tier": "2"}))["sbx.owner"].clone();
    let t = t.as_str().unwrap();
    let line = |name: &str, owner: &str| {
        serde_json::json!({"name": name, "state": "running", "networks": "",
            "labels": {"sbx.managed": "1", "sbx.id": name, "sbx.owner": owner, "sbx.tier": "2"}})
        .to_string()
    };
    let ours = line(ID, t);
    // An image that copied a real sandbox's labels: its token is for another name.
    let forged = line("sbx-0000000000ee", t);
    let unsigned = line("sbx-0000000000ef", "");
    rig.fake.push(Output::ok(&format!("{ours}\n{forged}\n{unsigned}\n")));
    let l = rig.driver().list().unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].id, ID);
    assert_eq!(rig.fake.verbs(), ["ps"]);
}

#[test]
fn channel_requires_a_running_sandbox() {
    let rig = Rig::new();
    let line = rig.inspect_line(ID, ID, &[]).replace("\"running\"", "\"exited\"");
    rig.fake.push(Output::ok(&line));
    let err = rig.driver().channel(ID).unwrap_err();
    assert!(matches!(err, Error::Sandbox(SandboxError::NotRunning { ref state, .. }) if state == "exited"));
    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &[])));
    let crate::host::channel::Channel::Direct { path, owners, .. } = rig.driver().channel(ID).unwrap() else {
        panic!("a sandbox without an sbx.channel label is direct")
    };
    assert_eq!(path, rig.sock_dir().join("sandbox.sock"));
    assert!(owners.contains(&65534));
    assert_eq!(rig.fake.verbs(), ["container inspect", "container inspect"], "an inspect each, nothing more");
    assert!(rig.fake.calls().iter().all(|c| c.last().unwrap() == ID), "{:?}", rig.fake.calls());
}

/// A relayed sandbox is reached by `docker exec` on its
/// container id, as its (token-covered) sbx.channel label says.
#[test]
fn a_relayed_sandbox_is_reached_through_docker_exec() {
    let rig = Rig::new();
    let cid = "ab".repeat(32);
    let mut v: serde_json::Value = serde_json::from_str(&rig.inspect_line(ID, ID, &[])).unwrap();
    let mut labels: std::collections::BTreeMap<String, String> =
        serde_json::from_value(v["Config"]["Labels"].clone()).unwrap();
    labels.insert("sbx.channel".into(), "exec".into());
    labels.remove("sbx.owner");
    v["Config"]["Labels"] = rig.seal(serde_json::to_value(&labels).unwrap());
    v["Id"] = cid.clone().into();
    rig.fake.push(Output::ok(&v.to_string()));
    assert_eq!(
        rig.driver().channel(ID).unwrap(),
        crate::host::channel::Channel::Exec { id: ID.into(), container: cid.clone() }
    );
    // Without the label's token covering it, the label is not sbx's: refused.
    v["Config"]["Labels"]["sbx.channel"] = "direct".into();
    rig.fake.push(Output::ok(&v.to_string()));
    assert!(matches!(rig.driver().channel(ID), Err(Error::Sandbox(SandboxError::Foreign { .. }))));
    let r = rig.driver().record(
        &crate::docker::parse::RawContainer { name: ID.into(), labels: labels.clone(), ..Default::default() },
        None,
    );
    assert_eq!((r.channel, r.socket.as_str()), (crate::host::channel::Kind::Exec, "/run/sandbox/sandbox.sock"));
    assert_eq!(rig.fake.verbs(), ["container inspect", "container inspect"], "the channel itself makes no call");
    assert!(rig.fake.calls().iter().all(|c| c.last().unwrap() == ID), "{:?}", rig.fake.calls());
}

/// With `--channel exec` nothing of
/// /run/sandbox is on the host (a bounded tmpfs in the container), and
/// readiness is polled through the helper, with the container's state
/// checked between polls.
#[test]
fn the_relayed_channel_mounts_a_tmpfs_and_waits_through_the_helper() {
    use std::os::unix::fs::MetadataExt;
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    // The first probe is started before the mount check's inspect.
    rig.fake.push(Output::fail(3, ""));
    rig.running();
    rig.fake.push(Output::ok("running 0\n"));
    rig.fake.push(Output::ok(""));
    let s = spec(CreateRequest { channel: crate::host::channel::Choice::Exec, ..Default::default() });
    let c = rig.driver().create(&s).unwrap();
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "exec", "container inspect", "container inspect", "exec"]);
    let calls = rig.fake.calls();
    let run = &calls[1];
    assert!(
        run.iter().any(|a| a.starts_with(
            "/run/sandbox:rw,noexec,nosuid,nodev,size=1m,nr_inodes=64,mode=0700,uid=1879065154,gid=1879065154"
        )),
        "{run:?}"
    );
    assert!(!run.iter().any(|a| a.contains("dst=/run/sandbox")), "the host directory is not mounted: {run:?}");
    assert!(run.iter().any(|a| a == "sbx.channel=exec"));
    assert_eq!(
        calls[2],
        ["exec", "--", "deadbeef", "/run/sbx/helper", "probe-socket", "/run/sandbox/sandbox.sock", "500"]
    );
    assert_eq!(calls[2], calls[5], "probed again the same way");
    assert_eq!(
        (c.record.channel, c.record.socket.as_str()),
        (crate::host::channel::Kind::Exec, "/run/sandbox/sandbox.sock")
    );
    // The marker directory: sbx's own, 0700, not a mount.
    let md = std::fs::metadata(rig.sock_dir()).unwrap();
    assert_eq!(md.mode() & 0o7777, 0o700);
    assert_eq!(std::fs::read_dir(rig.sock_dir()).unwrap().count(), 0);
}

#[test]
fn a_relayed_create_refuses_what_is_not_a_socket() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.fake.push(Output::fail(4, "sbx-helper: /run/sandbox/sandbox.sock is a symlink, not a unix socket"));
    rig.running();
    rig.fake.push(Output::ok("running 0\n"));
    rig.removed();
    let s = spec(CreateRequest { channel: crate::host::channel::Choice::Exec, ..Default::default() });
    let err = rig.driver().create(&s).unwrap_err();
    assert!(
        matches!(err, Error::Socket(SocketError::Hostile { ref reason, .. }) if reason == "it is a symlink, not a unix socket"),
        "{err:?}"
    );
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "exec", "container inspect", "container inspect", "rm"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn every_command_acts_only_on_a_proven_sandbox() {
    // `docker run --name sbx-... --label <copied labels>`.
    let rig = Rig::new();
    let open = |id: &str| rig.driver().open(&id.parse().unwrap()).map(|t| t.container.to_string());
    let cid = "ab".repeat(32);
    let mut line: serde_json::Value = serde_json::from_str(&rig.inspect_line(ID, ID, &["none"])).unwrap();
    line["Id"] = cid.clone().into();
    rig.fake.push(Output::ok(&format!("{line}\n")));
    assert_eq!(open(ID).unwrap(), cid);
    assert_eq!(rig.fake.verbs(), ["container inspect"]);
    // An impostor: the same labels, copied to another name.
    let impostor = "sbx-0000000000ee";
    let mut forged = line.clone();
    forged["Name"] = format!("/{impostor}").into();
    forged["Config"]["Labels"]["sbx.id"] = impostor.into();
    rig.fake.push(Output::ok(&format!("{forged}\n")));
    let err = open(impostor).unwrap_err();
    assert!(matches!(err, Error::Sandbox(SandboxError::Foreign { ref id }) if id == impostor), "{err:?}");
    assert!(err.to_string().contains("not a sandbox of this host"), "{err}");
    // A sandbox this host recorded: its container id, with no docker call.
    rig.record_container(ID, &"cd".repeat(32));
    assert_eq!(open(ID).unwrap(), "cd".repeat(32));
    assert_eq!(rig.fake.verbs(), ["container inspect", "container inspect"]);
}

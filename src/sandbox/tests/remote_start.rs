//! A remote engine through the fake, continued: `start` of a
//! stopped remote sandbox (the /run check before `docker start`, readiness
//! through the relayed channel, stopped again when it never gets ready),
//! and which engine this machine's files of a sandbox belong to (gc and
//! destroy against one engine leave another's alone).

use super::*;
use crate::error::SandboxError;
use crate::host::engine::EngineChoice;
use crate::host::state::Mark;

const FAR: &str = "ssh://me@far";

fn remote(rig: &Rig) -> Driver {
    rig.driver().with_engine(EngineChoice { docker_host: Some("ssh://me:pw@far".into()), ..Default::default() })
}

fn cid() -> String {
    "cd".repeat(32)
}

/// `docker container inspect` of [`ID`] as a remote create made it, in `status`.
fn remote_sandbox(rig: &Rig, status: &str, volume: &str) -> Output {
    let labels = serde_json::json!({
        "sbx.managed": "1", "sbx.id": ID, "sbx.socket": "/run/sandbox/sandbox.sock",
        "sbx.channel": "exec", "sbx.user": "65534:65534", "sbx.image": IMG,
        "sbx.expires": "2999-01-01T00:00:00Z",
    });
    let mut v: serde_json::Value = serde_json::from_str(&rig.container_line(ID, labels, &[])).unwrap();
    v["State"]["Status"] = status.into();
    v["Id"] = cid().into();
    v["HostConfig"] = serde_json::json!({"Runtime": "runc", "Mounts": [
        {"Type": "volume", "Source": volume, "Target": "/run/sbx", "ReadOnly": true}]});
    Output::ok(&format!("{v}\n"))
}

fn volume() -> String {
    format!("sbx-helper-{}", crate::host::helper::key())
}

/// `docker cp ID:/run -` of a sandbox whose /run holds `extra` besides the plain layout.
fn run_tar(sandbox: Option<(tar::EntryType, Option<&str>)>) -> Output {
    use tar::EntryType::{Directory, Regular};
    let mut entries: Vec<crate::sandbox::testing::TarEntry> = vec![("run", Directory, b"", 0o755, None)];
    if let Some((kind, link)) = sandbox {
        entries.push(("run/sandbox", kind, b"", 0o777, link));
    }
    entries.push(("run/sbx", Directory, b"", 0o755, None));
    entries.push(("run/sbx/helper", Regular, crate::host::helper::BYTES, 0o511, None));
    Output { status: 0, stdout: crate::sandbox::testing::tar_of(&entries), stderr: Vec::new() }
}

#[test]
fn a_remote_start_checks_run_before_docker_start_then_waits_through_the_relay() {
    let rig = Rig::new();
    rig.state().mark(ID, Mark::Stopped).unwrap();
    rig.fake.push(remote_sandbox(&rig, "exited", &volume()));
    rig.fake.push(run_tar(Some((tar::EntryType::Directory, None))));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    let done = remote(&rig).start(ID, Duration::from_secs(5)).unwrap();
    assert_eq!(rig.fake.verbs(), ["container inspect", "cp", "start", "exec"]);
    let calls = rig.fake.calls();
    assert_eq!(calls[1], ["cp", &format!("{ID}:/run"), "-"]);
    assert_eq!(calls[2], ["start", "--", &cid()]);
    assert!(calls[3].contains(&"probe-socket".to_string()), "{:?}", calls[3]);
    let here = [rig.root.display().to_string(), rig.state.display().to_string()];
    for a in calls.iter().flatten() {
        assert!(!here.iter().any(|h| a.contains(h.as_str())), "{a} names a path of this machine");
    }
    assert!(!rig.state().marked(ID, Mark::Stopped));
    // Attributed to this engine; nothing of it is made under the socket
    // root here: the watchdog watches its expiry in the data dir, not the
    // path inside.
    assert!(!rig.sock_dir().exists(), "a remote start made a directory on this machine");
    assert!(rig.state().belongs(ID, FAR));
    assert_eq!(done.unwatched, Some(rig.state().expiry_file(ID)));
}

#[test]
fn a_remote_start_that_never_gets_ready_is_stopped_again() {
    let rig = Rig::new();
    rig.fake.push(remote_sandbox(&rig, "exited", &volume()));
    rig.fake.push(run_tar(None));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::fail(crate::host::channel::HELPER_NO_SOCKET, ""));
    rig.fake.push(Output::ok("running 0\n"));
    rig.fake.push(Output::ok("booting\n"));
    rig.fake.push(Output::ok(""));
    let e = remote(&rig).start(ID, Duration::from_nanos(1)).unwrap_err();
    assert!(matches!(e, Error::Sandbox(SandboxError::SocketTimeout { .. })), "{e}");
    assert_eq!(rig.fake.verbs(), ["container inspect", "cp", "start", "exec", "container inspect", "logs", "stop"]);
    assert_eq!(rig.fake.calls()[6], ["stop", "--time", "0", "--", &cid()]);
    assert!(rig.state().marked(ID, Mark::Stopped), "stopped again, never destroyed");
}

#[test]
fn a_remote_start_refuses_a_swapped_run_an_old_helper_and_a_local_sandbox_before_docker_start() {
    // /run/sandbox became a symlink while it was stopped.
    let rig = Rig::new();
    rig.fake.push(remote_sandbox(&rig, "exited", &volume()));
    rig.fake.push(run_tar(Some((tar::EntryType::Symlink, Some("/tmp")))));
    let e = remote(&rig).start(ID, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(&e, Error::Image(crate::error::ImageError::Redirected { .. })), "{e}");
    assert!(e.to_string().contains("/run/sandbox in the image is a Symlink to /tmp"), "{e}");
    assert_eq!(rig.fake.verbs(), ["container inspect", "cp"], "never started");

    // Another sbx build's helper volume: this one cannot verify its helper.
    let rig = Rig::new();
    rig.fake.push(remote_sandbox(&rig, "exited", "sbx-helper-0000"));
    let e = remote(&rig).start(ID, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(&e, Error::Host(crate::error::HostError::HelperUntrusted { .. })), "{e}");
    assert!(e.to_string().contains("another sbx build's helper volume"), "{e}");
    assert_eq!(rig.fake.verbs(), ["container inspect"]);

    // A sandbox a local engine made (its socket directory is a path on the engine's machine).
    let rig = Rig::new();
    let mut v: serde_json::Value = serde_json::from_str(&rig.inspect_line(ID, ID, &[])).unwrap();
    v["State"]["Status"] = "exited".into();
    v["Id"] = cid().into();
    rig.fake.push(Output::ok(&v.to_string()));
    let e = remote(&rig).start(ID, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(&e, Error::Host(crate::error::HostError::RemoteUnsupported { .. })), "{e}");
    assert_eq!(rig.fake.verbs(), ["container inspect"]);
}

/// The marker, TTL, marks and record of a sandbox on another engine.
fn far_sandbox(rig: &Rig) {
    let st = rig.state();
    std::fs::create_dir_all(rig.sock_dir()).unwrap();
    st.set_engine(ID, FAR).unwrap();
    st.set_expiry(ID, std::time::SystemTime::now() + Duration::from_secs(3600)).unwrap();
    st.mark(ID, Mark::Stopped).unwrap();
    rig.record_container(ID, &cid());
}

#[test]
fn gc_and_destroy_against_the_local_engine_leave_a_remote_sandbox_s_files_alone() {
    let rig = Rig::new();
    far_sandbox(&rig);
    // Nothing on the local engine.
    rig.fake.push(Output::ok("")).push(Output::ok(""));
    let r = rig.driver().gc(false).unwrap();
    assert!(r.socket_dirs.is_empty(), "{r:?}");
    assert_eq!(rig.fake.verbs(), ["network ls", "ps"]);
    let st = rig.state();
    assert!(rig.sock_dir().is_dir() && st.expiry(ID).is_some() && st.marked(ID, Mark::Stopped));
    // destroy: its record names a container this engine does not have.
    rig.fake.push(Output::fail(1, &format!("Error: No such container: {ID}")));
    let d = rig.driver().destroy(&[ID.to_string()]).unwrap();
    assert_eq!(d.already_gone, [ID]);
    assert_eq!(rig.fake.verbs()[2], "container inspect");
    assert!(rig.sock_dir().is_dir() && st.expiry(ID).is_some() && st.belongs(ID, FAR));
}

#[test]
fn gc_against_the_remote_engine_reaps_the_marker_of_its_sandbox_removed_behind_sbx_s_back() {
    let rig = Rig::new();
    far_sandbox(&rig);
    // And a sandbox of the local engine, also without a container on the remote one.
    let local = "sbx-00000000000e";
    std::fs::create_dir_all(rig.root.join(local)).unwrap();
    rig.state().set_expiry(local, std::time::SystemTime::now()).unwrap();
    rig.fake.push(Output::ok("")).push(Output::ok(""));
    rig.fake.push(Output::fail(1, &format!("Error: No such container: {ID}")));
    rig.fake.push(Output::ok(""));
    let r = remote(&rig).gc(false).unwrap();
    assert_eq!(rig.fake.verbs(), ["network ls", "ps", "container inspect", "ps"]);
    assert_eq!(r.socket_dirs, [rig.sock_dir().display().to_string()]);
    let st = rig.state();
    assert!(!rig.sock_dir().exists() && st.expiry(ID).is_none() && !st.marked(ID, Mark::Stopped));
    assert!(st.attributed().is_empty() && st.record(ID).is_none());
    assert!(rig.root.join(local).is_dir() && st.expiry(local).is_some(), "the local sandbox's files went");
}

#[test]
fn remote_gc_removes_sbx_s_fillers_whose_create_is_gone_and_no_other() {
    use crate::sandbox::shared::fillers as filler;
    let rig = Rig::new();
    std::fs::create_dir_all(&rig.state).unwrap();
    let key = rig.state().key().unwrap();
    let at = "2026-11-30 13:45:26 +0000 UTC";
    let row = |name: &str, value: &str, owner: &str| serde_json::json!([name, value, owner, at]).to_string();
    let dead =
        format!("1 {} {} 1", std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap().trim(), i32::MAX);
    let live = filler::label_value(std::time::SystemTime::now());
    let ps = [
        row("sbx-fill-dead", &dead, &filler::token(&key, "sbx-fill-dead", &dead)),
        row("sbx-fill-live", &live, &filler::token(&key, "sbx-fill-live", &live)),
        row("sbx-fill-forged", &dead, "0000"),
    ]
    .join("\n");
    rig.fake.push(Output::ok("")).push(Output::ok(""));
    rig.fake.push(Output::ok(&ps));
    rig.fake.push(Output::ok("sbx-fill-dead\n"));
    let r = remote(&rig).gc(false).unwrap();
    assert_eq!(r.fillers, ["sbx-fill-dead"]);
    assert_eq!(rig.fake.calls()[3], ["rm", "-f", "-v", "--", "sbx-fill-dead"]);
    // Every creator checked here: the engine's clock was not asked.
    assert_eq!(rig.fake.calls().len(), 4);
}

/// Fillers of another machine sharing the key go by docker's `Created`
/// against the engine's clock (one `docker info`), whatever their label's
/// time says and whatever this machine's clock says (the engine's is in
/// 2001 here).
#[test]
fn remote_gc_ages_other_machines_fillers_by_the_engine_s_clock_not_their_label() {
    use crate::sandbox::shared::fillers as filler;
    let gc = |info: &str, removes: bool| {
        let rig = Rig::new();
        std::fs::create_dir_all(&rig.state).unwrap();
        let key = rig.state().key().unwrap();
        let row = |name: &str, value: &str, created: &str| {
            serde_json::json!([name, value, filler::token(&key, name, value), created]).to_string()
        };
        let ps = [
            // Made 61 minutes ago; its machine's clock runs far ahead.
            row("sbx-fill-old", "4102444800 other 2 5", "2001-01-01 11:59:00 +0000 UTC"),
            // Made a minute ago; its machine's clock runs far behind.
            row("sbx-fill-new", "1 other 2 5", "2001-01-01 13:59:00 +0100 CET"),
        ]
        .join("\n");
        rig.fake.push(Output::ok("")).push(Output::ok(""));
        rig.fake.push(Output::ok(&ps));
        rig.fake.push(Output::ok(info));
        if removes {
            rig.fake.push(Output::ok("sbx-fill-old\n"));
        }
        let r = remote(&rig).gc(false).unwrap();
        (r, rig.fake.calls())
    };
    let (r, calls) = gc("\"2001-01-01T13:00:00.5Z\"\n", true);
    assert_eq!(r.fillers, ["sbx-fill-old"]);
    assert_eq!(calls[3], ["info", "--format", "{{json .SystemTime}}"]);
    assert_eq!(calls[4], ["rm", "-f", "-v", "--", "sbx-fill-old"]);
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    // An engine time sbx cannot read: none goes, and gc says why.
    let (r, calls) = gc("\"soon\"\n", false);
    assert_eq!(r.fillers, Vec::<String>::new());
    assert_eq!(calls.len(), 4, "{calls:?}");
    assert_eq!(r.failed.len(), 1, "{:?}", r.failed);
    assert!(r.failed[0].error.contains("engine time"), "{:?}", r.failed);
}

/// `sbx ttl` of a remote sandbox: the watchdog it starts watches its
/// expiry in the data dir (nothing is made under the socket root here),
/// not the socket's path inside the sandbox, and the TTL is attributed to
/// that engine.
#[test]
fn ttl_of_a_remote_sandbox_watches_its_expiry_here() {
    let rig = Rig::new();
    rig.fake.push(remote_sandbox(&rig, "running", &volume()));
    let (_, watch) = remote(&rig).set_ttl(ID, Duration::from_secs(3600)).unwrap();
    assert_eq!(watch, Some(rig.state().expiry_file(ID)));
    assert!(!rig.sock_dir().exists() && rig.state().belongs(ID, FAR) && rig.state().expiry(ID).is_some());
    assert_eq!(rig.fake.verbs(), ["container inspect"], "the expiry is kept here, nothing is run there");
    assert_eq!(rig.fake.calls()[0].last().unwrap(), ID);
}

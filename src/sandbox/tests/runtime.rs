//! Create under another OCI runtime: the runtime is checked
//! before anything exists, and under gVisor the route hosts are written by sbx.

use super::*;
use crate::error::{ImageError, RuntimeError};

const RUNTIMES_OK: &str = r#"{"runc":{"path":"runc"},"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=host","--host-uds=create"]}}"#;

/// The container id `docker run` prints.
const CID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// gVisor's gofer beside the rig's main process (pid 4242, the Sentry):
/// pid 4240, in the container's cgroup, with `mountinfo` (its own root).
fn gofer(rig: &Rig, mountinfo: &str) {
    let proc = rig.root.with_extension("proc");
    let cgroup = format!("4:pids:/docker/{CID}\n");
    std::fs::write(proc.join("4242/cgroup"), &cgroup).unwrap();
    std::fs::create_dir_all(proc.join("4240")).unwrap();
    std::fs::write(proc.join("4240/cgroup"), &cgroup).unwrap();
    std::fs::write(proc.join("4240/mountinfo"), mountinfo.replace("600 ", "700 ").replace(" 600 ", " 700 ")).unwrap();
}

/// Attack finding 1: under gVisor an image that moved the
/// helper's mount is refused from the gofer's table, and nothing is left.
#[test]
fn under_gvisor_a_redirected_helper_is_refused() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(RUNTIMES_OK));
    let driver = rig.driver();
    gofer(&rig, &MOUNTINFO.replace(" /run/sbx ro,", " /tmp/a/sbx rw,"));
    rig.starts_and_binds_as(CID);
    // The failure is confirmed on the same, still running process; then the rollback.
    rig.running();
    rig.removed();
    let err = driver.create(&runsc(CreateRequest::default())).unwrap_err();
    assert!(
        matches!(&err, Error::Image(ImageError::Redirected { path, found, .. })
        if path == "/run/sbx" && found.contains("/tmp/a/sbx")),
        "{err}"
    );
    assert_eq!(rig.fake.verbs(), ["image inspect", "info", "run", "container inspect", "container inspect", "rm"]);
    assert!(!rig.sock_dir().exists(), "nothing left");
    // No gofer to read: refused too, never taken as checked.
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(RUNTIMES_OK));
    let driver = rig.driver();
    rig.starts_and_binds_as(CID);
    rig.running();
    rig.removed();
    let err = driver.create(&runsc(CreateRequest::default())).unwrap_err();
    assert!(err.to_string().contains("finding where gVisor placed"), "{err}");
}

fn runsc(req: CreateRequest) -> SandboxSpec {
    spec(CreateRequest { runtime: Some("runsc".into()), channel: crate::model::channel::Choice::Direct, ..req })
}

#[test]
fn runc_asks_the_engine_nothing_more() {
    let rig = Rig::new();
    rig.image("");
    rig.starts_and_binds();
    rig.driver().create(&spec(CreateRequest::default())).unwrap();
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect"]);
    let run = &rig.fake.calls()[1];
    assert!(run.windows(2).any(|w| w[0] == "--runtime" && w[1] == "runc"));
    assert!(run.iter().any(|a| a == "sbx.runtime=runc"));
}

#[test]
fn a_missing_runtime_is_refused_before_anything_exists() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(r#"{"runc":{"path":"runc"}}"#));
    let err = rig.driver().create(&runsc(CreateRequest::default())).unwrap_err();
    assert!(matches!(&err, Error::Runtime(RuntimeError::Missing { name, have }) if name == "runsc" && have == "runc"));
    assert_eq!(err.exit_code(), 1);
    let hint = err.hint().unwrap();
    assert!(hint.contains(r#""runtimeArgs":["--network=host","--host-uds=create"]"#), "{hint}");
    assert!(hint.contains("kill -HUP") && hint.contains("apt-get install runsc"), "{hint}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "info"]);
    assert!(!rig.sock_dir().exists(), "nothing made");
}

#[test]
fn a_registration_sbx_cannot_run_under_says_what_to_change() {
    for (args, needle) in [
        (r#"["--network=host"]"#, "--host-uds=none"),
        (r#"["--host-uds=create"]"#, "--network=sandbox"),
        (r#"["--network=host","--host-uds=create","--oci-seccomp"]"#, "--oci-seccomp"),
    ] {
        let rig = Rig::new();
        rig.image("");
        rig.fake.push(Output::ok(&format!(r#"{{"runsc":{{"path":"/usr/bin/runsc","runtimeArgs":{args}}}}}"#)));
        let err = rig.driver().create(&runsc(CreateRequest::default())).unwrap_err();
        assert!(err.to_string().contains(needle), "{args}: {err}");
        assert_eq!(err.kind(), "runtime_misconfigured");
        assert!(err.hint().unwrap().contains("/etc/docker/daemon.json"));
        assert_eq!(rig.fake.verbs(), ["image inspect", "info"], "{args}");
    }
}

#[test]
fn under_gvisor_a_pids_limit_gvisor_itself_would_exhaust_is_invalid_input() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(RUNTIMES_OK));
    let err = rig.driver().create(&runsc(CreateRequest { pids: Some(64), ..Default::default() })).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(err.to_string().contains("runtime's own threads"), "{err}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "info"]);
}

#[test]
fn under_gvisor_route_hosts_are_written_by_sbx() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(RUNTIMES_OK));
    rig.fake.push(Output::ok(&net_line("sbx-proxy", true, true)));
    let svc = serde_json::json!({"Name": "/proxy", "State": {"Status": "running"}, "Config": {"Labels": {}},
        "NetworkSettings": {"Networks": {"sbx-proxy": {"IPAddress": "172.30.0.2"}}}});
    rig.fake.push(Output::ok(&format!("{svc}\n")));
    let driver = rig.driver();
    gofer(&rig, MOUNTINFO);
    rig.starts_and_binds_as(CID);
    let c = driver.create(&runsc(routes(&["inference:proxy:8080"]))).unwrap();
    // The mounts are checked in gVisor's gofer's table, found from the main process.
    assert_eq!(
        rig.fake.verbs(),
        ["image inspect", "info", "network inspect", "container inspect", "run", "container inspect"]
    );
    let run = &rig.fake.calls()[4];
    assert!(run.windows(2).any(|w| w[0] == "--add-host" && w[1] == "proxy:172.30.0.2"), "{run:?}");
    assert!(run.windows(2).any(|w| w[0] == "--dns" && w[1] == "127.0.0.1"));
    assert!(run.windows(2).any(|w| w[0] == "--runtime" && w[1] == "runsc"));
    assert!(run.iter().any(|a| a == "SBX_SANDBOX_RUNTIME=runsc"));
    assert_eq!(c.record.runtime, "runsc");
}

#[test]
fn under_gvisor_a_route_host_that_is_no_container_is_refused() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(RUNTIMES_OK));
    rig.fake.push(Output::ok(&net_line("sbx-proxy", true, true)));
    rig.fake.push(Output {
        status: 1,
        stdout: b"[]\n".to_vec(),
        stderr: b"Error: No such container: proxy\n".to_vec(),
    });
    // The rollback's removal (nothing was run, so nothing is there).
    rig.fake.push(Output::fail(1, &format!("Error: No such container: {ID}\n")));
    let err = rig.driver().create(&runsc(routes(&["inference:proxy:8080"]))).unwrap_err();
    assert_eq!(err.kind(), "route_unresolved", "{err}");
    assert!(err.hint().unwrap().contains("docker network connect sbx-proxy proxy"));
    assert!(!rig.fake.verbs().contains(&"run".to_string()));
}

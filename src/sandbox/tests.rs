//! The driver through the recording fake: exact calls, every failure path,
//! and what each failure cleans up.

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;
use crate::docker::fake::FakeDocker;
use crate::error::SocketError;
use crate::host::state::{self, State};
use crate::spec::CreateRequest;

const IMG: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const ID: &str = "sbx-00000000000f";

/// `docker network inspect` lines as NETWORK_FORMAT prints them.
fn net_line(name: &str, internal: bool, inhibit: bool) -> String {
    let opts = if inhibit { r#"{"com.docker.network.bridge.inhibit_ipv4":"true"}"# } else { "{}" };
    format!("[{name:?},{internal},\"bridge\",{opts},{{}}]\n")
}

struct Rig {
    fake: FakeDocker,
    root: PathBuf,
    state: PathBuf,
}

impl Rig {
    fn new() -> Self {
        let root = std::env::temp_dir().join(format!("sbx-drv-{}-{}", std::process::id(), rand::random::<u64>()));
        let state = root.with_extension("state");
        Rig { fake: FakeDocker::new(), root, state }
    }

    fn driver(&self) -> ContainerDriver {
        let roots = RootChoice {
            explicit: Some(self.root.clone()),
            xdg_runtime_dir: None,
            temp_dir: self.root.clone(),
            euid: 0,
        };
        let states = StateChoice { explicit: Some(self.state.clone()), xdg_state_home: None, home: None, euid: 0 };
        // The sandbox's mount table, as the kernel shows it on the host.
        let proc = self.root.with_extension("proc");
        std::fs::create_dir_all(proc.join("4242")).unwrap();
        std::fs::write(proc.join("4242/mountinfo"), MOUNTINFO).unwrap();
        ContainerDriver::new(Arc::new(self.fake.clone()), roots, states)
            .with_ids(Arc::new(|| ID.to_string()))
            .with_proc(proc)
    }

    /// The main process's pid, asked right after the start.
    fn running(&self) {
        self.fake.push(Output::ok("4242 running 0\n"));
    }

    fn token(&self, id: &str) -> String {
        std::fs::create_dir_all(&self.state).unwrap();
        state::owner_token(&self.state().key().unwrap(), id)
    }

    /// Labels as sbx writes them on a container: `sbx.owner` covers the rest.
    fn seal(&self, mut labels: serde_json::Value) -> serde_json::Value {
        std::fs::create_dir_all(&self.state).unwrap();
        let map: std::collections::BTreeMap<String, String> = serde_json::from_value(labels.clone()).unwrap();
        let id = map["sbx.id"].clone();
        labels["sbx.owner"] = state::record_token(&self.state().key().unwrap(), &id, &map).into();
        labels
    }

    fn state(&self) -> State {
        State::at(self.state.clone())
    }

    fn inspect_line(&self, name: &str, labels_id: &str, networks: &[&str]) -> String {
        let nets: serde_json::Map<String, serde_json::Value> =
            networks.iter().map(|n| (n.to_string(), serde_json::json!({}))).collect();
        serde_json::json!({
            "Name": format!("/{name}"),
            "State": {"Status": "running"},
            "Config": {"Labels": self.seal(serde_json::json!({
                "sbx.managed": "1",
                "sbx.id": labels_id,
                "sbx.routes": "{\"inference\":\"sbx-proxy\",\"tools\":\"sbx-proxy\",\"docs\":\"sbx-docs\"}",
                "sbx.socket": self.root.join(name).join("sandbox.sock").display().to_string(),
                "sbx.user": "65534:65534",
            }))},
            "NetworkSettings": {"Networks": nets},
        })
        .to_string()
    }

    fn sock_dir(&self) -> PathBuf {
        self.root.join(ID)
    }

    fn image(&self, user: &str) {
        self.fake.push(Output::ok(&format!("[{user:?},{{\"org.opencontainers.image.title\":\"x\"}}]\n")));
    }

    /// `docker run`/`start` succeeds and the "sandbox" binds its socket.
    fn starts_and_binds(&self) {
        let dir = self.sock_dir();
        self.fake.push_with(Output::ok("deadbeef\n"), move |_| {
            let l = UnixListener::bind(dir.join("sandbox.sock")).unwrap();
            std::mem::forget(l);
        });
        self.running();
    }

    fn removed(&self) {
        self.fake.push(Output::ok(&format!("{ID}\n")));
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // As root the socket directory is a tmpfs: unmounted by sbx's own removal.
        let _ = socket::remove_dir(&self.sock_dir(), ID);
        let _ = std::fs::remove_dir_all(&self.root);
        let _ = std::fs::remove_dir_all(&self.state);
        let _ = std::fs::remove_dir_all(self.root.with_extension("proc"));
    }
}

/// A running route service as `docker container inspect` shows it: no sbx labels.
fn service_line(name: &str) -> String {
    serde_json::json!({"Name": format!("/{name}"), "State": {"Status": "running"},
        "Config": {"Labels": {"com.example.role": "proxy"}}, "NetworkSettings": {"Networks": {"bridge": {}}}})
    .to_string()
}
/// Where a sandbox's mounts are when the image redirects nothing.
const MOUNTINFO: &str = "\
600 500 0:51 / / ro,relatime - overlay overlay rw
611 600 8:1 /tmp/root/sbx-00000000000f /run/sandbox rw,relatime - ext4 /dev/sda1 rw
612 600 8:1 /var/lib/sbx/helper/v-k /run/sbx ro,relatime - ext4 /dev/sda1 rw
";

fn spec(req: CreateRequest) -> SandboxSpec {
    SandboxSpec::from_request(&CreateRequest { image: IMG.into(), ..req }, None).unwrap()
}

fn routes(r: &[&str]) -> CreateRequest {
    CreateRequest { routes: r.iter().map(|s| s.to_string()).collect(), ..Default::default() }
}

#[test]
fn create_without_routes_is_three_calls() {
    let rig = Rig::new();
    rig.image("");
    rig.starts_and_binds();
    let c = rig.driver().create(&spec(CreateRequest::default())).unwrap();
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect"]);
    let calls = rig.fake.calls();
    assert_eq!(
        calls[2],
        ["container", "inspect", "--format", "{{.State.Pid}} {{.State.Status}} {{.State.ExitCode}}", "--", ID]
    );
    // The helper's directory is mounted AT /run/sbx (a mount point), read-only.
    assert!(calls[1].iter().any(|a| a.starts_with("type=bind,src=") && a.ends_with(",dst=/run/sbx,readonly")));
    assert_eq!(
        calls[0],
        ["image", "inspect", "--format", "[{{json .Config.User}},{{json .Config.Labels}}]", "--", IMG]
    );
    assert_eq!((c.id.as_str(), c.tier, c.user.as_str()), (ID, 2, "65534:65534"));
    assert_eq!(c.socket, rig.sock_dir().join("sandbox.sock").display().to_string());
    assert!(c.warnings.is_empty());
    let run = &calls[1];
    assert!(run.windows(2).any(|w| w[0] == "--network" && w[1] == "none"));
}

#[test]
fn create_with_routes_attaches_the_rest_before_start() {
    let rig = Rig::new();
    rig.image("1000");
    rig.fake.push(Output::ok(&(net_line("sbx-proxy", true, true) + &net_line("sbx-tools", true, false))));
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.fake.push(Output::ok(""));
    rig.starts_and_binds();
    let s = spec(routes(&["inference:proxy:8080", "tools:tools:9000", "more:proxy:8081"]));
    let c = rig.driver().create(&s).unwrap();
    assert_eq!(
        rig.fake.verbs(),
        ["image inspect", "network inspect", "create", "network connect", "start", "container inspect"]
    );
    let calls = rig.fake.calls();
    assert_eq!(calls[1][5..], ["sbx-proxy", "sbx-tools"]);
    assert_eq!(calls[3], ["network", "connect", "--", "sbx-tools", ID]);
    assert_eq!(calls[4], ["start", "--", ID]);
    assert!(calls[2].windows(2).any(|w| w[0] == "--user" && w[1] == "1000:1000"));
    assert!(
        calls[2].windows(2).any(|w| w[0] == "--dns" && w[1] == "127.0.0.1"),
        "internal routes get the contained resolver"
    );
    assert_eq!(c.routes.len(), 3);
    // Shared operator networks: the sandbox is not alone on them, and
    // sbx-tools still has a host address. Tier 1, and each gap said.
    assert_eq!(c.tier, 1);
    let gaps: Vec<(&str, &str)> = c.gaps.iter().map(|g| (g.network.as_str(), g.property)).collect();
    assert_eq!(gaps, [("sbx-proxy", "shared"), ("sbx-tools", "host"), ("sbx-tools", "shared")]);
    assert_eq!(c.gaps[0].routes, ["inference", "more"]);
    assert_eq!(c.warnings.len(), 3);
    assert!(c.warnings[1].contains("inhibit_ipv4=true sbx-tools"), "{}", c.warnings[1]);
}

#[test]
fn missing_network_names_the_command_and_creates_nothing() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output {
        status: 1,
        stdout: net_line("sbx-proxy", true, true).into_bytes(),
        stderr: b"Error response from daemon: network sbx-tools not found\n".to_vec(),
    });
    let err = rig.driver().create(&spec(routes(&["a:proxy:1", "b:tools:2"]))).unwrap_err();
    match &err {
        Error::NetworkMissing { networks } => assert_eq!(networks, &["sbx-tools"]),
        other => panic!("{other:?}"),
    }
    assert!(err.hint().unwrap().contains("docker network create --internal sbx-tools"));
    assert_eq!(err.exit_code(), 1);
    assert_eq!(rig.fake.verbs(), ["image inspect", "network inspect"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn open_network_lowers_the_tier_or_is_refused_when_strict() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(&net_line("sbx-proxy", false, false)));
    rig.starts_and_binds();
    let c = rig.driver().create(&spec(routes(&["a:proxy:1"]))).unwrap();
    assert_eq!(c.tier, 1);
    assert!(c.warnings[0].contains("sbx-proxy is not internal"));
    let run = &rig.fake.calls()[2];
    assert!(run.contains(&"SBX_SANDBOX_TIER=1".to_string()) && run.contains(&"sbx.tier=1".to_string()));
    assert!(!run.contains(&"--dns".to_string()), "a sandbox with egress keeps its resolver");

    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(&net_line("sbx-proxy", true, true)));
    let err = rig.driver().create(&spec(CreateRequest { strict_egress: true, ..routes(&["a:proxy:1"]) })).unwrap_err();
    match &err {
        Error::NotContained { gaps } => assert_eq!(gaps.iter().map(|g| g.property).collect::<Vec<_>>(), ["shared"]),
        other => panic!("{other:?}"),
    }
    assert!(err.hint().unwrap().contains("--private-routes"));
    assert_eq!(rig.fake.verbs(), ["image inspect", "network inspect"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn missing_image_and_missing_docker() {
    let rig = Rig::new();
    rig.fake.push(Output::fail(1, "Error response from daemon: no such image: x: No such image: x"));
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(err, Error::ImageMissing { .. }));
    rig.fake.push_spawn_failure();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert_eq!(err.kind(), "docker_missing");
    assert!(err.hint().unwrap().contains("docker CLI"));
    let rig = Rig::new();
    rig.fake.push(Output::fail(
        1,
        "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
    ));
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(err.hint().unwrap().contains("start the docker daemon"), "{:?}", err.hint());
}

#[test]
fn failed_run_is_torn_down() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::fail(125, "docker: Error response from daemon: OCI runtime create failed"));
    rig.removed();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(err, Error::Docker(DockerError::Status { status: 125, .. })), "{err:?}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "rm"]);
    assert_eq!(rig.fake.calls()[2], ["rm", "-f", "-v", "--", ID]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn failed_attach_is_torn_down() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(&(net_line("sbx-a", true, true) + &net_line("sbx-b", true, true))));
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.fake.push(Output::fail(1, "Error response from daemon: network sbx-b not found"));
    rig.removed();
    let err = rig.driver().create(&spec(routes(&["a:a:1", "b:b:2"]))).unwrap_err();
    assert!(matches!(err, Error::Docker(DockerError::Status { .. })));
    assert_eq!(rig.fake.verbs(), ["image inspect", "network inspect", "create", "network connect", "rm"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn death_at_boot_reports_logs_and_cleans_up() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.fake.push(Output::ok("0 exited 3\n"));
    rig.fake.push(Output { status: 0, stdout: b"starting\n".to_vec(), stderr: b"panic: no config\n".to_vec() });
    rig.removed();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    match &err {
        Error::DiedAtBoot { code, logs, .. } => {
            assert_eq!(*code, 3);
            assert!(logs.contains("starting") && logs.contains("panic: no config"));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("panic: no config"));
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "logs", "rm"]);
    assert_eq!(
        rig.fake.calls()[2],
        ["container", "inspect", "--format", "{{.State.Pid}} {{.State.Status}} {{.State.ExitCode}}", "--", ID]
    );
    assert_eq!(rig.fake.calls()[3], ["logs", "--tail", "20", "--", ID]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn socket_timeout_reports_logs_and_cleans_up() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.running();
    rig.fake.push(Output::ok(""));
    rig.removed();
    let s = spec(CreateRequest { socket_wait: Some("60ms".into()), ..Default::default() });
    let err = rig.driver().create(&s).unwrap_err();
    assert!(matches!(err, Error::SocketTimeout { ref waited, .. } if waited == "60ms"), "{err:?}");
    assert!(err.to_string().contains("logged nothing"));
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "logs", "rm"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn socket_wait_zero_does_not_wait() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.running();
    let s = spec(CreateRequest { socket_wait: Some("0".into()), ..Default::default() });
    rig.driver().create(&s).unwrap();
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect"]);
}

#[test]
fn hostile_socket_fails_the_create() {
    let rig = Rig::new();
    rig.image("");
    let dir = rig.sock_dir();
    rig.fake.push_with(Output::ok("x\n"), move |_| {
        std::os::unix::fs::symlink("/var/run/docker.sock", dir.join("sandbox.sock")).unwrap();
    });
    rig.running();
    rig.removed();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(
        matches!(err, Error::Socket(SocketError::Hostile { ref reason, .. }) if reason.contains("symlink")),
        "{err:?}"
    );
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "rm"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn interrupt_during_wait_tears_down_and_exits_128_plus_signal() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("x\n"));
    rig.running();
    rig.removed();
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    // Signals arrive on the 5th check (while waiting for the socket).
    let driver = rig.driver().with_interrupts(Arc::new(move || (p.fetch_add(1, Ordering::SeqCst) >= 4).then_some(2)));
    let err = driver.create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(err, Error::Interrupted { signal: 2 }));
    assert_eq!(err.exit_code(), 130);
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "rm"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn interrupt_before_anything_exists_makes_nothing() {
    let rig = Rig::new();
    let driver = rig.driver().with_interrupts(Arc::new(|| Some(15)));
    let err = driver.create(&spec(CreateRequest::default())).unwrap_err();
    assert_eq!(err.exit_code(), 143);
    assert!(rig.fake.calls().is_empty());
    assert!(!rig.sock_dir().exists());
}

#[test]
fn too_long_socket_path_is_refused_before_docker() {
    let mut rig = Rig::new();
    rig.root = std::env::temp_dir().join("x".repeat(100));
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(err, Error::Socket(SocketError::PathTooLong { .. })));
    assert!(err.hint().unwrap().contains("shorter --socket-dir"));
    assert!(rig.fake.calls().is_empty());
}

#[test]
fn users_never_default_to_root() {
    let mut w = Vec::new();
    assert_eq!(choose_user(None, "", &mut w), UserSpec { uid: NOBODY, gid: NOBODY });
    assert!(w.is_empty());
    assert_eq!(choose_user(None, "root", &mut w), UserSpec { uid: NOBODY, gid: NOBODY });
    assert_eq!(choose_user(None, "0:0", &mut w), UserSpec { uid: NOBODY, gid: NOBODY });
    assert_eq!(w.len(), 2);
    assert_eq!(choose_user(None, "1000:100", &mut w), UserSpec { uid: 1000, gid: 100 });
    let mut w = Vec::new();
    assert_eq!(choose_user(Some(UserSpec { uid: 0, gid: 0 }), "1000", &mut w), UserSpec { uid: 0, gid: 0 });
    assert!(w[0].contains("root"));
}

#[test]
fn group_0_only_when_asked_for_and_then_with_a_warning() {
    // Issue 9 finding 10: `USER 1000:0` ran as gid 0 with no warning.
    let mut w = Vec::new();
    assert_eq!(choose_user(None, "1000:0", &mut w), UserSpec { uid: 1000, gid: 1000 });
    assert!(w[0].contains("group 0") && w[0].contains("--user 1000:0"), "{w:?}");
    let mut w = Vec::new();
    assert_eq!(choose_user(None, "1000", &mut w), UserSpec { uid: 1000, gid: 1000 });
    assert!(w.is_empty());
    let mut w = Vec::new();
    assert_eq!(choose_user(Some(UserSpec { uid: 65534, gid: 0 }), "", &mut w), UserSpec { uid: 65534, gid: 0 });
    assert!(w[0].contains("group 0 (root)") && w[0].contains("--user 65534:0"), "{w:?}");
    let mut w = Vec::new();
    choose_user(Some(UserSpec { uid: 1000, gid: 1000 }), "1000:0", &mut w);
    assert!(w.is_empty(), "--user wins over the image, silently");
}

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
    assert!(matches!(err, Error::Foreign { .. }));
    assert_eq!(rig.fake.verbs(), ["container inspect"], "nothing removed");

    rig.fake.push(Output::fail(1, "Cannot connect to the Docker daemon at unix:///var/run/docker.sock."));
    let err = rig.driver().destroy(&[ID.to_string()]).unwrap_err();
    assert!(matches!(err, Error::Docker(DockerError::Status { .. })));
}

#[test]
fn revoke_disconnects_and_reports_shared_networks() {
    let rig = Rig::new();
    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &["sbx-proxy", "sbx-docs"])));
    rig.fake.push(Output::ok(""));
    let r = rig.driver().revoke(ID, "inference").unwrap();
    assert_eq!(rig.fake.calls()[1], ["network", "disconnect", "--force", "--", "sbx-proxy", ID]);
    assert_eq!(r.cut, ["inference", "tools"]);
    assert!(!r.already);

    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &["sbx-docs"])));
    assert!(rig.driver().revoke(ID, "tools").unwrap().already);

    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &["sbx-docs"])));
    let err = rig.driver().revoke(ID, "nope").unwrap_err();
    match &err {
        Error::UnknownRoute { routes, .. } => assert_eq!(routes, &["docs"]),
        other => panic!("{other:?}"),
    }
    assert_eq!(err.exit_code(), 1);
    assert!(err.to_string().contains("its routes: docs"));

    rig.fake.push(Output::fail(1, &format!("Error: No such container: {ID}")));
    assert!(matches!(rig.driver().revoke(ID, "docs"), Err(Error::NotFound { .. })));
}

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
    assert!(matches!(err, Error::NotRunning { ref state, .. } if state == "exited"));
    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &[])));
    let crate::host::channel::Channel::Direct { path, owners } = rig.driver().channel(ID).unwrap() else {
        panic!("a sandbox without an sbx.channel label is direct")
    };
    assert_eq!(path, rig.sock_dir().join("sandbox.sock"));
    assert!(owners.contains(&65534));
}

/// Issue 10 item 7: a relayed sandbox is reached by `docker exec` on its
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
    assert!(matches!(rig.driver().channel(ID), Err(Error::Foreign { .. })));
    let r = rig.driver().record(&crate::docker::parse::RawContainer {
        name: ID.into(),
        labels: labels.clone(),
        ..Default::default()
    });
    assert_eq!((r.channel, r.socket.as_str()), (crate::host::channel::Kind::Exec, "/run/sandbox/sandbox.sock"));
}

/// Issue 10 item 7 / issue 9 finding 7: with `--channel exec` nothing of
/// /run/sandbox is on the host (a bounded tmpfs in the container), and
/// readiness is polled through the helper, with the container's state
/// checked between polls.
#[test]
fn the_relayed_channel_mounts_a_tmpfs_and_waits_through_the_helper() {
    use std::os::unix::fs::MetadataExt;
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.running();
    rig.fake.push(Output::fail(3, ""));
    rig.fake.push(Output::ok("running 0\n"));
    rig.fake.push(Output::ok(""));
    let s = spec(CreateRequest { channel: crate::host::channel::Choice::Exec, ..Default::default() });
    let c = rig.driver().create(&s).unwrap();
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "exec", "container inspect", "exec"]);
    let calls = rig.fake.calls();
    let run = &calls[1];
    assert!(
        run.iter()
            .any(|a| a
                .starts_with("/run/sandbox:rw,noexec,nosuid,nodev,size=1m,nr_inodes=64,mode=0700,uid=65534,gid=65534")),
        "{run:?}"
    );
    assert!(!run.iter().any(|a| a.contains("dst=/run/sandbox")), "the host directory is not mounted: {run:?}");
    assert!(run.iter().any(|a| a == "sbx.channel=exec"));
    assert_eq!(
        calls[3],
        ["exec", "--", "deadbeef", "/run/sbx/helper", "probe-socket", "/run/sandbox/sandbox.sock", "500"]
    );
    assert_eq!((c.channel, c.socket.as_str()), (crate::host::channel::Kind::Exec, "/run/sandbox/sandbox.sock"));
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
    rig.running();
    rig.fake.push(Output::fail(4, "sbx-helper: /run/sandbox/sandbox.sock is a symlink, not a unix socket"));
    rig.fake.push(Output::ok("running 0\n"));
    rig.removed();
    let s = spec(CreateRequest { channel: crate::host::channel::Choice::Exec, ..Default::default() });
    let err = rig.driver().create(&s).unwrap_err();
    assert!(
        matches!(err, Error::Socket(SocketError::Hostile { ref reason, .. }) if reason == "it is a symlink, not a unix socket"),
        "{err:?}"
    );
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "exec", "container inspect", "rm"]);
    assert!(!rig.sock_dir().exists());
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
fn gc_reaps_in_one_batched_removal_and_dry_run_removes_nothing() {
    let rig = Rig::new();
    let st = rig.state();
    std::fs::create_dir_all(&rig.root).unwrap();
    let line = |name: &str, expires: &str| {
        serde_json::json!({"name": name, "state": "running", "networks": "", "labels": rig.seal(serde_json::json!({
            "sbx.managed": "1", "sbx.id": name, "sbx.expires": expires,
            "sbx.socket": rig.root.join(name).join("sandbox.sock").display().to_string()}))})
        .to_string()
    };
    let (a, b, c) = ("sbx-00000000000a", "sbx-00000000000b", "sbx-00000000000c");
    for id in [a, b, c] {
        std::fs::create_dir_all(rig.root.join(id)).unwrap();
    }
    // c: a create whose process died before its container existed.
    st.begin_create(c, state::ProcId { pid: i32::MAX, start: 1 }).unwrap();
    let ps = format!("{}\n{}\n", line(a, "2000-01-01T00:00:00Z"), line(b, "2999-01-01T00:00:00Z"));
    let orphan_check = format!("Error: No such container: {c}");

    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&ps));
    rig.fake.push(Output::fail(1, &orphan_check));
    let r = rig.driver().gc(true).unwrap();
    assert!(r.dry_run);
    assert_eq!(r.containers.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), [a]);
    assert_eq!(r.socket_dirs.len(), 2);
    assert!(rig.root.join(a).exists() && rig.root.join(c).exists(), "dry run removed something");

    // a's private route network (made by sbx: its owner token is right) and a forged one.
    let nets = format!(
        "{}\n{}\n",
        serde_json::json!([format!("{a}-x"), a, "svc", rig.token(a)]),
        serde_json::json!(["forged", a, "svc", "0000"])
    );
    rig.fake.push(Output::ok(&nets));
    rig.fake.push(Output::ok(&ps));
    rig.fake.push(Output::fail(1, &orphan_check));
    rig.fake.push(Output::ok(a));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    let r = rig.driver().gc(false).unwrap();
    assert_eq!(r.containers.len(), 1);
    let calls = rig.fake.calls();
    assert_eq!(calls[3][..2], ["network", "ls"]);
    assert_eq!(calls[4][..2], ["ps", "-a"]);
    assert_eq!(calls[5], ["container", "inspect", "--format", "{{json .}}", "--", c]);
    assert_eq!(calls[6], ["rm", "-f", "-v", "--", a]);
    assert_eq!(calls[7], ["network", "disconnect", "--force", "--", &format!("{a}-x"), "svc"]);
    assert_eq!(calls[8], ["network", "rm", "--", &format!("{a}-x")]);
    assert_eq!(r.networks, [format!("{a}-x")]);
    assert!(!rig.root.join(a).exists() && !rig.root.join(c).exists() && rig.root.join(b).exists());
    assert!(st.creating().is_empty());
}

#[test]
fn private_routes_make_a_network_per_sandbox_and_reach_tier_2() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(&service_line("proxy")));
    rig.fake.push(Output::ok("netid\n"));
    rig.fake.push(Output::ok(""));
    rig.starts_and_binds();
    let s = spec(CreateRequest { private_routes: true, ..routes(&["inference:proxy:8080", "more:proxy:9"]) });
    let c = rig.driver().create(&s).unwrap();
    assert_eq!(
        rig.fake.verbs(),
        ["image inspect", "container inspect", "network create", "network connect", "run", "container inspect"]
    );
    let calls = rig.fake.calls();
    let net = format!("{ID}-inference");
    assert_eq!(calls[1][5..], ["proxy"]);
    assert_eq!(
        calls[2],
        [
            "network",
            "create",
            "--internal",
            "--opt",
            "com.docker.network.bridge.inhibit_ipv4=true",
            "--label",
            &format!("sbx.private-for={ID}"),
            "--label",
            "sbx.service=proxy",
            "--label",
            &format!("sbx.owner={}", rig.token(ID)),
            "--",
            &net,
        ]
    );
    assert_eq!(calls[3], ["network", "connect", "--alias", "proxy", "--", &net, "proxy"]);
    assert!(calls[4].windows(2).any(|w| w[0] == "--network" && w[1] == net));
    assert!(calls[4].contains(&format!("sbx.private={{\"{net}\":\"proxy\"}}")));
    assert_eq!((c.tier, c.gaps.len()), (2, 0));
    assert_eq!(c.routes.values().collect::<Vec<_>>(), [&net, &net]);
}

#[test]
fn private_routes_need_running_services_and_are_torn_down_on_failure() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::fail(1, "Error: No such container: proxy"));
    let s = spec(CreateRequest { private_routes: true, ..routes(&["inference:proxy:8080"]) });
    let err = rig.driver().create(&s).unwrap_err();
    assert!(matches!(err, Error::ServiceMissing { ref hosts } if hosts == &["proxy"]), "{err:?}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "container inspect"]);

    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(&service_line("proxy")));
    rig.fake.push(Output::ok("netid\n"));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::fail(125, "docker: Error response from daemon: boom"));
    rig.removed();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    assert!(rig.driver().create(&s).is_err());
    let net = format!("{ID}-inference");
    assert_eq!(
        rig.fake.verbs(),
        [
            "image inspect",
            "container inspect",
            "network create",
            "network connect",
            "run",
            "rm",
            "network disconnect",
            "network rm"
        ]
    );
    assert_eq!(rig.fake.calls()[7], ["network", "rm", "--", &net]);
    assert!(!rig.sock_dir().exists());
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
fn the_image_user_is_cached_by_digest() {
    let rig = Rig::new();
    rig.image("1000");
    rig.starts_and_binds();
    rig.driver().create(&spec(CreateRequest::default())).unwrap();
    socket::remove_dir(&rig.sock_dir(), ID).unwrap();
    // Second create of the same image: docker run only.
    rig.starts_and_binds();
    rig.driver().create(&spec(CreateRequest::default())).unwrap();
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "run", "container inspect"]);
    assert!(rig.fake.calls()[3].windows(2).any(|w| w[0] == "--user" && w[1] == "1000:1000"), "the cached user is used");
    // The image removed since: docker run says so, sbx says what to do.
    socket::remove_dir(&rig.sock_dir(), ID).unwrap();
    rig.fake.push(Output::fail(125, &format!("Unable to find image '{IMG}' locally")));
    rig.removed();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(err, Error::ImageMissing { .. }), "{err:?}");
}

#[test]
fn a_private_network_already_gone_does_not_fail_the_destroy() {
    let rig = Rig::new();
    let private = vec![(format!("{ID}-inference"), "proxy".to_string())];
    rig.fake.push(Output::fail(1, "Error: No such container: proxy"));
    rig.fake
        .push(Output::fail(1, &format!("Error response from daemon: network {ID}-inference not found\nexit status 1")));
    rig.driver().remove_private(&private).unwrap();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::fail(
        1,
        "Error response from daemon: error while removing network: network has active endpoints\nexit status 1",
    ));
    assert!(rig.driver().remove_private(&private).is_err(), "a real failure still fails");
}

#[test]
fn an_image_with_an_sbx_label_is_refused_before_anything_is_made() {
    // Issue 9 finding 5: `LABEL sbx.private=...` would become the sandbox's record.
    let rig = Rig::new();
    rig.fake.push(Output::ok(r#"["1000",{"sbx.private":"{\"sbx-rtsvc\":\"rtsvc\"}","a":"b"}]"#));
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    match &err {
        Error::ImageHasSbxLabel { label, .. } => assert_eq!(label, "sbx.private"),
        other => panic!("{other:?}"),
    }
    assert_eq!(err.exit_code(), 1);
    assert!(err.hint().unwrap().contains("rebuild the image without"));
    assert_eq!(rig.fake.verbs(), ["image inspect"], "nothing made");
    assert!(!rig.sock_dir().exists());
    // The verdict is cached per digest: the next create is refused with no docker call.
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(err, Error::ImageHasSbxLabel { .. }), "{err:?}");
    assert_eq!(rig.fake.verbs(), ["image inspect"]);
}

#[test]
fn a_private_route_never_attaches_a_sandbox_as_its_service() {
    // Issue 9 finding 3: `--route pivot:P:8080 --private-routes` put sandbox P
    // on the new sandbox's network. Refused before anything is made, whoever's
    // key made P, and for a container that only looks like a sandbox.
    let other_key_sandbox = Rig::new().inspect_line("sbx-0000000000aa", "sbx-0000000000aa", &["none"]);
    let renamed = service_line("sbx-0000000000ab");
    let labelled = service_line("pivot").replace("com.example.role", "sbx.managed");
    for (host, line, why) in [
        ("sbx-0000000000aa", other_key_sandbox, "carrying the sbx label"),
        ("sbx-0000000000ab", renamed, "named like a sandbox"),
        ("pivot", labelled, "carrying the sbx label \"sbx.managed\""),
    ] {
        let rig = Rig::new();
        rig.image("");
        rig.fake.push(Output::ok(&line));
        let s = spec(CreateRequest { private_routes: true, ..routes(&[&format!("pivot:{host}:8080")]) });
        let err = rig.driver().create(&s).unwrap_err();
        match &err {
            Error::ServiceIsSandbox { host: h, why: w } => {
                assert_eq!(h, host);
                assert!(w.contains(why), "{w}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(err.exit_code(), 1);
        assert_eq!(rig.fake.verbs(), ["image inspect", "container inspect"], "nothing made");
        assert!(!rig.sock_dir().exists());
    }
}

#[test]
fn every_command_acts_only_on_a_proven_sandbox() {
    // Issue 9 finding 9: `docker run --name sbx-... --label <copied labels>`.
    let rig = Rig::new();
    let cid = "ab".repeat(32);
    let mut line: serde_json::Value = serde_json::from_str(&rig.inspect_line(ID, ID, &["none"])).unwrap();
    line["Id"] = cid.clone().into();
    rig.fake.push(Output::ok(&format!("{line}\n")));
    assert_eq!(rig.driver().owned(ID).unwrap(), cid);
    assert_eq!(rig.fake.verbs(), ["container inspect"]);
    // An impostor: the same labels, copied to another name.
    let impostor = "sbx-0000000000ee";
    let mut forged = line.clone();
    forged["Name"] = format!("/{impostor}").into();
    forged["Config"]["Labels"]["sbx.id"] = impostor.into();
    rig.fake.push(Output::ok(&format!("{forged}\n")));
    let err = rig.driver().owned(impostor).unwrap_err();
    assert!(matches!(err, Error::Foreign { ref id } if id == impostor), "{err:?}");
    assert!(err.to_string().contains("not a sandbox of this host"), "{err}");
    // A sandbox this host recorded: its container id, with no docker call.
    let rec = state::SandboxRecord {
        container: "cd".repeat(32),
        socket_dir: rig.sock_dir(),
        private: vec![],
        volume: None,
        session: None,
    };
    rig.state().set_record(ID, &rec).unwrap();
    assert_eq!(rig.driver().owned(ID).unwrap(), "cd".repeat(32));
    assert_eq!(rig.fake.verbs(), ["container inspect", "container inspect"]);
}

#[test]
fn an_image_that_redirects_a_mount_is_refused_and_removed() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.running();
    // The failure is confirmed on the same, still running process.
    rig.running();
    rig.removed();
    let driver = rig.driver();
    // `/run/sbx -> /tmp/sbx` in the image: the kernel shows the mount under /tmp.
    let proc = rig.root.with_extension("proc");
    std::fs::write(proc.join("4242/mountinfo"), MOUNTINFO.replace(" /run/sbx ro,", " /tmp/sbx ro,")).unwrap();
    let err = driver.create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(&err, Error::Redirected { path, .. } if path == "/run/sbx"), "{err:?}");
    assert_eq!(err.exit_code(), 1);
    assert!(err.to_string().contains(&format!("image {IMG} redirects /run/sbx")), "{err}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "container inspect", "rm"]);
    assert!(!rig.sock_dir().exists());
    assert!(rig.state().record(ID).is_none());
}

#[test]
fn a_sandbox_that_exits_while_its_mounts_are_read_is_a_boot_crash() {
    // The pid was running at the look-up and gone at the read of its
    // mountinfo (a race the live boot-crash test hit): not a redirected image.
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.fake.push(Output::ok("4343 running 0\n"));
    rig.fake.push(Output::ok("0 exited 3\n"));
    rig.fake.push(Output::ok("crashing on purpose\n"));
    rig.removed();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(&err, Error::DiedAtBoot { code: 3, .. }), "{err:?}");
    assert!(err.to_string().contains("crashing on purpose"), "{err}");
}

/// A hostile image's boot output is quoted in sbx's own error: its escape
/// sequences (OSC 52 sets the operator's clipboard, CSI rewrites the
/// screen, `\r` hides a line) must reach the terminal inert, and a huge
/// line must not become a huge message.
#[test]
fn boot_logs_quoted_in_an_error_are_inert_and_bounded() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.fake.push(Output::ok("0 exited 3\n"));
    let mut out = b"\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07ok\r\x1b[2Kall fine\n\xc2\x9b31m".to_vec();
    out.extend(std::iter::repeat_n(b'A', 1 << 20));
    out.extend(b"\nlast line\n");
    rig.fake.push(Output { status: 0, stdout: out, stderr: vec![] });
    rig.removed();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err().to_string();
    assert!(!err.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "{:?}", &err[..200.min(err.len())]);
    assert!(err.len() < 20 * 1024, "{} bytes", err.len());
    assert!(err.contains("last line"), "the end of the output is kept");
}

/// `n` sandbox ids, each with a socket directory under the rig's root.
fn many(rig: &Rig, n: usize) -> Vec<String> {
    (1..=n)
        .map(|i| {
            let id = format!("sbx-{i:012x}");
            std::fs::create_dir_all(rig.root.join(&id)).unwrap();
            id
        })
        .collect()
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
        let rec = state::SandboxRecord {
            container: format!("{i:064x}"),
            socket_dir: rig.root.join(id),
            private: Vec::new(),
            volume: None,
            session: None,
        };
        st.set_record(id, &rec).unwrap();
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

#[test]
fn gc_reaps_many_in_paced_batches_and_reports_each_failed_batch() {
    let rig = Rig::new();
    std::fs::create_dir_all(&rig.root).unwrap();
    let ids = many(&rig, 12);
    let ps: String = ids
        .iter()
        .map(|id| {
            let labels = rig.seal(serde_json::json!({
                "sbx.managed": "1", "sbx.id": id, "sbx.expires": "2000-01-01T00:00:00Z",
                "sbx.socket": rig.root.join(id).join("sandbox.sock").display().to_string()}));
            format!("{}\n", serde_json::json!({"name": id, "state": "running", "networks": "", "labels": labels}))
        })
        .collect();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&ps));
    rig.fake.push(Output::fail(1, "Error response from daemon: could not kill"));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    let r = rig.driver().with_pace(Pace::sequential(5)).gc(false).unwrap();
    assert_eq!(rig.fake.verbs(), ["network ls", "ps", "rm", "rm", "rm"]);
    assert_eq!(r.failed.len(), 1, "{:?}", r.failed);
    assert_eq!(r.failed[0].item, format!("containers {}", ids[..5].join(" ")));
    assert!(r.failed[0].error.contains("could not kill"), "{:?}", r.failed);
    assert_eq!(r.containers.iter().map(|c| c.id.clone()).collect::<Vec<_>>(), ids[5..]);
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(rig.root.join(id).exists(), i < 5, "{id}: a sandbox still there keeps its directory");
    }

    // A hung engine: the batch in flight times out, none starts after it.
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&ps));
    rig.fake.push_timeout(Duration::from_secs(120));
    let r = rig.driver().with_pace(Pace::sequential(2)).gc(false).unwrap();
    assert_eq!(rig.fake.verbs()[5..], ["network ls", "ps", "rm"]);
    assert_eq!(r.failed.len(), 2, "the batch that hung, and the rest never tried: {:?}", r.failed);
    assert_eq!(r.failed[1].item, format!("containers {}", ids[2..].join(" ")));
    assert!(r.failed[0].error.contains("did not answer `docker rm`"), "{:?}", r.failed);
    assert!(r.failed[1].error.starts_with("not tried"), "{:?}", r.failed);
    assert!(r.containers.is_empty());
}

#[test]
fn gc_removes_session_state_whose_volume_is_gone_but_never_a_live_sessions() {
    // Issue 10: a create killed between making the session directory and
    // `docker volume create`, or a volume removed behind sbx's back.
    let rig = Rig::new();
    std::fs::create_dir_all(&rig.root).unwrap();
    std::fs::create_dir_all(&rig.state).unwrap();
    let key = rig.state().key().unwrap();
    let vols = rig.state.join("volumes");
    for p in ["gone", "alive", "racing"] {
        std::fs::create_dir_all(vols.join(p).join("workspace")).unwrap();
        std::fs::write(vols.join(format!("{p}.lock")), "").unwrap();
    }
    std::fs::write(vols.join("lockonly.lock"), "").unwrap();
    let listed = |n: &str| format!("[\"{n}\",\"{}\",\"{}\"]\n", n, state::owner_token(&key, n));
    let gc_calls = |rig: &Rig, vol_ls: &str| {
        rig.fake.push(Output::ok("")); // private networks
        rig.fake.push(Output::ok("")); // docker ps
        rig.fake.push(Output::ok(vol_ls));
    };
    // Dry run: says what would go, removes nothing.
    gc_calls(&rig, &listed("sbx-state-alive"));
    let r = rig.driver().gc(true).unwrap();
    let dry: Vec<String> = r.volume_state.iter().map(|p| p.rsplit('/').next().unwrap().to_string()).collect();
    assert_eq!(dry, ["gone", "gone.lock", "lockonly.lock", "racing", "racing.lock"]);
    assert!(vols.join("gone").exists());
    // "racing": its volume was created after the list (a create finished
    // meanwhile): looked up again under the lock, it stays.
    gc_calls(&rig, &listed("sbx-state-alive"));
    rig.fake.push(Output::fail(1, "Error: No such volume: sbx-state-gone"));
    rig.fake.push(Output::fail(1, "Error: No such volume: sbx-state-lockonly"));
    rig.fake.push(Output::ok("sbx-state-racing\n"));
    let r = rig.driver().gc(false).unwrap();
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    assert!(!vols.join("gone").exists() && !vols.join("gone.lock").exists() && !vols.join("lockonly.lock").exists());
    assert!(vols.join("alive/workspace").exists() && vols.join("racing/workspace").exists());
    assert_eq!(r.volume_state.len(), 3, "{:?}", r.volume_state);
    // A create holding a session's lock is never judged.
    let held = crate::host::persist::lock(&rig.state, "racing").unwrap();
    gc_calls(&rig, &listed("sbx-state-alive"));
    let r = rig.driver().gc(false).unwrap();
    assert!(r.volume_state.is_empty(), "{:?}", r.volume_state);
    assert!(vols.join("racing/workspace").exists());
    drop(held);
}

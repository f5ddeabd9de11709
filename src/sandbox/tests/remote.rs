//! A remote engine through the fake: create with the relayed
//! channel and the helper volume (made once, reused, refilled after a torn
//! read), what it refuses before any docker call, and destroy/gc/volumes
//! leaving this machine's files alone.

use super::*;
use crate::host::engine::EngineChoice;

pub(super) fn remote(rig: &Rig) -> Driver {
    rig.driver().with_engine(EngineChoice { docker_host: Some("ssh://me:pw@far".into()), ..Default::default() })
}

pub(super) fn spec(args: &[&str]) -> SandboxSpec {
    use clap::Parser;
    #[derive(Parser)]
    struct Req {
        #[command(flatten)]
        req: CreateRequest,
    }
    let full = ["x", "--image", IMG].into_iter().chain(args.iter().copied());
    SandboxSpec::from_request(&Req::try_parse_from(full).unwrap().req, None).unwrap()
}

/// A tar as `docker cp` prints it: (path, directory?, content, mode).
fn tar_of(entries: &[(&str, bool, &[u8], u32)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, dir, data, mode) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(if *dir { tar::EntryType::Directory } else { tar::EntryType::Regular });
        h.set_mode(*mode);
        h.set_uid(0);
        h.set_size(data.len() as u64);
        h.set_path(path).unwrap();
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap()
}

fn bytes(stdout: Vec<u8>) -> Output {
    Output { status: 0, stdout, stderr: Vec::new() }
}

/// What `docker cp ID:/run -` prints of a sandbox whose image keeps /run plain.
pub(super) fn plain_run() -> Output {
    let h = crate::host::helper::BYTES;
    bytes(tar_of(&[("run", true, b"", 0o755), ("run/sbx", true, b"", 0o755), ("run/sbx/helper", false, h, 0o511)]))
}

/// The rest of a remote create once the helper volume is ready: `docker
/// create`, the layout read through `docker cp`, `docker start`, and one
/// readiness probe through the helper.
pub(super) fn starts_remotely(rig: &Rig, run: Output) {
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.fake.push(run);
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
}

pub(super) fn volume_name() -> String {
    format!("sbx-helper-{}", crate::host::helper::key())
}

#[test]
fn a_remote_create_relays_the_channel_and_fills_the_helper_volume_once() {
    let rig = Rig::new();
    rig.image("");
    // The helper volume: missing, made, a filler of the sandbox's image
    // created (never started), read back empty, filled, read back whole, removed.
    rig.fake.push(Output::fail(1, "Error: No such volume"));
    rig.fake.push(Output::ok(&volume_name()));
    rig.fake.push(Output::ok("f111e4\n"));
    rig.fake.push(Output::fail(1, "Error: Could not find the file /v/helper in container f111e4"));
    rig.fake.push(Output::ok(""));
    rig.fake.push(bytes(crate::host::helper::tar(false)));
    rig.fake.push(Output::ok("f111e4\n"));
    starts_remotely(&rig, plain_run());
    let c = remote(&rig).create(&spec(&[])).unwrap();
    assert_eq!(c.record.channel, crate::host::channel::Kind::Exec);
    assert_eq!(c.record.socket, "/run/sandbox/sandbox.sock");
    let verbs = rig.fake.verbs();
    assert_eq!(
        verbs,
        ["image inspect", "volume", "volume", "create", "cp", "cp", "cp", "rm", "create", "cp", "start", "exec"]
    );
    let calls = rig.fake.calls();
    let run = &calls[8];
    let dir = crate::sandbox::testing::fill_dir(&calls);
    assert_eq!(calls[3].last(), Some(&format!("{dir}/helper")));
    assert_eq!(calls[4], ["cp", &format!("f111e4:{dir}/helper"), "-"], "read back from the random mount");
    assert_eq!(calls[5], ["cp", "-", &format!("f111e4:{dir}")], "filled there");
    assert!(calls[3].contains(&IMG.to_string()), "the filler is of the sandbox's image: {:?}", calls[3]);
    let mount = format!("type=volume,src={},dst=/run/sbx,readonly,volume-nocopy", volume_name());
    assert!(run.contains(&mount), "{run:?}");
    assert!(run.iter().any(|a| a.starts_with("/run/sandbox:rw,noexec")), "the socket dir is a tmpfs: {run:?}");
    // No path of this machine: its socket root, data dir and temp dir.
    let here = [rig.root.display().to_string(), rig.state.display().to_string()];
    for a in calls.iter().flatten().filter(|a| !a.starts_with("seccomp=")) {
        assert!(!here.iter().any(|h| a.contains(h.as_str())), "{a} names a path of this machine");
    }
    assert_eq!(calls[9], ["cp", "deadbeef:/run", "-"]);
    // Nothing of it on this machine's file system but its state in the
    // data dir: no directory under the socket root (a marker was), and
    // the TTL watchdog watches its expiry there.
    let under_root: Vec<_> =
        std::fs::read_dir(&rig.root).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert_eq!(under_root, Vec::<std::path::PathBuf>::new(), "a remote create made a socket directory here");
    assert_eq!(c.watched, rig.state().expiry_file(ID));
    let fill = rig.fake.inputs();
    assert_eq!(fill.len(), 1, "one fill");
    assert_eq!(fill[0].1, crate::host::helper::tar(false));

    // The next create trusts the verified volume after one inspect.
    let labels = format!("{{\"sbx.helper\":\"{}\"}}\n", crate::host::helper::key());
    rig.fake.push(Output::ok(&labels));
    starts_remotely(&rig, plain_run());
    let before = rig.fake.calls().len();
    let d = remote(&rig).with_ids(std::sync::Arc::new(|| "sbx-0123456789ac".to_string()));
    d.create(&spec(&[])).unwrap();
    let verbs: Vec<String> = rig.fake.verbs().split_off(before);
    assert_eq!(verbs, ["volume", "create", "cp", "start", "exec"]);
}

#[test]
fn a_helper_volume_that_is_not_sbx_s_or_an_image_that_moves_run_is_refused() {
    let rig = Rig::new();
    rig.image("");
    // Someone else's volume under the name (or one docker made empty): not trusted, not removed.
    rig.fake.push(Output::ok("null\n"));
    let e = remote(&rig).create(&spec(&[])).unwrap_err();
    assert!(matches!(&e, Error::Host(crate::error::HostError::HelperUntrusted { .. })), "{e}");
    assert!(e.to_string().contains("without the label sbx.helper="), "{e}");
    assert!(!rig.fake.verbs().iter().any(|v| v.contains("rm")), "{:?}", rig.fake.verbs());

    // An image whose /run/sbx is a symlink: refused before start, and the created sandbox removed.
    let rig = Rig::new();
    rig.image("");
    std::fs::create_dir_all(rig.state.join("helper")).unwrap();
    std::fs::write(rig.state.join("helper/remote-verified"), format!("ssh://me@far {}\n", volume_name())).unwrap();
    rig.fake.push(Output::ok(&format!("{{\"sbx.helper\":\"{}\"}}\n", crate::host::helper::key())));
    rig.fake.push(Output::ok("deadbeef\n"));
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    h.set_mode(0o777);
    h.set_link_name("/tmp/a/sbx").unwrap();
    h.set_path("run/sbx").unwrap();
    h.set_cksum();
    b.append(&h, &b""[..]).unwrap();
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_size(0);
    dir.set_mode(0o755);
    dir.set_path("run").unwrap();
    dir.set_cksum();
    let mut t = tar::Builder::new(Vec::new());
    t.append(&dir, &b""[..]).unwrap();
    let tail = b.into_inner().unwrap();
    let mut all = t.into_inner().unwrap();
    all.truncate(all.len() - 1024);
    all.extend(tail);
    rig.fake.push(bytes(all));
    rig.removed();
    let e = remote(&rig).create(&spec(&[])).unwrap_err();
    assert!(matches!(&e, Error::Image(crate::error::ImageError::Redirected { .. })), "{e}");
    assert!(e.to_string().contains("/run/sbx in the image is a Symlink to /tmp/a/sbx"), "{e}");
    let verbs = rig.fake.verbs();
    assert_eq!(verbs[..3], ["image inspect", "volume", "create"]);
    assert!(!verbs.contains(&"start".to_string()), "{verbs:?}");
    assert!(verbs.iter().any(|v| v == "rm"), "the created sandbox stays: {verbs:?}");
}

/// Two first creates at once: both make the volume (docker answers the
/// second `volume create` with the name), both fill it. A fill replaces the
/// file, so one may read back the other's half-written helper: it fills
/// again and trusts only what it read back whole.
#[test]
fn a_helper_volume_read_back_torn_by_a_concurrent_fill_is_filled_again() {
    let rig = Rig::new();
    rig.image("");
    let labels = format!("{{\"sbx.helper\":\"{}\"}}\n", crate::host::helper::key());
    rig.fake.push(Output::ok(&labels));
    rig.fake.push(Output::ok("f111e4\n"));
    let mut torn = crate::host::helper::tar(false);
    // The other create's fill, caught mid-write: right header, wrong bytes.
    let data = 512..512 + crate::host::helper::BYTES.len().min(4096);
    torn[data].fill(0);
    rig.fake.push(bytes(torn));
    rig.fake.push(Output::ok(""));
    rig.fake.push(bytes(crate::host::helper::tar(false)));
    rig.fake.push(Output::ok("f111e4\n"));
    starts_remotely(&rig, plain_run());
    remote(&rig).create(&spec(&[])).unwrap();
    assert_eq!(
        rig.fake.verbs(),
        ["image inspect", "volume", "create", "cp", "cp", "cp", "rm", "create", "cp", "start", "exec"]
    );
    assert_eq!(rig.fake.inputs().len(), 1, "one fill after the torn read");
    let verified = std::fs::read_to_string(rig.state.join("helper/remote-verified")).unwrap();
    assert_eq!(verified, format!("ssh://me@far {}\n", volume_name()));
}

#[test]
fn a_remote_create_refuses_direct_and_paths_before_any_docker_call() {
    let rig = Rig::new();
    let e = remote(&rig).create(&spec(&["--channel", "direct"])).unwrap_err();
    assert!(matches!(&e, Error::Invalid(i) if i.what == "--channel"), "{e}");
    assert!(e.to_string().contains("ssh://me@far") && !e.to_string().contains("pw"), "{e}");
    // A spec that names a path (a pool's refill has no request to refuse): exit 2.
    let dir = rig.root.with_extension("ro");
    std::fs::create_dir_all(&dir).unwrap();
    let e = remote(&rig).create(&spec(&["--ro", dir.to_str().unwrap()])).unwrap_err();
    assert!(matches!(&e, Error::Invalid(i) if i.what == "--ro"), "{e}");
    assert!(rig.fake.calls().is_empty(), "{:?}", rig.fake.calls());
    assert!(!rig.root.join(ID).exists());
}

#[test]
fn destroy_on_a_remote_engine_keeps_this_machine_s_files() {
    let rig = Rig::new();
    // A sandbox of the local engine: its directory and record are this machine's.
    std::fs::create_dir_all(rig.sock_dir()).unwrap();
    rig.fake.push(Output::fail(1, &format!("Error: No such container: {ID}")));
    let d = remote(&rig).destroy(&[ID.to_string()]).unwrap();
    assert_eq!(d.already_gone, [ID]);
    assert_eq!(rig.fake.verbs(), ["container inspect"]);
    assert!(rig.sock_dir().exists(), "a remote destroy removed a local socket directory");
}

#[test]
fn a_direct_channel_needs_this_machine_to_be_the_engine_s() {
    let rig = Rig::new();
    let d = remote(&rig);
    let unsupported = |e: Error| {
        assert!(matches!(&e, Error::Host(crate::error::HostError::RemoteUnsupported { .. })), "{e}");
        assert!(e.to_string().contains("(the engine is ssh://me@far)"), "{e}");
    };
    // (any `local_only` refusal reads the same.)
    unsupported(d.local_only("audit").unwrap_err());
    assert!(rig.fake.calls().is_empty(), "{:?}", rig.fake.calls());
    // The direct channel is known from the sandbox's label: one inspect, then refused.
    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &[])));
    unsupported(d.channel(ID).unwrap_err());
    assert_eq!(rig.fake.verbs(), ["container inspect"]);
}

/// Another sbx build on the engine dropped sbx's image before the remote
/// gate's `docker create`: imported again, the gate created once more.
#[test]
fn a_remote_gate_is_created_again_when_another_sbx_build_dropped_its_image() {
    const GATE: &str = "9a7e9a7e";
    const FIVE_C: &str = "sha256:5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c";
    let rig = Rig::new();
    rig.image("");
    std::fs::create_dir_all(rig.state.join("helper")).unwrap();
    std::fs::write(rig.state.join("helper/remote-verified"), format!("ssh://me@far {}\n", volume_name())).unwrap();
    rig.fake.push(Output::ok(&format!("{{\"sbx.helper\":\"{}\"}}\n", crate::host::helper::key())));
    rig.self_image_recorded_at("ssh://me@far", "sha256:5b"); // sbx's own image
    rig.fake.push(Output::ok(&net_line("sbx-egress-net", false, false)));
    super::host_addrs::engine_addrs_known(&rig);
    rig.fake.push(Output::ok("")); // the internal network
    rig.fake.push(Output::fail(1, "Error response from daemon: No such image: sha256:5b\n"));
    rig.fake.push(Output::ok("\"ENGINE:ONE\"\n")).push(Output::ok(&format!("{FIVE_C}\n"))); // imported again
    rig.fake.push(Output::ok(&format!("{GATE}\n"))); // docker create of the gate, again
    rig.fake.push(Output::ok("")); // the policy copied in
    rig.fake.push(Output::ok(&format!("{GATE}\n"))); // docker start of the gate
    starts_remotely(&rig, plain_run());
    rig.fake.push(Output::ok("")); // the gate joins the egress network
    let c = remote(&rig).create(&spec(&["--allow", "pypi.org"])).unwrap();
    assert_eq!(c.record.tier, 2);
    let calls = rig.fake.calls();
    assert_eq!(rig.fake.verbs()[4..8], ["create", "info", "import", "create"]);
    assert_eq!(calls[4].iter().map(|a| if a == "sha256:5b" { FIVE_C } else { a }).collect::<Vec<_>>(), calls[7]);
    assert!(calls[7].contains(&FIVE_C.to_string()), "{:?}", calls[7]);
    assert_eq!(calls[8], ["cp", "-", &format!("{GATE}:/policy")]);
}

/// `--allow` on a remote engine: the gate cannot bind this
/// machine's policy directory, so it is created with a volume of its own,
/// the policy copied in, then started; a change is copied in before it is
/// recorded here, and one the gate did not get is not recorded.
#[test]
fn a_remote_gate_gets_its_policy_through_docker_cp_never_a_bind() {
    use crate::model::gate;
    const GATE: &str = "9a7e9a7e";
    let rig = Rig::new();
    rig.image("");
    std::fs::create_dir_all(rig.state.join("helper")).unwrap();
    std::fs::write(rig.state.join("helper/remote-verified"), format!("ssh://me@far {}\n", volume_name())).unwrap();
    rig.fake.push(Output::ok(&format!("{{\"sbx.helper\":\"{}\"}}\n", crate::host::helper::key())));
    rig.self_image_recorded_at("ssh://me@far", "sha256:5b"); // sbx's own image
    rig.fake.push(Output::ok(&net_line("sbx-egress-net", false, false)));
    rig.fake.push(Output::ok("192.0.2.2\nfd00::2\n")); // the engine host's addresses
    rig.fake.push(Output::ok("")); // the internal network
    rig.fake.push(Output::ok(&format!("{GATE}\n"))); // docker create of the gate
    rig.fake.push(Output::ok("")); // the policy copied in
    rig.fake.push(Output::ok(&format!("{GATE}\n"))); // docker start of the gate
    starts_remotely(&rig, plain_run());
    rig.fake.push(Output::ok("")); // the gate joins the egress network
    let c = remote(&rig).create(&spec(&["--allow", "pypi.org"])).unwrap();
    assert_eq!(c.record.tier, 2);
    assert_eq!(
        rig.fake.verbs(),
        [
            "image inspect",
            "volume",
            "network inspect",
            "run",
            "network create",
            "create",
            "cp",
            "start",
            "create",
            "cp",
            "start",
            "exec",
            "network connect"
        ]
    );
    let calls = rig.fake.calls();
    assert_eq!(calls[5][..3], ["create", "--name", &gate::container(ID)]);
    assert!(calls[5].contains(&"type=volume,dst=/policy,volume-nocopy".to_string()), "{:?}", calls[5]);
    assert_eq!(calls[6], ["cp", "-", &format!("{GATE}:/policy")]);
    assert_eq!(calls[7], ["start", "--", GATE]);
    let here = [rig.root.display().to_string(), rig.state.display().to_string()];
    for a in calls.iter().flatten().filter(|a| !a.starts_with("seccomp=")) {
        assert!(!here.iter().any(|h| a.contains(h.as_str())), "{a} names a path of this machine");
    }
    let inputs = rig.fake.inputs();
    let policy = crate::host::egress::read(&rig.state, ID).unwrap();
    assert_eq!(policy.host_addrs, ["192.0.2.2", "fd00::2"].map(|a| a.parse::<std::net::IpAddr>().unwrap()));
    assert_eq!(inputs.last().unwrap().1, crate::host::egress::tar(&policy));
    let mut entries = tar::Archive::new(&inputs.last().unwrap().1[..]);
    let entry = entries.entries().unwrap().next().unwrap().unwrap();
    let h = entry.header();
    assert_eq!((h.uid().unwrap(), h.mode().unwrap(), h.path().unwrap().to_str().unwrap()), (0, 0o644, "policy.json"));

    // A change: the sandbox is gated, its gate found by owner token, the
    // new policy copied in, then recorded here.
    let inspect = |rig: &Rig| {
        rig.fake.push(Output::ok(&super::egress::gated_line(rig, &[&gate::network(ID)])));
        let row = serde_json::json!([gate::container(ID), ID, rig.token(ID), GATE]);
        rig.fake.push(Output::ok(&format!("{row}\n")));
    };
    inspect(&rig);
    rig.fake.push(Output::ok(""));
    let before = rig.fake.calls().len();
    let rule = crate::spec::egress::AllowRule::parse("files.example:8080", false).unwrap();
    let (p, _) = remote(&rig).change_egress(ID, |p| p.rules.push(rule.clone())).unwrap();
    assert_eq!(rig.fake.calls()[before + 2], ["cp", "-", &format!("{GATE}:/policy")]);
    let recorded = crate::host::egress::read(&rig.state, ID).unwrap();
    assert!(recorded.rules.contains(&rule) && recorded.rules.len() == 2, "{recorded:?}");
    assert_eq!(rig.fake.inputs().last().unwrap().1, crate::host::egress::tar(&p));

    // The gate did not get it: not recorded as its policy.
    inspect(&rig);
    rig.fake.push(Output::fail(1, "Error response from daemon: No such container: 9a7e9a7e"));
    let e = remote(&rig).change_egress(ID, |p| p.rules.clear()).unwrap_err();
    assert!(matches!(&e, Error::Egress(crate::error::EgressError::Publish { .. })), "{e}");
    assert!(
        e.to_string().contains("keeps enforcing the previous one") && e.to_string().contains("No such container"),
        "{e}"
    );
    assert_eq!(crate::host::egress::read(&rig.state, ID).unwrap(), recorded, "a policy the gate lacks was recorded");
}

/// `connect` to a sandbox this host made on the remote engine it drives
/// (recorded and attributed here): no inspect first, the recorded
/// container id; anything else is looked up as before, and a container
/// gone since is docker's answer, said as sbx's.
#[test]
fn a_recorded_remote_sandbox_is_connected_without_a_look_up() {
    let rig = Rig::new();
    let cid = "c".repeat(64);
    let state = rig.state();
    let rec = crate::host::state::SandboxRecord {
        container: cid.clone(),
        socket_dir: rig.root.join(ID),
        private: Vec::new(),
        volume: None,
        session: None,
        gate: None,
    };
    state.set_record(ID, &rec).unwrap();
    // Recorded but the local engine's (no attribution): looked up.
    rig.fake.push(Output::fail(1, &format!("Error: No such object: {ID}")));
    assert!(remote(&rig).channel(ID).is_err());
    assert_eq!(rig.fake.verbs(), ["container inspect"]);
    state.set_engine(ID, "ssh://me@far").unwrap();
    let before = rig.fake.calls().len();
    match remote(&rig).channel(ID).unwrap() {
        crate::host::channel::Channel::Exec { id, container } => assert_eq!((id.as_str(), container), (ID, cid)),
        other => panic!("{other:?}"),
    }
    assert_eq!(rig.fake.calls().len(), before, "a docker call before the exec");
    let gone = crate::host::channel::relay_status(ID, 1, "Error: No such container: cccc", Duration::from_secs(1));
    assert!(matches!(gone, Err(Error::Sandbox(crate::error::SandboxError::NotFound { .. }))), "{gone:?}");
}

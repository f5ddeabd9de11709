//! The egress gate through the fake: create's calls (gate started while the
//! sandbox starts), its rollback, destroy, revoke and gc of gates.

use super::*;
use crate::error::EgressError;
use crate::model::gate;

/// sbx's image as a new import names it.
const FIVE_C: &str = "sha256:5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c";
pub(super) const GATE_CID: &str = "9a7e9a7e9a7e9a7e9a7e9a7e9a7e9a7e9a7e9a7e9a7e9a7e9a7e9a7e9a7e9a7e";

fn allow(rules: &[&str]) -> CreateRequest {
    CreateRequest { allow: rules.iter().map(|s| s.to_string()).collect(), ..Default::default() }
}

impl Rig {
    /// sbx's image is there already, and so is the egress network.
    pub(super) fn gate_ready(&self) {
        self.self_image_recorded("sha256:5b");
        self.fake.push(Output::ok(&net_line("sbx-egress-net", false, false)));
    }

    pub(super) fn policy_dir(&self) -> PathBuf {
        crate::host::egress::dir(&self.state, ID)
    }

    /// `argv::gates` lists this sandbox's gate, owned by this host.
    pub(super) fn gate_listed(&self) {
        let row = serde_json::json!([gate::container(ID), ID, self.token(ID), GATE_CID]);
        self.fake.push(Output::ok(&format!("{row}\n")));
    }
}

#[test]
fn create_starts_the_gate_while_the_sandbox_starts() {
    let rig = Rig::new();
    rig.image("");
    rig.gate_ready();
    rig.fake.push(Output::ok("")); // the internal network
    rig.fake.push(Output::ok(&format!("{GATE_CID}\n"))); // the gate's run, in the background
    rig.starts_and_binds();
    rig.fake.push(Output::ok("")); // the gate joins the egress network
    let c = rig.driver().create(&spec(allow(&["pypi.org", "files.example:8080"]))).unwrap();
    assert_eq!(
        rig.fake.verbs(),
        ["image inspect", "network inspect", "network create", "run", "run", "container inspect", "network connect"]
    );
    let calls = rig.fake.calls();
    assert_eq!(calls[1], ["network", "inspect", "--format", parse::NETWORK_FORMAT, "--", "sbx-egress-net"]);
    assert_eq!(calls[2][..4], ["network", "create", "--internal", "--opt"]);
    assert_eq!(calls[2].last().unwrap(), &gate::network(ID));
    assert!(calls[2].contains(&format!("sbx.service={}", gate::container(ID))));
    let g = &calls[3];
    assert!(g.contains(&"sha256:5b".to_string()), "the recorded image, run by its id: {g:?}");
    assert_eq!(g[..4], ["run", "-d", "--name", &gate::container(ID)]);
    assert!(g.contains(&format!("type=bind,src={},dst=/policy,readonly", rig.policy_dir().display())));
    assert!(g.windows(2).any(|w| w == ["--network", &gate::network(ID)]));
    let s = &calls[4];
    // The gate runs as a uid of its own, not the sandbox's nor a shared one.
    let gate_user = format!("{0}:{0}", UID + 1);
    assert!(g.windows(2).any(|w| w == ["--user", &gate_user]), "{g:?}");
    assert!(s.windows(2).any(|w| w == ["--user", USER]), "{s:?}");
    use crate::host::uids::Holder;
    assert_eq!(rig.uids_held(), [(UID, Holder::Sandbox(ID.into())), (UID + 1, Holder::Service(ID.into()))]);
    assert!(s.windows(2).any(|w| w == ["--network", &gate::network(ID)]), "{s:?}");
    assert!(s.windows(2).any(|w| w == ["--dns", "127.0.0.1"]), "the sandbox resolves nothing outside");
    assert!(s.contains(&"HTTPS_PROXY=http://sbx-egress:3128".to_string()));
    assert_eq!(calls[6], ["network", "connect", "--", "sbx-egress-net", &gate::container(ID)]);
    // Tier 2: the sandbox reaches only its gate.
    assert_eq!(c.record.tier, 2);
    let e = c.record.egress.clone().unwrap();
    assert_eq!((e.mode.as_str(), e.network.as_str(), e.active), ("enforce", "sbx-egress-net", true));
    assert_eq!(e.allow.unwrap(), ["files.example:8080", "pypi.org:443"]);
    let policy = crate::host::egress::read(&rig.state, ID).unwrap();
    assert_eq!(policy.rules.len(), 2);
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["egress"]["mode"], "enforce");
}

impl Rig {
    /// sbx's image imported again after docker said the recorded one is
    /// gone (`self_image::again_if_gone`: the engine's ID, then the import).
    fn image_imported_again(&self, id: &str) {
        self.fake.push(Output::ok("\"ENGINE:ONE\"\n"));
        self.fake.push(Output::ok(&format!("{id}\n")));
    }
}

/// Another sbx build on the engine dropped sbx's image between create's
/// look-up and the gate's `docker run` (engine 20.10's answer): imported
/// again and the gate run once more with it, as audit and doctor do.
#[test]
fn the_gate_runs_again_when_another_sbx_build_dropped_its_image() {
    let rig = Rig::new();
    rig.image("");
    rig.gate_ready();
    rig.fake.push(Output::ok("")); // the internal network
    rig.fake.push(Output::fail(125, "docker: Error response from daemon: No such image: sha256:5b\n"));
    rig.starts_and_binds();
    rig.image_imported_again(FIVE_C);
    rig.fake.push(Output::ok(&format!("{GATE_CID}\n"))); // the gate's run, again
    rig.fake.push(Output::ok("")); // the gate joins the egress network
    let c = rig.driver().create(&spec(allow(&["pypi.org"]))).unwrap();
    let verbs = rig.fake.verbs();
    assert_eq!(verbs[verbs.len() - 4..], ["info", "import", "run", "network connect"]);
    let calls = rig.fake.calls();
    let (first, again) = (&calls[3], &calls[calls.len() - 2]);
    assert_eq!(again[..4], ["run", "-d", "--name", &gate::container(ID)]);
    assert!(first.contains(&"sha256:5b".to_string()) && again.contains(&FIVE_C.to_string()), "{again:?}");
    assert_eq!(
        first.iter().map(|a| if a == "sha256:5b" { FIVE_C } else { a }).collect::<Vec<_>>(),
        *again,
        "the same gate"
    );
    assert!(c.record.egress.unwrap().active);

    // Gone again: only once, and the create fails in docker's words.
    let rig = Rig::new();
    rig.image("");
    rig.gate_ready();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::fail(125, "docker: Error response from daemon: No such image: sha256:5b\n"));
    rig.starts_and_binds();
    rig.image_imported_again(FIVE_C);
    rig.fake.push(Output::fail(125, &format!("docker: Error response from daemon: No such image: {FIVE_C}\n")));
    // The rollback, as in `a_sandbox_that_dies_at_boot_takes_its_gate_with_it`.
    rig.fake.push(Output::ok(""));
    rig.gate_listed();
    rig.removed();
    rig.removed();
    rig.fake.push(Output::ok("")).push(Output::ok(""));
    let e = rig.driver().create(&spec(allow(&["pypi.org"]))).unwrap_err();
    assert!(e.to_string().contains(&format!("No such image: {FIVE_C}")), "{e}");
    let runs = rig.fake.verbs().iter().filter(|v| *v == "run").count();
    assert_eq!(runs, 3, "the gate twice, the sandbox once: {:?}", rig.fake.verbs());
    assert!(!rig.policy_dir().exists() && !rig.sock_dir().exists());
    assert_eq!(rig.uids_held(), [], "a failed create holds no uid");
}

#[test]
fn sbx_makes_its_egress_network_again_if_gc_took_it_before_the_gate_joined() {
    let rig = Rig::new();
    rig.image("");
    rig.gate_ready();
    rig.fake.push(Output::ok("")); // the internal network
    rig.fake.push(Output::ok(&format!("{GATE_CID}\n")));
    rig.starts_and_binds();
    rig.fake.push(Output::fail(1, "Error response from daemon: network sbx-egress-net not found"));
    rig.fake.push(Output::ok("net\n")); // made again
    rig.fake.push(Output::ok("")); // the gate joins it
    rig.driver().create(&spec(allow(&["pypi.org"]))).unwrap();
    let verbs = rig.fake.verbs();
    assert_eq!(verbs[verbs.len() - 3..], ["network connect", "network create", "network connect"]);
    let calls = rig.fake.calls();
    assert_eq!(calls[calls.len() - 2].last().unwrap(), "sbx-egress-net");
    assert_eq!(calls[calls.len() - 1], ["network", "connect", "--", "sbx-egress-net", &gate::container(ID)]);
}

#[test]
fn sbx_makes_its_egress_network_but_never_an_operators() {
    let rig = Rig::new();
    rig.image("");
    rig.self_image_recorded("sha256:5b");
    rig.fake.push(Output::fail(1, "Error response from daemon: network corp-out not found"));
    let s = spec(CreateRequest { egress_network: Some("corp-out".into()), ..allow(&["pypi.org"]) });
    let err = rig.driver().create(&s).unwrap_err();
    assert!(matches!(&err, Error::Egress(EgressError::NetworkMissing { network }) if network == "corp-out"), "{err:?}");
    assert_eq!(rig.fake.remaining(), 0);
    assert!(!rig.policy_dir().exists() && !rig.sock_dir().exists());

    let rig = Rig::new();
    rig.image("");
    rig.self_image_recorded("sha256:5b");
    rig.fake.push(Output::fail(1, "Error response from daemon: network sbx-egress-net not found"));
    rig.fake.push(Output::ok("net\n"));
    rig.fake.push(Output::fail(1, "boom")); // the internal network: the create fails and rolls back
    rig.fake.push(Output::ok("")); // docker logs of the gate, kept on the host
    rig.gate_listed();
    rig.removed(); // the gate
    rig.removed(); // the sandbox (never made)
    rig.fake.push(Output::ok("")); // disconnect the gate
    rig.fake.push(Output::ok("")); // network rm
    let err = rig.driver().create(&spec(allow(&["pypi.org"]))).unwrap_err();
    assert_eq!(err.kind(), "docker_failed");
    let calls = rig.fake.calls();
    assert_eq!(
        calls[2][..6],
        ["network", "create", "--driver", "bridge", "--opt", "com.docker.network.bridge.enable_icc=false"]
    );
    assert_eq!(calls[6], ["rm", "-f", "-v", "--", GATE_CID]);
    assert!(!rig.policy_dir().exists(), "the rollback removes the policy directory");
    assert!(rig.state().creating().is_empty());
}

#[test]
fn a_sandbox_that_dies_at_boot_takes_its_gate_with_it() {
    let rig = Rig::new();
    rig.image("");
    rig.gate_ready();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&format!("{GATE_CID}\n")));
    rig.fake.push(Output::fail(125, "docker: Error response from daemon: something new."));
    rig.fake.push(Output::ok("")); // the gate's connect still happens before the rollback
    rig.fake.push(Output::ok("")); // docker logs of the gate, kept on the host
    rig.gate_listed();
    rig.removed();
    rig.removed();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    rig.driver().create(&spec(allow(&["pypi.org"]))).unwrap_err();
    let verbs = rig.fake.verbs();
    assert_eq!(verbs[verbs.len() - 6..], ["logs", "ps", "rm", "rm", "network disconnect", "network rm"]);
    assert_eq!(rig.fake.remaining(), 0);
    assert!(!rig.policy_dir().exists() && !rig.sock_dir().exists());
}

/// Sandbox [`ID`] with a gate, as `docker container inspect` shows it.
pub(super) fn gated_line(rig: &Rig, networks: &[&str]) -> String {
    let labels = serde_json::json!({
        "sbx.managed": "1",
        "sbx.id": ID,
        "sbx.routes": format!("{{\"egress\":\"{}\"}}", gate::network(ID)),
        "sbx.private": format!("{{\"{}\":\"{}\"}}", gate::network(ID), gate::container(ID)),
        "sbx.socket": rig.sock_dir().join("sandbox.sock").display().to_string(),
        "sbx.egress": "enforce",
        "sbx.egress-network": "sbx-egress-net",
    });
    rig.container_line(ID, labels, networks)
}

#[test]
fn destroy_and_revoke_remove_the_gate_its_network_and_its_policy() {
    use crate::host::uids::Holder;
    use crate::model::ids::SBX_UID_BASE;
    let rig = Rig::new();
    let policy = crate::spec::egress::Policy::default();
    crate::host::egress::write(&rig.state, ID, &policy).unwrap();
    rig.fake.push(Output::ok(&gated_line(&rig, &[&gate::network(ID)])));
    rig.fake.push(Output::ok("")); // network disconnect of the sandbox
    rig.fake.push(Output::ok("")); // network disconnect of the gate
    rig.fake.push(Output::ok("")); // network rm
    rig.fake.push(Output::ok("")); // docker logs of the gate, kept on the host
    rig.gate_listed();
    rig.removed();
    let r = rig.driver().revoke(ID, "egress").unwrap();
    assert_eq!((r.kind.as_str(), r.already), ("egress", false));
    assert_eq!(
        rig.fake.verbs(),
        ["container inspect", "network disconnect", "network disconnect", "network rm", "logs", "ps", "rm"]
    );
    assert_eq!(rig.fake.calls()[6], ["rm", "-f", "-v", "--", GATE_CID]);
    assert!(!rig.policy_dir().exists());

    let rig = Rig::new();
    crate::host::egress::write(&rig.state, ID, &policy).unwrap();
    rig.fake.push(Output::ok(&gated_line(&rig, &[&gate::network(ID)])));
    rig.removed(); // the sandbox
    rig.fake.push(Output::ok("")); // docker logs of the gate, kept on the host
    rig.gate_listed();
    rig.removed(); // its gate
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    let place = crate::host::uids::Place { engine: crate::model::engine::DEFAULT_ENDPOINT, data: &rig.state };
    let table = crate::host::uids::Table::at(rig.root.with_extension("uids"));
    for h in [Holder::Sandbox(ID.into()), Holder::Service(ID.into()), Holder::Sandbox("sbx-other".into())] {
        table.claim(&place, h, 0, &|_| false).unwrap();
    }
    let d = rig.driver().destroy(&[ID.to_string()]).unwrap();
    assert_eq!(d.removed, [ID]);
    assert_eq!(rig.uids_held(), [(SBX_UID_BASE + 2, Holder::Sandbox("sbx-other".into()))], "destroy frees its own");
    assert_eq!(rig.fake.verbs(), ["container inspect", "rm", "logs", "ps", "rm", "network disconnect", "network rm"]);
    assert!(!rig.policy_dir().exists());

    // Without a gate there is nothing to revoke.
    let rig = Rig::new();
    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &["sbx-proxy"])));
    let err = rig.driver().revoke(ID, "egress").unwrap_err();
    assert!(matches!(err, Error::Egress(EgressError::NoGate { .. })), "{err:?}");
}

#[test]
fn gc_reaps_gates_and_policies_of_gone_sandboxes_then_the_egress_network() {
    let rig = Rig::new();
    let policy = crate::spec::egress::Policy::default();
    crate::host::egress::write(&rig.state, ID, &policy).unwrap();
    rig.fake.push(Output::ok("")); // private networks
    rig.fake.push(Output::ok("")); // docker ps: no sandbox
    rig.gate_listed();
    rig.fake.push(Output::fail(1, &format!("Error: No such object: {ID}"))); // not a container since
    rig.fake.push(Output::ok("\"sbx-egress-net\"\n"));
    let record = serde_json::json!({"time": "2026-11-30T00:00:00.000Z", "sandbox": ID, "host": "files.example",
        "port": 80, "addr": "192.0.2.7", "decision": "allow", "rule": "files.example:80", "reason": null,
        "bytes_up": 10, "bytes_down": 20, "duration_ms": 3});
    let forged = serde_json::json!({"time": "2026-11-30T00:00:00.000Z", "sandbox": "sbx-ffffffffffff",
        "host": "x.example", "port": 80, "addr": null, "decision": "allow", "rule": null, "reason": null,
        "bytes_up": 0, "bytes_down": 0, "duration_ms": 0});
    rig.fake.push(Output::ok(&format!("{record}\nnot a record\n{forged}\n"))); // docker logs of the gate
    rig.fake.push(Output::ok("")); // rm the gate
    rig.fake.push(Output::ok("")); // network rm
    let r = rig.driver().gc(false).unwrap();
    assert_eq!(r.gates, [gate::container(ID)]);
    assert_eq!(r.policy_dirs, [rig.policy_dir().display().to_string()]);
    assert_eq!(r.egress_networks, ["sbx-egress-net"]);
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    assert_eq!(rig.fake.calls()[5][0], "logs");
    assert_eq!(rig.fake.calls()[6], ["rm", "-f", "-v", "--", GATE_CID]);
    assert_eq!(rig.fake.calls()[7], ["network", "rm", "--", "sbx-egress-net"]);
    assert!(!rig.policy_dir().exists());
    // The gate's decisions outlive it on the host: only its own, checked records.
    let kept = std::fs::read_to_string(crate::host::egress::kept_log(&rig.state, ID)).unwrap();
    assert_eq!(kept.lines().count(), 1, "{kept}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(kept.trim()).unwrap(), record);
}

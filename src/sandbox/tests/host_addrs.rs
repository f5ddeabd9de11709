//! The Docker host's own addresses in a gate's policy, through the fake:
//! a local create lists this machine's interfaces (no docker call); a
//! remote one runs sbx's image once on the engine host's network, then
//! uses what it printed for `host_addrs::TTL`; an answer that is not a
//! list of addresses fails the create before anything of the sandbox exists.

use std::net::IpAddr;
use std::time::SystemTime;

use super::remote::{plain_run, remote, spec, starts_remotely, volume_name};
use super::*;
use crate::error::EgressError;
use crate::host::host_addrs;

const ENDPOINT: &str = "ssh://me@far";

/// The remote engine's addresses are known here already (cached).
pub(super) fn engine_addrs_known(rig: &Rig) {
    host_addrs::remember(&rig.state, ENDPOINT, &["192.0.2.2".parse().unwrap()], SystemTime::now());
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    let mut p = crate::spec::egress::Policy::default();
    p.set_host_addrs(list.iter().map(|a| a.parse().unwrap()));
    p.host_addrs
}

#[test]
fn a_local_gate_s_policy_holds_this_machine_s_addresses_without_a_docker_call() {
    let rig = Rig::new();
    rig.image("");
    rig.self_image_recorded("sha256:5b");
    rig.fake.push(Output::ok(&net_line("sbx-egress-net", false, false)));
    rig.fake.push(Output::ok("")); // the internal network
    rig.fake.push(Output::ok("9a7e\n")); // the gate's run
    rig.starts_and_binds();
    rig.fake.push(Output::ok("")); // the gate joins the egress network
    rig.driver().create(&spec(&["--allow", "pypi.org"])).unwrap();
    let verbs = rig.fake.verbs();
    assert_eq!(verbs.iter().filter(|v| *v == "run").count(), 2, "the gate's and the sandbox's only: {verbs:?}");
    let policy = crate::host::egress::read(&rig.state, ID).unwrap();
    let mut want = crate::spec::egress::Policy::default();
    want.set_host_addrs(host_addrs::interfaces().unwrap());
    assert!(!want.host_addrs.is_empty(), "this machine has an address");
    assert_eq!(policy.host_addrs, want.host_addrs);
}

/// The remote part of a create up to the gate's start, the helper volume
/// already verified.
fn remote_rig() -> Rig {
    let rig = Rig::new();
    rig.image("");
    std::fs::create_dir_all(rig.state.join("helper")).unwrap();
    std::fs::write(rig.state.join("helper/remote-verified"), format!("{ENDPOINT} {}\n", volume_name())).unwrap();
    rig.fake.push(Output::ok(&format!("{{\"sbx.helper\":\"{}\"}}\n", crate::host::helper::key())));
    rig.self_image_recorded_at(ENDPOINT, "sha256:5b"); // sbx's own image
    rig.fake.push(Output::ok(&net_line("sbx-egress-net", false, false)));
    rig
}

fn remote_gate_starts(rig: &Rig) {
    rig.fake.push(Output::ok("")); // the internal network
    rig.fake.push(Output::ok("9a7e\n")); // docker create of the gate
    rig.fake.push(Output::ok("")); // the policy copied in
    rig.fake.push(Output::ok("9a7e\n")); // docker start of the gate
    starts_remotely(rig, plain_run());
    rig.fake.push(Output::ok("")); // the gate joins the egress network
}

#[test]
fn a_remote_engine_s_addresses_are_asked_once_then_cached() {
    let rig = remote_rig();
    rig.fake.push(Output::ok("192.0.2.2\n10.213.7.1\nfd00::2\n")); // `/sbx __host-addrs`
    remote_gate_starts(&rig);
    remote(&rig).create(&spec(&["--allow", "pypi.org"])).unwrap();
    let calls = rig.fake.calls();
    let run = &calls[3];
    assert_eq!(run[..2], ["run", "--rm"]);
    assert!(run.windows(2).any(|w| w == ["--network", "host"]), "{run:?}");
    assert_eq!(run[run.len() - 2..], ["sha256:5b", "__host-addrs"]);
    let want = ips(&["192.0.2.2", "10.213.7.1", "fd00::2"]);
    assert_eq!(crate::host::egress::read(&rig.state, ID).unwrap().host_addrs, want);
    let mut cached = host_addrs::cached(&rig.state, ENDPOINT, SystemTime::now()).unwrap();
    cached.sort();
    assert_eq!(cached, want);

    // The next create within the TTL: no run of its own.
    let rig2 = remote_rig();
    std::fs::copy(rig.state.join("engine-addrs.json"), rig2.state.join("engine-addrs.json")).unwrap();
    remote_gate_starts(&rig2);
    remote(&rig2).create(&spec(&["--allow", "pypi.org"])).unwrap();
    assert!(!rig2.fake.calls().iter().any(|c| c.contains(&"__host-addrs".to_string())), "{:?}", rig2.fake.verbs());
    assert_eq!(crate::host::egress::read(&rig2.state, ID).unwrap().host_addrs, want);
}

#[test]
fn a_remote_answer_that_is_no_address_list_fails_the_create_first() {
    for answer in [
        Output::ok("exec /sbx: no such file or directory\n"),
        Output::ok(""),
        Output::fail(125, "docker: host networking is not allowed\n"),
    ] {
        let rig = remote_rig();
        rig.fake.push(answer);
        let e = remote(&rig).create(&spec(&["--allow", "pypi.org"])).unwrap_err();
        assert!(matches!(&e, Error::Egress(EgressError::HostAddrs { .. })), "{e}");
        assert!(e.to_string().contains("sbx could not learn the addresses of the engine's host (ssh://me@far)"), "{e}");
        assert_eq!(rig.fake.verbs(), ["image inspect", "volume", "network inspect", "run"]);
        assert_eq!(host_addrs::cached(&rig.state, ENDPOINT, SystemTime::now()), None);
    }
}

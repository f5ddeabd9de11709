//! Audit against a remote engine, through the fake: the probe's argv, the
//! report it gives, and what sbx does with a probe that fails or lies.

use super::super::status_probe::{render, Found};
use super::super::{of_sandbox, ProcStatus};
use crate::docker::Output;
use crate::host::engine::EngineChoice;
use crate::sandbox::testing::{Rig, ID, IMG};
use crate::sandbox::Driver;

const CID: &str = "abababababababababababababababababababababababababababababababab";
const SELF_IMAGE: &str = "sha256:5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f";

fn remote(rig: &Rig) -> Driver {
    rig.driver().with_engine(EngineChoice { docker_host: Some("ssh://me@far".into()), ..Default::default() })
}

/// Sandbox ID as inspect shows it: hardened as sbx makes it, in `state`.
fn inspect(rig: &Rig, running: bool, paused: bool) -> String {
    let mut v = super::super::tests::good();
    let labels = serde_json::json!({"sbx.managed": "1", "sbx.id": ID, "sbx.routes": "{\"inference\":\"sbx-proxy\"}",
        "sbx.volume": "sbx-state-s", "sbx.persist-size": "2147483648"});
    v["Config"]["Labels"] = rig.seal(labels);
    v["Name"] = format!("/{ID}").into();
    v["Id"] = CID.into();
    v["Image"] = IMG.into();
    let status = if !running {
        "exited"
    } else if paused {
        "paused"
    } else {
        "running"
    };
    v["State"] = serde_json::json!({"Status": status, "Running": running, "Paused": paused, "Pid": if running { 4242 } else { 0 }});
    v.to_string()
}

fn status(uid: &str) -> String {
    let s = ProcStatus {
        uid: uid.into(),
        cap_eff: "0000000000000000".into(),
        cap_prm: "0000000000000000".into(),
        cap_bnd: "0000000000000000".into(),
        no_new_privs: "1".into(),
        seccomp: "2".into(),
        program: "agent".into(),
    };
    render(&Found::Process { pid: 1, status: s })
}

/// The inspect, sbx's own image found by its label, then the probe's answer.
fn probed(rig: &Rig, answer: Output) {
    rig.fake.push(Output::ok(&inspect(rig, true, false)));
    rig.self_image_recorded_at("ssh://me@far", SELF_IMAGE);
    rig.fake.push(answer);
}

/// The image's labels and the engine's security options.
fn rest(rig: &Rig) {
    rig.fake.push(Output::ok("{}\n"));
    rig.fake.push(Output::ok("[\"name=seccomp,profile=default\"]\n"));
}

fn rule<'a>(r: &'a super::super::AuditReport, id: &str) -> &'a super::super::Rule {
    r.rules.iter().find(|x| x.id == id).unwrap()
}

#[test]
fn a_remote_audit_reads_the_process_through_a_probe_in_its_pid_namespace() {
    let rig = Rig::new();
    probed(&rig, Output::ok(&status("65534")));
    rest(&rig);
    let report = of_sandbox(&remote(&rig), ID).unwrap();
    assert!(report.passed, "{report:#?}");
    assert_eq!(rule(&report, "4.1").detail, "User \"65534:65534\"; process uid 65534");
    assert_eq!(rig.fake.verbs(), ["container inspect", "run", "image inspect", "info"]);
    let probe = &rig.fake.calls()[1];
    let pair = |k: &str, v: &str| probe.windows(2).any(|w| w[0] == k && w[1] == v);
    assert!(pair("--pid", &format!("container:{CID}")) && pair("--network", "none"), "{probe:?}");
    assert!(pair("--cap-drop", "ALL") && pair("--cap-add", "SYS_PTRACE") && pair("--user", "0:0"), "{probe:?}");
    assert!(pair("--label", &format!("sbx.audit-of={ID}")) && probe.contains(&"--rm".to_string()), "{probe:?}");
    // No path of this machine: the only absolute path is the image's /sbx.
    assert!(probe.iter().filter(|a| a.contains('/')).all(|a| a == "/sbx"), "{probe:?}");
    let tail: Vec<&str> = probe.iter().rev().take(4).rev().map(String::as_str).collect();
    assert_eq!(tail, [SELF_IMAGE, "__audit-probe", CID, "4242"]);
    assert!(rig.state.join(crate::model::record::AUDIT_PROBES_MARK).exists(), "gc would not look for probes");

    // A process that would fail a rule fails it, as a local audit's would.
    let rig = Rig::new();
    probed(&rig, Output::ok(&status("0")));
    rest(&rig);
    let report = of_sandbox(&remote(&rig), ID).unwrap();
    let failed: Vec<&str> = report.rules.iter().filter(|r| !r.pass).map(|r| r.id).collect();
    assert_eq!(failed, ["4.1"]);
}

#[test]
fn an_answer_that_is_not_the_probe_s_is_an_error_never_a_pass() {
    for forged in ["uid 65534\n", "sbx-audit-probe 1\npid 1\nuid 65534\nend\n", "whatever the sandbox wrote"] {
        let rig = Rig::new();
        probed(&rig, Output::ok(forged));
        let e = of_sandbox(&remote(&rig), ID).unwrap_err();
        assert_eq!(e.kind(), "audit_probe", "{e}");
        assert!(e.to_string().starts_with(&format!("audit of {ID}: the status probe gave no usable answer: ")), "{e}");
        assert_eq!(rig.fake.verbs(), ["container inspect", "run"], "nothing is judged after a forged answer");
        let probe = &rig.fake.calls()[1];
        assert!(probe.windows(2).any(|w| w[0] == "--pid" && w[1] == format!("container:{CID}")), "{probe:?}");
    }
}

#[test]
fn a_probe_that_fails_is_removed_by_name_and_its_failure_reported() {
    let rig = Rig::new();
    probed(&rig, Output::fail(125, "docker: Error response from daemon: engine busy."));
    rig.fake.push(Output::ok(""));
    let e = of_sandbox(&remote(&rig), ID).unwrap_err();
    assert!(e.to_string().contains("engine busy"), "{e}");
    let calls = rig.fake.calls();
    let name = calls[1].iter().skip_while(|a| *a != "--name").nth(1).unwrap().clone();
    assert!(name.starts_with("sbx-audit-00000000000f-"), "{name}");
    assert_eq!(calls[2], ["rm", "-f", "-v", "--", &name]);

    // sbx's image dropped meanwhile (another sbx build on the engine): found again, run once more.
    let rig = Rig::new();
    probed(&rig, Output::fail(125, "docker: Error response from daemon: No such image: sha256:5e1f."));
    rig.fake.push(Output::ok("")); // the failed probe removed
    rig.fake.push(Output::ok("\"ENGINE:ONE\"\n"));
    rig.fake.push(Output::ok(&format!("{SELF_IMAGE}\n")));
    rig.fake.push(Output::ok(&status("65534")));
    rest(&rig);
    assert!(of_sandbox(&remote(&rig), ID).unwrap().passed);
    assert_eq!(rig.fake.verbs(), ["container inspect", "run", "rm", "info", "import", "run", "image inspect", "info"]);

    // Stopped between the inspect and the probe: said so, not an error.
    let rig = Rig::new();
    probed(
        &rig,
        Output::fail(125, "docker: Error response from daemon: cannot join PID of a non running container: x."),
    );
    rig.fake.push(Output::ok(""));
    rest(&rig);
    let report = of_sandbox(&remote(&rig), ID).unwrap();
    assert!(rule(&report, "4.1").detail.contains("the sandbox stopped while audit read it"), "{report:#?}");
}

#[test]
fn a_stopped_sandbox_gets_no_probe_and_a_paused_one_is_said_to_be() {
    let rig = Rig::new();
    rig.fake.push(Output::ok(&inspect(&rig, false, false)));
    rest(&rig);
    let report = of_sandbox(&remote(&rig), ID).unwrap();
    assert_eq!(rig.fake.verbs(), ["container inspect", "image inspect", "info"], "no probe of a stopped sandbox");
    let d = &rule(&report, "4.1").detail;
    assert!(d.contains("established from the config alone: the sandbox is not running (exited)"), "{d}");
    assert_eq!(report.note, None);

    let rig = Rig::new();
    rig.fake.push(Output::ok(&inspect(&rig, true, true)));
    rig.self_image_recorded_at("ssh://me@far", SELF_IMAGE);
    rig.fake.push(Output::ok(&status("65534")));
    rest(&rig);
    let report = of_sandbox(&remote(&rig), ID).unwrap();
    assert!(report.passed && report.note.as_deref().unwrap().starts_with("the sandbox is paused"), "{report:#?}");
}

#[test]
fn the_engine_s_apparmor_counts_not_this_machine_s() {
    let rig = Rig::new();
    probed(&rig, Output::ok(&status("65534")));
    rig.fake.push(Output::ok("{}\n"));
    rig.fake.push(Output::ok("[\"name=apparmor\",\"name=seccomp,profile=default\"]\n"));
    let report = of_sandbox(&remote(&rig), ID).unwrap();
    // good() runs under docker-default: enforced, and judged so.
    assert_eq!(rule(&report, "5.2").detail, "profile \"docker-default\"");
    assert_eq!(rig.fake.verbs(), ["container inspect", "run", "image inspect", "info"], "the engine is asked");
    assert_eq!(rig.fake.calls()[2].last().unwrap(), IMG);
}

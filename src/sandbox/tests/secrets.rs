//! Secrets through the fake: create pushes the vault after its gate starts
//! (the value on stdin only, never in an argv or a label), a failed push
//! undoes the create, start pushes again, destroy and gc remove the kept copy.

use super::egress::{gated_line, GATE_CID};
use super::*;
use crate::model::gate;
use crate::spec::egress::vault::Vault;

const VALUE: &str = "s3cr3t-VALUE-never-in-argv";

fn with_secret(var: &str) -> CreateRequest {
    std::env::set_var(var, VALUE);
    CreateRequest {
        secret: vec![format!("TOKEN@api.example.com/X-Api-Key=env:{var}")],
        secret_prefix: Some("sk-".into()),
        ..Default::default()
    }
}

fn kept_file(rig: &Rig) -> PathBuf {
    rig.state.join("secrets").join(format!("{ID}.json"))
}

/// Nothing the fake recorded but stdin holds the value.
fn no_value_in_any_argv(rig: &Rig) {
    for c in rig.fake.calls() {
        assert!(!c.iter().any(|a| a.contains(VALUE)), "{c:?}");
    }
}

#[test]
fn create_pushes_the_vault_once_the_gate_is_up() {
    let rig = Rig::new();
    rig.image("");
    rig.gate_ready();
    rig.fake.push(Output::ok("")); // the internal network
    rig.fake.push(Output::ok(&format!("{GATE_CID}\n"))); // the gate's run
    rig.starts_and_binds();
    rig.fake.push(Output::ok("")); // the gate joins the egress network
    rig.fake.push(Output::ok("ok\n")); // the vault
    let c = rig.driver().create(&spec(with_secret("SBX_TEST_CREATE_PUSH"))).unwrap();
    assert_eq!(
        rig.fake.verbs(),
        [
            "image inspect",
            "network inspect",
            "network create",
            "run",
            "run",
            "container inspect",
            "network connect",
            "exec"
        ]
    );
    let calls = rig.fake.calls();
    assert_eq!(calls[7], ["exec", "-i", "--", GATE_CID, "/sbx", "__gate-vault"]);
    let inputs = rig.fake.inputs();
    assert_eq!(inputs.len(), 1);
    assert_eq!(inputs[0].0, 7, "the vault goes to the gate, nowhere else");
    let vault: Vault = serde_json::from_slice(&inputs[0].1).unwrap();
    let s = &vault.secrets[0];
    assert_eq!(
        (s.name.as_str(), s.host.as_str(), s.port, s.header.as_str()),
        ("TOKEN", "api.example.com", 443, "X-Api-Key")
    );
    assert_eq!(s.value, VALUE);
    assert!(s.placeholder.starts_with("sk-"));
    assert_eq!(vault.certs.len(), 1);
    assert_eq!(vault.certs[0].host, "api.example.com");
    no_value_in_any_argv(&rig);
    // The sandbox gets the placeholder and its bundle, read-only.
    let run = &calls[4];
    assert!(run.contains(&format!("TOKEN={}", s.placeholder)), "{run:?}");
    assert!(run.contains(&"SSL_CERT_FILE=/run/sbx-ca/ca-bundle.pem".to_string()));
    let bundle = crate::host::secrets::bundle_dir(&rig.state, ID);
    assert!(run.contains(&format!("type=bind,src={},dst=/run/sbx-ca,readonly", bundle.display())), "{run:?}");
    let label = run.iter().find(|a| a.starts_with("sbx.secrets=")).unwrap();
    assert_eq!(
        label,
        r#"sbx.secrets=[{"name":"TOKEN","host":"api.example.com","port":443,"header":"X-Api-Key","source":"env"}]"#
    );
    assert!(!run.iter().any(|a| a.contains("SBX_TEST_CREATE_PUSH")), "not even the source's name");
    // The gate's policy terminates the host; it holds no value, no placeholder.
    let policy = std::fs::read_to_string(rig.policy_dir().join("policy.json")).unwrap();
    assert!(policy.contains("\"terminate\"") && !policy.contains(VALUE) && !policy.contains(&s.placeholder));
    let text = std::fs::read_to_string(bundle.join("ca-bundle.pem")).unwrap();
    assert!(text.contains("BEGIN CERTIFICATE") && !text.contains("PRIVATE KEY"));
    assert!(kept_file(&rig).exists());
    assert!(!serde_json::to_string(&c).unwrap().contains(VALUE));
    assert_eq!(rig.fake.remaining(), 0);
}

/// A gate that does not take its vault fails the create, and the rollback
/// takes the kept copy with everything else.
#[test]
fn a_refused_push_undoes_the_create_and_its_kept_copy() {
    let rig = Rig::new();
    rig.image("");
    rig.gate_ready();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&format!("{GATE_CID}\n")));
    rig.starts_and_binds();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::fail(1, "")); // the gate's socket is not up yet: again
    rig.fake.push(Output { status: 1, stdout: b"error: the vault is not valid\n".to_vec(), stderr: Vec::new() });
    rig.fake.push(Output::ok("")); // docker logs of the gate, kept on the host
    rig.gate_listed();
    rig.removed(); // the gate
    rig.removed(); // the sandbox
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    let err = rig.driver().create(&spec(with_secret("SBX_TEST_CREATE_REFUSED"))).unwrap_err();
    assert!(err.to_string().contains("did not take its secrets") && err.to_string().contains("not valid"), "{err}");
    assert!(!err.to_string().contains(VALUE));
    assert_eq!(rig.fake.remaining(), 0);
    no_value_in_any_argv(&rig);
    assert!(!kept_file(&rig).exists() && !crate::host::secrets::bundle_dir(&rig.state, ID).exists());
    assert!(!rig.policy_dir().exists());
}

/// A SOURCE that cannot be read is exit 2 before any docker call.
#[test]
fn an_unreadable_source_makes_nothing() {
    let rig = Rig::new();
    let req =
        CreateRequest { secret: vec!["TOKEN@api.example.com=env:SBX_TEST_UNSET_SOURCE".into()], ..Default::default() };
    let err = rig.driver().create(&spec(req)).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(rig.fake.calls().is_empty());
    assert!(!kept_file(&rig).exists());
}

fn kept(rig: &Rig, var: &str) -> crate::host::secrets::Kept {
    let e = spec(with_secret(var)).egress.unwrap();
    let k = crate::host::secrets::prepare(ID, &e, &mut Vec::new()).unwrap().unwrap();
    crate::host::egress::write(&rig.state, ID, &e.policy).unwrap();
    crate::host::secrets::write(&rig.state, ID, &k).unwrap();
    k
}

#[test]
fn destroy_removes_the_kept_copy() {
    let rig = Rig::new();
    kept(&rig, "SBX_TEST_DESTROY_KEPT");
    rig.fake.push(Output::ok(&gated_line(&rig, &[&gate::network(ID)])));
    rig.removed(); // the sandbox
    rig.fake.push(Output::ok("")); // docker logs of the gate
    rig.gate_listed();
    rig.removed(); // its gate
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    rig.driver().destroy(&[ID.to_string()]).unwrap();
    assert!(!kept_file(&rig).exists() && !crate::host::secrets::bundle_dir(&rig.state, ID).exists());
}

/// A kept copy whose policy went already (a crash between the two) is gc's too.
#[test]
fn gc_removes_a_kept_copy_whose_sandbox_is_gone() {
    let rig = Rig::new();
    kept(&rig, "SBX_TEST_GC_KEPT");
    crate::host::egress::write(&rig.state, ID, &Default::default()).unwrap();
    std::fs::remove_dir_all(rig.policy_dir()).unwrap();
    rig.fake.push(Output::ok("")); // private networks
    rig.fake.push(Output::ok("")); // docker ps: no sandbox
    rig.fake.push(Output::ok("")); // no gate
    rig.fake.push(Output::fail(1, &format!("Error: No such object: {ID}"))); // not a container
    rig.fake.push(Output::ok("")); // no egress network
    let r = rig.driver().gc(false).unwrap();
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    assert!(!kept_file(&rig).exists() && !crate::host::secrets::bundle_dir(&rig.state, ID).exists());
    assert_eq!(rig.fake.remaining(), 0);
}

/// `sbx start`: its gate started (it stops with the engine) and given its
/// vault again before the sandbox runs; without a kept copy, nothing more.
#[test]
fn start_pushes_the_kept_vault_again_first() {
    use super::lifecycle::cid;
    let rig = Rig::new();
    let k = kept(&rig, "SBX_TEST_START_PUSH");
    rig.state().mark(ID, crate::host::state::Mark::Stopped).unwrap();
    std::fs::create_dir_all(rig.sock_dir()).unwrap();
    rig.fake.push(rig.in_state("exited"));
    rig.fake.push(Output::ok(&format!("{}\n", gate::container(ID)))); // docker start of the gate
    rig.fake.push(Output::ok("ok\n")); // the vault
    rig.start_binds();
    rig.running();
    rig.driver().start(ID, std::time::Duration::from_secs(5)).unwrap();
    assert_eq!(rig.fake.verbs(), ["container inspect", "start", "exec", "start", "container inspect"]);
    let calls = rig.fake.calls();
    assert_eq!(calls[1], ["start", "--", &gate::container(ID)]);
    assert_eq!(calls[2], ["exec", "-i", "--", &gate::container(ID), "/sbx", "__gate-vault"]);
    assert_eq!(calls[3], ["start", "--", &cid()]);
    let inputs = rig.fake.inputs();
    assert_eq!(inputs[0].0, 2);
    let vault: Vault = serde_json::from_slice(&inputs[0].1).unwrap();
    assert_eq!(vault.secrets[0].placeholder, k.secrets[0].placeholder, "the sandbox's placeholder stays");
    no_value_in_any_argv(&rig);
}

/// `sbx secret set`: the new value kept and pushed; the placeholder stays.
/// An unknown NAME or a bad SOURCE is exit 2 with nothing pushed.
#[test]
fn secret_set_rotates_the_value_and_pushes_it() {
    let rig = Rig::new();
    let k = kept(&rig, "SBX_TEST_SET_OLD");
    std::env::set_var("SBX_TEST_SET_NEW", "rotated-VALUE-2");
    rig.fake.push(Output::ok(&gated_line(&rig, &[&gate::network(ID)])));
    rig.fake.push(Output::ok("ok\n"));
    let src = crate::spec::egress::SecretSource::parse_flag("env:SBX_TEST_SET_NEW").unwrap();
    let done = rig.driver().set_secret(ID, "TOKEN", &src).unwrap();
    assert_eq!((done.name.as_str(), done.host.as_str(), done.port), ("TOKEN", "api.example.com", 443));
    assert_eq!(rig.fake.calls()[1], ["exec", "-i", "--", &gate::container(ID), "/sbx", "__gate-vault"]);
    let vault: Vault = serde_json::from_slice(&rig.fake.inputs()[0].1).unwrap();
    assert_eq!(vault.secrets[0].value, "rotated-VALUE-2");
    assert_eq!(vault.secrets[0].placeholder, k.secrets[0].placeholder);
    let again = crate::host::secrets::load(&rig.state, ID).unwrap().unwrap();
    assert_eq!(again.secrets[0].value, "rotated-VALUE-2");
    assert!(!rig.fake.calls().iter().flatten().any(|a| a.contains("rotated-VALUE")));

    rig.fake.push(Output::ok(&gated_line(&rig, &[&gate::network(ID)])));
    let err = rig.driver().set_secret(ID, "NOPE", &src).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    rig.fake.push(Output::ok(&gated_line(&rig, &[&gate::network(ID)])));
    let unset = crate::spec::egress::SecretSource::parse_flag("env:SBX_TEST_SET_UNSET").unwrap();
    assert_eq!(rig.driver().set_secret(ID, "TOKEN", &unset).unwrap_err().exit_code(), 2);
    let e = crate::spec::egress::SecretSource::parse_flag("ghp_literal").unwrap_err();
    assert!(!e.to_string().contains("ghp_literal"), "{e}");
    assert_eq!(rig.fake.inputs().len(), 1, "nothing pushed after a refusal");
    assert_eq!(rig.fake.remaining(), 0);
}

/// `inspect` (and so `ls --json`) shows each secret as its label records
/// it: name, host, port, header, source kind.
#[test]
fn inspect_shows_the_secrets_label() {
    let rig = Rig::new();
    let e = spec(with_secret("SBX_TEST_INSPECT")).egress.unwrap();
    let labels = serde_json::json!({
        "sbx.managed": "1",
        "sbx.id": ID,
        "sbx.routes": format!("{{\"egress\":\"{}\"}}", gate::network(ID)),
        "sbx.private": format!("{{\"{}\":\"{}\"}}", gate::network(ID), gate::container(ID)),
        "sbx.socket": rig.sock_dir().join("sandbox.sock").display().to_string(),
        "sbx.egress": "enforce",
        "sbx.egress-network": "sbx-egress-net",
        "sbx.secrets": crate::docker::argv::secrets_label(&e),
    });
    rig.fake.push(Output::ok(&rig.container_line(ID, labels, &[&gate::network(ID)])));
    let r = rig.driver().inspect(ID).unwrap();
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(
        json["egress"]["secrets"],
        serde_json::json!([{"name": "TOKEN", "host": "api.example.com", "port": 443, "header": "X-Api-Key", "source": "env"}])
    );
    assert!(!json.to_string().contains(VALUE));
}

/// `sbx deny ID HOST`: the host's secrets leave the kept copy and the
/// gate's memory; with nothing to drop, no docker call.
#[test]
fn deny_takes_the_hosts_secrets_out_of_the_gate() {
    let rig = Rig::new();
    kept(&rig, "SBX_TEST_DENY_KEPT");
    let mut policy = crate::host::egress::read(&rig.state, ID).unwrap();
    assert!(rig.driver().secrets_follow(ID, &policy).unwrap().is_empty());
    assert!(rig.fake.calls().is_empty());
    policy.deny(&[crate::spec::egress::AllowRule::parse("api.example.com", false).unwrap()]);
    rig.fake.push(Output::ok(&gated_line(&rig, &[&gate::network(ID)])));
    rig.fake.push(Output::ok("ok\n"));
    assert_eq!(rig.driver().secrets_follow(ID, &policy).unwrap(), ["TOKEN"]);
    let vault: Vault = serde_json::from_slice(&rig.fake.inputs()[0].1).unwrap();
    assert!(vault.secrets.is_empty() && !String::from_utf8_lossy(&rig.fake.inputs()[0].1).contains(VALUE));
    assert!(crate::host::secrets::load(&rig.state, ID).unwrap().unwrap().secrets.is_empty());
    assert_eq!(rig.fake.remaining(), 0);
}

/// A remote engine: a secret's value would travel to a machine sbx does
/// not vouch for, and the bundle is a path of this one. Exit 2, no call.
#[test]
fn a_remote_engine_refuses_secrets_before_any_docker_call() {
    let rig = Rig::new();
    std::env::set_var("SBX_TEST_REMOTE_SECRET", VALUE);
    let s = super::remote::spec(&["--secret", "TOKEN@api.example.com=env:SBX_TEST_REMOTE_SECRET"]);
    let e = super::remote::remote(&rig).create(&s).unwrap_err();
    assert!(matches!(&e, Error::Invalid(i) if i.what == "--secret"), "{e}");
    assert!(e.to_string().contains("remote") && !e.to_string().contains(VALUE), "{e}");
    assert!(rig.fake.calls().is_empty());
}

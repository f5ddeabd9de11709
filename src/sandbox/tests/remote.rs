//! A remote engine (issue 16) through the fake: create refused before any
//! docker call, and destroy/gc/volumes leave this machine's files alone.

use super::*;
use crate::host::engine::EngineChoice;

fn remote(rig: &Rig) -> Driver {
    rig.driver().with_engine(EngineChoice { docker_host: Some("ssh://me:pw@far".into()), ..Default::default() })
}

fn spec(args: &[&str]) -> SandboxSpec {
    use clap::Parser;
    #[derive(Parser)]
    struct Req {
        #[command(flatten)]
        req: CreateRequest,
    }
    let full = ["x", "--image", IMG].into_iter().chain(args.iter().copied());
    SandboxSpec::from_request(&Req::try_parse_from(full).unwrap().req, None).unwrap()
}

#[test]
fn create_on_a_remote_engine_fails_before_any_docker_call_naming_what_it_would_bind() {
    let rig = Rig::new();
    let e = remote(&rig).create(&spec(&[])).unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("remote engines: not yet supported: create against ssh://me@far"), "{text}");
    assert!(text.contains("helper") && text.contains("socket directory"), "{text}");
    assert_eq!(e.exit_code(), crate::error::EXIT_FAILED);
    let e = remote(&rig).create(&spec(&["--channel", "exec"])).unwrap_err();
    assert!(!e.to_string().contains("socket directory"), "{e}");
    // A spec that names a path (a pool's refill has no request to refuse): exit 2.
    let dir = rig.root.with_extension("ro");
    std::fs::create_dir_all(&dir).unwrap();
    let e = remote(&rig).create(&spec(&["--ro", dir.to_str().unwrap()])).unwrap_err();
    assert!(matches!(&e, Error::Invalid(i) if i.what == "--ro"), "{e}");
    assert!(rig.fake.calls().is_empty(), "{:?}", rig.fake.calls());
    assert!(!rig.root.join(ID).exists());
}

#[test]
fn destroy_on_a_remote_engine_keeps_this_machine_s_files_and_refuses_purge() {
    let rig = Rig::new();
    // A sandbox of the local engine: its directory and record are this machine's.
    std::fs::create_dir_all(rig.sock_dir()).unwrap();
    rig.fake.push(Output::fail(1, &format!("Error: No such container: {ID}")));
    let d = remote(&rig).destroy(&[ID.to_string()]).unwrap();
    assert_eq!(d.already_gone, [ID]);
    assert_eq!(rig.fake.verbs(), ["container inspect"]);
    assert!(rig.sock_dir().exists(), "a remote destroy removed a local socket directory");

    let e = remote(&rig).destroy_purging(&[ID.to_string()], true).unwrap_err();
    assert!(matches!(&e, Error::Invalid(i) if i.what == "--purge"), "{e}");
    let e = remote(&rig).remove_volume("s").unwrap_err();
    assert!(matches!(&e, Error::Invalid(i) if i.what == "volumes rm"), "{e}");
    assert_eq!(rig.fake.verbs(), ["container inspect"], "a refusal made a docker call");
}

#[test]
fn start_and_a_direct_channel_need_this_machine_to_be_the_engine_s() {
    let rig = Rig::new();
    let d = remote(&rig);
    let unsupported = |e: Error| {
        assert!(matches!(&e, Error::Host(crate::error::HostError::RemoteUnsupported { .. })), "{e}");
        assert!(e.to_string().contains("(the engine is ssh://me@far)"), "{e}");
    };
    unsupported(d.start(ID, Duration::from_secs(1)).unwrap_err());
    // (audit checks the same first: `checks::audit::read`.)
    unsupported(d.local_only("audit").unwrap_err());
    assert!(rig.fake.calls().is_empty(), "{:?}", rig.fake.calls());
    // The direct channel is known from the sandbox's label: one inspect, then refused.
    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &[])));
    unsupported(d.channel(ID).unwrap_err());
    assert_eq!(rig.fake.verbs(), ["container inspect"]);
}

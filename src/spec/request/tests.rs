use super::*;
use crate::spec::tests::req;

#[test]
fn defaults() {
    let s = SandboxSpec::from_request(&req(), None).unwrap();
    assert_eq!(s.pids, DEFAULT_PIDS);
    assert_eq!(s.socket_wait, DEFAULT_SOCKET_WAIT);
    assert!(s.routes.is_empty() && s.user.is_none() && s.session.is_none());
}

#[test]
fn refuses_duplicate_kinds() {
    let r = CreateRequest { routes: vec!["a:x:1".into(), "a:y:2".into()], ..req() };
    assert!(SandboxSpec::from_request(&r, None).unwrap_err().reason.contains("twice"));
}

#[test]
fn a_private_route_names_its_port() {
    let r = |route: &str| CreateRequest { routes: vec![route.into()], private_routes: true, ..req() };
    let err = SandboxSpec::from_request(&r("a:proxy"), None).unwrap_err();
    assert!(err.reason.contains("the one port sbx relays"), "{}", err.reason);
    assert!(SandboxSpec::from_request(&r("a:proxy:8080"), None).is_ok());
    assert!(SandboxSpec::from_request(&r("a:https://proxy/v1"), None).is_ok());
    let shared = CreateRequest { private_routes: false, ..r("a:proxy") };
    assert!(SandboxSpec::from_request(&shared, None).is_ok());
}

#[test]
fn memory_and_pids_bounds() {
    let r = CreateRequest { memory_mib: Some(1), ..req() };
    assert!(SandboxSpec::from_request(&r, None).unwrap_err().reason.contains("6"));
    let r = CreateRequest { pids: Some(0), ..req() };
    assert!(SandboxSpec::from_request(&r, None).is_err());
    let r = CreateRequest { pids: Some(MAX_PIDS), ..req() };
    assert_eq!(SandboxSpec::from_request(&r, None).unwrap().pids, MAX_PIDS);
    for p in [MAX_PIDS + 1, u32::MAX] {
        let r = CreateRequest { pids: Some(p), ..req() };
        assert!(SandboxSpec::from_request(&r, None).unwrap_err().reason.contains("at most"), "{p}");
    }
}

#[test]
fn egress_flags() {
    assert_eq!(SandboxSpec::from_request(&req(), None).unwrap().egress, None);
    let r = CreateRequest { allow: vec!["pypi.org".into(), "files.example:8080".into()], ..req() };
    let e = SandboxSpec::from_request(&r, None).unwrap().egress.unwrap();
    assert_eq!(e.policy.mode, egress::Mode::Enforce);
    assert_eq!(e.policy.rules.len(), 2);
    assert_eq!((e.dns, e.network), (None, None));
    let r = CreateRequest { egress: Some(egress::Mode::Observe), ..req() };
    assert!(SandboxSpec::from_request(&r, None).unwrap().egress.unwrap().policy.rules.is_empty());
    for (r, flag) in [
        (CreateRequest { egress_dns: Some("10.0.0.2".into()), ..req() }, "--egress-dns"),
        (CreateRequest { egress_network: Some("net".into()), ..req() }, "--egress-network"),
        (CreateRequest { allow_unsafe_cidr: true, ..req() }, "--allow-unsafe-cidr"),
    ] {
        let e = SandboxSpec::from_request(&r, None).unwrap_err();
        assert_eq!(e.what, flag);
        assert!(e.hint.unwrap().contains("--allow"));
    }
    let allow = vec!["pypi.org".to_string()];
    for bad in ["-x", "none", "host", "sbx-0123456789ab-egress", "a b"] {
        let r = CreateRequest { allow: allow.clone(), egress_network: Some(bad.into()), ..req() };
        assert_eq!(SandboxSpec::from_request(&r, None).unwrap_err().what, "--egress-network", "{bad}");
    }
    let r = CreateRequest { allow: vec!["pypi.org:0".into()], ..req() };
    assert_eq!(SandboxSpec::from_request(&r, None).unwrap_err().what, "--allow");
    let r = CreateRequest { routes: vec!["egress:proxy:3128".into()], ..req() };
    assert!(SandboxSpec::from_request(&r, None).unwrap_err().reason.contains("reserved"));
}

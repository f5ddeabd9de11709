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

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Each secret allows its host and joins one `terminate` entry per host:port.
#[test]
fn secrets_imply_their_host_and_a_terminate_entry() {
    use crate::spec::egress::{AllowRule, Terminated};
    let r = CreateRequest {
        secret: strings(&["A@api.example.com=env:A", "B@api.example.com/X-Key=env:B", "C@git.example.com:8443=env:C"]),
        secret_prefix: Some("sk-".into()),
        ..req()
    };
    let e = SandboxSpec::from_request(&r, None).unwrap().egress.unwrap();
    assert_eq!(
        e.policy.rules,
        [
            AllowRule::Host { name: "api.example.com".into(), port: 443 },
            AllowRule::Host { name: "git.example.com".into(), port: 8443 }
        ]
    );
    let t = |h: &str, port, s: &[&str]| Terminated { host: h.into(), port, rules: vec![], secrets: strings(s) };
    assert_eq!(e.policy.terminate, [t("api.example.com", 443, &["A", "B"]), t("git.example.com", 8443, &["C"])]);
    assert_eq!(e.secrets.len(), 3);
    assert_eq!(e.secret_prefix.as_deref(), Some("sk-"));
}

#[test]
fn secret_flags_refused_before_anything_is_made() {
    let err = |r: CreateRequest| SandboxSpec::from_request(&r, None).unwrap_err();
    let e = err(CreateRequest { secret: strings(&["A@a.example=env:A", "A@b.example=env:B"]), ..req() });
    assert!(e.what == "--secret" && e.reason.contains("twice"), "{e}");
    let e = err(CreateRequest { secret_prefix: Some("sk-".into()), ..req() });
    assert_eq!(e.what, "--secret-prefix");
    let e = err(CreateRequest { secret_prefix: Some("sk-".into()), allow: strings(&["a.example"]), ..req() });
    assert!(e.what == "--secret-prefix" && e.reason.contains("there is none"), "{e}");
    let one = strings(&["A@a.example=env:A"]);
    for bad in ["", "a b", "x".repeat(17).as_str(), "sk=", "é"] {
        let e = err(CreateRequest { secret: one.clone(), secret_prefix: Some(bad.into()), ..req() });
        assert_eq!(e.what, "--secret-prefix", "{bad}");
    }
    let e =
        err(CreateRequest { egress_ca: Some("/nonexistent/ca.pem".into()), allow: strings(&["a.example"]), ..req() });
    assert!(e.what == "--egress-ca" && e.reason.contains("terminates"), "{e}");
    let e = err(CreateRequest { secret: one.clone(), egress_ca: Some("/nonexistent/ca.pem".into()), ..req() });
    assert!(e.what == "--egress-ca" && e.reason.contains("cannot be read"), "{e}");
    let e = err(CreateRequest { secret: one.clone(), egress_ca: Some("/etc/hostname".into()), ..req() });
    assert!(e.what == "--egress-ca" && e.reason.contains("no PEM certificate"), "{e}");
    for bad in [
        "a b",
        "a.example GET",
        "a.example GET /x extra",
        "*.a.example GET /",
        "10.0.0.0/8 GET /",
        "a.example:80 GET /",
    ] {
        let e = err(CreateRequest { allow: strings(&[bad]), ..req() });
        assert_eq!(e.what, "--allow", "{bad}");
    }
}

#[test]
fn snapshots_run_under_their_runtime_on_the_relayed_channel_with_no_network() {
    use crate::model::channel::Choice;
    let s = SandboxSpec::from_request(&CreateRequest { snapshots: true, ..req() }, None).unwrap();
    assert_eq!(s.runtime, crate::model::runtime::SNAPSHOTS);
    assert_eq!(s.channel, Choice::Exec);
    let named = CreateRequest { snapshots: true, runtime: Some("gv-snap".into()), ..req() };
    assert_eq!(SandboxSpec::from_request(&named, None).unwrap().runtime, "gv-snap");
    let by_runtime = CreateRequest { runtime: Some("runsc-snap".into()), ..req() };
    assert_eq!(SandboxSpec::from_request(&by_runtime, None).unwrap().channel, Choice::Exec);

    let snap = || CreateRequest { snapshots: true, ..req() };
    for (r, what) in [
        (CreateRequest { routes: vec!["db:db:5432".into()], ..snap() }, "--route"),
        (CreateRequest { allow: vec!["example.com".into()], ..snap() }, "--allow"),
        (CreateRequest { secret: vec!["K@example.com=env:K".into()], ..snap() }, "--secret"),
        (CreateRequest { private_routes: true, ..snap() }, "--private-routes"),
        (CreateRequest { session: Some("s".into()), persist: true, ..snap() }, "--persist"),
        (CreateRequest { channel: Choice::Direct, ..snap() }, "--channel"),
        (CreateRequest { routes: vec!["db:db:5432".into()], ..by_runtime.clone() }, "--route"),
    ] {
        let e = SandboxSpec::from_request(&r, None).unwrap_err();
        assert_eq!(e.what, what, "{e}");
    }
    // Other runtimes keep their choices.
    let direct = CreateRequest { channel: Choice::Direct, routes: vec!["db:db:5432".into()], ..req() };
    assert_eq!(SandboxSpec::from_request(&direct, None).unwrap().channel, Choice::Direct);
}

use serde_json::json;

use super::*;

fn rules(r: &[&str]) -> Vec<AllowRule> {
    let mut v: Vec<AllowRule> = r.iter().map(|r| AllowRule::parse(r, false).unwrap()).collect();
    v.sort();
    v
}

fn ask(allow: &[&str], deny: &[&str], internet: Option<bool>) -> NetworkAsk {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
    NetworkAsk { allow_out: s(allow), deny_out: s(deny), internet }
}

fn parse(body: serde_json::Value) -> Result<NetworkAsk, Refusal> {
    let o = body.as_object().unwrap().clone();
    NetworkAsk::parse(&o, o.get("network"))
}

#[test]
fn allow_out_becomes_allow_rules_on_top_of_the_defaults() {
    let defaults = rules(&["10.0.0.5/32:80"]);
    let e = resolve(&defaults, false, false, &ask(&["files.example:80", "pypi.org"], &[], None)).unwrap();
    assert_eq!(e.rules, rules(&["10.0.0.5/32:80", "files.example:80", "pypi.org:443"]));
    assert_eq!(e.mode, Mode::Enforce);
    assert!(e.gated());
    let none = resolve(&[], false, false, &NetworkAsk::default()).unwrap();
    assert!(!none.gated(), "no rules and no internet is no gate");
}

#[test]
fn allow_out_is_checked_as_allow_is() {
    for bad in ["127.0.0.1", "http://x.example", "*", "*.com", "0.0.0.0/0", "-x", "a b"] {
        let r = resolve(&[], false, false, &ask(&[bad], &[], None)).unwrap_err();
        assert_eq!(r.0, StatusCode::BAD_REQUEST, "{bad}");
        assert!(r.1.starts_with("network.allowOut: "), "{bad}: {}", r.1);
    }
    // serve's --allow-unsafe-cidr lets a create name one, as create's flag does.
    assert!(resolve(&[], true, false, &ask(&["127.0.0.1:80"], &[], None)).is_ok());
}

#[test]
fn internet_is_observe_mode_and_only_with_allow_internet() {
    let r = resolve(&[], false, false, &ask(&[], &[], Some(true))).unwrap_err();
    assert_eq!(r.0, StatusCode::FORBIDDEN);
    assert!(r.1.contains("--allow-internet"), "{}", r.1);
    let e = resolve(&[], false, true, &ask(&["pypi.org"], &[], Some(true))).unwrap();
    assert_eq!((e.mode, e.gated()), (Mode::Observe, true));
    let r = resolve(&[], false, true, &ask(&[], &["10.0.0.0/8"], Some(true))).unwrap_err();
    assert!(r.1.contains("observe mode"), "{}", r.1);
}

#[test]
fn deny_out_narrows_the_defaults_where_rules_can_say_it_and_is_refused_elsewhere() {
    let defaults = rules(&["10.1.0.0/16:80", "10.2.0.5/32:443", "pypi.org:443"]);
    // All traffic, or allow_internet_access false: only allowOut is left.
    for a in [ask(&["files.example:80"], &["0.0.0.0/0"], None), ask(&["files.example:80"], &[], Some(false))] {
        let e = resolve(&defaults, false, false, &a).unwrap();
        assert_eq!(e.rules, rules(&["files.example:80"]));
    }
    // allowOut wins over denyOut, as in E2B.
    let e = resolve(&defaults, false, false, &ask(&["pypi.org"], &["0.0.0.0/0"], None)).unwrap();
    assert_eq!(e.rules, rules(&["pypi.org:443"]));
    // A CIDR default it covers whole is dropped; one it misses stays.
    let only_cidrs = rules(&["10.1.0.0/16:80", "10.2.0.5/32:443"]);
    let e = resolve(&only_cidrs, false, false, &ask(&[], &["10.2.0.0/16"], None)).unwrap();
    assert_eq!(e.rules, rules(&["10.1.0.0/16:80"]));
    let e = resolve(&only_cidrs, false, false, &ask(&[], &["10.2.0.5"], None)).unwrap();
    assert_eq!(e.rules, rules(&["10.1.0.0/16:80"]), "a bare address is its /32");
    let e = resolve(&only_cidrs, false, false, &ask(&[], &["192.0.2.0/24", "::ffff:10.2.0.5"], None)).unwrap();
    assert_eq!(e.rules, rules(&["10.1.0.0/16:80"]));
    // A hole in a default CIDR, or an address a default name may resolve to: refused.
    let r = resolve(&only_cidrs, false, false, &ask(&[], &["10.1.2.0/24"], None)).unwrap_err();
    assert!(r.0 == StatusCode::BAD_REQUEST && r.1.contains("10.1.0.0/16:80"), "{}", r.1);
    let r = resolve(&defaults, false, false, &ask(&[], &["192.0.2.0/24"], None)).unwrap_err();
    assert!(r.1.contains("pypi.org:443") && r.1.contains("allowlist only"), "{}", r.1);
    // Nothing to narrow: already denied.
    let e = resolve(&[], false, false, &ask(&["files.example:80"], &["10.0.0.0/8"], None)).unwrap();
    assert_eq!(e.rules, rules(&["files.example:80"]));
    for bad in ["example.com", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/+8", "x/8"] {
        let r = resolve(&[], false, false, &ask(&[], &[bad], None)).unwrap_err();
        assert!(r.1.contains("network.denyOut"), "{bad}: {}", r.1);
    }
}

#[test]
fn the_wire_shape_is_e2b_s_and_what_sbx_lacks_is_refused() {
    let a = parse(json!({"allow_internet_access": false, "network": {"allowOut": ["x.example"], "denyOut": ["0.0.0.0/0"], "dnsServers": [], "rules": {"x.example": [{}]}}})).unwrap();
    assert_eq!(a, ask(&["x.example"], &["0.0.0.0/0"], Some(false)));
    assert!(parse(json!({})).unwrap().is_empty());
    // An update body carries them at its top level.
    let o = json!({"allowOut": ["y.example"], "allow_internet_access": true});
    let u = NetworkAsk::parse(o.as_object().unwrap(), Some(&o)).unwrap();
    assert_eq!(u, ask(&["y.example"], &[], Some(true)));
    let unsupported = |b: serde_json::Value| {
        let r = parse(b).unwrap_err();
        assert_eq!(r.0, StatusCode::NOT_IMPLEMENTED, "{}", r.1);
        r.1
    };
    let m =
        unsupported(json!({"network": {"rules": {"x.example": [{"transform": {"headers": {"Authorization": "x"}}}]}}}));
    assert!(m.contains("transform") && m.contains("secrets"), "{m}");
    unsupported(json!({"network": {"egressProxy": {"address": "p:1080"}}}));
    unsupported(json!({"network": {"dnsServers": ["1.1.1.1"]}}));
    unsupported(json!({"network": {"allowPublicTraffic": true}}));
    unsupported(json!({"network": {"httpsPorts": [3000]}}));
    let too_many: Vec<String> = (0..300).map(|i| format!("h{i}.example")).collect();
    assert_eq!(parse(json!({"network": {"allowOut": too_many}})).unwrap_err().0, StatusCode::BAD_REQUEST);
    assert_eq!(parse(json!({"network": {"denyOut": [1]}})).unwrap_err().0, StatusCode::BAD_REQUEST);
    assert_eq!(parse(json!({"network": []})).unwrap_err().0, StatusCode::BAD_REQUEST);
}

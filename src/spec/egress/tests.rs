use std::net::IpAddr;

use super::*;

fn rule(s: &str) -> AllowRule {
    AllowRule::parse(s, false).unwrap_or_else(|e| panic!("{s}: {e} ({:?})", e.hint))
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn policy(mode: Mode, rules: &[&str]) -> Policy {
    let mut p = Policy { mode, ..Policy::default() };
    p.allow(&rules.iter().map(|r| rule(r)).collect::<Vec<_>>());
    p
}

fn allowed(v: &Verdict) -> Option<&str> {
    match v {
        Verdict::Allow { rule } => Some(rule),
        Verdict::Deny { .. } => None,
    }
}

fn reason(v: Verdict) -> String {
    match v {
        Verdict::Deny { reason } => reason,
        Verdict::Allow { rule } => panic!("allowed by {rule}"),
    }
}

#[test]
fn parses_and_canonicalizes_every_shape() {
    let cases = [
        ("pypi.org", "pypi.org:443"),
        ("PyPI.ORG.", "pypi.org:443"),
        ("github.com:22", "github.com:22"),
        ("example.com:0080", "example.com:80"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example:443"),
        ("a-b.c-d.example:65535", "a-b.c-d.example:65535"),
        ("*.pythonhosted.org", "*.pythonhosted.org:443"),
        ("*.Example.COM.:8443", "*.example.com:8443"),
        ("203.0.113.7", "203.0.113.7/32:443"),
        ("203.0.113.0/24", "203.0.113.0/24:443"),
        ("10.0.0.0/8:5432", "10.0.0.0/8:5432"),
        ("172.18.0.0/16:80", "172.18.0.0/16:80"),
        ("[2001:db8::1]", "2001:db8::1/128:443"),
        ("[2001:DB8::1]:8443", "2001:db8::1/128:8443"),
        ("2001:db8::/32", "2001:db8::/32:443"),
        ("[2001:db8::]/32:80", "2001:db8::/32:80"),
        ("[::ffff:10.1.2.3]:80", "10.1.2.3/32:80"),
        ("::ffff:10.0.0.0/104:80", "10.0.0.0/8:80"),
    ];
    for (input, want) in cases {
        let r = rule(input);
        assert_eq!(r.to_string(), want, "{input}");
        assert_eq!(AllowRule::parse(&r.to_string(), false).unwrap(), r, "{input} does not round-trip");
    }
    assert_eq!(rule("pypi.org"), AllowRule::Host { name: "pypi.org".into(), port: 443 });
    assert_eq!(rule("*.a.example:1"), AllowRule::Wildcard { suffix: "a.example".into(), port: 1 });
    assert_eq!(rule("10.0.0.0/8"), AllowRule::Cidr { addr: ip("10.0.0.0"), prefix: 8, port: 443 });
}

#[test]
fn refuses_bad_rules_with_a_hint() {
    let long = format!("{}.example", ["a"; 127].join("."));
    assert_eq!(long.len(), 261);
    let label64 = format!("{}.example", "a".repeat(64));
    let cases: &[(&str, &str)] = &[
        ("", "empty"),
        ("--network=host", "starts with '-'"),
        ("-x", "starts with '-'"),
        ("pypi .org", "spaces"),
        ("pypi.org\n", "control"),
        ("https://pypi.org/simple", "URL"),
        ("user@pypi.org", "'@'"),
        ("pypi.org:", "port"),
        ("pypi.org:0", "port"),
        ("pypi.org:65536", "port"),
        ("pypi.org:99999", "port"),
        ("pypi.org:+443", "port"),
        ("pypi.org:-1", "port"),
        ("pypi.org:443x", "port"),
        ("pypi.org:*", "port"),
        ("pypi.org/simple", "never a path"),
        ("*", "leading '*.'"),
        ("*:443", "leading '*.'"),
        ("*.", "empty"),
        ("**.example.com", "leading '*.'"),
        ("*example.com", "leading '*.'"),
        ("a.*.example.com", "leading '*.'"),
        ("foo*.example.com", "leading '*.'"),
        ("*.*.example.com", "not a DNS name"),
        ("*.com", "top-level domain"),
        ("*.example", "top-level domain"),
        ("*.localhost.", "loopback"),
        ("*.a.localhost", "loopback"),
        ("localhost", "loopback"),
        ("LOCALHOST.", "loopback"),
        ("x.localhost", "loopback"),
        ("ip6-localhost", "loopback"),
        ("a..b", "not a DNS name"),
        (".example.com", "not a DNS name"),
        ("example.com..", "not a DNS name"),
        ("-a.example", "starts with '-'"),
        ("b.-a.example", "not a DNS name"),
        ("a-.example", "not a DNS name"),
        ("a_b.example", "not a DNS name"),
        ("bücher.example", "punycode"),
        ("пример.рф", "punycode"),
        (&long, "at most 253"),
        (&label64, "not a DNS name"),
        ("127.1", "reads as an address"),
        ("0x7f000001", "reads as an address"),
        ("2130706433", "reads as an address"),
        ("0177.0.0.1", "reads as an address"),
        ("1.2.3.4.5", "reads as an address"),
        ("example.123", "reads as an address"),
        ("01.2.3.4", "reads as an address"),
        ("::1", "brackets"),
        ("2001:db8::1:443", "brackets"),
        ("[::1", "without ']'"),
        ("[pypi.org]:443", "not an IPv6 address"),
        ("[1.2.3.4]", "not an IPv6 address"),
        ("[2001:db8::1]x", "not :PORT"),
        ("[2001:db8::1]:", "port"),
        ("10.0.0.1/8", "not the network address"),
        ("203.0.113.1/24:80", "not the network address"),
        ("2001:db8::1/32", "not the network address"),
        ("10.0.0.0/33", "prefix"),
        ("10.0.0.0/", "prefix"),
        ("10.0.0.0/+8", "prefix"),
        ("10.0.0.0/08x", "prefix"),
        ("2001:db8::/129", "prefix"),
        ("10.0.0.0/8:0", "port"),
        ("127.0.0.1", "loopback"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.169.254", "metadata"),
        ("169.254.0.0/16:80", "link-local"),
        ("0.0.0.0/0", "unspecified"),
        ("0.0.0.0", "unspecified"),
        ("128.0.0.0/1", "link-local"),
        ("224.0.0.0/4", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("[::1]:443", "loopback"),
        ("[::]", "unspecified"),
        ("::/0", "unspecified"),
        ("[fe80::1]", "link-local"),
        ("fe80::/10:80", "link-local"),
        ("[::ffff:127.0.0.1]", "loopback"),
        ("[::ffff:169.254.169.254]:80", "link-local"),
        ("::ffff:0:0/96", "unspecified"),
        ("ff02::/16", "multicast"),
    ];
    for (input, why) in cases {
        let err = AllowRule::parse(input, false).expect_err(input);
        assert_eq!(err.what, "--allow");
        assert_eq!(err.value, *input);
        assert!(err.reason.contains(why), "{input:?}: {:?} lacks {why:?}", err.reason);
        assert!(
            err.hint.as_deref().is_some_and(|h| h.contains("--allow") || h.contains("e.g.")),
            "{input:?}: {:?}",
            err.hint
        );
    }
}

#[test]
fn hints_say_what_to_write() {
    let hint = |s| AllowRule::parse(s, false).unwrap_err().hint.unwrap();
    assert!(hint("10.0.0.1/8").contains("--allow 10.0.0.0/8:443"), "{}", hint("10.0.0.1/8"));
    assert!(hint("10.0.0.1/8").contains("10.0.0.1/32:443"));
    assert!(hint("127.0.0.0/8").contains("--allow-unsafe-cidr"));
    assert!(hint("*.com").contains("*.example.com"));
    assert!(hint("*").contains("--egress observe"));
    assert!(hint("bücher.example").contains("xn--"));
    assert!(hint("https://pypi.org").contains("--allow pypi.org"));
}

#[test]
fn an_unsafe_cidr_needs_the_override_and_a_private_one_does_not() {
    for s in ["127.0.0.0/8:80", "169.254.169.254/32:80", "0.0.0.0/0", "[::1]:443", "fe80::/10:80", "::/0"] {
        assert!(AllowRule::parse(s, false).is_err(), "{s}");
        assert!(AllowRule::parse(s, true).is_ok(), "{s}");
    }
    for s in ["10.0.0.0/8", "172.16.0.0/12", "192.168.1.0/24", "100.64.0.0/10", "fc00::/7", "203.0.113.9"] {
        assert!(AllowRule::parse(s, false).is_ok(), "{s}");
    }
    // The override is about ranges, not shapes.
    assert!(AllowRule::parse("10.0.0.1/8", true).unwrap_err().reason.contains("network address"));
}

#[test]
fn names_match_exactly_and_wildcards_only_below_their_suffix() {
    let p = policy(Mode::Enforce, &["pypi.org", "*.pythonhosted.org", "github.com:22", "example.com:80"]);
    assert_eq!(allowed(&p.decide_name("pypi.org", 443)), Some("pypi.org:443"));
    assert_eq!(allowed(&p.decide_name("PYPI.org.", 443)), Some("pypi.org:443"));
    assert_eq!(allowed(&p.decide_name("files.pythonhosted.org", 443)), Some("*.pythonhosted.org:443"));
    assert_eq!(allowed(&p.decide_name("a.b.PythonHosted.org", 443)), Some("*.pythonhosted.org:443"));
    assert_eq!(allowed(&p.decide_name("github.com", 22)), Some("github.com:22"));
    for (host, port) in [
        ("pythonhosted.org", 443),
        ("evilpythonhosted.org", 443),
        ("pythonhosted.org.evil.example", 443),
        ("www.pypi.org", 443),
        ("pypi.org.evil.example", 443),
        ("evil.example", 443),
        ("github.com", 443),
    ] {
        assert!(reason(p.decide_name(host, port)).starts_with("no rule allows"), "{host}:{port}");
    }
    assert_eq!(reason(p.decide_name("pypi.org", 80)), "no rule allows pypi.org on port 80 (only on 443)");
    assert_eq!(reason(p.decide_name("example.com", 443)), "no rule allows example.com on port 443 (only on 80)");
    assert_eq!(reason(p.decide_name("pypi.org", 0)), "port 0 is no port");
    // The matchers are public: they must not panic on what a sandbox sends.
    assert!(!rule("*.pythonhosted.org").allows_name("ü.éythonhosted.org", 443));
    assert!(!rule("*.pythonhosted.org").allows_name("€pythonhosted.org", 443));
}

#[test]
fn malformed_requested_hosts_are_refused_even_in_observe_mode() {
    let p = policy(Mode::Observe, &[]);
    for host in
        ["", "127.1", "0x7f000001", "localhost", "a..b", "ev il", "x\u{1b}[2J", "bücher.example", "fe80::1%eth0"]
    {
        assert!(allowed(&p.decide_name(host, 443)).is_none(), "{host:?}");
    }
    let long = "a".repeat(5000);
    let r = reason(p.decide_name(&long, 443));
    assert!(r.len() < 200, "a reason echoes at most a short prefix: {}", r.len());
    assert_eq!(allowed(&p.decide_name("anything.example", 8080)), Some(OBSERVE));
}

#[test]
fn literals_are_allowed_only_by_a_cidr_rule() {
    let p = policy(Mode::Enforce, &["203.0.113.0/24", "[2001:db8::]/32:80", "pypi.org"]);
    assert_eq!(allowed(&p.decide_name("203.0.113.9", 443)), Some("203.0.113.0/24:443"));
    assert_eq!(allowed(&p.decide_name("[2001:db8::5]", 80)), Some("2001:db8::/32:80"));
    assert_eq!(allowed(&p.decide_name("2001:db8::5", 80)), Some("2001:db8::/32:80"));
    assert_eq!(allowed(&p.decide_name("::ffff:203.0.113.9", 443)), Some("203.0.113.0/24:443"));
    let r = reason(p.decide_name("198.51.100.1", 443));
    assert!(r.contains("only a CIDR rule") && r.contains("--allow 198.51.100.1/32:443"), "{r}");
    assert!(allowed(&p.decide_name("203.0.113.9", 80)).is_none());
    // A name rule never allows a literal, nor a CIDR rule a name.
    assert!(allowed(&p.decide_name("[::1]", 443)).is_none());
    let p = policy(Mode::Observe, &[]);
    assert_eq!(allowed(&p.decide_name("198.51.100.1", 443)), Some(OBSERVE));
}

#[test]
fn check_addr_refuses_every_internal_class_in_every_form() {
    let p = policy(Mode::Observe, &[]);
    for a in [
        "127.0.0.1",
        "127.255.255.254",
        "0.0.0.0",
        "0.1.2.3",
        "169.254.169.254",
        "169.254.1.1",
        "10.0.0.1",
        "172.16.0.1",
        "172.17.0.2",
        "172.31.255.255",
        "192.168.1.1",
        "100.64.0.1",
        "100.127.255.255",
        "224.0.0.1",
        "239.255.255.250",
        "255.255.255.255",
        "240.0.0.1",
        "::",
        "::1",
        "::127.0.0.1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "::ffff:10.0.0.1",
        "::ffff:0.0.0.0",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b::7f00:1",
        "fe80::1",
        "febf::1",
        "fec0::1",
        "fc00::1",
        "fd12:3456::1",
        "ff02::1",
    ] {
        let r = reason(p.check_addr(ip(a), 443));
        assert!(r.contains("only a CIDR rule allows it"), "{a}: {r}");
    }
    assert!(reason(p.check_addr(ip("::ffff:169.254.169.254"), 80)).starts_with("169.254.169.254 is link-local"));
    assert!(reason(p.check_addr(ip("64:ff9b::a9fe:a9fe"), 80)).contains("NAT64 of 169.254.169.254"));
    for a in [
        "8.8.8.8",
        "172.32.0.1",
        "172.15.255.255",
        "100.128.0.1",
        "192.169.0.1",
        "1.1.1.1",
        "2606:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
    ] {
        assert_eq!(allowed(&p.check_addr(ip(a), 443)), Some(PUBLIC), "{a}");
    }
    assert!(allowed(&p.check_addr(ip("8.8.8.8"), 0)).is_none());
}

#[test]
fn check_addr_lets_a_cidr_rule_cover_address_and_port() {
    let mut p = policy(Mode::Enforce, &["172.18.0.0/16:443", "pypi.org"]);
    p.allow(&[AllowRule::parse("169.254.169.254:80", true).unwrap()]);
    assert_eq!(allowed(&p.check_addr(ip("172.18.0.5"), 443)), Some("172.18.0.0/16:443"));
    assert_eq!(allowed(&p.check_addr(ip("::ffff:172.18.0.5"), 443)), Some("172.18.0.0/16:443"));
    assert!(allowed(&p.check_addr(ip("172.18.0.5"), 80)).is_none(), "the port is part of the rule");
    assert!(allowed(&p.check_addr(ip("172.19.0.5"), 443)).is_none());
    assert_eq!(allowed(&p.check_addr(ip("169.254.169.254"), 80)), Some("169.254.169.254/32:80"));
    assert!(allowed(&p.check_addr(ip("169.254.169.253"), 80)).is_none());
}

#[test]
fn refused_class_names_the_range() {
    assert_eq!(addr::refused_class(ip("172.17.0.1")).unwrap(), "private (172.16.0.0/12, Docker's bridge networks)");
    assert_eq!(addr::refused_class(ip("::1")).unwrap(), "loopback (::1)");
    assert_eq!(addr::refused_class(ip("9.9.9.9")), None);
}

#[test]
fn allow_and_deny_keep_a_sorted_unique_list() {
    let mut p = policy(Mode::Enforce, &["pypi.org", "github.com"]);
    p.allow(&[rule("PYPI.org"), rule("*.example.com"), rule("10.0.0.0/8")]);
    let shown: Vec<String> = p.rules.iter().map(|r| r.to_string()).collect();
    assert_eq!(shown, ["github.com:443", "pypi.org:443", "*.example.com:443", "10.0.0.0/8:443"]);
    let removed = p.deny(&[rule("pypi.org"), rule("nothere.example"), rule("pypi.org")]);
    assert_eq!(removed, [rule("pypi.org")]);
    assert!(allowed(&p.decide_name("pypi.org", 443)).is_none());
    // Denying a name under a wildcard removes nothing: the wildcard stands.
    assert!(p.deny(&[rule("a.example.com")]).is_empty());
    assert!(allowed(&p.decide_name("a.example.com", 443)).is_some());
    assert_eq!(p.deny(&[rule("*.example.com"), rule("10.0.0.0/8")]).len(), 2);
    assert_eq!(p.rules, [rule("github.com")]);
}

#[test]
fn the_policy_file_round_trips_and_is_checked_on_read() {
    let mut p = policy(Mode::Observe, &["pypi.org", "*.example.com:80", "10.0.0.0/8", "[2001:db8::]/32"]);
    p.allow(&[AllowRule::parse("127.0.0.1:8080", true).unwrap()]);
    let json = p.to_json();
    assert!(json.ends_with('\n'));
    assert_eq!(Policy::from_json(&json).unwrap(), p);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["mode"], "observe");
    assert_eq!(v["rules"][0], serde_json::json!({"type": "host", "name": "pypi.org", "port": 443}));
    let bad = [
        (r#"{"mode":"enforce","rules":[{"type":"host","name":"PyPI.org","port":443}]}"#, "not canonical"),
        (r#"{"mode":"enforce","rules":[{"type":"host","name":"a b","port":443}]}"#, "not valid"),
        (r#"{"mode":"enforce","rules":[{"type":"host","name":"x.example:80","port":443}]}"#, "not"),
        (r#"{"mode":"enforce","rules":[{"type":"host","name":"pypi.org","port":0}]}"#, "not valid"),
        (r#"{"mode":"enforce","rules":[{"type":"wildcard","suffix":"com","port":443}]}"#, "not valid"),
        (r#"{"mode":"enforce","rules":[{"type":"cidr","addr":"10.0.0.1","prefix":8,"port":443}]}"#, "not valid"),
        (r#"{"mode":"enforce","rules":[{"type":"cidr","addr":"10.0.0.0","prefix":40,"port":443}]}"#, "not valid"),
        (
            r#"{"mode":"enforce","rules":[{"type":"cidr","addr":"::ffff:10.0.0.0","prefix":104,"port":443}]}"#,
            "not canonical",
        ),
        (r#"{"mode":"lax","rules":[]}"#, "not valid JSON"),
        (r#"{"mode":"enforce","rules":[],"extra":1}"#, "not valid JSON"),
        ("", "not valid JSON"),
    ];
    for (json, why) in bad {
        let err = Policy::from_json(json).unwrap_err();
        assert!(err.contains(why), "{json}: {err}");
    }
    let huge = format!(r#"{{"mode":"enforce","rules":[]{}}}"#, " ".repeat(MAX_POLICY_BYTES));
    assert!(Policy::from_json(&huge).unwrap_err().contains("bytes"));
    assert_eq!(Policy::from_json(r#"{"mode":"enforce","rules":[]}"#).unwrap(), Policy::default());
}

mod addresses;

/// `sbx deny ID HOST` ends the host's termination too: no secret is put
/// in there any more, and another port's entry stays.
#[test]
fn deny_drops_the_hosts_terminate_entry() {
    let mut p = policy(Mode::Enforce, &["api.example.com", "api.example.com:8443"]);
    let t = |port| Terminated { host: "api.example.com".into(), port, rules: vec![], secrets: vec!["K".into()] };
    p.terminate = vec![t(443), t(8443)];
    assert_eq!(p.deny(&[rule("api.example.com")]), [rule("api.example.com")]);
    assert_eq!(p.terminate, [t(8443)]);
    assert_eq!(p.rules, [rule("api.example.com:8443")]);
}

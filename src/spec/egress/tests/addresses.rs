//! The address judgement: every special-purpose range, the IPv4 inside
//! IPv6 forms, and the Docker host's own addresses, reachable only through
//! a rule that names exactly one.

use super::*;

/// One address in each refused range, and the class it is refused as.
#[test]
fn every_special_purpose_range_is_refused_by_its_name() {
    let p = policy(Mode::Observe, &[]);
    for (a, class) in [
        ("0.0.0.0", "unspecified"),
        ("0.255.255.255", "unspecified"),
        ("10.213.7.9", "private (10.0.0.0/8)"),
        ("100.64.0.1", "CGNAT"),
        ("127.0.0.1", "loopback"),
        ("168.63.129.16", "Azure's wire server"),
        ("169.254.169.254", "link-local"),
        ("172.17.0.1", "172.16.0.0/12"),
        ("192.0.0.9", "192.0.0.0/24"),
        ("192.0.0.170", "192.0.0.0/24"),
        ("192.0.2.2", "TEST-NET-1"),
        ("192.88.99.1", "6to4 relay anycast"),
        ("192.168.1.1", "192.168.0.0/16"),
        ("198.18.0.1", "benchmarking"),
        ("198.19.255.255", "benchmarking"),
        ("198.51.100.7", "TEST-NET-2"),
        ("203.0.113.9", "TEST-NET-3"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.254", "reserved"),
        ("255.255.255.255", "limited broadcast"),
        ("::", "unspecified"),
        ("::1", "loopback"),
        ("::a00:1", "IPv4-compatible"),
        ("64:ff9b:1::808:808", "local-use IPv4/IPv6 translation"),
        ("100::1", "discard-only"),
        ("100:0:0:1::1", "dummy prefix"),
        ("2001:2::1", "IETF protocol assignments (2001::/23)"),
        ("2001:1ff:ffff::1", "2001::/23"),
        ("2001:db8::1", "documentation (2001:db8::/32)"),
        ("3fff::1", "3fff::/20"),
        ("5f00::1", "segment routing"),
        ("fc00::1", "unique local"),
        ("fd00::2", "unique local"),
        ("fe80::1", "link-local"),
        ("fec0::1", "site-local"),
        ("ff02::1", "multicast"),
    ] {
        let r = reason(p.check_addr(ip(a), 443));
        assert!(r.starts_with(&format!("{a} is ")) && r.contains(class), "{a}: {r}");
        assert!(r.contains("only a CIDR rule allows it"), "{a}: {r}");
    }
    // Their neighbours are the internet.
    for a in [
        "1.1.1.1",
        "168.63.129.15",
        "168.63.129.17",
        "192.0.1.255",
        "192.0.3.0",
        "192.88.98.255",
        "198.17.255.255",
        "198.20.0.0",
        "198.51.99.255",
        "203.0.112.255",
        "223.255.255.255",
        "2001:200::1",
        "2001:db9::1",
        "2606:4700::1111",
        "3fff:1000::1",
        "64:ff9b::808:808",
    ] {
        assert_eq!(allowed(&p.check_addr(ip(a), 443)), Some(PUBLIC), "{a}");
    }
}

/// NAT64, 6to4 and Teredo carry an IPv4 address the traffic is delivered
/// to: that address is judged, with the rules, as if it had been asked for.
#[test]
fn the_ipv4_inside_nat64_6to4_and_teredo_is_judged() {
    let p = policy(Mode::Observe, &[]);
    let refused = [
        ("::ffff:127.0.0.1", "127.0.0.1 is loopback"),
        ("64:ff9b::a9fe:a9fe", "NAT64 of 169.254.169.254: 169.254.169.254 is link-local"),
        ("64:ff9b::c000:202", "NAT64 of 192.0.2.2: 192.0.2.2 is documentation"),
        ("2002:7f00:1::1", "6to4 of 127.0.0.1: 127.0.0.1 is loopback"),
        ("2002:a9fe:a9fe:1::1", "6to4 of 169.254.169.254"),
        ("2002:c0a8:101::", "6to4 of 192.168.1.1"),
        // Teredo: server 127.0.0.1 (bits 32..64), client 8.8.8.8 (inverted).
        ("2001:0:7f00:1:0:0:f7f7:f7f7", "Teredo via server 127.0.0.1"),
        // Server 8.8.8.8, client 10.0.0.1 = !0xf5fffffe.
        ("2001:0:808:808:8000:ffff:f5ff:fffe", "Teredo to client 10.0.0.1"),
    ];
    for (a, why) in refused {
        let r = reason(p.check_addr(ip(a), 443));
        assert!(r.contains(why), "{a}: {r}");
    }
    for a in ["2002:808:808::1", "2001:0:808:808:0:0:f7f7:f7f7", "64:ff9b::101:101"] {
        assert_eq!(allowed(&p.check_addr(ip(a), 443)), Some(PUBLIC), "{a}");
    }
    // A v6 rule covering the outer form does not cover the inner address.
    let mut wide = policy(Mode::Enforce, &["2002::/16:443", "64:ff9b::/96:443", "2001::/32:443"]);
    for a in ["2002:7f00:1::1", "64:ff9b::a9fe:a9fe", "2001:0:7f00:1:0:0:f7f7:f7f7"] {
        assert!(allowed(&wide.check_addr(ip(a), 443)).is_none(), "{a}");
    }
    assert_eq!(allowed(&wide.check_addr(ip("2002:808:808::1"), 443)), Some("2002::/16:443"));
    // An inner private address is allowed by a rule for it (and the outer's).
    wide.allow(&[rule("192.168.1.0/24:443")]);
    assert_eq!(allowed(&wide.check_addr(ip("2002:c0a8:101::"), 443)), Some("2002::/16:443"));
}

fn on_host(rules: &[&str]) -> Policy {
    let mut p = policy(Mode::Enforce, rules);
    p.set_host_addrs(["192.0.2.2", "10.213.7.1", "172.17.0.1", "fd00::2", "::ffff:198.51.100.1"].map(ip));
    p
}

/// The host's addresses (its interfaces, docker0, every bridge's gateway)
/// are refused under any wider CIDR; a rule naming exactly one reaches it.
#[test]
fn a_host_address_is_reached_only_by_a_rule_naming_exactly_it() {
    let mut p = on_host(&["192.0.2.0/24:47002", "10.213.7.0/24:80", "172.16.0.0/12:80", "fd00::/64:443"]);
    p.allow(&[AllowRule::parse("0.0.0.0/0:80", true).unwrap()]);
    assert_eq!(p.host_addrs, ["10.213.7.1", "172.17.0.1", "192.0.2.2", "198.51.100.1", "fd00::2"].map(ip));
    for (a, port) in [
        ("192.0.2.2", 47002),
        ("::ffff:192.0.2.2", 47002),
        ("10.213.7.1", 80),
        ("172.17.0.1", 80),
        ("fd00::2", 443),
        ("198.51.100.1", 80),
        // Its v6 forms are the host too.
        ("64:ff9b::c000:202", 47002),
        ("2002:c000:202::1", 47002),
    ] {
        let r = reason(p.check_addr(ip(a), port));
        assert!(r.contains("the Docker host's own address"), "{a}: {r}");
    }
    let r = reason(p.check_addr(ip("192.0.2.2"), 47002));
    assert!(
        r.starts_with("192.0.2.2 is the Docker host's own address") && r.ends_with("(--allow 192.0.2.2/32:47002)"),
        "{r}"
    );
    // The rest of the same networks is theirs to allow.
    assert_eq!(allowed(&p.check_addr(ip("192.0.2.3"), 47002)), Some("192.0.2.0/24:47002"));
    assert!(allowed(&p.check_addr(ip("10.213.7.2"), 80)).is_some());
    assert_eq!(allowed(&p.check_addr(ip("fd00::3"), 443)), Some("fd00::/64:443"));
    // Named exactly, on its port: reached; on another port: not.
    p.allow(&[rule("192.0.2.2/32:47002"), rule("[fd00::2]:443")]);
    assert_eq!(allowed(&p.check_addr(ip("192.0.2.2"), 47002)), Some("192.0.2.2/32:47002"));
    assert_eq!(allowed(&p.check_addr(ip("::ffff:192.0.2.2"), 47002)), Some("192.0.2.2/32:47002"));
    assert_eq!(allowed(&p.check_addr(ip("fd00::2"), 443)), Some("fd00::2/128:443"));
    assert_eq!(allowed(&p.check_addr(ip("2002:c000:202::1"), 47002)), Some(PUBLIC), "its 6to4 form, by the exact rule");
    assert!(reason(p.check_addr(ip("192.0.2.2"), 47003)).contains("the Docker host's own address"));
    // A literal in observe mode is no exception.
    let mut observe = on_host(&[]);
    observe.mode = Mode::Observe;
    assert_eq!(allowed(&observe.decide_name("192.0.2.2", 47002)), Some(OBSERVE));
    assert!(reason(observe.check_addr(ip("192.0.2.2"), 47002)).contains("the Docker host's own address"));
}

#[test]
fn the_host_addresses_round_trip_in_the_policy_file() {
    let p = on_host(&["pypi.org"]);
    let json = p.to_json();
    assert!(json.contains("\"host_addrs\""), "{json}");
    assert_eq!(Policy::from_json(&json).unwrap(), p);
    // Read canonical whatever the file says; absent is none (a policy
    // written before sbx knew them).
    let text = r#"{"mode":"enforce","rules":[],"host_addrs":["fd00::2","::ffff:192.0.2.2","192.0.2.2"]}"#;
    assert_eq!(Policy::from_json(text).unwrap().host_addrs, ["192.0.2.2", "fd00::2"].map(ip));
    assert!(!Policy::default().to_json().contains("host_addrs"));
    assert!(Policy::from_json(r#"{"mode":"enforce","rules":[],"host_addrs":["host"]}"#).is_err());
}

#[test]
fn only_ranges_that_reach_the_gate_host_or_metadata_need_the_override() {
    for s in ["168.63.129.16:80", "168.63.0.0/16:80", "255.255.255.255:80"] {
        assert!(AllowRule::parse(s, false).unwrap_err().reason.contains("covers"), "{s}");
        assert!(AllowRule::parse(s, true).is_ok(), "{s}");
    }
    for s in ["192.0.2.0/24:47002", "198.18.0.0/15", "2001:db8::/32", "2002::/16", "64:ff9b::/96", "192.0.2.2/32:80"] {
        assert!(AllowRule::parse(s, false).is_ok(), "{s}");
    }
}

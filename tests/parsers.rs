//! The input parsers under fuzzing (proptest) and a corpus of hostile
//! inputs. No Docker needed: everything here is refused or accepted before
//! any docker call.

#[path = "../benches/sbx_bench/markdown.rs"]
mod markdown;

use proptest::prelude::*;
use sbx::spec::{self, ImageRef, MountSpec, Route};

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('0') => out.push('\0'),
            Some(o) => out.push(o),
            None => out.push('\\'),
        }
    }
    out
}

fn refused(what: &str, input: &str) -> bool {
    match what {
        "image" => ImageRef::parse(input).is_err(),
        "route" => Route::parse(input).is_err(),
        "mount" => MountSpec::parse(input, true, &spec::docker_socket_paths(None)).is_err(),
        "env" => spec::parse_env(input).is_err(),
        "session" => spec::parse_session(input).is_err(),
        "label" => spec::parse_label(input).is_err(),
        "user" => spec::UserSpec::parse(input).is_err(),
        "id" => spec::parse_id(input).is_err(),
        "duration" => spec::parse_duration("d", input).is_err(),
        "ttl" => spec::parse_ttl(input).is_err(),
        "pids" | "memory" | "cpus" => {
            let mut req = spec::CreateRequest {
                image: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".into(),
                ..Default::default()
            };
            match what {
                "pids" => match input.parse() {
                    Ok(p) => req.pids = Some(p),
                    Err(_) => return true, // clap refuses it
                },
                "memory" => match input.parse() {
                    Ok(m) => req.memory_mib = Some(m),
                    Err(_) => return true,
                },
                _ => req.cpus = Some(input.to_string()),
            }
            spec::SandboxSpec::from_request(&req, None).is_err()
        }
        other => panic!("unknown corpus kind {other}"),
    }
}

#[test]
fn every_hostile_input_in_the_corpus_is_refused() {
    let corpus = include_str!("corpus/hostile_inputs.txt");
    let mut n = 0;
    for line in corpus.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (what, input) = line.split_once('\t').unwrap_or_else(|| panic!("bad corpus line {line:?}"));
        let input = unescape(input);
        assert!(refused(what, &input), "{what} {input:?} was accepted");
        n += 1;
    }
    assert!(n > 100, "corpus too small: {n}");
}

/// A spelling of an IPv4 address as inet_aton reads it: 1-4 parts, each in
/// decimal, octal or hex.
fn spell(addr: u32, parts: usize, bases: &[u8]) -> String {
    let bytes = addr.to_be_bytes();
    let mut nums: Vec<u64> = bytes[..parts - 1].iter().map(|b| *b as u64).collect();
    let rest_bytes = &bytes[parts - 1..];
    nums.push(rest_bytes.iter().fold(0u64, |acc, b| (acc << 8) | *b as u64));
    nums.iter()
        .zip(bases.iter().cycle())
        .map(|(n, base)| match base % 3 {
            0 => n.to_string(),
            1 => format!("0{n:o}"),
            _ => format!("0x{n:x}"),
        })
        .collect::<Vec<_>>()
        .join(".")
}

proptest! {
    // A fixed seed keeps CI deterministic; the regression file keeps what earlier runs found.
    #![proptest_config(ProptestConfig {
        cases: 2000,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x5b0c_2026),
        ..ProptestConfig::default()
    })]

    #[test]
    fn loopback_in_any_spelling_is_refused(low in 0u32..(1 << 24), parts in 1usize..=4, bases in proptest::collection::vec(0u8..3, 4)) {
        let addr = (127u32 << 24) | low;
        let host = spell(addr, parts, &bases);
        let err = Route::parse(&format!("k:{host}:80")).unwrap_err();
        prop_assert!(err.reason.contains("loopback"), "{host}: {}", err.reason);
    }

    #[test]
    fn an_accepted_route_is_a_safe_dns_name(s in "\\PC{0,40}") {
        if let Ok(r) = Route::parse(&s) {
            prop_assert!(r.host.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'), "{r:?}");
            prop_assert!(!sbx::spec::is_loopback(&r.host));
            prop_assert!(!r.host.starts_with('-'));
            prop_assert_eq!(r.network(), format!("sbx-{}", r.host));
            prop_assert!(spec::validate_kind(&r.kind).is_ok());
        }
    }

    #[test]
    fn an_accepted_route_from_route_like_input_is_safe(kind in "[a-z]{1,5}", host in "[a-zA-Z0-9.:;$ -]{0,20}", port in "[0-9x]{0,6}") {
        if let Ok(r) = Route::parse(&format!("{kind}:{host}:{port}")) {
            prop_assert!(r.host.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'));
            prop_assert!(!sbx::spec::is_loopback(&r.host));
        }
    }

    #[test]
    fn an_accepted_image_is_pinned(s in "\\PC{0,90}") {
        if let Ok(i) = ImageRef::parse(&s) {
            let digest = i.as_str().rsplit('@').next().unwrap();
            let hex = digest.strip_prefix("sha256:").unwrap();
            prop_assert_eq!(hex.len(), 64);
            prop_assert!(!i.as_str().starts_with('-'));
        }
    }

    #[test]
    fn a_pinned_image_is_accepted(hex in "[0-9a-f]{64}", repo in "[a-z][a-z0-9]{0,10}(/[a-z0-9]{1,8})?") {
        let bare = format!("sha256:{hex}");
        prop_assert!(ImageRef::parse(&bare).is_ok());
        let pinned = format!("{repo}@sha256:{hex}");
        prop_assert!(ImageRef::parse(&pinned).is_ok());
    }

    #[test]
    fn an_accepted_mount_cannot_inject_options(target in "\\PC{0,30}") {
        let spec_str = format!("/tmp:{target}");
        if let Ok(m) = MountSpec::parse(&spec_str, true, &[]) {
            let arg = m.mount_arg();
            prop_assert_eq!(arg.matches(',').count(), 3, "{}", arg);
            prop_assert!(!arg.contains('"') && !arg.contains('\n'));
            // "..0" is a fine name; a ".." component is not.
            prop_assert!(m.sandbox.starts_with('/'));
            prop_assert!(std::path::Path::new(&m.sandbox).components().all(|c| !matches!(c, std::path::Component::ParentDir)));
            for forbidden in ["/proc", "/sys", "/dev", "/run/sandbox"] {
                prop_assert!(!std::path::Path::new(&m.sandbox).starts_with(forbidden));
            }
        }
    }

    #[test]
    fn accepted_env_session_and_ids_are_plain(s in "\\PC{0,30}") {
        if let Ok((k, _)) = spec::parse_env(&s) {
            prop_assert!(!k.starts_with("SBX_") && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        }
        if let Ok(k) = spec::parse_session(&s) {
            prop_assert!(k.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)));
        }
        if let Ok(id) = spec::parse_id(&s) {
            prop_assert!(id.len() == 16 && !id.contains('/'));
        }
    }
}

mod egress {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    use proptest::prelude::*;
    use sbx::spec::egress::{AllowRule, Mode, Policy, Verdict};

    fn allows(v: &Verdict) -> bool {
        matches!(v, Verdict::Allow { .. })
    }

    fn enforce(rules: &[&str]) -> Policy {
        let mut p = Policy { mode: Mode::Enforce, ..Policy::default() };
        p.allow(&rules.iter().map(|r| AllowRule::parse(r, false).unwrap()).collect::<Vec<_>>());
        p
    }

    /// What an accepted rule must be, whatever the input: canonical (its
    /// display parses back to itself), plain ASCII, and no unsafe range.
    fn check_accepted(r: &AllowRule) -> Result<(), TestCaseError> {
        let shown = r.to_string();
        prop_assert_eq!(&AllowRule::parse(&shown, false).unwrap(), r);
        prop_assert!(shown.is_ascii() && !shown.contains(char::is_whitespace) && !shown.starts_with('-'), "{}", shown);
        match r {
            AllowRule::Host { name, .. } | AllowRule::Wildcard { suffix: name, .. } => {
                prop_assert!(name.len() <= 253 && !name.ends_with('.'));
                prop_assert!(name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'));
                prop_assert!(name.split('.').all(|l| !l.is_empty() && l.len() <= 63 && !l.starts_with('-')));
            }
            AllowRule::Cidr { .. } => {
                for inner in ["127.0.0.1", "169.254.169.254", "0.0.0.0", "::1", "fe80::1"] {
                    prop_assert!(!r.allows_addr(inner.parse().unwrap(), r.port()), "{} covers {}", shown, inner);
                }
            }
        }
        prop_assert!(r.port() != 0);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2000,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x5b0c_2026),
            ..ProptestConfig::default()
        })]

        #[test]
        fn an_accepted_rule_is_canonical_and_safe(s in "\\PC{0,40}") {
            if let Ok(r) = AllowRule::parse(&s, false) {
                check_accepted(&r)?;
            }
        }

        #[test]
        fn an_accepted_rule_from_rule_like_input_is_canonical_and_safe(s in "[a-zA-Z0-9.*:/\\[\\]-]{0,30}") {
            if let Ok(r) = AllowRule::parse(&s, false) {
                check_accepted(&r)?;
            }
        }

        #[test]
        fn a_cidr_rule_is_refused_unless_it_is_a_network_address(a in any::<u32>(), prefix in 0u8..=32, port in 1u16..) {
            let s = format!("{}/{prefix}:{port}", Ipv4Addr::from(a));
            let host_bits = if prefix == 32 { 0 } else { a & (u32::MAX >> prefix) };
            match AllowRule::parse(&s, true) {
                Ok(r) => {
                    prop_assert_eq!(host_bits, 0);
                    prop_assert_eq!(r.to_string(), s);
                }
                Err(e) => {
                    prop_assert_ne!(host_bits, 0);
                    prop_assert!(e.reason.contains("not the network address"), "{}", e.reason);
                }
            }
        }

        #[test]
        fn internal_addresses_are_refused_in_every_form(low in any::<u32>(), net in 0usize..6, port in 1u16..) {
            // (network, host bits) for 0/8, 127/8, 169.254/16, 10/8, 172.16/12, 192.168/16.
            let (base, bits) = [(0u32, 24), (127 << 24, 24), (0xa9fe_0000, 16), (10 << 24, 24), (0xac10_0000, 20), (0xc0a8_0000, 16)][net];
            let v4 = Ipv4Addr::from(base | (low & ((1u32 << bits) - 1)));
            let observe = Policy { mode: Mode::Observe, ..Policy::default() };
            let n = u128::from(u32::from(v4));
            // NAT64, 6to4 and Teredo (client, inverted) carry it too.
            let nat64 = IpAddr::V6(Ipv6Addr::from((0x64_ff9bu128 << 96) | n));
            let six_to_four = IpAddr::V6(Ipv6Addr::from((0x2002u128 << 112) | (n << 80) | u128::from(low)));
            let teredo = IpAddr::V6(Ipv6Addr::from((0x2001u128 << 112) | (0x0808_0808u128 << 64) | (n ^ 0xffff_ffff)));
            for addr in [nat64, six_to_four, teredo] {
                prop_assert!(!allows(&observe.check_addr(addr, port)), "{}", addr);
            }
            for addr in [IpAddr::V4(v4), IpAddr::V6(v4.to_ipv6_mapped())] {
                prop_assert!(!allows(&observe.check_addr(addr, port)), "{}", addr);
                prop_assert!(!allows(&enforce(&["pypi.org"]).decide_name(&addr.to_string(), port)), "{}", addr);
            }
        }

        #[test]
        fn internal_v6_addresses_are_refused(low in any::<u128>(), net in 0usize..3) {
            let (base, bits) = [(0xfe80u128 << 112, 118), (0xfc00u128 << 112, 121), (1u128, 0)][net];
            let addr = IpAddr::V6(Ipv6Addr::from(base | (low & ((1u128 << bits) - 1))));
            prop_assert!(!allows(&Policy::default().check_addr(addr, 443)), "{}", addr);
        }

        #[test]
        fn enforce_allows_only_listed_names(host in "[a-zA-Z0-9.-]{1,30}", label in "[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", port in 1u16..) {
            let p = enforce(&["pypi.org", "*.example.com"]);
            let listed = host.trim_end_matches('.').eq_ignore_ascii_case("pypi.org") && port == 443
                || host.to_ascii_lowercase().trim_end_matches('.').ends_with(".example.com") && port == 443 && host.len() <= 253;
            if allows(&p.decide_name(&host, port)) {
                prop_assert!(listed, "{}:{} allowed", host, port);
            }
            let sub = format!("{label}.example.com");
            prop_assert!(allows(&p.decide_name(&sub, 443)), "{}", sub);
            prop_assert!(!allows(&p.decide_name(&sub, 80)));
            let glued = format!("{label}example.com");
            prop_assert!(!allows(&p.decide_name(&glued, 443)), "{}", glued);
        }
    }
}

/// A full bench run once dropped the soak figures and the notes written
/// by hand between runs: it keeps every section it did not make.
#[test]
fn a_benchmarks_rewrite_keeps_the_sections_the_run_did_not_make() {
    let old = "# b\nRun: 1\n\n## Time\nold t\n\n## Reading the figures\nnotes\n\n## Soak (benches/soak.py)\nsoak\n";
    let new = "# b\nRun: 2\n\n## Time\nnew t\n\n## Serve\nserve\n\n## What each case measures\ncases\n";
    assert_eq!(
        markdown::merge_sections(old, new),
        "# b\nRun: 2\n\n## Time\nnew t\n\n## Serve\nserve\n\n## What each case measures\ncases\n\n\
         ## Reading the figures\nnotes\n\n## Soak (benches/soak.py)\nsoak\n"
    );
}

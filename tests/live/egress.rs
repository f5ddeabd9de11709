//! The egress reach, one test per promise: a sandbox reaches the
//! names on its allowlist through its gate, byte-exact, and nothing else;
//! refused names are never looked up; an address no rule covers is refused,
//! as a literal or under an allowed name; the SNI must match the CONNECT
//! host; the sandbox can neither bypass the gate nor resolve names itself.
//! The lifecycle promises are in `egress_lifecycle`.
//!
//! The "internet" is `support::internet` (stand-ins on a network the test
//! makes, a counting resolver stand-in given as `--egress-dns`); the sandbox
//! runs the tools image (curl, honouring the proxy variables sbx sets).
//! Tests that need no stand-in pass a bare test network as
//! `--egress-network`, never sbx's host-wide default (only `egress_network`
//! uses that: it checks what gc does to it).

use crate::support::egress::*;
use crate::support::internet::{BIG, EVIL, FILES, LOOP, PYPI, REBIND, TLS2};
use crate::support::*;

#[test]
fn the_stand_in_internet_answers_its_names() {
    // The stand-ins alone, with a plain container (no sbx): the other tests'
    // failures then point at sbx, not at the stage.
    let inet = Internet::start();
    let client = |args: &[&str]| {
        let mut full = vec!["run", "--rm", "--label", TEST_LABEL, "--network", &inet.net.name, "--dns", &inet.dns_ip];
        full.extend(["--entrypoint", "/usr/bin/curl", tools_image(), "-sSk", "--max-time", "20"]);
        full.extend_from_slice(args);
        docker(&full)
    };
    let out = client(&[&format!("http://{FILES}/big.bin")]);
    assert_success(&out, "curl http://files.example/big.bin");
    assert!(out.stdout == inet.big(), "the HTTP stand-in's payload differs ({} bytes)", out.stdout.len());
    let out = client(&[&format!("https://{PYPI}/big.bin")]);
    assert_success(&out, "curl https://pypi.org/big.bin");
    assert!(out.stdout == inet.big(), "the TLS stand-in's payload differs ({} bytes)", out.stdout.len());
    assert!(inet.queries(FILES) >= 1 && inet.queries(PYPI) >= 1, "the resolver stand-in counted nothing");
    assert_eq!(inet.queries(EVIL), 0);
}

#[test]
fn allowed_names_are_reached_through_the_gate_byte_exact() {
    let w = World::new();
    let inet = Internet::start();
    let sb = create(&w, &inet.create_args(&[&format!("{FILES}:80"), PYPI]));
    let env = sb.inspect("{{json .Config.Env}}");
    for var in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
        assert!(env.contains(&format!("\"{var}=http://sbx-egress:3128\"")), "{var} not set: {env}");
    }
    assert!(env.contains("NO_PROXY=") && env.contains("no_proxy="), "{env}");

    // Plain HTTP (an absolute-URI request) and CONNECT + TLS, several MiB each.
    let got = fetch(&sb, &format!("http://{FILES}/big.bin"), &[]);
    assert_eq!((got.exit, got.code), (0, 200), "{got:?}");
    assert!(got.body == inet.big(), "HTTP payload through the gate differs: {} of {BIG} bytes", got.body.len());
    let got = fetch(&sb, &format!("https://{PYPI}/big.bin"), &[]);
    assert_eq!((got.exit, got.code, got.connect), (0, 200, 200), "{got:?}");
    assert!(got.body == inet.big(), "TLS payload through the gate differs: {} of {BIG} bytes", got.body.len());
    assert!(inet.queries(FILES) >= 1 && inet.queries(PYPI) >= 1, "the gate did not use --egress-dns");

    // The record says so: labels, inspect, ls.
    assert_eq!(sb.inspect("{{index .Config.Labels \"sbx.egress\"}}"), "enforce");
    assert_eq!(sb.inspect("{{index .Config.Labels \"sbx.egress-network\"}}"), inet.net.name);
    let rec = stdout(&w.sbx(&["inspect", &sb.id]));
    assert!(rec.contains("enforce") && rec.contains("pypi.org") && rec.contains("files.example:80"), "{rec}");
    let ls = stdout(&w.sbx(&["ls", "--json"]));
    assert!(ls.contains("enforce"), "ls --json does not show the egress mode: {ls}");
    // The sandbox itself is never on the egress network.
    let nets = sb.inspect("{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}");
    assert!(!nets.split_whitespace().any(|n| n == inet.net.name), "the sandbox is on the egress network: {nets}");

    let id = sb.id.clone();
    drop(sb); // destroys it
    assert_no_egress_left(&w, &id);
    w.assert_nothing_left();
}

#[test]
fn an_unlisted_name_is_refused_with_403_and_never_looked_up() {
    let w = World::new();
    let inet = Internet::start();
    let sb = create(&w, &inet.create_args(&[&format!("{FILES}:80"), PYPI]));
    let got = fetch(&sb, &format!("http://{EVIL}/small.txt"), &[]);
    assert_eq!(got.code, 403, "{got:?}");
    assert!(!String::from_utf8_lossy(&got.body).trim().is_empty(), "a 403 without a reason: {got:?}");
    let got = fetch(&sb, &format!("https://{EVIL}/small.txt"), &[]);
    assert_eq!(got.connect, 403, "{got:?}");
    assert_ne!(got.exit, 0);
    // The port is part of the rule: files.example is allowed on 80 only.
    let got = fetch(&sb, &format!("https://{FILES}/small.txt"), &[]);
    assert_eq!(got.connect, 403, "{got:?}");
    assert_eq!(inet.queries(EVIL), 0, "a refused name was looked up");
    // The counter works: an allowed name is looked up.
    assert_eq!(fetch(&sb, &format!("http://{FILES}/small.txt"), &[]).code, 200);
    assert!(inet.queries(FILES) >= 1);
}

#[test]
fn an_ip_literal_no_rule_covers_is_refused() {
    let w = World::new();
    let inet = Internet::start();
    let sb = create(&w, &inet.create_args(&[&format!("{FILES}:80")]));
    // The resolver stand-in also serves HTTP on 80: reachable, but no rule names it.
    let got = fetch(&sb, &format!("http://{}/small.txt", inet.dns_ip), &[]);
    assert_eq!(got.code, 403, "{got:?}");
    let got = fetch(&sb, &format!("https://{}/small.txt", inet.dns_ip), &[]);
    assert_eq!(got.connect, 403, "{got:?}");
    // A CIDR:PORT rule does allow a literal in its range (and nothing else).
    let got = fetch(&sb, &format!("http://{}/small.txt", inet.web_ip), &[]);
    assert_eq!((got.code, got.body.as_slice()), (200, &b"hello from the stand-in\n"[..]), "{got:?}");
    let got = fetch(&sb, &format!("https://{}/small.txt", inet.web_ip), &[]);
    assert_eq!(got.connect, 403, "port 443 on the web stand-in is outside its rule: {got:?}");
}

#[test]
fn an_allowed_name_resolving_to_a_private_or_loopback_address_is_refused() {
    let w = World::new();
    let inet = Internet::start();
    let sb = create(&w, &inet.create_args(&[&format!("{REBIND}:80"), &format!("{LOOP}:80")]));
    for name in [REBIND, LOOP] {
        let got = fetch(&sb, &format!("http://{name}/small.txt"), &[]);
        assert_eq!(got.code, 403, "{name}: {got:?}");
        assert!(inet.queries(name) >= 1, "{name} was refused without being resolved: not the address check");
    }
    let lines = log_until(&w, &sb.id, |l| line_for(l, REBIND, "deny").is_some());
    let line = line_for(&lines, REBIND, "deny").unwrap();
    assert_eq!(line["addr"], inet.dns_ip.as_str(), "{line}");
    assert!(line["reason"].as_str().is_some_and(|r| !r.is_empty()), "{line}");
}

#[test]
fn a_tls_client_hello_naming_another_host_is_refused() {
    let w = World::new();
    let inet = Internet::start();
    let sb = create(&w, &inet.create_args(&[PYPI, TLS2]));
    // Both names are allowed: the only fault is the SNI (pypi.org) inside a
    // CONNECT to tls2.example.
    let got = fetch(&sb, &format!("https://{PYPI}/small.txt"), &["--connect-to", &format!("{PYPI}:443:{TLS2}:443")]);
    assert_ne!(got.exit, 0, "{got:?}");
    assert!(got.body.is_empty(), "{got:?}");
    let got = fetch(&sb, &format!("https://{TLS2}/small.txt"), &[]);
    assert_eq!((got.exit, got.code), (0, 200), "the same host with a matching SNI: {got:?}");
    let lines = log_until(&w, &sb.id, |l| line_for(l, TLS2, "deny").is_some());
    let line = line_for(&lines, TLS2, "deny").unwrap();
    assert_eq!(line["port"], 443, "{line}");
    assert!(line["reason"].as_str().is_some_and(|r| !r.is_empty()), "{line}");
}

#[test]
fn a_direct_connection_bypassing_the_gate_fails() {
    let w = World::new();
    let inet = Internet::start();
    let sb = create(&w, &inet.create_args(&[&format!("{FILES}:80")]));
    for addr in [format!("{}:80", inet.web_ip), format!("{}:443", inet.tls_ip), format!("{}:53", inet.dns_ip)] {
        let out = sb.exec(&["dial", &addr]);
        assert!(stdout(&out).starts_with("unreachable"), "dial {addr} from the sandbox: {}", stdout(&out));
    }
    let got = fetch(&sb, &format!("http://{}/small.txt", inet.web_ip), &["--noproxy", "*"]);
    assert_ne!(got.exit, 0, "curl --noproxy reached the stand-in: {got:?}");
}

#[test]
fn the_sandbox_cannot_resolve_outside_names() {
    let w = World::new();
    let inet = Internet::start();
    let sb = create(&w, &inet.create_args(&[&format!("{FILES}:80"), PYPI]));
    for name in [FILES, PYPI, EVIL] {
        // "answered rcode=N answers=M" or "no answer": any answer record is a leak.
        let text = stdout(&sb.exec(&["dns-ask", name]));
        assert!(!text.contains("answers=") || text.contains("answers=0"), "{name} resolved in the sandbox: {text}");
    }
    let got = fetch(&sb, &format!("http://{FILES}/small.txt"), &["--noproxy", "*"]);
    assert_ne!(got.exit, 0, "{got:?}");
    assert_eq!(inet.queries(EVIL), 0, "the sandbox's own DNS reached the resolver stand-in");
}

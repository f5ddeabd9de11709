//! The Docker host's own addresses (its interfaces, docker0, every
//! bridge's gateway): traffic from the egress bridge to one enters the
//! host's INPUT chain, so the gate refuses them as literals and as what an
//! allowed name resolves to, under any wider CIDR rule; only a rule naming
//! exactly the address reaches it. The service is the test's own, on this
//! machine's address (`support::egress::HostService`).

use crate::support::egress::*;
use crate::support::internet::Internet;
use crate::support::*;

const HOSTNAME: &str = "hostaddr.example";

/// Observe mode allows every name, never the host: a literal CONNECT to
/// the host's address is refused, and the log says why.
#[test]
fn observe_mode_refuses_a_connect_to_the_host_s_own_address() {
    let w = World::new();
    let svc = HostService::start();
    let net = Network::with_prefix(false, "inet-");
    let sb = create(&w, &strings(&["--egress", "observe", "--egress-network", &net.name]));
    let got = svc.fetch_from(&sb, &svc.ip);
    assert_eq!(got.connect, 403, "the gate reached the host's own address {}: {got:?}", svc.ip);
    assert_eq!(svc.hits(), 0, "a connection reached the host's service");
    let lines = log_until(&w, &sb.id, |l| line_for(l, &svc.ip, "deny").is_some());
    let line = line_for(&lines, &svc.ip, "deny").unwrap();
    let reason = line["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("the Docker host's own address"), "{line}");
    assert!(reason.contains(&format!("--allow {}/32:{}", svc.ip, svc.port)), "{line}");
    let shown = stdout(&w.sbx(&["egress", "log", &sb.id]));
    assert!(shown.contains("the Docker host's own address"), "sbx egress log: {shown}");
}

/// Enforce mode with the host's whole network allowed: its own address is
/// still refused, literal or resolved from an allowed name; `sbx allow` of
/// exactly that address (`/32`) reaches it, both ways.
#[test]
fn a_wider_cidr_never_covers_the_host_and_a_32_rule_reaches_it() {
    let w = World::new();
    let svc = HostService::start();
    let inet = Internet::start_with(&[format!("{HOSTNAME}={}", svc.ip)]);
    let mut args = inet.create_args(&[&format!("{HOSTNAME}:{}", svc.port)]);
    args.extend(["--allow".into(), svc.network_rule()]);
    let sb = create(&w, &args);
    let got = svc.fetch_from(&sb, &svc.ip);
    assert_eq!(got.connect, 403, "{} reached the host's own address {}: {got:?}", svc.network_rule(), svc.ip);
    let got = svc.fetch_from(&sb, HOSTNAME);
    assert_eq!(got.connect, 403, "{HOSTNAME} (resolving to the host) reached it: {got:?}");
    assert!(inet.queries(HOSTNAME) >= 1, "{HOSTNAME} was refused unresolved: not the address check");
    assert_eq!(svc.hits(), 0, "a connection reached the host's service");
    let lines =
        log_until(&w, &sb.id, |l| line_for(l, HOSTNAME, "deny").is_some() && line_for(l, &svc.ip, "deny").is_some());
    for host in [HOSTNAME, svc.ip.as_str()] {
        let line = line_for(&lines, host, "deny").unwrap();
        assert_eq!(line["addr"], svc.ip.as_str(), "{line}");
        assert!(line["reason"].as_str().unwrap_or_default().contains("the Docker host's own address"), "{line}");
    }

    let exact = format!("{}/32:{}", svc.ip, svc.port);
    assert_success(&w.sbx(&["allow", &sb.id, &exact]), "sbx allow HOST/32:PORT");
    let reached = until(std::time::Duration::from_secs(5), || svc.fetch_from(&sb, &svc.ip).connect == 200);
    assert!(reached.is_some(), "the /32 rule never reached the host: {:?}", svc.fetch_from(&sb, &svc.ip));
    let got = svc.fetch_from(&sb, &svc.ip);
    assert_eq!((got.code, got.body.as_slice()), (200, HOST_BODY), "{got:?}");
    let got = svc.fetch_from(&sb, HOSTNAME);
    assert_eq!((got.connect, got.code, got.body.as_slice()), (200, 200, HOST_BODY), "{got:?}");
    assert!(svc.hits() >= 2);
}

/// An address on `lo` beyond 127.0.0.0/8 (an anycast or service address)
/// is the host's own as much as one on a NIC: a wider CIDR rule never
/// reaches it (the gate's list once skipped the whole loopback interface).
#[test]
fn an_address_on_loopback_is_the_host_s_own_too() {
    let lo = LoAddress::add("198.51.100.77");
    let w = World::new();
    let svc = HostService::start_on(lo.0.clone(), 24);
    let net = Network::with_prefix(false, "inet-");
    let sb = create(&w, &strings(&["--allow", &svc.network_rule(), "--egress-network", &net.name]));
    let got = svc.fetch_from(&sb, &svc.ip);
    assert_eq!(got.connect, 403, "{} reached the host's address {} on lo: {got:?}", svc.network_rule(), svc.ip);
    assert_eq!(svc.hits(), 0, "a connection reached the host's service");
    let lines = log_until(&w, &sb.id, |l| line_for(l, &svc.ip, "deny").is_some());
    let line = line_for(&lines, &svc.ip, "deny").unwrap();
    assert!(line["reason"].as_str().unwrap_or_default().contains("the Docker host's own address"), "{line}");
}

//! The boundary: what a route really reaches, on the real engine. A routed
//! service is reachable and an unrouted one is not, revoke cuts it, a network
//! that is not internal lowers the tier. Every "denied" check is paired with a
//! control that shows the same path working where it is allowed. Traffic goes
//! only to containers these tests start.

use std::process::Command;

use crate::support::*;

fn ip_on(container: &str, network: &str) -> String {
    docker_ok(&[
        "inspect",
        "--format",
        &format!("{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}"),
        container,
    ])
}

/// The IPv4 addresses the host holds on a network's bridge.
fn host_addresses(network: &str) -> String {
    let id = docker_ok(&["network", "inspect", "--format", "{{.Id}}", network]);
    let out =
        Command::new("ip").args(["-4", "-o", "addr", "show", "dev", &format!("br-{}", &id[..12])]).output().unwrap();
    assert!(out.status.success(), "ip addr: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn shared_route_leaks_are_reported_and_private_routes_close_them() {
    let w = World::new();
    let shared = Network::new(true);
    let svc = Service::start(&shared, &w.image);
    let route = format!("inference:{}:8080", svc.name);

    // Two sandboxes on the operator's shared network: each reaches the
    // other (the leak), and sbx says so instead of claiming tier 2.
    let out = w.try_create(&["--json", "--route", &route, "--socket-wait", "0", "--", "tcp-echo", "9000"]);
    assert_success(&out, "create a listening sandbox on the shared network");
    let a = json(&out);
    let a_id = a["id"].as_str().unwrap().to_string();
    let _ga = w.adopt(&a_id);
    assert_eq!(a["tier"], 1);
    let props: Vec<&str> = a["gaps"].as_array().unwrap().iter().map(|g| g["property"].as_str().unwrap()).collect();
    assert_eq!(props, ["host", "shared", "ports"], "{a}");
    let ports = a["gaps"].as_array().unwrap().iter().find(|g| g["property"] == "ports").unwrap();
    let says = format!("every port of the service answers through {}, not only {}:8080", shared.name, svc.name);
    assert!(ports["detail"].as_str().unwrap().contains(&says), "{a}");
    // Under --json the warning is in the result, not repeated in prose.
    let warnings = a["warnings"].to_string();
    assert!(warnings.contains("is shared") && warnings.contains("--private-routes"), "{a}");
    assert!(!stderr(&out).contains("sbx: warning"), "{}", stderr(&out));
    let b = w.create(&["--route", &route]);
    let a_ip = ip_on(&a_id, &shared.name);
    assert_success(
        &b.exec(&["dial", &format!("{a_ip}:9000")]),
        "control: sandboxes on a shared network reach each other",
    );
    assert!(!host_addresses(&shared.name).trim().is_empty(), "control: a plain internal bridge has a host address");
    // What the ports gap says: a port no route names answers too.
    assert_success(&b.exec(&["dial", &svc.addr_port(9090)]), "a shared network reaches every port of the service");

    // Private routes: tier 2, the service is reached, the other sandbox is not.
    let out = w.try_create(&[
        "--json",
        "--private-routes",
        "--route",
        &route,
        "--socket-wait",
        "0",
        "--",
        "tcp-echo",
        "9000",
    ]);
    assert_success(&out, "create with --private-routes");
    let p = json(&out);
    let p_id = p["id"].as_str().unwrap().to_string();
    let _gp = w.adopt(&p_id);
    assert_eq!(p["tier"], 2, "{p}");
    assert_eq!(p["gaps"], serde_json::json!([]));
    let private_net = p["routes"]["inference"].as_str().unwrap().to_string();
    assert_eq!(private_net, format!("{p_id}-inference"));
    assert!(host_addresses(&private_net).trim().is_empty(), "the private bridge holds no host address");
    let q = w.create(&["--private-routes", "--route", &route]);
    let by_name = format!("{}:8080", svc.name);
    assert_success(&q.exec(&["dial", &by_name]), "the route's service over the private network");
    let p_ip = ip_on(&p_id, &private_net);
    assert_exit(&q.exec(&["dial", &format!("{p_ip}:9000")]), 1, "another sandbox's private network");
    assert_exit(&b.exec(&["dial", &format!("{p_ip}:9000")]), 1, "from the shared network into a private one");
    assert_eq!(q.inspect("{{json .HostConfig.Dns}}"), r#"["127.0.0.1"]"#, "contained resolver (CVE-2024-29018)");
    assert_success(&w.sbx(&["audit", &q.id]), "audit of a private-route sandbox");

    // Revoke removes the private network; destroy removes the rest; the
    // service stays, on its own network only.
    assert_success(&w.sbx(&["revoke", &q.id, "inference"]), "revoke a private route");
    assert!(
        docker(&["network", "inspect", &format!("{}-inference", q.id)]).status.code() != Some(0),
        "revoked private network removed"
    );
    assert_exit(&q.exec(&["dial", &by_name]), 2, "after revoke, the name resolves no more");
    assert_success(&w.sbx(&["destroy", &q.id]), "destroy after its private route was revoked");
    assert_success(&w.sbx(&["destroy", &p_id]), "destroy");
    assert!(
        docker(&["network", "inspect", &private_net]).status.code() != Some(0),
        "private network removed with its sandbox"
    );
    let nets =
        docker_ok(&["inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", &svc.name]);
    assert_eq!(nets.trim(), shared.name, "the service is back on its own network only");
}

/// Docker filters no ports: with the service on the sandbox's network,
/// `--route svc:HOST:8080 --private-routes` reached every port of it. The
/// route now goes through sbx's forwarder, which answers under the route's
/// name and relays only 8080; revoke ends a relayed connection at once.
#[test]
fn a_private_route_reaches_only_its_port_through_sbxs_forwarder() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let w = World::new();
    let net = Network::new(true);
    let svc = Service::start(&net, &w.image);
    assert_success(
        &docker(&["exec", &svc.name, "/bin/fixture", "dial", &svc.addr_port(9090)]),
        "control: 9090 answers",
    );
    let out = w.try_create(&["--json", "--private-routes", "--route", &format!("svc:{}:8080", svc.name)]);
    assert_success(&out, "create with a private route");
    let c = json(&out);
    let id = c["id"].as_str().unwrap().to_string();
    let sb = w.adopt(&id);
    assert_eq!((c["tier"].clone(), c["gaps"].clone()), (serde_json::json!(2), serde_json::json!([])), "{c}");
    let rec = json(&w.sbx(&["inspect", &id]));
    assert_eq!(rec["tier"], 2, "{rec}");
    assert!(rec.get("gaps").is_none(), "{rec}");
    // The forwarder runs as a uid of its own, not the sandbox's.
    let fwd_user = docker_ok(&["inspect", "--format", "{{.Config.User}}", &format!("{id}-svc.fwd")]);
    let fwd_uid: u32 = fwd_user.split(':').next().unwrap().parse().unwrap();
    assert!((0x7000_0000..0x7100_0000).contains(&fwd_uid) && fwd_uid != sb.uid(), "the forwarder runs as {fwd_user}");

    assert_success(&sb.exec(&["dial", &format!("{}:8080", svc.name)]), "the route's port, by the route's name");
    let t = Instant::now();
    let out = sb.exec(&["dial", &format!("{}:9090", svc.name)]);
    assert_exit(&out, 1, "a port the route does not name");
    assert!(stdout(&out).starts_with("unreachable"), "{}", stdout(&out));
    assert!(t.elapsed() < Duration::from_secs(5), "9090 took {:?} to fail", t.elapsed());
    assert_exit(
        &sb.exec(&["dial", &svc.addr_port(9090)]),
        1,
        "the service's own address is on no network of the sandbox",
    );

    // The sandbox's network holds the sandbox and the forwarder, nothing else.
    let private = format!("{id}-svc");
    let fwd = format!("{private}.fwd");
    let members = docker_ok(&["network", "inspect", "--format", "{{range .Containers}}{{.Name}} {{end}}", &private]);
    let mut members: Vec<&str> = members.split_whitespace().collect();
    members.sort();
    assert_eq!(members, [id.as_str(), fwd.as_str()]);
    let hardening = docker_ok(&[
        "inspect",
        "--format",
        "{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.CapDrop}} {{.Config.User}} {{.HostConfig.SecurityOpt}} \
         {{.HostConfig.NanoCpus}} {{.HostConfig.Memory}} {{.HostConfig.PidsLimit}} {{index .Config.Labels \"sbx.forward-of\"}}",
        &fwd,
    ]);
    assert!(hardening.starts_with(&format!("true [ALL] {fwd_user} [no-new-privileges seccomp=")), "{hardening}");
    assert!(hardening.ends_with(&format!("500000000 67108864 16 {id}")), "{hardening}");
    let audit = w.sbx(&["audit", &id]);
    assert_success(&audit, "audit of a forwarded route");
    assert!(stdout(&audit).contains("sbx.forwarders"), "{}", stdout(&audit));
    // The service put on the sandbox's network behind sbx's back: audit says so.
    docker_ok(&["network", "connect", &private, &svc.name]);
    let audit = w.sbx(&["audit", &id]);
    assert_exit(&audit, 1, "audit with the service on the sandbox's network");
    assert!(stdout(&audit).contains(&format!("{} on {private}", svc.name)), "{}", stdout(&audit));
    docker_ok(&["network", "disconnect", &private, &svc.name]);

    // An idle relayed connection ends when the route is revoked, not at its next use.
    let mut child = Command::new("docker")
        .args(["exec", &id, "/bin/fixture", "hold-idle", &format!("{}:8080", svc.name)])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "connected");
    let t = Instant::now();
    assert_success(&w.sbx(&["revoke", &id, "svc"]), "revoke");
    let ended = lines.next().unwrap().unwrap();
    assert!(
        ended == "ended: eof" || ended.starts_with("ended: error"),
        "the relayed connection outlived revoke: {ended}"
    );
    assert!(t.elapsed() < Duration::from_secs(10), "ended only after {:?}", t.elapsed());
    child.wait().unwrap();
    assert!(docker(&["inspect", &fwd]).status.code() != Some(0), "the forwarder is gone");
    assert_exit(&sb.exec(&["dial", &format!("{}:8080", svc.name)]), 2, "the route's name after revoke");

    assert_success(&w.sbx(&["destroy", &id]), "destroy");
    let left = docker_ok(&["ps", "-aq", "--filter", &format!("label=sbx.forward-of={id}")]);
    assert!(left.is_empty(), "a forwarder outlived its sandbox: {left}");
    for n in [private.clone(), format!("{private}.up")] {
        assert!(docker(&["network", "inspect", &n]).status.code() != Some(0), "{n} outlived its sandbox");
    }
    let nets =
        docker_ok(&["inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", &svc.name]);
    assert_eq!(nets.trim(), net.name, "the service is back on its own network only");
}

/// Destroy without a revoke first: the forwarder goes with its sandbox.
#[test]
fn destroy_leaves_no_forwarder_behind() {
    let w = World::new();
    let net = Network::new(true);
    let svc = Service::start(&net, &w.image);
    let sb = w.create(&[
        "--private-routes",
        "--route",
        &format!("a:{}:8080", svc.name),
        "--route",
        &format!("b:{}:9090", svc.name),
    ]);
    for port in [8080, 9090] {
        assert_success(&sb.exec(&["dial", &format!("{}:{port}", svc.name)]), "both declared ports");
    }
    let id = sb.id.clone();
    drop(sb);
    let left = docker_ok(&["ps", "-aq", "--filter", &format!("label=sbx.forward-of={id}")]);
    assert!(left.is_empty(), "a forwarder outlived its sandbox: {left}");
    w.assert_nothing_left();

    // A sandbox removed behind sbx's back: gc reaps its forwarder and networks.
    let sb = w.create(&["--private-routes", "--route", &format!("a:{}:8080", svc.name)]);
    let fwd = format!("{}-a.fwd", sb.id);
    docker_ok(&["rm", "-f", &sb.id]);
    let out = w.sbx(&["gc", "--json"]);
    assert_success(&out, "gc");
    let r = json(&out);
    assert_eq!(r["forwarders"], serde_json::json!([fwd]), "{r}");
    assert!(docker(&["inspect", &fwd]).status.code() != Some(0), "gc left the forwarder");
    for n in [format!("{}-a", sb.id), format!("{}-a.up", sb.id)] {
        assert!(docker(&["network", "inspect", &n]).status.code() != Some(0), "gc left {n}");
    }
}

#[test]
fn private_routes_refuse_a_missing_service_and_leave_nothing() {
    let w = World::new();
    let out = w.try_create(&["--private-routes", "--route", &format!("inference:{}:8080", unique("nosvc"))]);
    assert_exit(&out, 1, "private route to a missing service");
    assert!(stderr(&out).contains("must name a running service container"), "{}", stderr(&out));
    w.assert_nothing_left();
}

#[test]
fn strict_egress_refuses_a_shared_network_and_accepts_a_private_one() {
    let w = World::new();
    let shared = Network::new(true);
    let svc = Service::start(&shared, &w.image);
    let route = format!("inference:{}:8080", svc.name);
    let out = w.try_create(&["--strict-egress", "--route", &route]);
    assert_exit(&out, 1, "strict egress on a shared network");
    assert!(stderr(&out).contains("(shared)") && stderr(&out).contains("--private-routes"), "{}", stderr(&out));
    w.assert_nothing_left();
    let sb = w.create(&["--strict-egress", "--private-routes", "--route", &route]);
    assert_eq!(sb.inspect("{{index .Config.Labels \"sbx.tier\"}}"), "2");
}

#[test]
fn a_sandbox_swapping_decoys_under_its_socket_never_gets_the_host_elsewhere() {
    use std::io::Read;
    use std::os::unix::process::CommandExt;

    let w = World::new();
    let sb = w.create(&["--", "swap", "60"]);
    let dir = w.socket_root.join(&sb.id);
    let sock = dir.join("sandbox.sock");
    // Someone else's socket, for the sandbox to swap in: bound by uid 4242.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let mut other = Command::new(fixture_binary())
        .arg("bind-other")
        .arg(dir.join("other.sock"))
        .uid(4242)
        .gid(4242)
        .spawn()
        .unwrap();
    let bound = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        dir.join("other.sock").exists()
    });
    assert!(bound, "the other uid never bound its socket");
    std::fs::write(dir.join("go"), b"").unwrap();

    let owners = sbx::host::socket::allowed_owners(Some(sb.uid()));
    let (mut real, mut refused) = (0, std::collections::BTreeMap::<String, u32>::new());
    let kinds = ["symlink", "regular file", "FIFO", "uid 4242"];
    let mut tries = 0;
    while tries < 50_000 && (real < 100 || kinds.iter().any(|k| !refused.contains_key(*k))) {
        tries += 1;
        match sbx::host::socket::connect_checked(&sock, &owners) {
            Ok(mut s) => {
                s.set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
                let mut got = Vec::new();
                let _ = s.read_to_end(&mut got);
                assert_eq!(got, b"REAL\n", "attempt {tries}: sbx talked to something other than the sandbox");
                real += 1;
            }
            Err(sbx::error::SocketError::Hostile { reason, .. }) => {
                let kind = kinds
                    .iter()
                    .find(|k| reason.contains(*k))
                    .unwrap_or_else(|| panic!("unexpected refusal: {reason}"));
                *refused.entry(kind.to_string()).or_default() += 1;
            }
            // Between renames the entry is briefly missing, or the socket not yet listening.
            Err(sbx::error::SocketError::Io { .. } | sbx::error::SocketError::NotBound { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    eprintln!("{tries} attempts: {real} reached the sandbox, refused {refused:?}");
    assert!(real >= 100, "the real socket was reached only {real} times");
    for k in kinds {
        assert!(refused.contains_key(k), "never saw the {k} decoy refused in {tries} attempts: {refused:?}");
    }
    // The CLI under the same attack: the sandbox's bytes or a refusal, nothing else.
    for _ in 0..20 {
        let out = w.sbx(&["connect", &sb.id]);
        match out.status.code() {
            Some(0) => assert_eq!(out.stdout, b"REAL\n"),
            Some(1) => assert!(out.stdout.is_empty(), "{}", stdout(&out)),
            other => panic!("connect exited {other:?}: {}", stderr(&out)),
        }
    }
    other.kill().unwrap();
    other.wait().unwrap();
}

#[test]
fn revoke_cuts_an_established_connection_on_its_next_use() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let w = World::new();
    let net = Network::new(true);
    let svc = Service::start(&net, &w.image);
    let sb = w.create(&["--route", &format!("inference:{}:8080", svc.name)]);
    let hold = |sb: &Sandbox| {
        let mut child = Command::new("docker")
            .args(["exec", &sb.id, "/bin/fixture", "hold", &svc.addr()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "connected");
        (child, lines)
    };
    // Control: without a revoke, the held connection keeps working.
    let (mut child, mut lines) = hold(&sb);
    docker_ok(&["exec", &sb.id, "/bin/fixture", "write", "/tmp/go"]);
    assert_eq!(lines.next().unwrap().unwrap(), "second: ok");
    child.wait().unwrap();
    // The same on a fresh sandbox (the image has no way to remove /tmp/go), now with a revoke.
    let sb2 = w.create(&["--route", &format!("inference:{}:8080", svc.name)]);
    let (mut child, mut lines) = hold(&sb2);
    assert_success(&w.sbx(&["revoke", &sb2.id, "inference"]), "revoke");
    assert_exit(&sb2.exec(&["dial", &svc.addr()]), 1, "a new connection after revoke");
    docker_ok(&["exec", &sb2.id, "/bin/fixture", "write", "/tmp/go"]);
    let second = lines.next().unwrap().unwrap();
    assert!(second.starts_with("second: failed"), "the established connection survived revoke: {second}");
    child.wait().unwrap();
}

#[test]
fn a_fork_bomb_stops_at_the_pids_limit() {
    let _load = loading_the_engine();
    let w = World::new();
    let sb = w.create(&["--pids", "40"]);
    let out = sb.exec(&["forkbomb"]);
    let text = stdout(&out);
    let n: u32 = text.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{text}"));
    assert!(text.contains("refused") && n < 40, "{text}");
    // The sandbox itself is unharmed.
    assert_eq!(sb.inspect("{{.State.Running}}"), "true");
    let out = w.sbx(&["connect", &sb.id]);
    assert_success(&out, "connect after the fork bomb");
}

#[test]
fn a_memory_hog_is_killed_at_the_limit_and_the_reason_is_reported() {
    let _load = loading_the_engine();
    let w = World::new();
    let sb = w.create(&["--memory", "32", "--", "hog"]);
    let mut rec = serde_json::Value::Null;
    for _ in 0..200 {
        rec = json(&w.sbx(&["inspect", &sb.id]));
        if rec["state"] == "exited" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(rec["state"], "exited", "{rec}");
    assert_eq!(rec["exit_code"], 137);
    assert_eq!(rec["oom_killed"], true);
    assert!(rec["reason"].as_str().unwrap().contains("OOM killer at its memory limit (32 MiB)"), "{rec}");
}

#[test]
fn dns_for_outside_names_stays_inside_the_sandbox() {
    // CVE-2024-29018: on engines before 26.0.0 / 25.0.4 / 23.0.11 the embedded
    // resolver forwards from the host. With sbx's `--dns 127.0.0.1` it must
    // forward into the sandbox's own namespace instead: a listener there (and
    // nothing on the host) receives the query. No control runs without the
    // fix: that would send a query to the host's real resolver.
    let w = World::new();
    let net = Network::new(true);
    let svc = Service::start(&net, &w.image);
    let sb = w.create(&["--private-routes", "--route", &format!("inference:{}:8080", svc.name)]);
    let mut sink = Command::new("docker")
        .args(["exec", &sb.id, "/bin/fixture", "dns-sink"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(sink.stdout.as_mut().unwrap()), &mut first).unwrap();
    assert_eq!(first.trim(), "listening");
    // Control: the route's own name is answered by the embedded resolver itself.
    let out = sb.exec(&["dns-ask", &svc.name]);
    assert!(stdout(&out).contains("answers=1"), "the service's name did not resolve: {}", stdout(&out));
    assert_exit(&sb.exec(&["exists", "/tmp/dns-hit"]), 1, "an internal name must not be forwarded");
    // An outside name: forwarded, but only as far as the sandbox's own loopback.
    let _ = sb.exec(&["dns-ask", "sbx-leak-check.invalid"]);
    assert_success(&sb.exec(&["exists", "/tmp/dns-hit"]), "the outside lookup reached the sandbox's own resolver");
    sink.kill().unwrap();
    sink.wait().unwrap();
}

#[test]
fn routed_service_is_reachable_unrouted_is_not_and_revoke_cuts_it() {
    let w = World::new();
    let routed = Network::new(true);
    let svc = Service::start(&routed, &w.image);
    let other = Network::new(true);
    let unrouted = Service::start(&other, &w.image);
    let sb = w.create(&["--route", &format!("inference:{}:8080", routed.host)]);

    assert_success(&sb.exec(&["dial", &svc.addr()]), "dial the routed service");
    assert_exit(&sb.exec(&["dial", &unrouted.addr()]), 1, "dial a container on an unrouted network");
    let st = stdout(&sb.exec(&["status"]));
    assert!(st.contains("Interfaces:\tlo,eth0\n") || st.contains("Interfaces:\teth0,lo\n"), "{st}");

    let out = w.sbx(&["inspect", &sb.id]);
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rec["routes"], serde_json::json!({ "inference": routed.name }));
    // A shared operator network: other sandboxes and the host's bridge
    // address are reachable too, so sbx reports tier 1 (see the first test).
    assert_eq!(rec["tier"], 1);

    let out = w.sbx(&["revoke", &sb.id, "nope"]);
    assert_exit(&out, 1, "revoke an unknown kind");
    assert!(stderr(&out).contains("its routes: inference"), "{}", stderr(&out));

    assert_success(&w.sbx(&["revoke", &sb.id, "inference"]), "revoke");
    assert_exit(&sb.exec(&["dial", &svc.addr()]), 1, "dial after revoke");
    let rec: serde_json::Value = serde_json::from_slice(&w.sbx(&["inspect", &sb.id]).stdout).unwrap();
    assert_eq!(rec["routes"], serde_json::json!({}));
    let ls: serde_json::Value = serde_json::from_slice(&w.sbx(&["ls", "--json"]).stdout).unwrap();
    let mine = ls.as_array().unwrap().iter().find(|r| r["id"] == sb.id.as_str()).expect("ls lists it");
    assert_eq!(mine["routes"], serde_json::json!({}));
    // Revoking again is not an error (a cost cap may fire twice).
    assert_success(&w.sbx(&["revoke", &sb.id, "inference"]), "second revoke");
    assert_success(&w.sbx(&["revoke", &sb.id, "all"]), "revoke all");
    w.assert_nothing_left();
}

#[test]
fn two_routes_are_both_attached_before_the_program_starts() {
    let w = World::new();
    let (n1, n2) = (Network::new(true), Network::new(true));
    let (s1, s2) = (Service::start(&n1, &w.image), Service::start(&n2, &w.image));
    let out = w.try_create(&[
        "--json",
        "--route",
        &format!("a:{}:8080", n1.host),
        "--route",
        &format!("b:http://{}:8080/v1", n2.host),
    ]);
    assert_success(&out, "create with two routes");
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = rec["id"].as_str().unwrap().to_string();
    let _guard = w.adopt(&id);
    assert_eq!(rec["routes"], serde_json::json!({ "a": n1.name, "b": n2.name }));
    for key in ["id", "session", "image", "tier", "socket", "routes", "created_at"] {
        assert!(rec.get(key).is_some(), "--json lacks {key}: {rec}");
    }
    for s in [&s1, &s2] {
        let out = docker(&["exec", &id, "/bin/fixture", "dial", &s.addr()]);
        assert_success(&out, "dial over each route");
    }
}

#[test]
fn non_internal_network_lowers_the_tier_or_is_refused() {
    let w = World::new();
    let open = Network::new(false);
    let route = format!("inference:{}:8080", open.host);
    let out = w.try_create(&["--json", "--route", &route]);
    assert_success(&out, "create on an open network");
    let rec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let _guard = w.adopt(rec["id"].as_str().unwrap());
    assert_eq!(rec["tier"], 1);
    // Under --json the warning is in the result, not repeated in prose.
    assert!(rec["warnings"].to_string().contains("not internal"), "{rec}");
    assert!(!stderr(&out).contains("sbx: warning"), "{}", stderr(&out));
    let env = docker_ok(&["inspect", "--format", "{{json .Config.Env}}", rec["id"].as_str().unwrap()]);
    assert!(env.contains("SBX_SANDBOX_TIER=1"), "{env}");
    drop(_guard);

    for (args, env) in [(vec!["--strict-egress"], vec![]), (vec![], vec![("SBX_STRICT_EGRESS", "1")])] {
        let label = w.case_label();
        let mut full = vec!["create", "--image", w.image.as_str(), "--label", &label, "--route", &route];
        full.extend(args);
        let out = w.sbx_env(&full, &env);
        assert_exit(&out, 1, "strict egress on an open network");
        assert!(stderr(&out).contains("(egress)") && stderr(&out).contains("--internal"), "{}", stderr(&out));
        w.assert_nothing_left();
    }
}

#[test]
fn missing_network_fails_with_the_command_to_run() {
    let w = World::new();
    let host = unique("missing");
    let out = w.try_create(&["--route", &format!("inference:{host}:8080")]);
    assert_exit(&out, 1, "missing network");
    assert!(stderr(&out).contains(&format!("docker network create --internal sbx-{host}")), "{}", stderr(&out));
    w.assert_nothing_left();
}

//! Live tests of the boundary: what a route really reaches, on the real
//! engine. Every "denied" check is paired with a control that shows the same
//! path working where it is allowed. Traffic goes only to containers these
//! tests start.

mod common;

use std::process::Command;

use common::*;

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

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
    assert_eq!(props, ["host", "shared"], "{a}");
    assert!(stderr(&out).contains("is shared") && stderr(&out).contains("--private-routes"), "{}", stderr(&out));
    let b = w.create(&["--route", &route]);
    let a_ip = ip_on(&a_id, &shared.name);
    assert_success(
        &b.exec(&["dial", &format!("{a_ip}:9000")]),
        "control: sandboxes on a shared network reach each other",
    );
    assert!(!host_addresses(&shared.name).trim().is_empty(), "control: a plain internal bridge has a host address");

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
    let svc_ip = ip_on(&svc.name, &format!("{}-inference", q.id));
    assert_success(&q.exec(&["dial", &format!("{svc_ip}:8080")]), "the route's service over the private network");
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
    assert_exit(&q.exec(&["dial", &format!("{svc_ip}:8080")]), 1, "after revoke");
    assert_success(&w.sbx(&["destroy", &p_id]), "destroy");
    assert!(
        docker(&["network", "inspect", &private_net]).status.code() != Some(0),
        "private network removed with its sandbox"
    );
    let nets =
        docker_ok(&["inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", &svc.name]);
    assert_eq!(nets.trim(), shared.name, "the service is back on its own network only");
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

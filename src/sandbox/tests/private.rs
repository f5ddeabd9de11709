//! Private route networks: made per sandbox by create, removed by destroy and revoke.

use super::*;
use crate::error::{RouteError, SandboxError};
use crate::model::forward;
use crate::model::record::PrivateRoute;

const FWD_CID: &str = "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0";

impl Rig {
    /// The private route networks of `ID-inference` made, the service attached upstream.
    fn private_made(&self) {
        self.self_image_recorded("sha256:5b"); // sbx's image is there already
        self.fake.push(Output::ok("netid\n"));
        self.fake.push(Output::ok("upid\n"));
        self.fake.push(Output::ok(""));
    }

    /// `argv::forwarders` lists this sandbox's forwarder of `ID-inference`, owned by this host.
    fn forwarder_listed(&self) {
        let row = serde_json::json!([forward::container(&format!("{ID}-inference")), ID, self.token(ID), FWD_CID]);
        self.fake.push(Output::ok(&format!("{row}\n")));
    }
}

/// Docker filters no ports on a network, so the service is never on the
/// sandbox's: the sandbox's network holds it and a forwarder of sbx's own
/// answering under the route's name and relaying only the routes' ports,
/// over a second network where the service is.
#[test]
fn private_routes_put_a_forwarder_between_the_sandbox_and_the_service() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(&service_line("proxy")));
    rig.private_made();
    rig.fake.push(Output::ok(&format!("{FWD_CID}\n"))); // the forwarder's run, in the background
    rig.starts_and_binds();
    rig.fake.push(Output::ok("")); // the forwarder joins the upstream network
    let s = spec(CreateRequest { private_routes: true, ..routes(&["inference:proxy:8080", "more:proxy:9"]) });
    let c = rig.driver().create(&s).unwrap();
    assert_eq!(
        rig.fake.verbs(),
        [
            "image inspect",
            "container inspect",
            "network create",
            "network create",
            "network connect",
            "run",
            "run",
            "container inspect",
            "network connect"
        ]
    );
    let calls = rig.fake.calls();
    let net = format!("{ID}-inference");
    let (up, fwd) = (forward::upstream(&net), forward::container(&net));
    assert_eq!(calls[1][5..], ["proxy"]);
    let made = |name: &str, service: &str| {
        vec![
            "network".to_string(),
            "create".into(),
            "--internal".into(),
            "--opt".into(),
            "com.docker.network.bridge.inhibit_ipv4=true".into(),
            "--label".into(),
            format!("sbx.private-for={ID}"),
            "--label".into(),
            format!("sbx.service={service}"),
            "--label".into(),
            format!("sbx.owner={}", rig.token(ID)),
            "--".into(),
            name.into(),
        ]
    };
    assert_eq!(calls[2], made(&net, &fwd));
    assert_eq!(calls[3], made(&up, "proxy"));
    assert_eq!(calls[4], ["network", "connect", "--alias", "sbx-upstream", "--", &up, "proxy"]);
    let f = &calls[5];
    assert_eq!(f[..4], ["run", "-d", "--name", &fwd]);
    assert!(f.windows(2).any(|w| w == ["--network", &net]) && f.windows(2).any(|w| w == ["--network-alias", "proxy"]));
    assert!(
        f.ends_with(&["__forward", "--upstream", "sbx-upstream", "--port", "8080", "--port", "9"].map(String::from))
    );
    assert!(f.contains(&format!("sbx.owner={}", rig.token(ID))) && f.contains(&format!("sbx.forward-of={ID}")));
    let sb = &calls[6];
    assert!(sb.windows(2).any(|w| w == ["--network", &net]));
    assert!(sb.contains(&format!("sbx.private={{\"{net}\":\"{fwd}\",\"{up}\":\"proxy\"}}")), "{sb:?}");
    assert_eq!(calls[8], ["network", "connect", "--", &up, &fwd]);
    assert_eq!((c.record.tier, c.gaps.len()), (2, 0), "{:?}", c.gaps);
    assert_eq!(c.record.routes.values().collect::<Vec<_>>(), [&net, &net]);
    assert!(rig.state.join(forward::MARK).exists(), "gc looks for forwarders on this host");
}

#[test]
fn private_routes_need_running_services_and_are_torn_down_on_failure() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::fail(1, "Error: No such container: proxy"));
    let s = spec(CreateRequest { private_routes: true, ..routes(&["inference:proxy:8080"]) });
    let err = rig.driver().create(&s).unwrap_err();
    assert!(matches!(err, Error::Route(RouteError::ServiceMissing { ref hosts }) if hosts == &["proxy"]), "{err:?}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "container inspect"]);

    // The sandbox's run fails: the forwarder, the sandbox, the networks go.
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(&service_line("proxy")));
    rig.private_made();
    rig.fake.push(Output::ok(&format!("{FWD_CID}\n")));
    rig.fake.push(Output::fail(125, "docker: Error response from daemon: boom"));
    rig.fake.push(Output::ok("")); // the forwarder's run is waited for whatever the sandbox's did
    rig.forwarder_listed();
    rig.fake.push(Output::ok(""));
    rig.removed();
    for _ in 0..3 {
        rig.fake.push(Output::ok(""));
    }
    assert!(rig.driver().create(&s).is_err());
    let net = format!("{ID}-inference");
    assert_eq!(
        rig.fake.verbs()[5..],
        ["run", "run", "network connect", "ps", "rm", "rm", "network disconnect", "network disconnect", "network rm"]
    );
    let calls = rig.fake.calls();
    assert_eq!(calls[9], ["rm", "-f", "-v", "--", FWD_CID], "the forwarder first, by its id");
    assert_eq!(calls[13], ["network", "rm", "--", &net, &forward::upstream(&net)]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn a_private_route_never_attaches_a_sandbox_as_its_service() {
    // `--route pivot:P:8080 --private-routes` put sandbox P
    // on the new sandbox's network. Refused before anything is made, whoever's
    // key made P, and for a container that only looks like a sandbox.
    let other_key_sandbox = Rig::new().inspect_line("sbx-0000000000aa", "sbx-0000000000aa", &["none"]);
    let renamed = service_line("sbx-0000000000ab");
    let labelled = service_line("pivot").replace("com.example.role", "sbx.managed");
    for (host, line, why) in [
        ("sbx-0000000000aa", other_key_sandbox, "carrying the sbx label"),
        ("sbx-0000000000ab", renamed, "named like a sandbox"),
        ("pivot", labelled, "carrying the sbx label \"sbx.managed\""),
    ] {
        let rig = Rig::new();
        rig.image("");
        rig.fake.push(Output::ok(&line));
        let s = spec(CreateRequest { private_routes: true, ..routes(&[&format!("pivot:{host}:8080")]) });
        let err = rig.driver().create(&s).unwrap_err();
        match &err {
            Error::Route(RouteError::ServiceIsSandbox { host: h, why: w }) => {
                assert_eq!(h, host);
                assert!(w.contains(why), "{w}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(err.exit_code(), 1);
        assert_eq!(rig.fake.verbs(), ["image inspect", "container inspect"], "nothing made");
        assert!(!rig.sock_dir().exists());
    }
}

#[test]
fn a_private_network_already_gone_does_not_fail_the_destroy() {
    let rig = Rig::new();
    let private = vec![PrivateRoute { network: format!("{ID}-inference"), service: "proxy".to_string() }];
    rig.fake.push(Output::fail(1, "Error: No such container: proxy"));
    rig.fake
        .push(Output::fail(1, &format!("Error response from daemon: network {ID}-inference not found\nexit status 1")));
    rig.driver().remove_private(&private).unwrap();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::fail(
        1,
        "Error response from daemon: error while removing network: network has active endpoints\nexit status 1",
    ));
    assert!(rig.driver().remove_private(&private).is_err(), "a real failure still fails");
    let net = format!("{ID}-inference");
    let once = [vec!["network", "disconnect", "--force", "--", &net, "proxy"], vec!["network", "rm", "--", &net]];
    assert_eq!(rig.fake.calls(), [once.clone(), once].concat());
}

#[test]
fn revoke_disconnects_and_reports_shared_networks() {
    let rig = Rig::new();
    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &["sbx-proxy", "sbx-docs"])));
    rig.fake.push(Output::ok(""));
    let r = rig.driver().revoke(ID, "inference").unwrap();
    assert_eq!(rig.fake.calls()[1], ["network", "disconnect", "--force", "--", "sbx-proxy", ID]);
    assert_eq!(r.cut, ["inference", "tools"]);
    assert!(!r.already);

    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &["sbx-docs"])));
    assert!(rig.driver().revoke(ID, "tools").unwrap().already);

    rig.fake.push(Output::ok(&rig.inspect_line(ID, ID, &["sbx-docs"])));
    let err = rig.driver().revoke(ID, "nope").unwrap_err();
    match &err {
        Error::Route(RouteError::Unknown { routes, .. }) => assert_eq!(routes, &["docs"]),
        other => panic!("{other:?}"),
    }
    assert_eq!(err.exit_code(), 1);
    assert!(err.to_string().contains("its routes: docs"));

    rig.fake.push(Output::fail(1, &format!("Error: No such container: {ID}")));
    assert!(matches!(rig.driver().revoke(ID, "docs"), Err(Error::Sandbox(SandboxError::NotFound { .. }))));
}

/// A sandbox whose route `inference` goes through its forwarder.
fn forwarded_line(rig: &Rig, networks: &[&str]) -> String {
    let net = format!("{ID}-inference");
    let labels = serde_json::json!({
        "sbx.managed": "1",
        "sbx.id": ID,
        "sbx.routes": format!("{{\"inference\":\"{net}\"}}"),
        "sbx.private": format!("{{\"{net}\":\"{}\",\"{}\":\"proxy\"}}", forward::container(&net), forward::upstream(&net)),
        "sbx.socket": rig.sock_dir().join("sandbox.sock").display().to_string(),
    });
    rig.container_line(ID, labels, networks)
}

#[test]
fn revoke_removes_the_forwarder_before_anything_else_then_both_networks() {
    let rig = Rig::new();
    let net = format!("{ID}-inference");
    rig.fake.push(Output::ok(&forwarded_line(&rig, &[&net])));
    rig.forwarder_listed();
    rig.fake.push(Output::ok("")); // rm the forwarder
    for _ in 0..4 {
        rig.fake.push(Output::ok("")); // disconnects of the sandbox, forwarder, service; network rm
    }
    let r = rig.driver().revoke(ID, "inference").unwrap();
    assert_eq!((r.network.as_str(), r.already), (net.as_str(), false));
    assert_eq!(
        rig.fake.verbs(),
        [
            "container inspect",
            "ps",
            "rm",
            "network disconnect",
            "network disconnect",
            "network disconnect",
            "network rm"
        ]
    );
    let calls = rig.fake.calls();
    assert_eq!(calls[2], ["rm", "-f", "-v", "--", FWD_CID], "its relayed connections end with it, first");
    assert_eq!(calls[3], ["network", "disconnect", "--force", "--", &net, ID]);
    assert_eq!(calls[6], ["network", "rm", "--", &net, &forward::upstream(&net)]);
}

#[test]
fn destroy_and_gc_remove_forwarders_owned_by_this_host_only() {
    let rig = Rig::new();
    let net = format!("{ID}-inference");
    rig.fake.push(Output::ok(&forwarded_line(&rig, &[&net])));
    rig.removed();
    // Another host's forwarder of the same id (its own key) is listed too, and stays.
    let foreign = serde_json::json!([forward::container(&net), ID, "not-this-hosts-token", "0b0b"]);
    let mine = serde_json::json!([forward::container(&net), ID, rig.token(ID), FWD_CID]);
    rig.fake.push(Output::ok(&format!("{foreign}\n{mine}\n")));
    rig.fake.push(Output::ok("")); // rm the forwarder
    for _ in 0..3 {
        rig.fake.push(Output::ok(""));
    }
    let d = rig.driver().destroy(&[ID.to_string()]).unwrap();
    assert_eq!(d.removed, [ID]);
    assert_eq!(
        rig.fake.verbs(),
        ["container inspect", "rm", "ps", "rm", "network disconnect", "network disconnect", "network rm"]
    );
    assert_eq!(rig.fake.calls()[3], ["rm", "-f", "-v", "--", FWD_CID]);

    // gc: only where forwarders were made, and only those whose sandbox is gone.
    let rig = Rig::new();
    rig.fake.push(Output::ok("")); // private networks
    rig.fake.push(Output::ok("")); // docker ps: no sandbox
    let r = rig.driver().gc(false).unwrap();
    assert!(r.forwarders.is_empty() && rig.fake.verbs() == ["network ls", "ps"], "{:?}", rig.fake.verbs());
    std::fs::write(rig.state.join(forward::MARK), b"").unwrap();
    let (fwd, up, tok) = (forward::container(&net), forward::upstream(&net), rig.token(ID));
    let rows = [serde_json::json!([net, ID, fwd, tok]), serde_json::json!([up, ID, "proxy", tok])];
    rig.fake.push(Output::ok(&format!("{}\n{}\n", rows[0], rows[1]))); // its private networks
    rig.fake.push(Output::ok("")); // docker ps: its sandbox is gone
    rig.forwarder_listed();
    for _ in 0..4 {
        rig.fake.push(Output::ok("")); // rm, two disconnects, network rm
    }
    let r = rig.driver().gc(false).unwrap();
    assert_eq!(r.forwarders, [fwd]);
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    // Docker refuses to remove a network a container is still on: the forwarder goes first.
    assert_eq!(rig.fake.verbs()[4..], ["ps", "rm", "network disconnect", "network disconnect", "network rm"]);
    assert_eq!(rig.fake.calls()[5], ["rm", "-f", "-v", "--", FWD_CID]);
}

//! Private route networks: made per sandbox by create, removed by destroy and revoke.

use super::*;
use crate::error::{RouteError, SandboxError};
use crate::model::record::PrivateRoute;

#[test]
fn private_routes_make_a_network_per_sandbox_and_reach_tier_2() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(&service_line("proxy")));
    rig.fake.push(Output::ok("netid\n"));
    rig.fake.push(Output::ok(""));
    rig.starts_and_binds();
    let s = spec(CreateRequest { private_routes: true, ..routes(&["inference:proxy:8080", "more:proxy:9"]) });
    let c = rig.driver().create(&s).unwrap();
    assert_eq!(
        rig.fake.verbs(),
        ["image inspect", "container inspect", "network create", "network connect", "run", "container inspect"]
    );
    let calls = rig.fake.calls();
    let net = format!("{ID}-inference");
    assert_eq!(calls[1][5..], ["proxy"]);
    assert_eq!(
        calls[2],
        [
            "network",
            "create",
            "--internal",
            "--opt",
            "com.docker.network.bridge.inhibit_ipv4=true",
            "--label",
            &format!("sbx.private-for={ID}"),
            "--label",
            "sbx.service=proxy",
            "--label",
            &format!("sbx.owner={}", rig.token(ID)),
            "--",
            &net,
        ]
    );
    assert_eq!(calls[3], ["network", "connect", "--alias", "proxy", "--", &net, "proxy"]);
    assert!(calls[4].windows(2).any(|w| w[0] == "--network" && w[1] == net));
    assert!(calls[4].contains(&format!("sbx.private={{\"{net}\":\"proxy\"}}")));
    assert_eq!((c.record.tier, c.gaps.len()), (2, 0));
    assert_eq!(c.record.routes.values().collect::<Vec<_>>(), [&net, &net]);
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

    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(&service_line("proxy")));
    rig.fake.push(Output::ok("netid\n"));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::fail(125, "docker: Error response from daemon: boom"));
    rig.removed();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    assert!(rig.driver().create(&s).is_err());
    let net = format!("{ID}-inference");
    assert_eq!(
        rig.fake.verbs(),
        [
            "image inspect",
            "container inspect",
            "network create",
            "network connect",
            "run",
            "rm",
            "network disconnect",
            "network rm"
        ]
    );
    assert_eq!(rig.fake.calls()[7], ["network", "rm", "--", &net]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn a_private_route_never_attaches_a_sandbox_as_its_service() {
    // Issue 9 finding 3: `--route pivot:P:8080 --private-routes` put sandbox P
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

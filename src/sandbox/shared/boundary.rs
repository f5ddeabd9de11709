//! Judging a sandbox's route networks (see `model::boundary` for what each
//! gap means and why).

use std::collections::BTreeMap;

use crate::docker::parse::NetInfo;
use crate::model::boundary::Gap;
use crate::model::record::RouteNetwork;
use crate::spec::Route;

/// The gaps of `routes` for sandbox `id`, given what docker says of each
/// route network. No gaps: tier 2.
pub fn assess(id: &str, routes: &[Route], networks: &[RouteNetwork], info: &BTreeMap<String, NetInfo>) -> Vec<Gap> {
    let mut by_net: Vec<(&str, Vec<String>, Vec<&Route>)> = Vec::new();
    for RouteNetwork { kind, network: net } in networks {
        let route = routes.iter().find(|r| &r.kind == kind);
        match by_net.iter_mut().find(|(n, _, _)| n == net) {
            Some((_, kinds, rs)) => {
                kinds.push(kind.clone());
                rs.extend(route);
            }
            None => by_net.push((net.as_str(), vec![kind.clone()], route.into_iter().collect())),
        }
    }
    let mut gaps = Vec::new();
    for (net, kinds, rs) in by_net {
        let n = info.get(net).cloned().unwrap_or_default();
        let targets: Vec<&str> = rs.iter().map(|r| r.target.as_str()).collect();
        let recreate = format!(
            "`docker network rm {net} && docker network create --internal -o com.docker.network.bridge.inhibit_ipv4=true {net}` and reconnect the service, or create the sandbox with --private-routes"
        );
        let mut gap = |property: &'static str, detail: String, fix: String| {
            gaps.push(Gap { routes: kinds.clone(), network: net.to_string(), property, detail, fix })
        };
        if !n.internal {
            gap(
                "egress",
                format!("{net} is not internal: the sandbox can reach beyond {}", targets.join(", ")),
                recreate.clone(),
            );
        }
        if !(n.driver == "bridge" && n.inhibit_ipv4) {
            gap(
                "host",
                format!("the host is reachable through {net}'s gateway address: any host service listening on 0.0.0.0 is exposed"),
                recreate.clone(),
            );
        }
        let private = n.private_for.as_deref() == Some(id);
        if !private {
            gap(
                "shared",
                format!("{net} is shared: every other sandbox routed to it can reach this one and resolve its name"),
                "create the sandbox with --private-routes (its own network, with only the route's service on it)"
                    .into(),
            );
        }
        // Docker has no port filter on a network: on a network sbx does not
        // relay (a shared one), whatever the service listens on answers.
        let ported: Vec<String> =
            rs.iter().filter_map(|r| r.port_or_default().map(|p| format!("{}:{p}", r.host))).collect();
        if !private && !ported.is_empty() {
            gap(
                "ports",
                format!(
                    "every port of the service answers through {net}, not only {}: docker filters no ports",
                    ported.join(", ")
                ),
                "create the sandbox with --private-routes (sbx relays only the route's port)".into(),
            );
        }
    }
    gaps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::boundary::tier;

    fn info(internal: bool, inhibit: bool, private_for: Option<&str>) -> NetInfo {
        NetInfo {
            internal,
            driver: "bridge".into(),
            inhibit_ipv4: inhibit,
            private_for: private_for.map(str::to_string),
        }
    }

    const ID: &str = "sbx-0123456789ab";

    fn run(nets: &[(&str, &str)], info_of: &[(&str, NetInfo)]) -> Vec<(String, &'static str)> {
        let routes: Vec<Route> = nets
            .iter()
            .map(|(k, n)| Route::parse(&format!("{k}:{}:80", n.trim_start_matches("sbx-"))).unwrap())
            .collect();
        let networks: Vec<RouteNetwork> =
            nets.iter().map(|(k, n)| RouteNetwork { kind: k.to_string(), network: n.to_string() }).collect();
        let info: BTreeMap<String, NetInfo> = info_of.iter().map(|(n, i)| (n.to_string(), i.clone())).collect();
        assess(ID, &routes, &networks, &info).into_iter().map(|g| (g.network, g.property)).collect()
    }

    #[test]
    fn only_a_private_internal_hostless_network_is_contained() {
        assert!(run(&[("a", "sbx-p")], &[("sbx-p", info(true, true, Some(ID)))]).is_empty());
        assert_eq!(
            run(&[("a", "sbx-p")], &[("sbx-p", info(true, true, None))]),
            [("sbx-p".into(), "shared"), ("sbx-p".into(), "ports")]
        );
        assert_eq!(
            run(&[("a", "sbx-p")], &[("sbx-p", info(true, true, Some("sbx-000000000000")))]),
            [("sbx-p".into(), "shared"), ("sbx-p".into(), "ports")]
        );
        assert_eq!(run(&[("a", "sbx-p")], &[("sbx-p", info(true, false, Some(ID)))]), [("sbx-p".into(), "host")]);
        assert_eq!(
            run(&[("a", "sbx-p")], &[("sbx-p", info(false, false, None))]),
            [
                ("sbx-p".into(), "egress"),
                ("sbx-p".into(), "host"),
                ("sbx-p".into(), "shared"),
                ("sbx-p".into(), "ports")
            ]
        );
        let mut overlay = info(true, true, Some(ID));
        overlay.driver = "overlay".into();
        assert_eq!(run(&[("a", "sbx-p")], &[("sbx-p", overlay)]), [("sbx-p".into(), "host")]);
    }

    /// Docker filters no ports: a route to `svc:8080` on a shared network
    /// reaches every port of the service, and the report says so; a URL
    /// names its scheme's port, a bare host names the whole host.
    #[test]
    fn a_shared_network_reaches_every_port_of_the_service() {
        let shared = BTreeMap::from([("sbx-svc".to_string(), info(true, true, None))]);
        let net = |kind: &str| RouteNetwork { kind: kind.into(), network: "sbx-svc".into() };
        for (route, says) in [("a:svc:8080", Some("svc:8080")), ("a:https://svc/v1", Some("svc:443")), ("a:svc", None)]
        {
            let g = assess(ID, &[Route::parse(route).unwrap()], &[net("a")], &shared);
            let ports: Vec<&Gap> = g.iter().filter(|g| g.property == "ports").collect();
            match says {
                Some(p) => {
                    assert_eq!(ports.len(), 1, "{route}: {g:?}");
                    assert!(
                        ports[0]
                            .detail
                            .contains(&format!("every port of the service answers through sbx-svc, not only {p}")),
                        "{g:?}"
                    );
                    assert!(ports[0].fix.contains("--private-routes"), "{g:?}");
                }
                None => assert!(ports.is_empty(), "{route}: {g:?}"),
            }
        }
    }

    #[test]
    fn routes_sharing_a_network_are_reported_once() {
        let gaps = run(&[("a", "sbx-p"), ("b", "sbx-p")], &[("sbx-p", info(true, false, None))]);
        assert_eq!(gaps, [("sbx-p".into(), "host"), ("sbx-p".into(), "shared"), ("sbx-p".into(), "ports")]);
        let routes = vec![Route::parse("a:p:1").unwrap(), Route::parse("b:p:2").unwrap()];
        let net = |kind: &str| RouteNetwork { kind: kind.into(), network: "sbx-p".into() };
        let nets = vec![net("a"), net("b")];
        let g = assess(ID, &routes, &nets, &BTreeMap::from([("sbx-p".to_string(), info(true, true, None))]));
        assert_eq!(g[0].routes, ["a", "b"]);
        assert!(g[1].detail.contains("every port of the service answers through sbx-p, not only p:1, p:2"), "{g:?}");
        assert_eq!(tier(&g), 1);
        assert_eq!(tier(&[]), 2);
    }
}

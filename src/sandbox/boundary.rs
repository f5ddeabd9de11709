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
        if n.private_for.as_deref() != Some(id) {
            gap(
                "shared",
                format!("{net} is shared: every other sandbox routed to it can reach this one and resolve its name"),
                "create the sandbox with --private-routes (its own network, with only the route's service on it)"
                    .into(),
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
        assert_eq!(run(&[("a", "sbx-p")], &[("sbx-p", info(true, true, None))]), [("sbx-p".into(), "shared")]);
        assert_eq!(
            run(&[("a", "sbx-p")], &[("sbx-p", info(true, true, Some("sbx-000000000000")))]),
            [("sbx-p".into(), "shared")]
        );
        assert_eq!(run(&[("a", "sbx-p")], &[("sbx-p", info(true, false, Some(ID)))]), [("sbx-p".into(), "host")]);
        assert_eq!(
            run(&[("a", "sbx-p")], &[("sbx-p", info(false, false, None))]),
            [("sbx-p".into(), "egress"), ("sbx-p".into(), "host"), ("sbx-p".into(), "shared")]
        );
        let mut overlay = info(true, true, Some(ID));
        overlay.driver = "overlay".into();
        assert_eq!(run(&[("a", "sbx-p")], &[("sbx-p", overlay)]), [("sbx-p".into(), "host")]);
    }

    #[test]
    fn routes_sharing_a_network_are_reported_once() {
        let gaps = run(&[("a", "sbx-p"), ("b", "sbx-p")], &[("sbx-p", info(true, false, None))]);
        assert_eq!(gaps, [("sbx-p".into(), "host"), ("sbx-p".into(), "shared")]);
        let routes = vec![Route::parse("a:p:1").unwrap(), Route::parse("b:p:2").unwrap()];
        let net = |kind: &str| RouteNetwork { kind: kind.into(), network: "sbx-p".into() };
        let nets = vec![net("a"), net("b")];
        let g = assess(ID, &routes, &nets, &BTreeMap::from([("sbx-p".to_string(), info(true, true, None))]));
        assert_eq!(g[0].routes, ["a", "b"]);
        assert_eq!(tier(&g), 1);
        assert_eq!(tier(&[]), 2);
    }
}

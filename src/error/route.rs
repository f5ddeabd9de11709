//! RouteError: its failures, each with its `--json` kind and its hint.
//! Every one exits 1 (see the table in the parent module).

use crate::model::boundary::Gap;

/// Routes, their networks and the services they name.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("route network(s) missing: {}", networks.join(", "))]
    NetworkMissing { networks: Vec<String> },
    #[error("routes reach beyond their targets, refused under strict egress: {}", gaps.iter().map(|g| format!("{} ({})", g.network, g.property)).collect::<Vec<_>>().join(", "))]
    NotContained { gaps: Vec<Gap> },
    #[error("with --private-routes each route's host must name a running service container; not running: {}", hosts.join(", "))]
    ServiceMissing { hosts: Vec<String> },
    #[error("sandbox {id} has no route {kind:?} (its routes: {})", if routes.is_empty() { "none".to_string() } else { routes.join(", ") })]
    Unknown { id: String, kind: String, routes: Vec<String> },
    #[error("route service {host:?} {why}; sbx never attaches a sandbox to another sandbox's route")]
    ServiceIsSandbox { host: String, why: String },
    #[error("route host {host:?} is not a container on network {network}: under runtime {runtime} Docker's DNS does not answer in the sandbox, so sbx writes each route host's address itself and must find it")]
    Unresolved { host: String, network: String, runtime: String },
}

impl RouteError {
    pub fn kind(&self) -> &'static str {
        match self {
            RouteError::NetworkMissing { .. } => "network_missing",
            RouteError::NotContained { .. } => "not_contained",
            RouteError::ServiceMissing { .. } => "service_missing",
            RouteError::Unknown { .. } => "unknown_route",
            RouteError::ServiceIsSandbox { .. } => "service_is_sandbox",
            RouteError::Unresolved { .. } => "route_unresolved",
        }
    }

    pub fn hint(&self) -> Option<String> {
        Some(match self {
            RouteError::NetworkMissing { networks } => {
                format!("{}; or create the sandbox with --private-routes", missing_network_fix(networks))
            }
            RouteError::NotContained { gaps } => {
                let mut fixes: Vec<String> = gaps.iter().map(|g| format!("{}: {}", g.network, g.fix)).collect();
                fixes.dedup();
                format!("{}; or drop --strict-egress / SBX_STRICT_EGRESS to accept tier 1", fixes.join("; "))
            }
            RouteError::ServiceMissing { .. } => {
                "start the service as a container named after the route's host (`docker run -d --name HOST ...`), or create without --private-routes".into()
            }
            RouteError::Unknown { id, .. } => {
                format!("`sbx inspect {id}` shows its routes; `sbx revoke {id} all` destroys it")
            }
            RouteError::Unresolved { host, network, .. } => format!(
                "give the route the service container's name (not a network alias) and attach it: `docker network connect {network} {host}`; or use runc"
            ),
            RouteError::ServiceIsSandbox { .. } => {
                "route to a service container that is not a sandbox; to let sandboxes talk, use a shared route network you create".into()
            }
        })
    }
}

/// How to make missing route networks; `create`'s hint and `doctor
/// --route` say the same (consistency).
pub fn missing_network_fix(networks: &[String]) -> String {
    let cmds: Vec<String> = networks.iter().map(|n| format!("`docker network create --internal {n}`")).collect();
    let attach: Vec<String> = networks
        .iter()
        .map(|n| format!("`docker network connect --alias {} {n} SERVICE`", n.trim_start_matches("sbx-")))
        .collect();
    format!(
        "create it with {} (add `-o com.docker.network.bridge.inhibit_ipv4=true` to keep the host out of reach) and attach the service with {}",
        cmds.join(" and "),
        attach.join(" and ")
    )
}

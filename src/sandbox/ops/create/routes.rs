//! Create's routes: which network each uses, and the services of private routes.

use crate::docker::parse::NetInfo;
use crate::docker::{argv, parse, status_error};
use crate::error::RouteError;
use crate::error::{Error, Result};
use crate::model::record::{PrivateRoute, RouteNetwork};
use crate::sandbox::{unique, Driver};
use crate::spec::{self, SandboxSpec};

/// How a sandbox's routes map onto networks.
#[derive(Debug, Default)]
pub(super) struct RouteNets {
    /// In route order.
    pub(super) networks: Vec<RouteNetwork>,
    pub(super) info: std::collections::BTreeMap<String, NetInfo>,
    /// The private route networks sbx makes and removes.
    pub(super) private: Vec<PrivateRoute>,
    /// One forwarder per private route host (`model::forward`).
    pub(super) forwards: Vec<Forward>,
}

/// A forwarder to start: on `network` under the route host `alias`,
/// relaying `ports` (every route to that host) to the service.
#[derive(Debug)]
pub(super) struct Forward {
    pub(super) network: String,
    pub(super) alias: String,
    pub(super) ports: Vec<u16>,
}

impl Driver {
    /// Which network each route uses, and what docker says of each.
    /// Shared routes: one `docker network inspect` for all of them.
    /// Private routes: one `docker container inspect` of the services; the
    /// networks are made later, so their properties are known by design.
    pub(super) fn route_networks(&self, id: &str, spec: &SandboxSpec) -> Result<RouteNets> {
        let mut r = RouteNets::default();
        if spec.routes.is_empty() {
            return Ok(r);
        }
        if spec.private_routes {
            let hosts: Vec<String> = unique(spec.routes.iter().map(|r| r.host.clone()));
            self.check_services(&hosts)?;
            // The sandbox's network holds the sandbox and the forwarder; the
            // service is on the forwarder's upstream network only, so only
            // the routes' ports reach it (docker filters no ports).
            for route in &spec.routes {
                let port = route.port_or_default().expect("spec validation requires a port on a private route");
                let net = match r.forwards.iter_mut().find(|f| f.alias == route.host) {
                    Some(f) => {
                        if !f.ports.contains(&port) {
                            f.ports.push(port);
                        }
                        f.network.clone()
                    }
                    None => {
                        let network = format!("{id}-{}", route.kind);
                        r.private.push(PrivateRoute {
                            network: network.clone(),
                            service: crate::model::forward::container(&network),
                        });
                        r.private.push(PrivateRoute {
                            network: crate::model::forward::upstream(&network),
                            service: route.host.clone(),
                        });
                        r.forwards.push(Forward {
                            network: network.clone(),
                            alias: route.host.clone(),
                            ports: vec![port],
                        });
                        network
                    }
                };
                let info = NetInfo {
                    internal: true,
                    driver: "bridge".into(),
                    inhibit_ipv4: true,
                    private_for: Some(id.to_string()),
                };
                r.info.insert(net.clone(), info);
                r.networks.push(RouteNetwork { kind: route.kind.clone(), network: net });
            }
            return Ok(r);
        }
        r.networks = spec
            .routes
            .iter()
            .map(|route| RouteNetwork { kind: route.kind.clone(), network: route.network() })
            .collect();
        let nets = unique(r.networks.iter().map(|r| r.network.clone()));
        let args = argv::network_inspect(&nets);
        let out = self.docker.run(&args)?;
        let report = parse::networks(&nets, &out.stdout_str(), &out.stderr_str());
        if !report.missing.is_empty() {
            return Err(Error::Route(RouteError::NetworkMissing { networks: report.missing }));
        }
        if out.status != 0 || report.nets.len() != nets.len() {
            return Err(status_error(&args, &out).into());
        }
        r.info = report.nets;
        Ok(r)
    }

    /// Private routes attach existing service containers: they must run.
    fn check_services(&self, hosts: &[String]) -> Result<()> {
        let args = argv::inspect(hosts);
        let out = self.docker.run(&args)?;
        let found = crate::docker::parse::parse_inspect(&out.stdout_str(), &crate::docker::render(&args))?;
        // A route naming another sandbox would attach it
        // to this one's network. Refused whoever's key made it, and also a
        // container that only looks like a sandbox (sbx labels, sbx's names).
        for c in &found {
            let why = if let Some(label) = c.labels.keys().find(|k| crate::model::record::is_reserved_label(k)) {
                format!("is a container carrying the sbx label {label:?}")
            } else if spec::parse_id(&c.name).is_ok() {
                format!("is named like a sandbox ({})", c.name)
            } else {
                continue;
            };
            let host = hosts.iter().find(|h| **h == c.name).unwrap_or(&c.name).clone();
            return Err(Error::Route(RouteError::ServiceIsSandbox { host, why }));
        }
        for h in hosts {
            if spec::parse_id(h).is_ok() {
                return Err(Error::Route(RouteError::ServiceIsSandbox {
                    host: h.clone(),
                    why: "is named like a sandbox".into(),
                }));
            }
        }
        let missing: Vec<String> =
            hosts.iter().filter(|h| !found.iter().any(|c| &c.name == *h && c.state == "running")).cloned().collect();
        if !missing.is_empty() {
            if out.status != 0 && parse::missing_containers(hosts, &out.stderr_str()).len() + found.len() != hosts.len()
            {
                return Err(status_error(&args, &out).into());
            }
            return Err(Error::Route(RouteError::ServiceMissing { hosts: missing }));
        }
        Ok(())
    }
}

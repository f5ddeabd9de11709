//! `revoke`: cut a route off a running sandbox; `egress` also removes its gate.

use serde::Serialize;

use crate::docker::{argv, parse, status_error};
use crate::error::{EgressError, Error, Result, RouteError};
use crate::model::event::{Event, Kind};
use crate::model::{forward, record};
use crate::sandbox::shared::networks::private_of;
use crate::sandbox::Driver;
use crate::spec::EGRESS_KIND;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Revoked {
    pub id: String,
    pub kind: String,
    pub network: String,
    /// Every route cut, `kind` included: routes to one host share a network.
    pub cut: Vec<String>,
    pub already: bool,
}

impl Driver {
    pub fn revoke(&self, id: &str, kind: &str) -> Result<Revoked> {
        let raw = self.inspect_one(id)?;
        let egress = kind == EGRESS_KIND;
        if egress && !raw.labels.contains_key(record::EGRESS) {
            return Err(EgressError::NoGate { id: id.to_string() }.into());
        }
        let declared = raw.declared_routes();
        let Some(network) = declared.get(kind).cloned() else {
            return Err(Error::Route(RouteError::Unknown {
                id: id.to_string(),
                kind: kind.to_string(),
                routes: self.record(&raw, crate::sandbox::started_at(&raw)).routes.into_keys().collect(),
            }));
        };
        let cut: Vec<String> = declared.iter().filter(|(_, n)| **n == network).map(|(k, _)| k.clone()).collect();
        // A private route's forwarder first: it goes, and every connection
        // it relays ends with it, before the sandbox leaves the network.
        let private_all = private_of(&raw);
        if private_all.iter().any(|p| p.network == network && forward::is_forwarder(p)) {
            self.remove_forwarders(&[id.to_string()], Some(&network))?;
        }
        let mut already = !raw.networks.contains(&network);
        if !already {
            let args = argv::network_disconnect(&network, &crate::sandbox::acted_on(&raw));
            let out = self.docker.run(&args)?;
            if out.status != 0 {
                if parse::not_connected(&out.stderr_str()) {
                    already = true;
                } else {
                    return Err(status_error(&args, &out).into());
                }
            }
        }
        let private: Vec<_> = forward::of_route(&private_all, &network).cloned().collect();
        self.remove_private(&private)?;
        if egress {
            // Its network is gone already; the gate and its policy go too.
            let state = &self.state()?.state;
            let known: Vec<String> = state.record(id).and_then(|r| r.gate).into_iter().collect();
            self.remove_gates(&[id.to_string()], &known)?;
            crate::host::egress::remove(&state.dir, id)?;
        }
        if !already {
            let mut e = Event::new(std::time::SystemTime::now(), id, Kind::Revoked);
            e.route = Some(kind.to_string());
            e.session = raw.labels.get(record::SESSION).filter(|s| !s.is_empty()).cloned();
            crate::host::journal::record(&self.state()?.state.dir, &e);
        }
        Ok(Revoked { id: id.to_string(), kind: kind.to_string(), network, cut, already })
    }
}

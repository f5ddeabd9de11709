//! Private route networks: made by create, removed by destroy, revoke and gc.

use std::collections::BTreeMap;

use crate::docker::parse::RawContainer;
use crate::docker::{argv, parse, run_ok, status_error};
use crate::error::{DockerError, Result};
use crate::model::forward;
use crate::model::record::{self, PrivateRoute};
use crate::sandbox::{is_timeout, Driver};

impl Driver {
    /// Make each private route network (internal, no host address, labelled
    /// as this sandbox's) and attach a route's service to its forwarder's
    /// upstream network, under the name the forwarder dials.
    pub(in crate::sandbox) fn make_private(&self, id: &str, owner: &str, private: &[PrivateRoute]) -> Result<()> {
        for p @ PrivateRoute { network: net, service: svc } in private {
            self.check_interrupt()?;
            run_ok(&*self.docker, &argv::private_network(net, id, svc, owner))?;
            // The egress gate and a forwarder join their networks when they
            // start, under the alias the sandbox knows them by.
            if *svc == crate::model::gate::container(id) || forward::is_forwarder(p) {
                continue;
            }
            run_ok(&*self.docker, &argv::network_connect_alias(net, svc, forward::UPSTREAM_ALIAS))?;
        }
        Ok(())
    }

    /// Detach services from private route networks and remove them. Already
    /// gone is fine.
    pub(in crate::sandbox) fn remove_private(&self, private: &[PrivateRoute]) -> Result<()> {
        if private.is_empty() {
            return Ok(());
        }
        for PrivateRoute { network: net, service: svc } in private {
            // Its failure shows in the removal; a hung engine stops here.
            if let Err(e @ DockerError::Timeout { .. }) = self.docker.run(&argv::network_disconnect(net, svc)) {
                return Err(e.into());
            }
        }
        let nets: Vec<String> = private.iter().map(|p| p.network.clone()).collect();
        // Paced like container removals; the first failure is
        // returned once every batch has run.
        let remove = |batch: &[String]| -> Result<()> {
            let args = argv::network_remove(batch);
            let out = self.docker.run(&args)?;
            if out.status != 0 && parse::network_rm_failed(&out.stderr_str()) {
                return Err(status_error(&args, &out).into());
            }
            Ok(())
        };
        let done = self.pace.run_until(&nets, remove, |r| r.as_ref().is_err_and(is_timeout));
        match done.into_iter().find_map(|(_, r)| r.and_then(Result::err)) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The private route networks recorded on a sandbox.
pub(in crate::sandbox) fn private_of(raw: &RawContainer) -> Vec<PrivateRoute> {
    raw.labels
        .get(record::PRIVATE)
        .and_then(|p| serde_json::from_str::<BTreeMap<String, String>>(p).ok())
        .map(|m| m.into_iter().map(PrivateRoute::from).collect())
        .unwrap_or_default()
}

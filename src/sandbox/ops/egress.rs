//! `allow`, `deny`, `egress log`: the policy of a running gate (the gate
//! itself, its removal and its reaping are `shared::gates`).

use crate::error::{EgressError, Result};
use crate::model::gate;
use crate::sandbox::Driver;
use crate::spec::egress::Policy;

impl Driver {
    /// Sandbox `id`, proven this host's, with a gate that still stands:
    /// what `allow`, `deny` and `egress log` act on.
    fn gated(&self, id: &str) -> Result<()> {
        let raw = self.inspect_one(id)?;
        if !raw.labels.contains_key(crate::model::record::EGRESS) {
            return Err(EgressError::NoGate { id: id.to_string() }.into());
        }
        if !raw.networks.contains(&gate::network(id)) {
            return Err(EgressError::Revoked { id: id.to_string() }.into());
        }
        Ok(())
    }

    /// The policy sandbox `id`'s gate enforces now.
    pub fn egress_policy(&self, id: &str) -> Result<Policy> {
        self.gated(id)?;
        crate::host::egress::read(&self.state()?.state.dir, id)
    }

    /// Change sandbox `id`'s policy with `change`; the gate follows within a
    /// second. Returns the new policy and what `change` returned.
    pub fn change_egress<T>(&self, id: &str, change: impl FnOnce(&mut Policy) -> T) -> Result<(Policy, T)> {
        self.gated(id)?;
        let data = &self.state()?.state.dir;
        if !self.engine()?.is_remote() {
            // This machine's addresses again (a bridge made since create is
            // one more): cheap, and a change is when the gate rereads.
            let now = crate::host::host_addrs::interfaces().unwrap_or_default();
            return crate::host::egress::update(data, id, |p| {
                let known = std::mem::take(&mut p.host_addrs);
                p.set_host_addrs(known.into_iter().chain(now));
                change(p)
            });
        }
        // A remote gate reads its own volume: the new policy is
        // copied in first, and recorded here only once it is there.
        let gate = self
            .owned_gates()?
            .into_iter()
            .find(|g| g.sandbox == id)
            .ok_or_else(|| EgressError::Revoked { id: id.to_string() })?;
        crate::host::egress::update_then(data, id, change, |p| self.publish_policy(id, &gate.container, p))
    }

    /// The gate container of sandbox `id`, for `docker logs`.
    pub fn gate_of(&self, id: &str) -> Result<String> {
        self.gated(id)?;
        Ok(gate::container(id))
    }
}

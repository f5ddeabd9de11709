//! Egress gates after create: the policy of a running gate
//! (`allow`, `deny`, `egress log`), removing a sandbox's gate and
//! policy directory (rollback, destroy, revoke) and reaping what is left of
//! gates whose sandbox is gone (gc). A gate is found by its container id
//! from the sandbox's record, else by its `sbx.gate-of` label with this
//! host's owner token: never by name alone, which another container could take.

use std::collections::BTreeSet;

use crate::docker::parse::{self, Gate};
use crate::docker::{argv, run_ok};
use crate::error::{EgressError, Result};
use crate::host::state::{self, State};
use crate::model::gate;
use crate::sandbox::Driver;
use crate::spec::egress::{LogLine, Policy};

impl Driver {
    /// This host's gates (owner token checked).
    pub(in crate::sandbox) fn owned_gates(&self) -> Result<Vec<Gate>> {
        let key = &self.state()?.key;
        let out = run_ok(&*self.docker, &argv::gates())?;
        Ok(parse::rows::<Gate>(&out.stdout_str())
            .into_iter()
            .filter(|g| g.owner == state::owner_token(key, &g.sandbox))
            .collect())
    }

    /// Remove the gates of `ids` (`known`: container ids from their records;
    /// the rest are looked up by label). Already gone is fine.
    pub(in crate::sandbox) fn remove_gates(&self, ids: &[String], known: &[String]) -> Result<()> {
        for id in ids {
            self.keep_gate_log(id, &gate::container(id));
        }
        let mut cids: Vec<String> = known.to_vec();
        if ids.len() > known.len() {
            let wanted: BTreeSet<&String> = ids.iter().collect();
            cids.extend(self.owned_gates()?.into_iter().filter(|g| wanted.contains(&g.sandbox)).map(|g| g.container));
        }
        cids.sort();
        cids.dedup();
        if cids.is_empty() {
            return Ok(());
        }
        self.remove_tolerant(&cids)
    }

    /// Keep the decision log of sandbox `id`'s gate (`container`: its id or
    /// name) on the host before the gate goes: only lines that parse as
    /// records of this sandbox, re-serialized, bounded by sbx
    /// (`host::egress::keep_log`). Best effort: a gate already gone has none.
    pub(in crate::sandbox) fn keep_gate_log(&self, id: &str, container: &str) {
        let Ok(out) = self.docker.run(&argv::logs(container, false, None)) else { return };
        if out.status != 0 {
            return;
        }
        let lines: Vec<String> = out
            .stdout_str()
            .lines()
            .filter_map(|l| LogLine::parse(l).ok())
            .filter(|l| l.sandbox == id)
            .filter_map(|l| serde_json::to_string(&l).ok())
            .collect();
        let kept = self.state().and_then(|s| crate::host::egress::keep_log(&s.state.dir, id, &lines));
        if let Err(e) = kept {
            self.warn("egress_log", &format!("could not keep the decision log of {id}'s gate: {e}"));
        }
    }

    /// Rollback's and revoke's: the gate of `id`, then its policy directory.
    /// True when both are gone; a failure is said on stderr and left to gc.
    pub(in crate::sandbox) fn remove_gate(&self, id: &str, state: &State, cid: Option<String>) -> bool {
        let known: Vec<String> = cid.into_iter().collect();
        if let Err(e) = self.remove_gates(&[id.to_string()], &known) {
            self.warn("cleanup", &format!("could not remove the egress gate of {id}: {e}; `sbx gc` will"));
            return false;
        }
        if let Err(e) = crate::host::egress::remove(&state.dir, id) {
            self.warn("cleanup", &format!("could not remove the egress policy of {id}: {e}; `sbx gc` will"));
            return false;
        }
        true
    }
}

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

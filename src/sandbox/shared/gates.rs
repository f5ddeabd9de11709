//! Egress gates after create: removing a sandbox's gate and policy
//! directory (rollback, destroy, revoke), reaping what is left of gates
//! whose sandbox is gone (gc), and a remote gate's policy published (create,
//! `allow`, `deny`). A gate is found by its container id
//! from the sandbox's record, else by its `sbx.gate-of` label with this
//! host's owner token: never by name alone, which another container could take.

use std::collections::BTreeSet;

use crate::docker::parse::{self, Gate};
use crate::docker::{argv, run_ok};
use crate::error::{EgressError, Result};
use crate::host::state::{self, State};
use crate::model::gate;
use crate::sandbox::Driver;
use crate::spec::egress::LogLine;

/// How long a push waits for a gate's control socket to come up.
const VAULT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
const VAULT_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

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

    /// Push `kept`'s vault into the memory of sandbox `id`'s gate (`gate`:
    /// its container), which swaps it whole; fresh leaf certificates each
    /// time. The gate answers `ok` or `error: ...` on stdout (its own
    /// words, quoted inert); no answer at all means its control socket is
    /// not up yet (a gate just started), tried again for `VAULT_WAIT`.
    /// Nothing of the vault is ever in an argv or a message.
    pub(in crate::sandbox) fn push_vault(&self, id: &str, gate: &str, kept: &crate::host::secrets::Kept) -> Result<()> {
        let vault = kept.vault()?;
        let json = serde_json::to_vec(&vault)
            .map_err(|e| EgressError::Vault { id: id.to_string(), reason: format!("it could not be encoded: {e}") })?;
        let deadline = std::time::Instant::now() + VAULT_WAIT;
        loop {
            let out = self.docker.run_input(&argv::gate_vault(gate), &json)?;
            if out.status == 0 {
                return Ok(());
            }
            let said = crate::model::text::inert_chars(out.stdout_str().trim());
            if said.is_empty() && std::time::Instant::now() < deadline {
                self.check_interrupt()?;
                std::thread::sleep(VAULT_RETRY);
                continue;
            }
            let said = if said.is_empty() { crate::model::text::inert_chars(out.stderr_str().trim()) } else { said };
            let said: String = said.chars().take(400).collect();
            let reason = format!("`docker exec ... /sbx __gate-vault` exited {}: {said}", out.status);
            return Err(EgressError::Vault { id: id.to_string(), reason }.into());
        }
    }

    /// `sbx start` (after an engine restart the gate is stopped too, and
    /// its memory empty): the gate started if it is not running, and the
    /// kept vault pushed again. Nothing when nothing is kept for `id`.
    pub(in crate::sandbox) fn repush_vault(&self, id: &str) -> Result<()> {
        let data = &self.state()?.state.dir;
        let Some(kept) = crate::host::secrets::load(data, id)? else { return Ok(()) };
        let name = gate::container(id);
        run_ok(&*self.docker, &argv::start(&name))?;
        self.push_vault(id, &name, &kept)
    }

    /// Copy `policy` into sandbox `id`'s remote gate's /policy volume
    /// (`container`: the gate's id).
    pub(in crate::sandbox) fn publish_policy(
        &self,
        id: &str,
        container: &str,
        policy: &crate::spec::egress::Policy,
    ) -> Result<()> {
        let args = argv::remote::copy_in(container, gate::POLICY_DIR);
        let out = self.docker.run_input(&args, &crate::host::egress::tar(policy))?;
        if out.status != 0 {
            let reason = format!("`docker cp` into the gate failed: {}", out.stderr_str().trim());
            return Err(EgressError::Publish { id: id.to_string(), reason }.into());
        }
        Ok(())
    }
}

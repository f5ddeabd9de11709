//! Forwarders after create (see `model::forward`): removed with their
//! route (`revoke`: the relayed connections end with the process), with
//! their sandbox (destroy, a failed create) and, once their sandbox is
//! gone, by gc. A forwarder is found by its `sbx.forward-of` label with
//! this host's owner token: never by name alone, which another container
//! could take.

use std::collections::BTreeSet;

use crate::docker::parse::{self, Gate};
use crate::docker::{argv, run_ok};
use crate::error::Result;
use crate::host::state;
use crate::model::forward;
use crate::sandbox::Driver;

impl Driver {
    /// This host's forwarders (owner token checked), as `[name, sandbox,
    /// owner, container id]` rows like the gates'.
    fn owned_forwarders(&self) -> Result<Vec<Gate>> {
        let key = &self.state()?.key;
        let out = run_ok(&*self.docker, &argv::forwarders())?;
        Ok(parse::rows::<Gate>(&out.stdout_str())
            .into_iter()
            .filter(|f| f.owner == state::owner_token(key, &f.sandbox))
            .collect())
    }

    /// Remove the forwarders of sandboxes `ids`; with `network`, only the
    /// one of that private route network. Already gone is fine.
    pub(in crate::sandbox) fn remove_forwarders(&self, ids: &[String], network: Option<&str>) -> Result<()> {
        let only = network.map(forward::container);
        let going: Vec<String> = self
            .owned_forwarders()?
            .into_iter()
            .filter(|f| ids.contains(&f.sandbox) && only.as_ref().is_none_or(|n| *n == f.name))
            .map(|f| f.container)
            .collect();
        if going.is_empty() {
            return Ok(());
        }
        self.remove_tolerant(&going)
    }

    /// Rollback's: true when the forwarders of `id` are gone; a failure is
    /// said on stderr and left to gc.
    pub(in crate::sandbox) fn remove_forwarders_warning(&self, id: &str) -> bool {
        match self.remove_forwarders(&[id.to_string()], None) {
            Ok(()) => true,
            Err(e) => {
                self.warn("cleanup", &format!("could not remove the route forwarders of {id}: {e}; `sbx gc` will"));
                false
            }
        }
    }

    /// gc's part: the forwarders whose sandbox is gone (not in `keep`: the
    /// sandboxes that stay and the creates in flight), removed unless
    /// `dry_run`; their names. Only on a host that has made one (its data
    /// dir has the mark). Before the private networks: docker refuses to
    /// remove a network a container is still on.
    pub(in crate::sandbox) fn gc_forwarders(&self, keep: &BTreeSet<String>, dry_run: bool) -> Result<Vec<String>> {
        if !self.state()?.state.dir.join(forward::MARK).exists() {
            return Ok(Vec::new());
        }
        let going: Vec<Gate> = self.owned_forwarders()?.into_iter().filter(|f| !keep.contains(&f.sandbox)).collect();
        let names = going.iter().map(|f| f.name.clone()).collect();
        if !dry_run && !going.is_empty() {
            self.remove_tolerant(&going.into_iter().map(|f| f.container).collect::<Vec<_>>())?;
        }
        Ok(names)
    }
}

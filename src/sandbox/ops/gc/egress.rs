//! gc's part of egress: gates and policy directories whose
//! sandbox is gone, and sbx's own egress network once no gate uses it. Only
//! on a host that has used egress (its data dir has `egress/`), so gc makes
//! no extra docker call elsewhere. The internal networks are private route
//! networks and go with them (see `plan`).

use std::collections::BTreeSet;

use super::{GcFailure, GcReport};
use crate::docker::{argv, parse, run_ok};
use crate::error::Result;
use crate::sandbox::Driver;

impl Driver {
    /// `keep`: sandboxes that stay (not reaped, or creates in flight).
    /// Runs after the sandboxes were reaped.
    /// `mine`: ids attributed to the engine gc asks; a policy
    /// directory of another engine's sandbox stays, unless this engine has
    /// its gate.
    pub(super) fn gc_egress(
        &self,
        keep: &BTreeSet<String>,
        mine: &dyn Fn(&str) -> bool,
        dry_run: bool,
        report: &mut GcReport,
    ) -> Result<()> {
        let data = self.state()?.state.dir.clone();
        if !crate::host::egress::root(&data).is_dir() {
            return Ok(());
        }
        let expired = crate::host::egress::expired_logs(&data);
        report.egress_logs = expired.iter().map(|p| p.display().to_string()).collect();
        if !dry_run {
            for p in &expired {
                if let Err(e) = std::fs::remove_file(p) {
                    report.failed.push(GcFailure { item: p.display().to_string(), error: e.to_string() });
                }
            }
        }
        let gates = self.owned_gates()?;
        let mut dirs = crate::host::egress::ids(&data);
        // A sandbox's kept secrets go with its policy (`egress::remove`),
        // also when the policy went first.
        dirs.extend(crate::host::secrets::ids(&data));
        dirs.sort();
        dirs.dedup();
        dirs.retain(|id| mine(id) || gates.iter().any(|g| g.sandbox == *id));
        let mut doomed: BTreeSet<String> = gates.iter().map(|g| g.sandbox.clone()).collect();
        doomed.extend(dirs.iter().cloned());
        doomed.retain(|id| !keep.contains(id));
        // A create may have finished since `docker ps`: keep any that is a container now.
        if !doomed.is_empty() {
            let ids: Vec<String> = doomed.iter().cloned().collect();
            let out = self.docker.run(&argv::inspect(&ids))?;
            for r in parse::parse_inspect(&out.stdout_str(), "docker container inspect")? {
                doomed.remove(&r.name);
            }
        }
        let going: Vec<String> = gates.iter().filter(|g| doomed.contains(&g.sandbox)).map(|g| g.name.clone()).collect();
        let dirs_going: Vec<String> = dirs.iter().filter(|id| doomed.contains(*id)).cloned().collect();
        let gates_left = gates.len() - going.len();
        report.gates = going;
        report.policy_dirs =
            dirs_going.iter().map(|id| crate::host::egress::dir(&data, id).display().to_string()).collect();
        // sbx's own egress network, once no gate is left and no create is in flight.
        let nets: Vec<String> = if gates_left == 0 && keep.is_empty() {
            let out = run_ok(&*self.docker, &argv::egress_networks())?;
            parse::rows::<String>(&out.stdout_str())
        } else {
            Vec::new()
        };
        report.egress_networks = nets.clone();
        if dry_run {
            return Ok(());
        }
        for g in gates.iter().filter(|g| doomed.contains(&g.sandbox)) {
            self.keep_gate_log(&g.sandbox, &g.container);
        }
        let cids: Vec<String> =
            gates.iter().filter(|g| doomed.contains(&g.sandbox)).map(|g| g.container.clone()).collect();
        if let Err(e) = self.remove_gates(&[], &cids) {
            report
                .failed
                .push(GcFailure { item: format!("egress gates {}", report.gates.join(" ")), error: e.to_string() });
            report.gates.clear();
            return Ok(());
        }
        for id in &dirs_going {
            if let Err(e) = crate::host::egress::remove(&data, id) {
                report.failed.push(GcFailure { item: format!("egress policy of {id}"), error: e.to_string() });
            }
        }
        for n in &nets {
            // Refused while a container uses it (a gate of another host's sbx): it stays.
            let out = self.docker.run(&argv::network_remove(&[n]))?;
            if out.status != 0 {
                report.egress_networks.retain(|x| x != n);
            }
        }
        Ok(())
    }
}

//! gc's part of audit's status probe: a probe container is
//! removed by `--rm`, or by audit when its run fails; one left by an sbx
//! that died meanwhile (between docker's create and start, say) is
//! reaped here once its `sbx.expires` has passed, if its owner token is
//! this data dir's.

use std::time::SystemTime;

use super::{GcFailure, GcReport};
use crate::docker::{argv, parse, run_ok};
use crate::error::Result;
use crate::sandbox::Driver;

impl Driver {
    /// Only on a host that has run one (its data dir has the mark).
    pub(super) fn gc_audit_probes(&self, dry_run: bool, report: &mut GcReport) -> Result<()> {
        let crate::sandbox::HostState { state, key } = self.state()?;
        if !state.dir.join(crate::model::record::AUDIT_PROBES_MARK).exists() {
            return Ok(());
        }
        let out = run_ok(&*self.docker, &argv::audit_probes())?;
        let going = parse::expired_probes(&out.stdout_str(), key, SystemTime::now());
        report.probes = going.iter().map(|(name, _)| name.clone()).collect();
        if dry_run || going.is_empty() {
            return Ok(());
        }
        let cids: Vec<&str> = going.iter().map(|(_, cid)| cid.as_str()).collect();
        if let Err(e) = run_ok(&*self.docker, &argv::remove(&cids)) {
            report
                .failed
                .push(GcFailure { item: format!("audit probes {}", report.probes.join(" ")), error: e.to_string() });
            report.probes.clear();
        }
        Ok(())
    }
}

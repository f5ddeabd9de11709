//! `sbx gc`: reap what leaked, in a few batched docker calls.

use super::Context;
use crate::error::SandboxError;
use crate::error::{Error, Result};

pub fn exec(dry_run: bool, ctx: &Context) -> Result<()> {
    let report = ctx.driver.gc(dry_run)?;
    // Everything else was done; then say what was not, and exit 1.
    let incomplete = |report: &crate::sandbox::GcReport| match report.failed.len() {
        0 => Ok(()),
        n => Err(Error::Sandbox(SandboxError::GcIncomplete {
            failed: report.failed.iter().map(|f| format!("{}: {}", f.item, f.error)).collect::<Vec<_>>(),
            count: n,
        })),
    };
    if ctx.json() {
        ctx.out.json_line(&report)?;
        return incomplete(&report);
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    let mut text = String::new();
    for r in &report.containers {
        text.push_str(&format!("{verb} {} ({})\n", r.id, r.reason));
    }
    for n in &report.networks {
        text.push_str(&format!("{verb} private route network {n}\n"));
    }
    for d in &report.socket_dirs {
        text.push_str(&format!("{verb} socket directory {d}\n"));
    }
    for p in &report.volume_state {
        text.push_str(&format!("{verb} orphaned session state {p}\n"));
    }
    let remade = if dry_run { "would make again" } else { "made again" };
    for v in &report.restored_volumes {
        text.push_str(&format!("{remade} session volume {v} (it was gone; the session's data is kept)\n"));
    }
    for p in &report.clone_scratch {
        text.push_str(&format!("{verb} clone left by a killed create {p}\n"));
    }
    for p in &report.persist_leftovers {
        text.push_str(&format!("{verb} session image part left by a killed create {p}\n"));
    }
    for g in &report.gates {
        text.push_str(&format!("{verb} egress gate {g}\n"));
    }
    for d in &report.policy_dirs {
        text.push_str(&format!("{verb} egress policy {d}\n"));
    }
    for l in &report.egress_logs {
        text.push_str(&format!("{verb} expired egress log {l}\n"));
    }
    for n in &report.egress_networks {
        text.push_str(&format!("{verb} egress network {n}\n"));
    }
    for f in &report.fillers {
        text.push_str(&format!("{verb} filler {f}\n"));
    }
    ctx.out.data(&text)?;
    incomplete(&report)
}

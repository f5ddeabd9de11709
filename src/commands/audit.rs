//! `sbx audit ID`: one line per CIS runtime rule, pass or fail.

use super::Context;
use crate::error::CheckError;
use crate::error::{Error, Result};
use crate::model::names::SandboxId;

pub fn exec(id: &SandboxId, ctx: &Context) -> Result<()> {
    let report = crate::checks::audit::of_sandbox(&ctx.driver, id)?;
    if let (Some(note), false) = (&report.note, ctx.json()) {
        ctx.out.note("paused", note);
    }
    if ctx.json() {
        ctx.out.json_line(&report)?;
    } else {
        let mut text = String::new();
        for r in &report.rules {
            let tag = if r.pass { "PASS" } else { "FAIL" };
            text.push_str(&format!("{tag}  {:<12} {:<42} {}\n", r.id, r.title, r.detail));
        }
        ctx.out.data(&text)?;
    }
    if report.passed {
        Ok(())
    } else {
        let failed = report.rules.iter().filter(|r| !r.pass).map(|r| format!("{} {}", r.id, r.title)).collect();
        Err(Error::Check(CheckError::AuditFailed { id: id.to_string(), failed }))
    }
}

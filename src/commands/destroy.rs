//! `sbx destroy ID...`: remove sandboxes; already gone counts as success.

use super::Context;
use crate::error::Result;
use crate::model::names::SandboxId;

pub fn exec(ids: &[SandboxId], purge: bool, ctx: &Context) -> Result<()> {
    let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
    let done = ctx.driver.destroy_purging(&ids, purge)?;
    tracing::debug!(removed = ?done.removed, already_gone = ?done.already_gone, "destroyed");
    if ctx.json() {
        ctx.out.json_line(&done)?;
    }
    Ok(())
}

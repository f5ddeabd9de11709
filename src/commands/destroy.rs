//! `sbx destroy ID...`: remove sandboxes; already gone counts as success.

use super::Context;
use crate::error::Result;
use crate::spec::parse_id;

pub fn exec(ids: &[String], purge: bool, ctx: &Context) -> Result<()> {
    let ids: Vec<String> = ids.iter().map(|i| parse_id(i)).collect::<Result<_, _>>()?;
    let done = ctx.driver.destroy_purging(&ids, purge)?;
    tracing::debug!(removed = ?done.removed, already_gone = ?done.already_gone, "destroyed");
    if ctx.json() {
        ctx.out.json_line(&done)?;
    }
    Ok(())
}

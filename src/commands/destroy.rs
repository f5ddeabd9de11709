//! `sbx destroy ID...`: remove sandboxes; already gone counts as success.

use super::Context;
use crate::error::Result;
use crate::model::names::SandboxId;

pub fn exec(ids: &[SandboxId], purge: bool, ctx: &Context) -> Result<()> {
    let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
    let done = ctx.driver.destroy_purging(&ids, purge)?;
    tracing::debug!(removed = ?done.removed, already_gone = ?done.already_gone, "destroyed");
    // Named checkpoints outlive their sandbox: said, so none is forgotten on disk.
    for id in &ids {
        let kept = ctx.driver.checkpoints(Some(id)).unwrap_or_default();
        if !kept.is_empty() {
            let names: Vec<&str> = kept.iter().map(|m| m.name.as_str()).collect();
            ctx.out.note(
                "checkpoints_kept",
                &format!(
                    "kept {} checkpoint(s) of {id} ({}): `sbx fork {id} --from NAME` carries on from one, \
                     `sbx checkpoints rm {id} NAME...` removes them",
                    kept.len(),
                    names.join(", ")
                ),
            );
        }
    }
    if ctx.json() {
        ctx.out.json_line(&done)?;
    }
    Ok(())
}

//! `sbx inspect ID`: the sandbox's record as JSON.

use super::Context;
use crate::error::Result;
use crate::model::names::SandboxId;

pub fn exec(id: &SandboxId, ctx: &Context) -> Result<()> {
    let rec = ctx.driver.inspect(id)?;
    let text = serde_json::to_string_pretty(&rec).map_err(crate::output::json_error)?;
    ctx.out.data(&format!("{text}\n"))
}

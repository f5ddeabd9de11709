//! `sbx inspect ID`: the sandbox's record as JSON.

use super::Context;
use crate::error::Result;
use crate::spec::parse_id;

pub fn exec(id: &str, ctx: &Context) -> Result<()> {
    let id = parse_id(id)?;
    let rec = ctx.driver.inspect(&id)?;
    let text = serde_json::to_string_pretty(&rec).map_err(crate::output::json_error)?;
    ctx.out.data(&format!("{text}\n"))
}

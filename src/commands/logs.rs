//! `sbx logs ID [HANDLE]`: the sandbox's output, or a background process's.

use super::Context;
use crate::cli::LogsArgs;
use crate::error::Result;
use crate::workbench;

pub fn exec(a: &LogsArgs, ctx: &Context) -> Result<u8> {
    if let Some(h) = &a.handle {
        workbench::validate_handle(h)?;
    }
    let code = workbench::logs(&ctx.driver.open(&a.id)?, a.handle.as_deref(), a.follow, a.tail)?;
    Ok(if code == 0 { 0 } else { 1 })
}

//! `sbx logs ID [HANDLE]`: the sandbox's output, or a background process's.

use super::Context;
use crate::cli::LogsArgs;
use crate::error::Result;
use crate::spec::parse_id;
use crate::workbench;

pub fn exec(a: &LogsArgs, ctx: &Context) -> Result<u8> {
    let id = parse_id(&a.id)?;
    if let Some(h) = &a.handle {
        workbench::validate_handle(h)?;
    }
    let driver = &ctx.driver;
    let target = driver.owned(&id)?;
    let code = workbench::logs(driver.docker(), &target, a.handle.as_deref(), a.follow, a.tail)
        .map_err(|e| super::named(e, &target, &id))?;
    Ok(if code == 0 { 0 } else { 1 })
}

//! `sbx serve`: hand the server the driver and the TTL watchdog starter.

use super::Context;
use crate::cli::ServeArgs;
use crate::error::Result;

pub fn exec(a: &ServeArgs, ctx: &Context) -> Result<()> {
    let watchdog = |id: &str, watched: &std::path::Path| super::watchdog::spawn(id, watched, &ctx.dirs);
    crate::serve::run(a, &ctx.driver, &watchdog, &ctx.out)
}

//! `sbx backup ID > state.tar` and `sbx restore ID < state.tar`.

use super::Context;
use crate::error::{Error, Invalid, Result};
use crate::spec::parse_id;
use crate::workbench;
use crate::workbench::transfer::{parse_max_bytes, skipped_warning, Limits};

pub fn backup(id: &str, max_bytes: &str, ctx: &Context) -> Result<()> {
    let id = parse_id(id)?;
    let limits = Limits { max_bytes: parse_max_bytes(max_bytes)?, ..Limits::default() };
    if nix::unistd::isatty(1).unwrap_or(false) {
        return Err(Invalid::new("stdout", "a terminal", "a tar stream would go to the terminal")
            .hint(format!("redirect it: sbx backup {id} > state.tar"))
            .into());
    }
    let driver = &ctx.driver;
    let target = driver.owned(&id)?;
    let mut out = std::io::stdout().lock();
    let skipped =
        workbench::backup(driver.docker(), &target, &mut out, &limits).map_err(|e| super::named(e, &target, &id))?;
    std::io::Write::flush(&mut out).map_err(|e| Error::io("writing stdout", e))?;
    if let Some(w) = skipped_warning(&skipped) {
        ctx.out.warn("skipped", &w);
    }
    Ok(())
}

pub fn restore(id: &str, max_bytes: &str, ctx: &Context) -> Result<()> {
    let id = parse_id(id)?;
    let limits = Limits { max_bytes: parse_max_bytes(max_bytes)?, ..Limits::default() };
    if nix::unistd::isatty(0).unwrap_or(false) {
        return Err(Invalid::new("stdin", "a terminal", "restore reads a tar stream")
            .hint(format!("sbx restore {id} < state.tar"))
            .into());
    }
    let driver = &ctx.driver;
    let target = driver.owned(&id)?;
    workbench::restore(driver.docker(), &target, std::io::stdin().lock(), &limits)
        .map_err(|e| super::named(e, &target, &id))
}

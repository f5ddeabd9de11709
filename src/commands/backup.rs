//! `sbx backup ID > state.tar` and `sbx restore ID < state.tar`.

use super::Context;
use crate::error::{Error, Invalid, Result};
use crate::model::names::SandboxId;
use crate::workbench;
use crate::workbench::transfer::{parse_max_bytes, skipped_warning, Limits};

pub fn backup(id: &SandboxId, max_bytes: &str, ctx: &Context) -> Result<()> {
    let limits = Limits { max_bytes: parse_max_bytes(max_bytes)?, ..Limits::default() };
    if nix::unistd::isatty(1).unwrap_or(false) {
        return Err(Invalid::new("stdout", "a terminal", "a tar stream would go to the terminal")
            .hint(format!("redirect it: sbx backup {id} > state.tar"))
            .into());
    }
    let target = ctx.driver.open(id)?;
    let mut out = std::io::stdout().lock();
    let skipped = workbench::backup(&target, &mut out, &limits)?;
    std::io::Write::flush(&mut out).map_err(|e| Error::io("writing stdout", e))?;
    if let Some(w) = skipped_warning(&skipped) {
        ctx.out.warn("skipped", &w);
    }
    Ok(())
}

pub fn restore(id: &SandboxId, max_bytes: &str, ctx: &Context) -> Result<()> {
    let limits = Limits { max_bytes: parse_max_bytes(max_bytes)?, ..Limits::default() };
    if nix::unistd::isatty(0).unwrap_or(false) {
        return Err(Invalid::new("stdin", "a terminal", "restore reads a tar stream")
            .hint(format!("sbx restore {id} < state.tar"))
            .into());
    }
    workbench::restore(&ctx.driver.open(id)?, std::io::stdin().lock(), &limits)
}

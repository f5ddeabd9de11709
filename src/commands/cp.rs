//! `sbx cp SRC DST`: files and directories between host and sandbox.

use super::Context;
use crate::error::{Invalid, Result};
use crate::workbench::transfer::{parse_max_bytes, skipped_warning, Limits};
use crate::workbench::{self, CpSide};

pub fn exec(src: &str, dst: &str, max_bytes: &str, ctx: &Context) -> Result<()> {
    let (s, d) = (workbench::parse_cp_side(src)?, workbench::parse_cp_side(dst)?);
    // `-` is a tar stream, never a terminal's keystrokes or screen.
    use std::io::IsTerminal;
    if d == CpSide::Tar && std::io::stdout().is_terminal() {
        return Err(Invalid::new("cp destination", dst, "stdout is a terminal; a tar stream goes to a pipe or file")
            .hint(format!("sbx cp {src} - > copy.tar, or | tar -x"))
            .into());
    }
    if s == CpSide::Tar && std::io::stdin().is_terminal() {
        return Err(Invalid::new("cp source", src, "stdin is a terminal; `-` reads a tar archive from stdin")
            .hint(format!("tar -c FILES | sbx cp - {dst}"))
            .into());
    }
    let limits = Limits { max_bytes: parse_max_bytes(max_bytes)?, ..Limits::default() };
    // The sandbox side is proven this host's (and then named by its container id).
    let open = |side: CpSide| -> Result<CpSide<workbench::Target>> {
        Ok(match side {
            CpSide::Sandbox { id, path } => CpSide::Sandbox { id: ctx.driver.open(&id)?, path },
            CpSide::Host(p) => CpSide::Host(p),
            CpSide::Tar => CpSide::Tar,
        })
    };
    let (s, d) = (open(s)?, open(d)?);
    let skipped = workbench::cp(&s, &d, &limits)?;
    if let Some(w) = skipped_warning(&skipped) {
        ctx.out.warn("skipped", &w);
    }
    Ok(())
}

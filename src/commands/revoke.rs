//! `sbx revoke ID KIND`: cut one route now; `egress` removes the egress
//! gate; `all` destroys the sandbox.

use super::Context;
use crate::error::{Invalid, Result};
use crate::model::names::SandboxId;
use crate::spec::{validate_kind, EGRESS_KIND};

pub fn exec(id: &SandboxId, kind: &str, ctx: &Context) -> Result<()> {
    let driver = &ctx.driver;
    if kind == "all" {
        let done = driver.destroy(&[id.to_string()])?;
        if ctx.json() {
            ctx.out.json_line(&done)?;
        }
        return Ok(());
    }
    // `egress` is reserved for the gate, so it is no route kind a user names.
    if kind != EGRESS_KIND {
        validate_kind(kind).map_err(|r| Invalid::new("route kind", kind, r))?;
    }
    let r = driver.revoke(id, kind)?;
    if r.already {
        ctx.out.note("already_revoked", &format!("route {} of {} was already revoked", r.kind, r.id));
    } else if r.cut.len() > 1 {
        let msg = format!("revoked {} (network {}, shared with routes {})", r.kind, r.network, r.cut.join(", "));
        ctx.out.note("revoked_shared", &msg);
    }
    if ctx.json() {
        ctx.out.json_line(&r)?;
    }
    Ok(())
}

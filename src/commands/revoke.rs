//! `sbx revoke ID KIND`: cut one route now; `all` destroys the sandbox.

use crate::error::{Invalid, Result};
use crate::spec::{parse_id, validate_kind};
use crate::{Dirs, Env};

pub fn exec(id: &str, kind: &str, json: bool, env: &Env, dirs: &Dirs) -> Result<()> {
    let id = parse_id(id)?;
    let driver = crate::real_driver(env, dirs);
    if kind == "all" {
        let done = driver.destroy(&[id])?;
        if json {
            super::json_line(&done)?;
        }
        return Ok(());
    }
    validate_kind(kind).map_err(|r| Invalid::new("route kind", kind, r))?;
    let r = driver.revoke(&id, kind)?;
    if r.already {
        crate::messages::note("already_revoked", &format!("route {} of {} was already revoked", r.kind, r.id));
    } else if r.cut.len() > 1 {
        let msg = format!("revoked {} (network {}, shared with routes {})", r.kind, r.network, r.cut.join(", "));
        crate::messages::note("revoked_shared", &msg);
    }
    if json {
        super::json_line(&r)?;
    }
    Ok(())
}

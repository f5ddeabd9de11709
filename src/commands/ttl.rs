//! `sbx ttl ID DURATION`: move a sandbox's expiry to DURATION from now.

use super::Context;
use crate::error::Result;
use crate::model::names::SandboxId;
use crate::spec::parse_ttl;

pub fn exec(id: &SandboxId, duration: &str, ctx: &Context) -> Result<()> {
    let ttl = parse_ttl(duration)?;
    let (at, unwatched) = ctx.driver.set_ttl(id, ttl)?;
    if let Some(watched) = unwatched {
        super::watchdog::spawn(id, &watched, &ctx.dirs)?;
    }
    let expires_at = humantime::format_rfc3339_millis(at).to_string();
    if ctx.json() {
        ctx.out.json_line(&serde_json::json!({ "id": id, "expires_at": expires_at }))
    } else {
        ctx.out.data(&format!("{expires_at}\n"))
    }
}

//! `sbx ttl ID DURATION`: move a sandbox's expiry to DURATION from now.

use crate::error::Result;
use crate::spec::{parse_id, parse_ttl};
use crate::{Dirs, Env};

pub fn exec(id: &str, duration: &str, json: bool, env: &Env, dirs: &Dirs) -> Result<()> {
    let id = parse_id(id)?;
    let ttl = parse_ttl(duration)?;
    let (at, unwatched) = crate::real_driver(env, dirs).set_ttl(&id, ttl)?;
    if let Some(socket) = unwatched {
        super::watchdog::spawn(&id, &socket, dirs)?;
    }
    let expires_at = humantime::format_rfc3339_millis(at).to_string();
    if json {
        super::json_line(&serde_json::json!({ "id": id, "expires_at": expires_at }))
    } else {
        super::out(&format!("{expires_at}\n"))
    }
}

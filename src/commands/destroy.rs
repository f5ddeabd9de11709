//! `sbx destroy ID...`: remove sandboxes; already gone counts as success.

use crate::error::Result;
use crate::spec::parse_id;
use crate::{Dirs, Env};

pub fn exec(ids: &[String], purge: bool, json: bool, env: &Env, dirs: &Dirs) -> Result<()> {
    let ids: Vec<String> = ids.iter().map(|i| parse_id(i)).collect::<Result<_, _>>()?;
    let done = crate::real_driver(env, dirs).destroy_purging(&ids, purge)?;
    tracing::debug!(removed = ?done.removed, already_gone = ?done.already_gone, "destroyed");
    if json {
        super::json_line(&done)?;
    }
    Ok(())
}

//! `sbx volumes [rm KEY...]`: the persistent session volumes.

use super::Context;
use crate::error::Result;

/// `sbx volumes`: each volume, its session, size and users.
pub fn list(ctx: &Context) -> Result<()> {
    let list = ctx.driver.volumes()?;
    if ctx.json() {
        return ctx.out.json_line(&list);
    }
    let mut t = String::from("VOLUME                  SESSION         SIZE        LIMIT       IN USE BY\n");
    for v in &list {
        let users = if v.in_use_by.is_empty() { "-".to_string() } else { v.in_use_by.join(",") };
        let limit = match (v.limit, v.mounted) {
            (None, _) => "unbounded".to_string(),
            (Some(n), Some(false)) => format!("{n} (unmounted)"),
            (Some(n), _) => n.to_string(),
        };
        t.push_str(&format!("{:<23} {:<15} {:<11} {:<11} {}\n", v.name, v.session, v.bytes, limit, users));
    }
    ctx.out.data(&t)
}

/// `sbx volumes rm KEY...`: each session's volume, directory and lock file.
pub fn rm(keys: &[String], ctx: &Context) -> Result<()> {
    let keys: Vec<String> = keys.iter().map(|k| crate::spec::parse_session(k)).collect::<Result<_, _>>()?;
    for k in &keys {
        let name = ctx.driver.remove_volume(k)?;
        if ctx.json() {
            ctx.out.json_line(&serde_json::json!({ "removed": name, "session": k }))?;
        } else {
            ctx.out.data(&format!("{name}\n"))?;
        }
    }
    Ok(())
}

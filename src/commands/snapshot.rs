//! `sbx checkpoint`, `sbx checkpoints [rm]`, `sbx fork`, `sbx hibernate` (see
//! `sandbox::ops::lifecycle::snapshot`). The checkpoint's name alone on
//! stdout; `--json` its record.

use super::Context;
use crate::cli::{CheckpointArgs, CheckpointLimits, CheckpointsAction, CheckpointsArgs, ForkArgs, HibernateArgs};
use crate::error::{Invalid, Result};
use crate::host::checkpoints::{self, Limits, Meta};

pub fn checkpoint(a: &CheckpointArgs, ctx: &Context) -> Result<()> {
    let name = match &a.name {
        Some(n) => n.clone(),
        None => format!(
            "c-{}",
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
        ),
    };
    if !checkpoints::valid_name(&name) || checkpoints::transient(&name) {
        return Err(Invalid::new(
            "--name",
            &name,
            "a checkpoint's name is 1 to 64 letters, digits, '.', '_', '-', starting with a letter or digit, \
             and neither `hibernated` (hibernate's own) nor starting with `fork-` (fork's own)",
        )
        .into());
    }
    let limits = limits(&a.limits)?;
    (ctx.catch_signals)();
    let meta = ctx.driver.checkpoint(&a.id, &name, limits)?;
    if ctx.json() {
        return ctx.out.json_line(&meta_json(&meta));
    }
    ctx.out.data(&format!("{}\n", meta.name))
}

pub fn hibernate(a: &HibernateArgs, ctx: &Context) -> Result<()> {
    let limits = limits(&a.limits)?;
    (ctx.catch_signals)();
    let done = ctx.driver.hibernate(&a.id, limits)?;
    if ctx.json() {
        ctx.out.json_line(&done)?;
    }
    Ok(())
}

/// The children's ids, one a line; `--json`: a list of what create prints for each.
pub fn fork(a: &ForkArgs, ctx: &Context) -> Result<()> {
    let limits = limits(&a.limits)?;
    (ctx.catch_signals)();
    let made = ctx.driver.fork(&a.id, a.count, a.from.as_deref(), limits, ctx.env.docker_host.as_deref())?;
    for c in made.iter().filter(|c| c.record.expires_at.is_some()) {
        if let Err(e) = super::watchdog::spawn(&c.record.id, &c.watched, &ctx.dirs) {
            ctx.out.warn(
                "ttl_watchdog",
                &format!("could not start the TTL watchdog of {} ({e}); run `sbx gc` from cron", c.record.id),
            );
        }
    }
    if ctx.json() {
        return ctx.out.json_line(&made);
    }
    for w in made.iter().flat_map(|c| &c.warnings) {
        ctx.out.warn("warning", w);
    }
    let ids: String = made.iter().map(|c| format!("{}\n", c.record.id)).collect();
    ctx.out.data(&ids)
}

pub fn exec(a: &CheckpointsArgs, ctx: &Context) -> Result<()> {
    if let Some(CheckpointsAction::Rm { id, names }) = &a.action {
        ctx.driver.checkpoints_rm(id, names)?;
        if ctx.json() {
            return ctx.out.json_line(&serde_json::json!({ "id": id.as_str(), "removed": names }));
        }
        return Ok(());
    }
    let list = ctx.driver.checkpoints(a.id.as_deref())?;
    if ctx.json() {
        return ctx.out.json_line(&list.iter().map(meta_json).collect::<Vec<_>>());
    }
    let mut t = String::from("SANDBOX           NAME                              SIZE         CREATED\n");
    for m in &list {
        let when = humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(m.created));
        t.push_str(&format!("{:<17} {:<33} {:<12} {when}\n", m.sandbox, m.name, m.size));
    }
    ctx.out.data(&t)
}

fn limits(a: &CheckpointLimits) -> Result<Limits> {
    let mut l = Limits::default();
    if let Some(s) = &a.max_checkpoint_size {
        l.per_sandbox =
            crate::model::size::parse_bytes(s).map_err(|e| Invalid { what: "--max-checkpoint-size", ..e })?;
    }
    if let Some(s) = &a.max_checkpoints_total {
        l.total = crate::model::size::parse_bytes(s).map_err(|e| Invalid { what: "--max-checkpoints-total", ..e })?;
    }
    Ok(l)
}

/// A checkpoint as `--json` shows it: no MAC, no spec (its labels hold the
/// sandbox's ownership token).
fn meta_json(m: &Meta) -> serde_json::Value {
    serde_json::json!({ "sandbox": m.sandbox, "name": m.name, "size": m.size, "created": m.created })
}

//! `sbx create`: validate, build the sandbox, wait for its socket, print its id.

use super::Context;
use crate::error::Result;
use crate::spec::{CreateRequest, SandboxSpec};

pub fn exec(mut req: CreateRequest, ctx: &Context) -> Result<()> {
    // The environment's defaults; an option given on the command line wins.
    req.strict_egress |= ctx.env.strict_egress;
    if req.seccomp_profile.is_none() {
        req.seccomp_profile = ctx.env.seccomp_profile.clone();
    }
    if req.runtime.is_none() {
        req.runtime = ctx.env.runtime.clone();
    }
    if let (None, Some(v)) = (req.pull, ctx.env.pull.as_deref()) {
        req.pull = Some(crate::spec::PullPolicy::from_env(v)?);
    }
    // Paths of this machine mean nothing to a remote engine: refused before they are looked at.
    crate::spec::refuse_host_paths(&req, ctx.driver.engine()?)?;
    fold_memory(&mut req, ctx)?;
    let spec = SandboxSpec::from_request(&req, ctx.env.docker_host.as_deref())?;
    // From here on a signal must not kill sbx before it has cleaned up.
    (ctx.catch_signals)();
    let created = ctx.driver.create(&spec)?;
    if created.record.expires_at.is_some() {
        if let Err(e) = super::watchdog::spawn(&created.record.id, &created.watched, &ctx.dirs) {
            // The sandbox stands; `sbx gc` still reaps it once expired.
            ctx.out.warn(
                "ttl_watchdog",
                &format!("could not start the TTL watchdog ({e}); run `sbx gc` from cron to enforce TTLs"),
            );
        }
    }
    if ctx.json() {
        // The warnings are in the result object already.
        ctx.out.json_line(&created)
    } else {
        for w in &created.warnings {
            ctx.out.warn("warning", w);
        }
        ctx.out.data(&format!("{}\n", created.record.id))
    }
}

/// No --memory: an eighth of the engine's host where sbx can know its size
/// (see `host::memory`).
pub(super) fn fold_memory(req: &mut CreateRequest, ctx: &Context) -> Result<()> {
    if req.memory_mib.is_none() {
        let total = crate::host::memory::engine_mem_total_mib(ctx.driver.engine()?);
        req.memory_mib = Some(crate::host::memory::default_memory_mib(total));
    }
    Ok(())
}

//! `sbx serve`: check its create defaults as `create` would, then hand the
//! server the driver, the TTL watchdog starter and the pools' refiller.

use super::Context;
use crate::cli::{ServeArgs, SERVE_DEFAULTS};
use crate::error::{Invalid, Result};

/// How long serve's watchdog and refiller starts wait for the answer to leave.
const AFTER_THE_ANSWER: std::time::Duration = std::time::Duration::from_millis(20);

pub fn exec(a: &ServeArgs, ctx: &Context) -> Result<()> {
    let mut a = a.clone();
    a.defaults = defaults(&a.defaults, &[], "serve", ctx)?;
    // Off the request's path, and a moment after it: a spawn holds its
    // thread until the child execs (vfork), and the children (the claim's
    // watchdog, the pool's refiller and the docker CLIs it starts at once)
    // take both cores of a small host while the client waits for its
    // answer. A failure is only logged either way: gc reaps an expired
    // sandbox without a watchdog, and the next claim starts the refiller.
    let watchdog = |id: &str, watched: &std::path::Path| {
        let (id, watched, dirs) = (id.to_string(), watched.to_path_buf(), ctx.dirs.clone());
        std::thread::spawn(move || {
            std::thread::sleep(AFTER_THE_ANSWER);
            if let Err(e) = super::watchdog::spawn(&id, &watched, &dirs) {
                tracing::warn!(error = %e, %id, "no TTL watchdog; `sbx gc` still reaps it once expired");
            }
        });
        Ok(())
    };
    let refill = |pool: &crate::host::pool::Pool| {
        let (pool, dirs) = (pool.clone(), ctx.dirs.clone());
        std::thread::spawn(move || {
            std::thread::sleep(AFTER_THE_ANSWER);
            super::pool::ensure_refiller(&pool, &dirs)
        });
    };
    let hooks = crate::serve::Hooks { watchdog: &watchdog, refill: &refill };
    crate::serve::run(&a, ctx.env.docker_host.as_deref(), &ctx.driver, hooks, &ctx.out)
}

/// The create flags `command` (serve, mcp) takes as every sandbox's
/// defaults, checked as `create` checks them, with the environment's and
/// the memory default folded in; one sandbox's flags (but `also`) refused.
pub(super) fn defaults(
    d: &crate::spec::CreateRequest,
    also: &[&str],
    command: &'static str,
    ctx: &Context,
) -> Result<crate::spec::CreateRequest> {
    let allowed: Vec<&str> = SERVE_DEFAULTS.iter().chain(also).copied().collect();
    let one_sandbox = super::pool::given_flags(d, &allowed);
    if !one_sandbox.is_empty() {
        return Err(Invalid::new(
            command,
            one_sandbox.join(" "),
            "these are one sandbox's, not defaults for every sandbox sbx serve makes",
        )
        .hint(
            "an E2B create sets its own timeout, envVars and network; \
             `--allow-internet` lets a create ask for observe mode",
        )
        .into());
    }
    // The environment's defaults and the memory default, as `create` folds them in.
    let d = super::pool::with_env(d.clone(), ctx)?;
    crate::spec::refuse_host_paths(&d, ctx.driver.engine()?)?;
    Ok(d)
}

//! `sbx mcp`: hand the session the driver, the TTL watchdog starter, the
//! signals and stdio, with stdout kept for JSON-RPC alone.

use std::os::fd::{AsFd, OwnedFd};

use super::Context;
use crate::cli::McpArgs;
use crate::error::{Error, Result};

pub fn exec(a: &McpArgs, ctx: &Context) -> Result<()> {
    let mut a = a.clone();
    a.defaults = super::serve::defaults(&a.defaults, &["ttl"], "mcp", ctx)?;
    let watchdog = |id: &str, watched: &std::path::Path| super::watchdog::spawn(id, watched, &ctx.dirs);
    let refill = |pool: &crate::host::pool::Pool| super::pool::ensure_refiller(pool, &ctx.dirs);
    let replies = rpc_stdout()?;
    let watch = (ctx.watch_signals)().map_err(|e| Error::io("watching for SIGTERM", e))?;
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let replies = crate::mcp::Replies::new(std::fs::File::from(replies));
    crate::mcp::run(
        &a,
        ctx.env.docker_host.as_deref(),
        &ctx.driver,
        crate::serve::Hooks { watchdog: &watchdog, refill: &refill },
        (&mut input, replies),
        &watch,
        &ctx.out,
    )
}

/// The process's stdout, moved to a descriptor of its own for JSON-RPC;
/// descriptor 1 then points at stderr, so nothing else that writes there
/// (a child that inherits it, a stray print) can break the protocol.
fn rpc_stdout() -> Result<OwnedFd> {
    let io = |e: std::io::Error| Error::io("keeping stdout for JSON-RPC", e);
    // Close-on-exec: no docker child holds the protocol's descriptor.
    let kept = std::io::stdout().as_fd().try_clone_to_owned().map_err(io)?;
    nix::unistd::dup2(2, 1).map_err(|e| io(e.into()))?;
    Ok(kept)
}

//! `sbx stop`, `start`, `pause`, `resume`: one sandbox's processes end, run
//! again, freeze or thaw (see `sandbox::ops::lifecycle`). Nothing on stdout but
//! `--json`'s result; "already" is a note on stderr.

use super::Context;
use crate::cli::{StartArgs, StopArgs};
use crate::error::{Invalid, Result};
use crate::model::names::SandboxId;
use crate::sandbox::Changed;
use crate::spec::{parse_duration, DEFAULT_SOCKET_WAIT};

/// `docker stop --time` is a 32-bit count of seconds; nobody waits a day.
const MAX_GRACE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

pub fn stop(a: &StopArgs, ctx: &Context) -> Result<()> {
    let id = &a.id;
    let grace = parse_duration("--grace", &a.grace)?;
    if grace > MAX_GRACE {
        return Err(Invalid::new("--grace", &a.grace, "at most 24h").hint("give a shorter grace, e.g. 30s").into());
    }
    report(ctx.driver.stop(id, grace)?, "already stopped", ctx)
}

pub fn start(a: &StartArgs, ctx: &Context) -> Result<()> {
    let id = &a.id;
    let wait = a.socket_wait.as_deref().map(|w| parse_duration("--socket-wait", w)).transpose()?;
    // Ctrl-C while it boots: the driver stops it again before sbx exits.
    (ctx.catch_signals)();
    let done = ctx.driver.start(id, wait.unwrap_or(DEFAULT_SOCKET_WAIT))?;
    if let Some(watched) = &done.unwatched {
        super::watchdog::spawn(id, watched, &ctx.dirs)?;
    }
    report(done, "", ctx)
}

pub fn pause(id: &SandboxId, ctx: &Context) -> Result<()> {
    report(ctx.driver.pause(id)?, "already paused", ctx)
}

pub fn resume(id: &SandboxId, ctx: &Context) -> Result<()> {
    (ctx.catch_signals)();
    let done = ctx.driver.resume(id)?;
    // Restored after a reboot or an engine restart: its watchdog is gone.
    if let Some(watched) = &done.unwatched {
        super::watchdog::spawn(id, watched, &ctx.dirs)?;
    }
    report(done, "", ctx)
}

fn report(done: Changed, already: &str, ctx: &Context) -> Result<()> {
    if done.already && !already.is_empty() {
        ctx.out.note("already", &format!("sandbox {} was {already}", done.id));
    }
    if ctx.json() {
        ctx.out.json_line(&done)?;
    }
    Ok(())
}

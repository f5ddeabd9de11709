//! The TTL watchdog: a detached `sbx __watchdog ID` that destroys the
//! sandbox at its expiry, long after `sbx create` and its shell are gone.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};

use super::Context;
use crate::error::{Error, Result};
use crate::host::env::Dirs;

pub fn exec(id: &crate::model::names::SandboxId, dir: &Path, ctx: &Context) -> Result<()> {
    ctx.driver.watch(id, dir)
}

/// Start the watchdog in its own session with no terminal and no inherited
/// pipes, so `id=$(sbx create --ttl ...)` returns at once and a closing
/// shell's SIGHUP does not reach it. `dir`: it ends when that is gone (a
/// local sandbox's socket directory, a remote one's expiry in the data
/// dir: see `Driver::watched`).
pub fn spawn(id: &str, dir: &Path, dirs: &Dirs) -> Result<()> {
    let args = [OsStr::new("__watchdog"), OsStr::new(id), OsStr::new("--dir"), dir.as_os_str()];
    spawn_detached(&args, dirs, "starting the TTL watchdog")
}

/// `sbx [dirs] ARGS` in the background, its stdio null, for the same
/// engine as this command. No pre_exec hook: with one, std forks (copying
/// the page tables of a many-threaded `sbx serve`, 2-3 ms a spawn on the
/// warm-pool claim's path); without, it spawns with vfork semantics. The
/// child leaves this session itself, first thing ([`detach`]).
pub fn spawn_detached(args: &[&OsStr], dirs: &Dirs, what: &str) -> Result<()> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding the sbx executable", e))?;
    let mut cmd = Command::new(exe);
    if let Some(d) = &dirs.socket_dir {
        cmd.arg("--socket-dir").arg(d);
    }
    if let Some(d) = &dirs.state_dir {
        cmd.arg("--data-dir").arg(d);
    }
    if let Some(c) = &dirs.context {
        cmd.arg("--context").arg(c);
    }
    cmd.args(args);
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let child = cmd.spawn().map_err(|e| Error::io(what, e))?;
    reap_and_keep(child);
    Ok(())
}

/// Children this process started and has not waited for. A one-shot
/// command exits and init reaps them; a long-running `sbx serve` would
/// gather one zombie per expired watchdog, so each spawn first collects
/// those that have exited.
fn reap_and_keep(child: std::process::Child) {
    static LIVE: std::sync::Mutex<Vec<std::process::Child>> = std::sync::Mutex::new(Vec::new());
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    live.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
    live.push(child);
}

/// A detached helper's first act: a session of its own, so the terminal's
/// Ctrl-C or hang-up that ends the command which started it does not end
/// it too. (Until this runs it shares that command's process group.)
pub fn detach() {
    let _ = nix::unistd::setsid();
}

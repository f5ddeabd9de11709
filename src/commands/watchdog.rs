//! The TTL watchdog: a detached `sbx __watchdog ID` that destroys the
//! sandbox at its expiry, long after `sbx create` and its shell are gone.

use std::os::unix::process::CommandExt;
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
    let exe = std::env::current_exe().map_err(|e| Error::io("finding the sbx executable", e))?;
    let mut cmd = Command::new(exe);
    if let Some(d) = &dirs.socket_dir {
        cmd.arg("--socket-dir").arg(d);
    }
    if let Some(d) = &dirs.state_dir {
        cmd.arg("--data-dir").arg(d);
    }
    // The same engine as the command that started it.
    if let Some(c) = &dirs.context {
        cmd.arg("--context").arg(c);
    }
    cmd.arg("__watchdog").arg(id).arg("--dir").arg(dir);
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| nix::unistd::setsid().map(|_| ()).map_err(std::io::Error::from));
    }
    cmd.spawn().map(|_| ()).map_err(|e| Error::io("starting the TTL watchdog", e))
}

//! `sbx exec` and `sbx shell`: run a command in a sandbox, its exit code
//! becoming sbx's.

use super::Context;
use crate::cli::ExecArgs;
use crate::error::{Invalid, Result};
use crate::model::names::SandboxId;
use crate::spec::{parse_env, UserSpec};
use crate::workbench::{self, ExecOpts};

pub fn exec(a: ExecArgs, ctx: &Context) -> Result<u8> {
    let envs = a.env.iter().map(|e| parse_env(e)).collect::<Result<Vec<_>, _>>()?;
    if let Some(w) = &a.workdir {
        if !w.starts_with('/') {
            return Err(Invalid::new("--workdir", w, "it must be an absolute path").into());
        }
    }
    // A command in the sandbox is the sandbox: never as the caller's ids either.
    let user = match a.user.as_deref().map(UserSpec::parse).transpose()? {
        Some(u) => Some(u.not_reserved(&ctx.driver.reserved_ids()?)?.outside_sbx_range("-u")?),
        None => None,
    };
    let user = user.map(|u| format!("{}:{}", u.uid, u.gid));
    if a.detach && (a.interactive || a.tty) {
        return Err(Invalid::new("exec", "-d", "a background process has no terminal or stdin: drop -i/-t").into());
    }
    let opts = ExecOpts { interactive: a.interactive, tty: a.tty, env: envs, workdir: a.workdir, user };
    let driver = &ctx.driver;
    let target = driver.open(&a.id)?;
    if opts.user.as_deref().is_some_and(|u| u.starts_with("0:")) {
        refuse_root_with_writable_mount(&driver.inspect_one(&a.id)?.full)?;
    }
    if a.detach {
        let (handle, _pid) = workbench::exec_detached(&target, &opts, &workbench::new_handle(), &a.command)?;
        ctx.out.data(&format!("{handle}\n"))?;
        return Ok(0);
    }
    // Signals reaching sbx go on to the command.
    let watch = (ctx.watch_signals)().map_err(|e| crate::error::Error::io("watching for signals", e))?;
    let code = workbench::exec_watched(&target, &opts, &a.command, &watch)?;
    Ok(code.clamp(0, 255) as u8)
}

/// `exec -u 0` where the sandbox has a writable host mount: what root makes
/// there, links included, is root's, the one owner `sbx cp` follows a link
/// of (as `create --user 0 --rw` is refused). /run/sandbox is sbx's own.
fn refuse_root_with_writable_mount(inspect: &serde_json::Value) -> Result<()> {
    let mounts = inspect["Mounts"].as_array().map(Vec::as_slice).unwrap_or_default();
    let writable = mounts.iter().find(|m| {
        m["Type"] == "bind" && m["RW"] == true && m["Destination"] != crate::model::paths::SANDBOX_SOCKET_DIR
    });
    match writable {
        Some(m) => Err(Invalid::new(
            "--user",
            "0",
            format!(
                "the sandbox has the host directory {} mounted writable at {}: what root makes there, links included, \
                 is root's, and root's links are the ones sbx cp follows on the host",
                m["Source"].as_str().unwrap_or_default(),
                m["Destination"].as_str().unwrap_or_default()
            ),
        )
        .hint("run the command as the sandbox's user (drop -u) or another non-root uid")
        .into()),
        None => Ok(()),
    }
}

pub fn shell(id: &SandboxId, ctx: &Context) -> Result<u8> {
    let tty = nix::unistd::isatty(0).unwrap_or(false) && nix::unistd::isatty(1).unwrap_or(false);
    let code = workbench::shell(&ctx.driver.open(id)?, tty)?;
    Ok(code.clamp(0, 255) as u8)
}

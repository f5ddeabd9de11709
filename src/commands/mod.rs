//! One file per subcommand: each turns parsed arguments into driver calls
//! and prints the result (data on stdout, everything else on stderr).

mod audit;
mod backup;
mod connect;
mod cp;
mod create;
mod destroy;
mod doctor;
mod exec;
mod gc;
mod inspect;
mod logs;
mod ls;
mod port_forward;
mod ps;
mod revoke;
mod stats;
mod ttl;
pub(crate) mod watchdog;

use std::io::Write;

use crate::cli::{Cli, Command};
use crate::error::{Error, Result};
use crate::{Dirs, Env};

/// Run the command; Ok carries the exit code (`exec` passes its command's on).
pub fn dispatch(cli: Cli, env: &Env) -> Result<u8> {
    let json = cli.json;
    // An empty SBX_SOCKET_DIR / SBX_DATA_DIR means unset, as for most path variables.
    let dirs = Dirs {
        socket_dir: cli.socket_dir.filter(|d| !d.as_os_str().is_empty()).or_else(|| env.socket_dir.clone()),
        state_dir: cli.data_dir.filter(|d| !d.as_os_str().is_empty()).or_else(|| env.data_dir.clone()),
    };
    let dirs = &dirs;
    let done = |r: Result<()>| r.map(|()| 0u8);
    match cli.command {
        Command::Exec(a) => exec::exec(a, env, dirs),
        Command::Ps(a) => done(ps::ps(&a.id, json, env, dirs)),
        Command::Kill(a) => done(ps::kill(&a, env, dirs)),
        Command::Logs(a) => logs::exec(&a, env, dirs),
        Command::Shell(a) => exec::shell(&a.id, env, dirs),
        Command::Cp(a) => done(cp::exec(&a.src, &a.dst, &a.max_bytes, env, dirs)),
        Command::Stats(a) => done(stats::exec(&a.ids, a.watch, json, env, dirs)),
        Command::PortForward(a) => done(port_forward::exec(&a.id, &a.ports, env, dirs)),
        Command::WaitPort(a) => done(port_forward::wait_port(&a, env, dirs)),
        Command::Backup(a) => done(backup::backup(&a.id, &a.max_bytes, env, dirs)),
        Command::Restore(a) => done(backup::restore(&a.id, &a.max_bytes, env, dirs)),
        Command::Create(a) => done(create::exec(*a, json, env, dirs)),
        Command::Connect(a) => done(connect::exec(&a.id, &a.timeout, env, dirs)),
        Command::Revoke(a) => done(revoke::exec(&a.id, &a.kind, json, env, dirs)),
        Command::Destroy(a) => done(destroy::exec(&a.ids, a.purge, json, env, dirs)),
        Command::Volumes(a) => match a.action {
            None => done(volumes(json, env, dirs)),
            Some(crate::cli::VolumesAction::Rm { keys }) => done(volumes_rm(&keys, json, env, dirs)),
        },
        Command::Ls => done(ls::exec(json, env, dirs)),
        Command::Inspect(a) => done(inspect::exec(&a.id, env, dirs)),
        Command::Audit(a) => done(audit::exec(&a.id, json, env, dirs)),
        Command::Ttl(a) => done(ttl::exec(&a.id, &a.duration, json, env, dirs)),
        Command::Gc(a) => done(gc::exec(a.dry_run, json, env, dirs)),
        Command::Doctor(a) => done(doctor::exec(&a.routes, json, env, dirs)),
        Command::Probe(a) => done(crate::checks::probe::serve(&a.targets).map_err(|e| Error::io("probe", e))),
        Command::Watchdog(a) => done(watchdog::exec(&a.id, &a.dir, env, dirs)),
    }
}

/// Prove `id` is a sandbox of this host before touching it (issue 9
/// finding 9); returns the full container id to give docker.
pub(crate) fn owned(driver: &crate::sandbox::Driver, id: &str) -> Result<String> {
    driver.owned(id)
}

/// Errors about `target` (the container id a command acted on) name the
/// sandbox id the user gave instead.
pub(crate) fn named(e: Error, target: &str, id: &str) -> Error {
    match e {
        Error::NotFound { id: t } => Error::NotFound { id: t.replace(target, id) },
        Error::HelperMissing { id: t } if t == target => Error::HelperMissing { id: id.to_string() },
        Error::NoShell { id: t, tried } if t == target => Error::NoShell { id: id.to_string(), tried },
        Error::Explained(x) => Error::Explained(x.named(target, id)),
        Error::Io { context, source } => Error::Io { context: context.replace(target, id), source },
        e => e,
    }
}

/// Write data to stdout; a closed pipe (`sbx ls | head -1`) is not an error.
pub(crate) fn out(text: &str) -> Result<()> {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::io("writing to stdout", e)),
    }
}

pub(crate) fn json_line<T: serde::Serialize>(v: &T) -> Result<()> {
    out(&format!("{}\n", serde_json::to_string(v).map_err(|e| Error::io("encoding JSON", e.into()))?))
}

/// A warning on stderr; under `--json` a `{"warning":..}` line (see `messages`).
pub(crate) fn warn(msg: &str) {
    crate::messages::warn("warning", msg);
}

/// `sbx volumes`: the persistent session volumes.
fn volumes(json: bool, env: &Env, dirs: &Dirs) -> Result<()> {
    let list = crate::real_driver(env, dirs).volumes()?;
    if json {
        return json_line(&list);
    }
    let mut t = String::from("VOLUME                  SESSION         SIZE        IN USE BY\n");
    for v in &list {
        let users = if v.in_use_by.is_empty() { "-".to_string() } else { v.in_use_by.join(",") };
        t.push_str(&format!("{:<23} {:<15} {:<11} {}\n", v.name, v.session, v.bytes, users));
    }
    out(&t)
}

/// `sbx volumes rm KEY...`: each session's volume, directory and lock file.
fn volumes_rm(keys: &[String], json: bool, env: &Env, dirs: &Dirs) -> Result<()> {
    let keys: Vec<String> = keys.iter().map(|k| crate::spec::parse_session(k)).collect::<Result<_, _>>()?;
    let driver = crate::real_driver(env, dirs);
    for k in &keys {
        let name = driver.remove_volume(k)?;
        if json {
            json_line(&serde_json::json!({ "removed": name, "session": k }))?;
        } else {
            out(&format!("{name}\n"))?;
        }
    }
    Ok(())
}

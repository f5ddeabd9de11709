//! One file per subcommand: each turns parsed arguments into driver calls
//! and prints the result (data on stdout, everything else on stderr).

mod audit;
mod connect;
mod create;
mod destroy;
mod doctor;
mod gc;
mod inspect;
mod ls;
mod revoke;
mod ttl;
pub(crate) mod watchdog;

use std::io::Write;

use crate::cli::{Cli, Command};
use crate::error::{Error, Result};
use crate::{Dirs, Env};

pub fn dispatch(cli: Cli, env: &Env) -> Result<()> {
    let json = cli.json;
    // An empty SBX_SOCKET_DIR / SBX_DATA_DIR means unset, as for most path variables.
    let dirs = Dirs {
        socket_dir: cli.socket_dir.filter(|d| !d.as_os_str().is_empty()),
        state_dir: cli.data_dir.filter(|d| !d.as_os_str().is_empty()),
    };
    let dirs = &dirs;
    match cli.command {
        Command::Create(a) => create::exec(*a, json, env, dirs),
        Command::Connect(a) => connect::exec(&a.id, env, dirs),
        Command::Revoke(a) => revoke::exec(&a.id, &a.kind, json, env, dirs),
        Command::Destroy(a) => destroy::exec(&a.ids, json, env, dirs),
        Command::Ls => ls::exec(json, env, dirs),
        Command::Inspect(a) => inspect::exec(&a.id, env, dirs),
        Command::Audit(a) => audit::exec(&a.id, json, env, dirs),
        Command::Ttl(a) => ttl::exec(&a.id, &a.duration, json, env, dirs),
        Command::Gc(a) => gc::exec(a.dry_run, json, env, dirs),
        Command::Doctor(a) => doctor::exec(&a.routes, json, env, dirs),
        Command::Probe(a) => crate::probe::serve(&a.targets).map_err(|e| Error::io("probe", e)),
        Command::Watchdog(a) => watchdog::exec(&a.id, &a.dir, env, dirs),
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

pub(crate) fn warn(msg: &str) {
    let _ = writeln!(std::io::stderr().lock(), "sbx: warning: {msg}");
}

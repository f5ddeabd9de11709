//! One file per subcommand: each `exec` takes the parsed arguments and a
//! [`Context`] (the driver, the printer, the environment), calls the
//! library and prints the result (data on stdout, everything else on
//! stderr, through `ctx.out`). `dispatch` picks the subcommand; nothing
//! here builds the production driver, so every command runs on the fake
//! in unit tests (see `tests.rs`).

mod audit;
mod backup;
mod completions;
mod connect;
mod cp;
mod create;
mod destroy;
mod doctor;
mod egress;
mod events;
mod exec;
mod files;
mod gc;
mod inspect;
mod lifecycle;
mod logs;
mod ls;
mod man;
mod mcp;
mod pool;
mod port_forward;
mod ps;
mod revoke;
mod secret;
mod serve;
mod snapshot;
mod stats;
mod ttl;
mod volumes;
mod watch;
pub(crate) mod watchdog;

use crate::cli::{Command, VolumesAction};
use crate::error::{Error, Result};
use crate::host::env::{Dirs, Env};
use crate::output::Printer;
use crate::sandbox::Driver;

/// What every command is handed: built once by `run` (the real docker) or
/// by a test (the fake).
pub struct Context {
    pub driver: Driver,
    pub out: Printer,
    pub env: Env,
    pub dirs: Dirs,
    /// From here on SIGINT/SIGTERM/SIGHUP only set a flag the driver polls,
    /// so sbx cleans up before it exits (`host::interrupt::install`); tests
    /// pass a no-op and keep their process's signals.
    pub catch_signals: fn(),
    /// For `exec` in the foreground: signals reaching sbx go on to the
    /// command (`Watch::install`); tests pass `Watch::manual`, which no
    /// signal reaches.
    pub watch_signals: fn() -> std::io::Result<crate::host::interrupt::Watch>,
}

impl Context {
    /// `--json`: results, warnings and errors as JSON lines.
    pub fn json(&self) -> bool {
        self.out.json()
    }
}

/// Run the command and report its error; returns the exit code (`exec`
/// passes its command's on). Library warnings made meanwhile go to `ctx.out`.
pub fn run(command: Command, ctx: &Context) -> u8 {
    ctx.out.scope(|| match dispatch(command, ctx) {
        Ok(code) => code,
        Err(e) => {
            ctx.out.error(&e);
            e.exit_code()
        }
    })
}

/// Run the command; Ok carries the exit code.
pub fn dispatch(command: Command, ctx: &Context) -> Result<u8> {
    let done = |r: Result<()>| r.map(|()| 0u8);
    match command {
        Command::Exec(a) => exec::exec(a, ctx),
        Command::Ps(a) => done(ps::ps(&a.id, ctx)),
        Command::Kill(a) => done(ps::kill(&a, ctx)),
        Command::Logs(a) => logs::exec(&a, ctx),
        Command::Shell(a) => exec::shell(&a.id, ctx),
        Command::Cp(a) => done(cp::exec(&a.src, &a.dst, &a.max_bytes, ctx)),
        Command::Files(a) => done(files::files(&a, ctx)),
        Command::Mkdir(a) => done(files::mkdir(&a, ctx)),
        Command::Watch(a) => watch::exec(&a, ctx),
        Command::Stats(a) => done(stats::exec(&a.ids, a.watch, ctx)),
        Command::PortForward(a) => done(port_forward::exec(&a.id, &a.ports, ctx)),
        Command::WaitPort(a) => done(port_forward::wait_port(&a, ctx)),
        Command::Backup(a) => done(backup::backup(&a.id, &a.max_bytes, ctx)),
        Command::Restore(a) => done(backup::restore(&a.id, &a.max_bytes, ctx)),
        // `--pool`: a claim, which may fall back to a create (pool -> create, never back).
        Command::Create(a) if a.pool.is_some() => done(pool::claim(*a, ctx)),
        Command::Create(a) => done(create::exec(*a, ctx)),
        Command::Connect(a) => done(connect::exec(&a.id, &a.timeout, ctx)),
        Command::Revoke(a) => done(revoke::exec(&a.id, &a.kind, ctx)),
        Command::Allow(a) => done(egress::change(&a, false, ctx)),
        Command::Deny(a) => done(egress::change(&a, true, ctx)),
        Command::Egress(a) => done(egress::exec(&a.action, ctx)),
        Command::Secret(a) => done(secret::exec(&a.action, ctx)),
        Command::Destroy(a) => done(destroy::exec(&a.ids, a.purge, ctx)),
        Command::Stop(a) => done(lifecycle::stop(&a, ctx)),
        Command::Start(a) => done(lifecycle::start(&a, ctx)),
        Command::Pause(a) => done(lifecycle::pause(&a.id, ctx)),
        Command::Resume(a) => done(lifecycle::resume(&a.id, ctx)),
        Command::Checkpoint(a) => done(snapshot::checkpoint(&a, ctx)),
        Command::Checkpoints(a) => done(snapshot::exec(&a, ctx)),
        Command::Hibernate(a) => done(snapshot::hibernate(&a, ctx)),
        Command::Fork(a) => done(snapshot::fork(&a, ctx)),
        Command::Volumes(a) => match a.action {
            None => done(volumes::list(ctx)),
            Some(VolumesAction::Rm { keys }) => done(volumes::rm(&keys, ctx)),
        },
        Command::Ls => done(ls::exec(ctx)),
        Command::Inspect(a) => done(inspect::exec(&a.id, ctx)),
        Command::Audit(a) => done(audit::exec(&a.id, ctx)),
        Command::Ttl(a) => done(ttl::exec(&a.id, &a.duration, ctx)),
        Command::Events(a) => events::exec(&a, ctx),
        Command::Gc(a) => done(gc::exec(a.dry_run, ctx)),
        Command::Doctor(a) => done(doctor::exec(&a.routes, a.runtime.as_deref(), ctx)),
        Command::Pool(a) => done(pool::exec(a.action, ctx)),
        Command::Serve(a) => done(serve::exec(&a, ctx)),
        Command::Mcp(a) => done(mcp::exec(&a, ctx)),
        Command::Completions(a) => done(completions::exec(a.shell, ctx)),
        Command::Man(a) => done(man::exec(&a.dir, ctx)),
        Command::PoolFill(a) => {
            watchdog::detach();
            done(pool::refill(&a.name, ctx))
        }
        Command::Probe(a) => done(crate::checks::probe::serve(&a.targets)),
        Command::AuditProbe(a) => done(crate::checks::audit::status_probe::serve(&a.container, &a.pid)),
        Command::Watchdog(a) => {
            watchdog::detach();
            done(watchdog::exec(&a.id, &a.dir, ctx))
        }
        Command::Gate(a) => done(crate::gate::run(a).map_err(|e| Error::io("egress gate", e))),
        Command::GateVault => match crate::gate::vault::push_stdin() {
            Ok(true) => done(Ok(())),
            Ok(false) => Ok(1),
            Err(e) => done(Err(Error::io("pushing the vault to the gate", e))),
        },
        Command::HostAddrs => {
            done(crate::host::host_addrs::print().map_err(|e| Error::io("listing the host's addresses", e)))
        }
        Command::Forward(a) => done(crate::gate::forward::run(a).map_err(|e| Error::io("route forwarder", e))),
    }
}

#[cfg(test)]
mod tests;

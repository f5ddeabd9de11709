//! The command line, as clap parses it. Parsing only; validation happens in
//! `spec` (sandbox ids and pool names: their `model::names` types, which
//! clap parses), and nothing here touches docker. The `Command` enum (one variant
//! per subcommand, its help line and examples) reads best whole here; the
//! argument structs of a group of commands go in their own file (`pool`,
//! `lifecycle`, `workbench`, `events`, `docs`).

// Field doc comments here are clap's help text, in its notation ([:GID],
// <64 hex>), not rustdoc links.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod dashes;
mod docs;
mod events;
mod examples;
mod files;
mod lifecycle;
mod mcp;
mod pool;
mod serve;
mod workbench;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::model::names::{PoolName, SandboxId};

pub use dashes::missing_dashes;
pub use docs::{public_command, CompletionsArgs, ManArgs, Shell};
pub use events::EventsArgs;
use examples::*;
pub use files::{BackupArgs, CpArgs, FilesArgs, MkdirArgs, WatchArgs};
pub use lifecycle::{
    CheckpointArgs, CheckpointLimits, CheckpointsAction, CheckpointsArgs, ForkArgs, HibernateArgs, StartArgs, StopArgs,
};
pub use mcp::McpArgs;
pub use pool::{PoolAction, PoolArgs, PoolCreateArgs, PoolNameArg};
pub use serve::{ServeArgs, SERVE_DEFAULTS};
pub use workbench::{ExecArgs, KillArgs, LogsArgs, PortForwardArgs, StatsArgs, WaitPortArgs};

/// The command line with sandbox ids and pool names taken as plain text:
/// whatever else clap refuses on a line that also has a malformed name (a
/// missing argument, `--help` after it) is said first, as it was before
/// clap checked names.
pub fn unchecked_names() -> clap::Command {
    fn loosen(cmd: clap::Command) -> clap::Command {
        let is_name = |a: &clap::Arg| {
            let t = a.get_value_parser().type_id();
            t == std::any::TypeId::of::<SandboxId>() || t == std::any::TypeId::of::<PoolName>()
        };
        // `mut_arg` moves an argument last: every one, in order, keeps the positions.
        let ids: Vec<clap::Id> = cmd.get_arguments().map(|a| a.get_id().clone()).collect();
        let cmd = ids.into_iter().fold(cmd, |c, id| {
            c.mut_arg(id, |a| if is_name(&a) { a.value_parser(clap::value_parser!(String)) } else { a })
        });
        cmd.mut_subcommands(loosen)
    }
    loosen(<Cli as clap::CommandFactory>::command())
}

/// Disposable, hardened Docker sandboxes for AI-agent sessions.
///
/// Each sandbox is a container with every capability dropped, no new
/// privileges, a read-only root, a non-root user and no network except the
/// routes you declare, plus a private unix socket between it and the host.
#[derive(Debug, Parser)]
#[command(name = "sbx", version, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(flatten)]
    pub globals: Globals,
    #[command(subcommand)]
    pub command: Command,
}

/// The options every command takes, before or after its name.
#[derive(Debug, Args)]
pub struct Globals {
    /// Log what sbx does (docker calls and timings) to stderr; -vv for more.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print results, and errors on stderr, as JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// Directory that holds the per-sandbox socket directories
    /// [default: /run/sbx/sandboxes, then $XDG_RUNTIME_DIR/sbx-sandboxes, then the temp dir] [env: SBX_SOCKET_DIR]
    // The variable is read by `Env`, not clap: clap lists an env-provided
    // option in usage lines as if it were required (help texts).
    #[arg(long, global = true, value_name = "DIR")]
    pub socket_dir: Option<PathBuf>,
    /// Directory for sbx's host-side state (ownership key, TTLs, creates in flight)
    /// [default: /var/lib/sbx for root, else $XDG_STATE_HOME/sbx or ~/.local/state/sbx] [env: SBX_DATA_DIR]
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The docker context to drive (`docker --context NAME` for every call); an
    /// engine on another machine is remote, see `sbx doctor` [env: SBX_CONTEXT]
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
}

impl Cli {
    /// The line parsed: through [`fast_parse`] when it can, else the whole
    /// command tree.
    pub fn parse_line(args: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
        fast_parse(args).map_or_else(|| Cli::try_parse_from(args), Ok)
    }
}

/// The line parsed with the tree of its own command alone, for the
/// commands scripts run most. clap builds every subcommand's arguments
/// before it parses (about 0.7 ms of sbx's own CPU on every command here,
/// a fifth of `sbx ls`), and these are the commands whose CPU counts.
/// None unless it parsed cleanly: help, --version, any error, an alias or
/// another command then take the whole tree, which says it as always.
/// A test holds the two parses equal.
pub fn fast_parse(args: &[std::ffi::OsString]) -> Option<Cli> {
    use clap::FromArgMatches;
    let mut i = 1;
    while let Some(a) = args.get(i)?.to_str() {
        match a {
            "--json" | "--verbose" => i += 1,
            "--socket-dir" | "--data-dir" | "--context" => i += 2,
            _ if a.starts_with("--socket-dir=") || a.starts_with("--data-dir=") || a.starts_with("--context=") => {
                i += 1
            }
            _ if a.len() > 1 && a.starts_with('-') && !a.starts_with("--") && a[1..].bytes().all(|b| b == b'v') => {
                i += 1
            }
            _ => break,
        }
    }
    let name = ["ls", "exec", "inspect", "create"].into_iter().find(|n| args.get(i).is_some_and(|a| a == n))?;
    let sub = clap::Command::new(name);
    let sub = match name {
        "ls" => sub,
        "exec" => ExecArgs::augment_args(sub),
        "inspect" => IdArg::augment_args(sub),
        _ => crate::spec::CreateRequest::augment_args(sub),
    };
    let root = Globals::augment_args(clap::Command::new("sbx")).subcommand_required(true).subcommand(sub);
    let m = root.try_get_matches_from(args).ok()?;
    let globals = Globals::from_arg_matches(&m).ok()?;
    let (_, sm) = m.subcommand()?;
    let command = match name {
        "ls" => Command::Ls,
        "exec" => Command::Exec(ExecArgs::from_arg_matches(sm).ok()?),
        "inspect" => Command::Inspect(IdArg::from_arg_matches(sm).ok()?),
        _ => Command::Create(Box::new(crate::spec::CreateRequest::from_arg_matches(sm).ok()?)),
    };
    Some(Cli { globals, command })
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a sandbox, wait until it binds its socket, print its id.
    #[command(after_help = EX_CREATE)]
    Create(Box<crate::spec::CreateRequest>),
    /// Relay stdin to the sandbox's socket and the socket to stdout.
    #[command(after_help = EX_CONNECT)]
    Connect(ConnectArgs),
    /// Cut one route at once (`docker network disconnect --force`); `egress` removes the
    /// egress gate; `all` destroys the sandbox.
    #[command(after_help = EX_REVOKE)]
    Revoke(RevokeArgs),
    /// Let a running sandbox reach more hosts through its egress gate (within a second).
    #[command(after_help = EX_ALLOW)]
    Allow(EgressRulesArgs),
    /// Take hosts off a running sandbox's allowlist; their open connections are cut.
    #[command(after_help = EX_DENY)]
    Deny(EgressRulesArgs),
    /// A sandbox's egress: the gate's decision log, and the --allow flags it suggests.
    #[command(after_help = EX_EGRESS)]
    Egress(EgressArgs),
    /// A running sandbox's secrets (`create --secret`): rotate a value; the sandbox keeps its placeholder.
    #[command(after_help = EX_SECRET)]
    Secret(SecretArgs),
    /// Remove sandboxes and their socket directories; already gone is success.
    #[command(after_help = EX_DESTROY)]
    Destroy(DestroyArgs),
    /// Stop the sandbox's processes (SIGTERM, SIGKILL after --grace); keep its container, routes and /state.
    #[command(after_help = EX_STOP)]
    Stop(StopArgs),
    /// Run a stopped sandbox again; returns once it has bound its socket, as create does.
    #[command(after_help = EX_START)]
    Start(StartArgs),
    /// Freeze every process of a sandbox in place (memory kept); its socket stalls until resume.
    #[command(after_help = EX_PAUSE)]
    Pause(IdArg),
    /// Thaw a paused sandbox, or restore a hibernated one (also after the engine or the
    /// host restarted); returns once its socket answers.
    #[command(after_help = EX_RESUME)]
    Resume(IdArg),
    /// Save a running sandbox's memory and file systems (a `--snapshots` sandbox) and
    /// leave it running; prints the checkpoint's name. Processes started with `exec -d`
    /// are not in it; refused while a `docker exec` session runs in the sandbox.
    #[command(after_help = EX_CHECKPOINT)]
    Checkpoint(CheckpointArgs),
    /// List checkpoints (sandbox, name, size, time); `checkpoints rm ID NAME...` removes them.
    #[command(after_help = EX_CHECKPOINTS)]
    Checkpoints(CheckpointsArgs),
    /// Make N new sandboxes that carry on from a `--snapshots` sandbox's state now (it keeps
    /// running) or from one of its checkpoints (--from, also after it is gone), each with
    /// an id, channel, ownership token and TTL of its own; prints their ids.
    #[command(after_help = EX_FORK)]
    Fork(ForkArgs),
    /// Checkpoint a sandbox, then stop it: no memory or process held; `ls` says hibernated
    /// and `resume` brings it back.
    #[command(after_help = EX_HIBERNATE)]
    Hibernate(HibernateArgs),
    /// List this tool's sandboxes: id, session, tier, runtime, routes, state, age, expiry;
    /// warns when the live sandboxes' memory limits add up to more than the host's RAM.
    #[command(after_help = EX_LS)]
    Ls,
    /// Print one sandbox's record as JSON, with every network it is on.
    #[command(after_help = EX_INSPECT)]
    Inspect(IdArg),
    /// Run a command in a sandbox; its exit code becomes sbx's (126/127: cannot run / not found).
    ///
    /// SIGINT/SIGTERM/SIGHUP to sbx go on to the command (SIGKILL after 2s); sbx then exits 128+n.
    #[command(after_help = EX_EXEC)]
    Exec(ExecArgs),
    /// List background processes started with `exec -d`.
    #[command(after_help = EX_PS)]
    Ps(IdArg),
    /// Signal a background process's whole process group.
    #[command(after_help = EX_KILL)]
    Kill(KillArgs),
    /// The sandbox's own output, or a background process's combined output.
    #[command(after_help = EX_LOGS)]
    Logs(LogsArgs),
    /// An interactive terminal in the sandbox, with the image's shell.
    #[command(after_help = EX_SHELL)]
    Shell(IdArg),
    /// Copy files or directories between host and sandbox; one side is ID:/path.
    #[command(after_help = EX_CP)]
    Cp(CpArgs),
    /// List a directory in a sandbox: type, mode, size, mtime, name, link target (never followed).
    #[command(after_help = EX_FILES)]
    Files(FilesArgs),
    /// Create a directory in a sandbox (-p: and its parents; one already there is fine).
    #[command(after_help = EX_MKDIR)]
    Mkdir(MkdirArgs),
    /// Print each change below a sandbox directory as it happens (inotify), until Ctrl-C or the sandbox ends.
    #[command(after_help = EX_WATCH)]
    Watch(WatchArgs),
    /// CPU %, memory (without page cache) and limit, network bytes, pids.
    #[command(after_help = EX_STATS)]
    Stats(StatsArgs),
    /// Forward 127.0.0.1 ports to the sandbox's own loopback ports, even with no network.
    #[command(after_help = EX_PORT_FORWARD)]
    PortForward(PortForwardArgs),
    /// Wait until something in the sandbox listens on PORT.
    #[command(after_help = EX_WAIT_PORT)]
    WaitPort(WaitPortArgs),
    /// Write the sandbox's /state/workspace as a tar stream to stdout.
    #[command(after_help = EX_BACKUP)]
    Backup(BackupArgs),
    /// Replace the sandbox's /state/workspace with a tar stream from stdin.
    #[command(after_help = EX_RESTORE)]
    Restore(BackupArgs),
    /// Check a sandbox against the CIS Docker Benchmark runtime rules; exit 1 on any failure.
    #[command(after_help = EX_AUDIT)]
    Audit(IdArg),
    /// List the persistent session volumes (`create --persist`); `volumes rm KEY...` removes them.
    #[command(after_help = EX_VOLUMES)]
    Volumes(VolumesArgs),
    /// Set a sandbox's time to live to DURATION from now (extend or shorten).
    #[command(after_help = EX_TTL)]
    Ttl(TtlArgs),
    /// Lifecycle events of this host's sandboxes (created ... died with exit code and OOM), until Ctrl-C.
    #[command(after_help = EX_EVENTS)]
    Events(EventsArgs),
    /// Remove expired sandboxes, those of creates that died, orphaned socket directories.
    #[command(after_help = EX_GC)]
    Gc(GcArgs),
    /// Check this host end to end: docker, runtimes, sockets, a real hardened probe sandbox, routes.
    #[command(after_help = EX_DOCTOR)]
    Doctor(DoctorArgs),
    /// Warm pools of ready sandboxes: `sbx create --pool NAME` claims one in a few ms, without a docker call (one on a remote engine; a pool is the engine's it was made on).
    #[command(after_help = EX_POOL)]
    Pool(PoolArgs),
    /// Serve E2B's API (control plane and envd) so the E2B SDKs drive sbx sandboxes unchanged.
    ///
    /// Control-plane requests need an API key (X-API-KEY or Authorization: Bearer);
    /// envd requests need the sandbox's own access token (X-Access-Token), handed out at
    /// create. See docs/serve.md for what of E2B's API is supported.
    // The create flags that are one sandbox's stay parseable, so the refusal
    // can name them (exit 2), but out of serve's help.
    #[command(
        after_help = EX_SERVE,
        mut_arg("image", |a| a.required_unless_present(clap::builder::Resettable::Reset).hide(true)),
        mut_arg("pool", |a| a.hide(true)),
        mut_arg("no_fallback", |a| a.hide(true)),
        mut_arg("session", |a| a.hide(true)),
        mut_arg("ttl", |a| a.hide(true)),
        mut_arg("persist", |a| a.hide(true)),
        mut_arg("persist_size", |a| a.hide(true)),
        mut_arg("clone", |a| a.hide(true)),
        mut_arg("setup", |a| a.hide(true)),
        mut_arg("state_dir", |a| a.hide(true)),
        mut_arg("rw", |a| a.hide(true)),
        mut_arg("user", |a| a.hide(true)),
        mut_arg("socket_wait", |a| a.hide(true)),
        mut_arg("channel", |a| a.hide(true)),
        mut_arg("egress", |a| a.hide(true)),
        mut_arg("command", |a| a.hide(true))
    )]
    Serve(Box<ServeArgs>),
    /// Serve sbx to an agent as MCP tools on stdin/stdout (JSON-RPC; logs on stderr).
    ///
    /// Tools: create_sandbox, run_command, read_file, write_file, list_dir, allow_hosts,
    /// deny_hosts, destroy_sandbox, list_sandboxes. They reach only the sandboxes this
    /// session made; those get a TTL and are destroyed when the session ends (stdin
    /// closed, SIGTERM) unless created with keep. See docs/mcp.md.
    #[command(
        after_help = EX_MCP,
        mut_arg("image", |a| a.required_unless_present(clap::builder::Resettable::Reset).hide(true))
    )]
    Mcp(Box<McpArgs>),
    /// Print a shell completion script (bash, zsh or fish) to stdout.
    #[command(after_help = EX_COMPLETIONS)]
    Completions(CompletionsArgs),
    /// Write man pages (sbx.1 and one per subcommand, e.g. sbx-create.1) into DIR.
    #[command(after_help = EX_MAN)]
    Man(ManArgs),
    /// Internal: the detached refiller a claim starts (one per pool, under its lock).
    #[command(name = "__pool-fill", hide = true)]
    PoolFill(PoolNameArg),
    /// Internal: the probe program `doctor` runs inside a sandbox.
    #[command(name = "__probe", hide = true)]
    Probe(ProbeArgs),
    /// Internal: audit's status probe, in the sandbox's pid namespace (remote engines).
    #[command(name = "__audit-probe", hide = true)]
    AuditProbe(AuditProbeArgs),
    /// Internal: the detached TTL watchdog that `create --ttl` starts.
    #[command(name = "__watchdog", hide = true)]
    Watchdog(WatchdogArgs),
    /// Internal: the egress gate a sandbox's gate container runs.
    #[command(name = "__gate", hide = true)]
    Gate(crate::gate::GateArgs),
    /// Internal: push a vault (JSON on stdin) into this container's gate.
    #[command(name = "__gate-vault", hide = true)]
    GateVault,
    /// Internal: this machine's addresses, one a line (run on a remote engine's host network).
    #[command(name = "__host-addrs", hide = true)]
    HostAddrs,
    /// Internal: the relay a private route's forwarder container runs.
    #[command(name = "__forward", hide = true)]
    Forward(crate::gate::forward::ForwardArgs),
}

#[derive(Debug, Args)]
pub struct EgressRulesArgs {
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// HOST[:PORT] (port 443 unless given), `*.SUFFIX[:PORT]` or CIDR:PORT, as `create --allow` takes them.
    #[arg(required = true, value_name = "RULE")]
    pub rules: Vec<String>,
    /// Let a CIDR rule name loopback, link-local or multicast addresses, or Azure's host endpoint.
    #[arg(long)]
    pub allow_unsafe_cidr: bool,
}

/// `sbx egress log|policy ID`.
#[derive(Debug, Args)]
pub struct EgressArgs {
    #[command(subcommand)]
    pub action: EgressAction,
}

#[derive(Debug, Subcommand)]
pub enum EgressAction {
    /// The gate's decisions, one per connection (with --json: one JSON object per line).
    Log {
        /// Sandbox id.
        #[arg(value_name = "ID")]
        id: SandboxId,
        /// Keep following new decisions.
        #[arg(short, long)]
        follow: bool,
    },
    /// The minimal --allow flags that would have allowed what the log shows (observe mode: run once, then lock down).
    Policy {
        /// Sandbox id.
        #[arg(value_name = "ID")]
        id: SandboxId,
    },
}

/// `sbx secret set ID NAME SOURCE`.
#[derive(Debug, Args)]
pub struct SecretArgs {
    #[command(subcommand)]
    pub action: SecretAction,
}

#[derive(Debug, Subcommand)]
pub enum SecretAction {
    /// Read NAME's new value from SOURCE and give it to the sandbox's gate, which uses it
    /// from its next request on; the sandbox sees no change.
    #[command(after_help = EX_SECRET)]
    Set {
        /// Sandbox id.
        #[arg(value_name = "ID")]
        id: SandboxId,
        /// The secret's NAME, as `create --secret NAME@...` gave it.
        #[arg(value_name = "NAME")]
        name: String,
        /// `env:VAR` (sbx's environment) or `file:PATH` (only its owner may read it); never a value.
        #[arg(value_name = "SOURCE")]
        source: String,
    },
}

#[derive(Debug, Args)]
pub struct TtlArgs {
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// New time to live from now, e.g. 90s, 30m, 2h.
    #[arg(value_name = "DURATION")]
    pub duration: String,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Say what would be removed, remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Also check a route: its network exists and is internal, and a sandbox on it reaches the target.
    #[arg(long = "route", value_name = "KIND:TARGET")]
    pub routes: Vec<String>,
    /// Check this runtime's registration (what to change in /etc/docker/daemon.json when it
    /// is wrong) and run the whole probe under it, e.g. runsc [env: SBX_RUNTIME] [default: runc].
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,
}

#[derive(Debug, Args)]
pub struct AuditProbeArgs {
    /// The sandbox's full container id.
    pub container: String,
    /// Its main process's pid as the engine reports it.
    pub pid: String,
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// host:port targets to dial from inside.
    pub targets: Vec<String>,
}

#[derive(Debug, Args)]
pub struct WatchdogArgs {
    /// Sandbox id.
    pub id: SandboxId,
    /// The sandbox's socket directory: when it is gone, so is the sandbox.
    #[arg(long)]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct IdArg {
    /// Sandbox id (sbx-<12 hex>), as `create` printed it.
    pub id: SandboxId,
}

#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// Route kind to cut (as in --route KIND:TARGET), `egress` for the egress gate, or `all` to destroy the sandbox.
    #[arg(value_name = "KIND")]
    pub kind: String,
}

#[derive(Debug, Args)]
pub struct DestroyArgs {
    /// Sandbox ids.
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<SandboxId>,
    /// Also remove the persistent /state volume of their sessions (`create --persist`).
    #[arg(long)]
    pub purge: bool,
}

#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// Sandbox id.
    pub id: SandboxId,
    /// Give up if the sandbox has not accepted the connection within this long.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub timeout: String,
}

/// `sbx volumes [rm KEY...]`.
#[derive(Debug, Args)]
pub struct VolumesArgs {
    #[command(subcommand)]
    pub action: Option<VolumesAction>,
}

#[derive(Debug, Subcommand)]
pub enum VolumesAction {
    /// Remove session volumes no running sandbox uses: the docker volume, its directory under the
    /// data dir and its lock file. Refused (exit 1) while a sandbox uses one.
    Rm {
        /// Session keys (as given to `create --session`), e.g. `sbx volumes rm alice-task-1`.
        #[arg(required = true, value_name = "KEY")]
        keys: Vec<String>,
    },
}

#[cfg(test)]
mod tests;

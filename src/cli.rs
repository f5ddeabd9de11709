//! The command line, as clap parses it. Parsing only; validation happens in
//! `spec`, and nothing here touches docker.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const AFTER_HELP: &str = "\
Exit codes: 0 success, 1 the operation failed, 2 invalid input (nothing was created),
130/143 interrupted by SIGINT/SIGTERM (after removing what was made).

Environment: SBX_SOCKET_DIR (socket root), SBX_DATA_DIR (state), SBX_STRICT_EGRESS=1 (as --strict-egress),
SBX_DOCKER (docker CLI to run), SBX_DOCKER_TIMEOUT (how long a docker look-up may take, default 30s;
changes get 4x; a stream such as exec or logs -f must get an answer about its
sandbox within 1s plus that), SBX_SECCOMP_PROFILE (as create --seccomp-profile), DOCKER_HOST (passed to docker),
RUST_LOG (tracing).";

/// Disposable, hardened Docker sandboxes for AI-agent sessions.
///
/// Each sandbox is a container with every capability dropped, no new
/// privileges, a read-only root, a non-root user and no network except the
/// routes you declare, plus a private unix socket between it and the host.
#[derive(Debug, Parser)]
#[command(name = "sbx", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// Log what sbx does (docker calls and timings) to stderr; -vv for more.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print results, and errors on stderr, as JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// Directory that holds the per-sandbox socket directories
    /// [default: /run/sbx/sandboxes, then $XDG_RUNTIME_DIR/sbx-sandboxes, then the temp dir]
    #[arg(long, global = true, value_name = "DIR", env = "SBX_SOCKET_DIR", hide_env_values = true)]
    pub socket_dir: Option<PathBuf>,
    /// Directory for sbx's host-side state (ownership key, TTLs, creates in flight)
    /// [default: /var/lib/sbx for root, else $XDG_STATE_HOME/sbx or ~/.local/state/sbx]
    #[arg(long, global = true, value_name = "DIR", env = "SBX_DATA_DIR", hide_env_values = true)]
    pub data_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a sandbox, wait until it binds its socket, print its id.
    Create(Box<CreateArgs>),
    /// Relay stdin to the sandbox's socket and the socket to stdout.
    Connect(ConnectArgs),
    /// Cut one route at once (`docker network disconnect --force`); `all` destroys the sandbox.
    Revoke(RevokeArgs),
    /// Remove sandboxes and their socket directories; already gone is success.
    Destroy(DestroyArgs),
    /// List this tool's sandboxes: id, session, tier, routes, state, age.
    Ls,
    /// Print one sandbox's record as JSON, with every network it is on.
    Inspect(IdArg),
    /// Run a command in a sandbox; its exit code becomes sbx's (126/127: cannot run / not found).
    ///
    /// SIGINT/SIGTERM/SIGHUP to sbx go on to the command (SIGKILL after 2s); sbx then exits 128+n.
    Exec(ExecArgs),
    /// List background processes started with `exec -d`.
    Ps(IdArg),
    /// Signal a background process's whole process group.
    Kill(KillArgs),
    /// The sandbox's own output, or a background process's combined output.
    Logs(LogsArgs),
    /// An interactive terminal in the sandbox, with the image's shell.
    Shell(IdArg),
    /// Copy files or directories between host and sandbox; one side is ID:/path.
    Cp(CpArgs),
    /// CPU %, memory (without page cache) and limit, network bytes, pids.
    Stats(StatsArgs),
    /// Forward 127.0.0.1 ports to the sandbox's own loopback ports, even with no network.
    PortForward(PortForwardArgs),
    /// Wait until something in the sandbox listens on PORT.
    WaitPort(WaitPortArgs),
    /// Write the sandbox's /state/workspace as a tar stream to stdout.
    Backup(BackupArgs),
    /// Replace the sandbox's /state/workspace with a tar stream from stdin.
    Restore(BackupArgs),
    /// Check a sandbox against the CIS Docker Benchmark runtime rules; exit 1 on any failure.
    Audit(IdArg),
    /// List the persistent session volumes (`create --persist`).
    Volumes,
    /// Set a sandbox's time to live to DURATION from now (extend or shorten).
    Ttl(TtlArgs),
    /// Remove expired sandboxes, those of creates that died, orphaned socket directories.
    Gc(GcArgs),
    /// Check this host end to end: docker, runc, sockets, a real hardened probe sandbox, routes.
    Doctor(DoctorArgs),
    /// Internal: the probe program `doctor` runs inside a sandbox.
    #[command(name = "__probe", hide = true)]
    Probe(ProbeArgs),
    /// Internal: the detached TTL watchdog that `create --ttl` starts.
    #[command(name = "__watchdog", hide = true)]
    Watchdog(WatchdogArgs),
}

#[derive(Debug, Args)]
pub struct TtlArgs {
    /// Sandbox id.
    pub id: String,
    /// New time to live from now, e.g. 90s, 30m, 2h.
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
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// host:port targets to dial from inside.
    pub targets: Vec<String>,
}

#[derive(Debug, Args)]
pub struct WatchdogArgs {
    pub id: String,
    /// The sandbox's socket directory: when it is gone, so is the sandbox.
    #[arg(long)]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Image pinned by digest: repo[:tag]@sha256:<64 hex> or sha256:<64 hex>.
    /// Refused if it carries a label starting with `sbx.`.
    #[arg(long, value_name = "IMAGE")]
    pub image: String,
    /// Session key recorded on the sandbox [default: the sandbox id].
    #[arg(long, value_name = "KEY")]
    pub session: Option<String>,
    /// Route KIND:TARGET (e.g. inference:proxy:8080): joins network sbx-<host>. Repeatable.
    #[arg(long = "route", value_name = "KIND:TARGET")]
    pub routes: Vec<String>,
    /// Bind-mount HOST read-only at SANDBOX (default: the same path). Repeatable.
    #[arg(long, value_name = "HOST[:SANDBOX]")]
    pub ro: Vec<String>,
    /// Bind-mount HOST read-write at SANDBOX (default: the same path). Repeatable.
    #[arg(long, value_name = "HOST[:SANDBOX]")]
    pub rw: Vec<String>,
    /// Host directory mounted at /state instead of a tmpfs.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<String>,
    /// Memory limit in MiB (swap is not added on top) [default: 4096].
    #[arg(long, value_name = "MIB")]
    pub memory: Option<u64>,
    /// CPU limit, e.g. 1.5 [default: 1].
    #[arg(long, value_name = "N")]
    pub cpus: Option<String>,
    /// Process limit [default: 512].
    #[arg(long, value_name = "N")]
    pub pids: Option<u32>,
    /// Environment variable K=V for the sandbox (SBX_* is reserved). Repeatable.
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// Label K=V added to the container (sbx.* is reserved). Repeatable.
    #[arg(long = "label", value_name = "K=V")]
    pub labels: Vec<String>,
    /// Numeric UID[:GID] [default: the image's numeric non-root user, else 65534:65534].
    /// Group 0 only when given here (UID:0), with a warning; never from the image.
    #[arg(long, value_name = "UID[:GID]")]
    pub user: Option<String>,
    /// How long to wait for the sandbox to bind its socket; 0 returns once it runs [default: 90s].
    #[arg(long, value_name = "DURATION")]
    pub socket_wait: Option<String>,
    /// Destroy the sandbox after DURATION (e.g. 90s, 30m, 2h), even after sbx and the shell exit.
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
    /// Keep /state in the session's named volume (needs --session): a new sandbox for
    /// the same session continues where the last left off. `destroy --purge` removes it.
    #[arg(long)]
    pub persist: bool,
    /// Clone URL[#REF] on the host into /state/workspace before the sandbox starts
    /// (needs --persist or --state-dir; skipped when the workspace already has files,
    /// refused when it is a symlink or not a directory).
    #[arg(long, value_name = "URL[#REF]")]
    pub clone: Option<String>,
    /// Run CMD (split into words, never through a shell) in the ready sandbox; in order,
    /// repeatable. A failing one fails the create and removes the sandbox.
    #[arg(long, value_name = "CMD")]
    pub setup: Vec<String>,
    /// Give each route its own internal network, with no host address and only the
    /// route's service (the container named HOST, never a sandbox) on it: tier 2.
    /// Removed with the sandbox.
    #[arg(long)]
    pub private_routes: bool,
    /// Refuse, instead of lowering the tier, when a route reaches more than its target.
    #[arg(long)]
    pub strict_egress: bool,
    /// Seccomp profile FILE (Docker's JSON format) instead of sbx's own; `unconfined` is
    /// refused, and `sbx audit` then fails the sandbox's sbx.seccomp rule.
    #[arg(long, value_name = "FILE", env = "SBX_SECCOMP_PROFILE", hide_env_values = true)]
    pub seccomp_profile: Option<String>,
    /// How sbx reaches the sandbox's socket: `direct` (connect to it on the host),
    /// `exec` (relay through `docker exec` and sbx's helper; /run/sandbox is then a
    /// 1 MiB tmpfs inside the sandbox), or `auto`: direct as root, exec otherwise.
    #[arg(long, value_name = "auto|direct|exec", value_enum, default_value_t)]
    pub channel: crate::channel::Choice,
    /// The command to run in the sandbox (default: the image's).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct IdArg {
    /// Sandbox id (sbx-<12 hex>), as `create` printed it.
    pub id: String,
}

#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// Sandbox id.
    pub id: String,
    /// Route kind to cut, or `all` to destroy the sandbox.
    pub kind: String,
}

#[derive(Debug, Args)]
pub struct DestroyArgs {
    /// Sandbox ids.
    #[arg(required = true)]
    pub ids: Vec<String>,
    /// Also remove the persistent /state volume of their sessions (`create --persist`).
    #[arg(long)]
    pub purge: bool,
}

#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// Sandbox id.
    pub id: String,
    /// Give up if the sandbox has not accepted the connection within this long.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub timeout: String,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Sandbox id.
    pub id: String,
    /// Keep stdin open and pass it to the command.
    #[arg(short, long)]
    pub interactive: bool,
    /// Allocate a terminal.
    #[arg(short, long)]
    pub tty: bool,
    /// Environment variable K=V for the command. Repeatable.
    #[arg(short = 'e', long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// Working directory (absolute).
    #[arg(short = 'w', long = "workdir", value_name = "DIR")]
    pub workdir: Option<String>,
    /// Numeric UID[:GID] to run as [default: the sandbox's user].
    #[arg(short = 'u', long = "user", value_name = "UID[:GID]")]
    pub user: Option<String>,
    /// Start in the background and print a process handle (see `sbx ps`, `kill`, `logs`).
    #[arg(short = 'd', long)]
    pub detach: bool,
    /// The command and its arguments, passed through unchanged.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct KillArgs {
    pub id: String,
    /// Process handle from `sbx exec -d`.
    pub handle: String,
    /// Signal name or number.
    #[arg(long, short, default_value = "TERM")]
    pub signal: String,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    pub id: String,
    /// A background process handle; without it, the sandbox's own output.
    pub handle: Option<String>,
    /// Keep following new output.
    #[arg(short, long)]
    pub follow: bool,
    /// Only the last N lines.
    #[arg(long, value_name = "N")]
    pub tail: Option<u64>,
}

#[derive(Debug, Args)]
pub struct CpArgs {
    /// Source: a host path or ID:/path.
    pub src: String,
    /// Destination: a host path or ID:/path.
    pub dst: String,
    /// Refuse a copy out of a sandbox whose files add up to more than this
    /// (sizes as files claim them, holes included), e.g. 512M, 4GiB.
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub max_bytes: String,
}

/// `backup` and `restore`.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// Sandbox id.
    pub id: String,
    /// Refuse a workspace (backup) or an archive (restore) larger than this, e.g. 512M, 4GiB.
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub max_bytes: String,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    #[arg(required = true)]
    pub ids: Vec<String>,
    /// Refresh every 2 seconds until Ctrl-C.
    #[arg(long)]
    pub watch: bool,
}

#[derive(Debug, Args)]
pub struct PortForwardArgs {
    pub id: String,
    /// [LOCAL:]PORT: listen on 127.0.0.1:LOCAL (0 or none: a free port), relay to the sandbox's PORT.
    #[arg(required = true, value_name = "[LOCAL:]PORT")]
    pub ports: Vec<String>,
}

#[derive(Debug, Args)]
pub struct WaitPortArgs {
    pub id: String,
    pub port: u16,
    /// Give up after this long [default: 30s].
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
}

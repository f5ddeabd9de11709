//! The arguments of the commands that work inside a sandbox (`exec`, `cp`,
//! `logs`, `port-forward`, ...).

// Field doc comments here are clap's help text, in its notation.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use crate::model::names::SandboxId;
use clap::Args;

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Sandbox id.
    pub id: SandboxId,
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
    /// Numeric UID[:GID] to run as, never yours or the docker socket's group [default: the
    /// sandbox's user].
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
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// Process handle (p<8 hex>) as `sbx exec -d` printed it; `sbx ps ID` lists them.
    #[arg(value_name = "HANDLE")]
    pub handle: String,
    /// Signal name or number.
    #[arg(long, short, default_value = "TERM")]
    pub signal: String,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// A background process handle (from `sbx exec -d`); without it, the sandbox's own output.
    #[arg(value_name = "HANDLE")]
    pub handle: Option<String>,
    /// Keep following new output.
    #[arg(short, long)]
    pub follow: bool,
    /// Only the last N lines.
    #[arg(long, value_name = "N")]
    pub tail: Option<u64>,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Sandbox ids.
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<SandboxId>,
    /// Refresh every 2 seconds until Ctrl-C.
    #[arg(long)]
    pub watch: bool,
}

#[derive(Debug, Args)]
pub struct PortForwardArgs {
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// [LOCAL:]PORT: listen on 127.0.0.1:LOCAL (0 or none: a free port), relay to the sandbox's PORT.
    #[arg(required = true, value_name = "[LOCAL:]PORT")]
    pub ports: Vec<String>,
}

#[derive(Debug, Args)]
pub struct WaitPortArgs {
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// TCP port (1-65535) on the sandbox's own loopback.
    #[arg(value_name = "PORT")]
    pub port: u16,
    /// Give up after this long [default: 30s].
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
}

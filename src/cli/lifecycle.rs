//! `sbx stop`, `start`, `checkpoint`, `checkpoints`, `fork` and `hibernate`'s arguments (`pause`/`resume` take an id alone).

// Field doc comments here are clap's help text.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use crate::model::names::SandboxId;
use clap::Args;

#[derive(Debug, Args)]
pub struct StopArgs {
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// SIGTERM first, SIGKILL after this long (whole seconds; a fraction rounds up).
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub grace: String,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// How long to wait for the sandbox to bind its socket again; 0 returns once it runs [default: 90s].
    #[arg(long, value_name = "DURATION")]
    pub socket_wait: Option<String>,
}

/// The limits a new checkpoint must fit in (the image is discarded past them).
#[derive(Debug, Args)]
pub struct CheckpointLimits {
    /// At most this much for the sandbox's checkpoints together, this one included
    /// (e.g. 512MiB, 4GiB) [default: 4GiB].
    #[arg(long, value_name = "SIZE")]
    pub max_checkpoint_size: Option<String>,
    /// At most this much for every checkpoint in the data dir [default: 16GiB].
    #[arg(long, value_name = "SIZE")]
    pub max_checkpoints_total: Option<String>,
}

#[derive(Debug, Args)]
pub struct CheckpointArgs {
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// The checkpoint's name: letters, digits, '.', '_', '-' [default: c-<seconds since the epoch>].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    #[command(flatten)]
    pub limits: CheckpointLimits,
}

#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The sandbox to fork (with --from: whose checkpoint; it may be gone).
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// How many sandboxes to make, 1 to 64.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub count: usize,
    /// Carry on from this checkpoint of ID instead of from its state now.
    #[arg(long, value_name = "NAME")]
    pub from: Option<String>,
    #[command(flatten)]
    pub limits: CheckpointLimits,
}

#[derive(Debug, Args)]
pub struct HibernateArgs {
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    #[command(flatten)]
    pub limits: CheckpointLimits,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CheckpointsArgs {
    /// Only this sandbox's.
    #[arg(value_name = "ID")]
    pub id: Option<SandboxId>,
    #[command(subcommand)]
    pub action: Option<CheckpointsAction>,
}

#[derive(Debug, clap::Subcommand)]
pub enum CheckpointsAction {
    /// Remove checkpoints of a sandbox.
    Rm {
        /// Sandbox id.
        #[arg(value_name = "ID")]
        id: SandboxId,
        /// Checkpoint names.
        #[arg(value_name = "NAME", required = true)]
        names: Vec<String>,
    },
}

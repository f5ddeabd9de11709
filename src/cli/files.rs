//! The arguments of the commands on a sandbox's files: `cp`, `backup`,
//! `restore`, and `files`, `mkdir`, `watch`.

use crate::model::names::SandboxId;
use clap::Args;

#[derive(Debug, Args)]
pub struct FilesArgs {
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// Absolute path in the sandbox: a directory's entries, or the entry itself (a symlink is never followed).
    #[arg(value_name = "PATH")]
    pub path: String,
    /// List subdirectories too, to --max-depth (never through a symlink).
    #[arg(short, long)]
    pub recursive: bool,
    /// How many levels to list (1: the directory's own entries) [default: 16 with --recursive, max 64].
    #[arg(long, value_name = "N")]
    pub max_depth: Option<u32>,
    /// Stop after this many entries, and say so.
    #[arg(long, value_name = "N", default_value_t = crate::workbench::listing::DEFAULT_LIMIT)]
    pub limit: u64,
}

#[derive(Debug, Args)]
pub struct MkdirArgs {
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// Absolute path of the new directory in the sandbox.
    #[arg(value_name = "PATH")]
    pub path: String,
    /// Create missing parents too; a directory already there is not an error.
    #[arg(short, long)]
    pub parents: bool,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Sandbox id.
    #[arg(value_name = "ID")]
    pub id: SandboxId,
    /// Absolute path of a directory in the sandbox.
    #[arg(value_name = "PATH")]
    pub path: String,
    /// Watch subdirectories too, including those created later (never through a symlink).
    #[arg(short, long)]
    pub recursive: bool,
}

#[derive(Debug, Args)]
pub struct CpArgs {
    /// Source: a host path, ID:/path, or - (a tar archive on stdin, extracted into the directory ID:/path).
    #[arg(value_name = "SRC")]
    pub src: String,
    /// Destination: a host path, ID:/path, or - (ID:/path as a tar stream on stdout).
    #[arg(value_name = "DST")]
    pub dst: String,
    /// Refuse a copy out of a sandbox whose files add up to more than this
    /// (sizes as files claim them, holes and symlink targets included), e.g. 512M, 4GiB.
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub max_bytes: String,
}

/// `backup` and `restore`.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// Sandbox id.
    pub id: SandboxId,
    /// Refuse a workspace (backup) or an archive (restore) larger than this, e.g. 512M, 4GiB.
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub max_bytes: String,
}

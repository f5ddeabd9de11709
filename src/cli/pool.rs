//! `sbx pool`'s arguments.

// Field doc comments here are clap's help text.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use crate::model::names::PoolName;
use clap::{Args, Subcommand};

use super::examples::{EX_POOL_CREATE, EX_POOL_FILL, EX_POOL_LS, EX_POOL_RM};

/// `sbx pool create|ls|fill|rm`.
#[derive(Debug, Args)]
pub struct PoolArgs {
    #[command(subcommand)]
    pub action: PoolAction,
}

#[derive(Debug, Subcommand)]
pub enum PoolAction {
    /// Record a pool (the create flags that fix its sandboxes) and fill it to --size.
    /// Flags of one session (--session, --ttl, --persist, --clone, --setup) belong on
    /// `sbx create --pool NAME`.
    // The flags `pool create` refuses (exit 2) stay parseable, so the refusal
    // can name them, but out of its help.
    #[command(
        after_help = EX_POOL_CREATE,
        mut_arg("pool", |a| a.hide(true)),
        mut_arg("no_fallback", |a| a.hide(true)),
        mut_arg("session", |a| a.hide(true)),
        mut_arg("ttl", |a| a.hide(true)),
        mut_arg("persist", |a| a.hide(true)),
        mut_arg("clone", |a| a.hide(true)),
        mut_arg("setup", |a| a.hide(true))
    )]
    Create(Box<PoolCreateArgs>),
    /// The pools: size, ready, filling, failed (creates failed in a row, with the last
    /// error), the ready members' memory (`docker stats`).
    #[command(after_help = EX_POOL_LS)]
    Ls,
    /// Top a pool up to its size now and recycle members idle past --max-idle (for cron);
    /// returns at once when a refiller is already at work on it.
    #[command(after_help = EX_POOL_FILL)]
    Fill(PoolNameArg),
    /// Destroy a pool's unclaimed sandboxes and forget it; claimed ones stay.
    #[command(after_help = EX_POOL_RM)]
    Rm(PoolNameArg),
}

#[derive(Debug, Args)]
pub struct PoolNameArg {
    /// Pool name, as `sbx pool create` recorded it (`sbx pool ls` lists them).
    #[arg(value_name = "NAME")]
    pub name: PoolName,
}

#[derive(Debug, Args)]
pub struct PoolCreateArgs {
    /// Pool name: 1-40 of A-Z, a-z, 0-9, '.', '_', '-'.
    #[arg(value_name = "NAME")]
    pub name: PoolName,
    /// How many ready sandboxes to keep (1-1000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub size: u32,
    /// Recycle members idle longer than this (e.g. 30m): the refiller, `pool fill` and gc enforce it.
    #[arg(long, value_name = "DURATION")]
    pub max_idle: Option<String>,
    #[command(flatten)]
    pub request: crate::spec::CreateRequest,
}

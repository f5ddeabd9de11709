//! `sbx pool`'s arguments.

// Field doc comments here are clap's help text.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use clap::{Args, Subcommand};

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
    Create(Box<PoolCreateArgs>),
    /// The pools: size, ready, filling, failed (with the last error), idle memory.
    Ls,
    /// Top a pool up to its size now and recycle members past --max-idle (for cron).
    Fill(PoolNameArg),
    /// Destroy a pool's unclaimed sandboxes and forget it; claimed ones stay.
    Rm(PoolNameArg),
}

#[derive(Debug, Args)]
pub struct PoolNameArg {
    /// Pool name.
    #[arg(value_name = "NAME")]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct PoolCreateArgs {
    /// Pool name: 1-40 of A-Z, a-z, 0-9, '.', '_', '-'.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// How many ready sandboxes to keep (1-1000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub size: u32,
    /// Recycle members idle longer than this (e.g. 30m): the refiller, `pool fill` and gc enforce it.
    #[arg(long, value_name = "DURATION")]
    pub max_idle: Option<String>,
    #[command(flatten)]
    pub request: crate::spec::CreateRequest,
}

//! `sbx mcp`'s arguments.

// Field doc comments here are clap's help text.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use clap::Args;

/// Kept as its own struct so create defaults shared with `sbx serve` can
/// be flattened in beside the templates.
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// A template NAME the create_sandbox tool offers, made from IMAGE (pinned by digest,
    /// as `create --image`); its ENTRYPOINT and CMD never run: sbx's helper idles as the
    /// main process and commands run beside it. Repeatable. An image pinned by digest is
    /// a template too.
    #[arg(long = "template", value_name = "NAME=IMAGE")]
    pub templates: Vec<String>,
    /// Let create_sandbox ask for observe mode through the egress gate (every name
    /// allowed and logged); without it, only the --allow rules given here or to the tool.
    #[arg(long)]
    pub allow_internet: bool,
    /// The create flags every sandbox gets (routes, limits, runtime, --allow ...),
    /// checked at start as `sbx create` checks them, as `sbx serve` takes them; --ttl
    /// (1h unless given) is each sandbox's time to live unless create_sandbox asks
    /// for another: its watchdog destroys it then, even when this session is killed first.
    #[command(flatten)]
    pub defaults: crate::spec::CreateRequest,
}

//! `sbx serve`'s arguments.

// Field doc comments here are clap's help text.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::path::PathBuf;

use clap::Args;

/// The create flags `sbx serve` takes as defaults for every sandbox it makes
/// (field names, as `CreateRequest` spells them); the others are one
/// sandbox's (an E2B create gives its own timeout and envVars) and are
/// refused, exit 2.
pub const SERVE_DEFAULTS: &[&str] = &[
    "routes",
    "ro",
    "memory_mib",
    "cpus",
    "pids",
    "env",
    "labels",
    "private_routes",
    "strict_egress",
    "seccomp_profile",
    "allow",
    "egress_dns",
    "egress_network",
    "allow_unsafe_cidr",
    "runtime",
    "pull",
    "snapshots",
];

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Where to listen: HOST:PORT (port 0: a free one, said on stderr), or unix:PATH for a
    /// unix socket (made 0600). A TCP address that is not loopback is refused unless
    /// --tls-cert and --tls-key are given.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:3000")]
    pub listen: String,
    /// The API keys clients may use, one a line (refused when its group or others can
    /// read it) [default: one key made at first start, kept 0600 in the data dir's
    /// serve/api-key; stderr says where].
    #[arg(long, value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,
    /// An E2B template id NAME that creates a sandbox from IMAGE (pinned by digest, as
    /// `create --image`); its ENTRYPOINT and CMD never run: sbx's helper idles as
    /// the main process and commands run beside it. Repeatable. A warm pool's name
    /// (`sbx pool create`) is a template id too: a create claims one of its sandboxes.
    #[arg(long = "template", value_name = "NAME=IMAGE")]
    pub templates: Vec<String>,
    /// Serve HTTPS (HTTP/2 or HTTP/1.1, as the client offers) with this certificate: PEM,
    /// the server's certificate first, then its intermediates. Needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert, in PEM (refused when its group or others can read
    /// it). Needs --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Let an E2B create ask for `allow_internet_access: true`, which then means
    /// observe mode through the egress gate (every name allowed and logged, as
    /// `create --egress observe`); without it such a create is refused.
    #[arg(long)]
    pub allow_internet: bool,
    /// The create flags every sandbox gets (routes, limits, runtime, --allow ...),
    /// checked at start as `sbx create` checks them.
    #[command(flatten)]
    pub defaults: crate::spec::CreateRequest,
}

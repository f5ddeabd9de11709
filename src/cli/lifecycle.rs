//! `sbx stop` and `sbx start`'s arguments (`pause`/`resume` take an id alone).

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

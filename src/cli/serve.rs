//! `sbx serve`'s arguments.

// Field doc comments here are clap's help text.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen: HOST:PORT on a loopback address, or unix:PATH for a unix
    /// socket (made 0600). A TCP address that is not loopback is refused: it needs TLS,
    /// which sbx serve does not offer yet.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:3000")]
    pub listen: String,
    /// The API keys clients may use, one a line (refused when its group or others can
    /// read it) [default: one key made at first start, kept 0600 in the data dir's
    /// serve/api-key; stderr says where].
    #[arg(long, value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,
    /// An E2B template id NAME that creates a sandbox from IMAGE (pinned by digest, as
    /// `create --image`); its ENTRYPOINT and CMD never run: sbx's helper idles as
    /// the main process and commands run beside it. Repeatable.
    #[arg(long = "template", value_name = "NAME=IMAGE")]
    pub templates: Vec<String>,
}

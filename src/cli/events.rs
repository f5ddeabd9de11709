//! `sbx events`'s arguments.

// Field doc comments here are clap's help text.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use clap::Args;

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only these sandboxes [default: every sandbox of this host].
    // A filter, not a sandbox to reach: checked by `events` after --since
    // and --until, as it always was.
    #[arg(value_name = "ID")]
    pub ids: Vec<String>,
    /// Replay from this time on: RFC 3339, a duration ago (10m) or unix seconds.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// End at this time (same forms, or +DURATION from now); a past time ends once the replay is printed.
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// End (exit 0) after printing the first event of this kind, e.g. `died`. Repeatable.
    #[arg(long, value_name = "EVENT")]
    pub until_event: Vec<String>,
}

//! `sbx completions` and `sbx man`: their arguments, and the command line
//! both are generated from.

use std::path::PathBuf;

use clap::Args;

use super::examples::AFTER_HELP;
use super::Cli;

/// The shells `sbx completions` writes a script for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Directory to write the pages into (created when missing); existing pages of the same names are replaced.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// The command line as users see it: clap's, without the hidden internal
/// subcommands (`__watchdog` and friends), which clap_complete would
/// otherwise offer at `sbx <TAB>`.
pub fn public_command() -> clap::Command {
    use clap::CommandFactory;
    let full = Cli::command();
    let mut public = clap::Command::new("sbx")
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if let Some(about) = full.get_about() {
        public = public.about(about.clone());
    }
    if let Some(long) = full.get_long_about() {
        public = public.long_about(long.clone());
    }
    public.after_help(AFTER_HELP).subcommand_required(true)
}

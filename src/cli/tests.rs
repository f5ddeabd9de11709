//! The help texts: examples for every subcommand, described positionals.

use super::*;
use clap::CommandFactory;

/// Issue 10, help texts: each listed subcommand has examples, each
/// positional a description; internal commands stay out of the list.
#[test]
fn every_subcommand_has_examples_and_described_positionals() {
    let mut cli = Cli::command();
    cli.build();
    for sub in cli.get_subcommands_mut() {
        let name = sub.get_name().to_string();
        if name == "help" {
            continue;
        }
        if sub.is_hide_set() {
            assert!(name.starts_with("__"), "{name} is hidden");
            continue;
        }
        let help = sub.render_long_help().to_string();
        assert!(
            help.contains("Examples:\n  ") && help.contains(&format!("sbx {name}")),
            "{name} --help has no examples:\n{help}"
        );
        for arg in sub.get_positionals() {
            assert!(arg.get_help().is_some(), "{name}: positional {} has no description", arg.get_id());
        }
    }
    let top = Cli::command().render_help().to_string();
    assert!(!top.contains("__probe") && !top.contains("__watchdog") && !top.contains("__gate"), "{top}");
}

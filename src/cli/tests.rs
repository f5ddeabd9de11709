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
        // `sbx pool`'s subcommands are commands of their own (issue 14).
        if name == "pool" {
            for action in sub.get_subcommands_mut().filter(|a| a.get_name() != "help") {
                let help = action.render_long_help().to_string();
                let full = format!("sbx pool {}", action.get_name());
                assert!(
                    help.contains("Examples:\n  ") && help.contains(&full),
                    "{full} --help has no examples:\n{help}"
                );
                for arg in action.get_positionals() {
                    assert!(arg.get_help().is_some(), "{full}: positional {} has no description", arg.get_id());
                }
            }
        }
    }
    let top = Cli::command().render_help().to_string();
    assert!(!top.contains("__probe") && !top.contains("__watchdog") && !top.contains("__gate"), "{top}");
    assert!(!top.contains("__audit-probe") && !top.contains("__forward"), "{top}");
}

/// `pool create` refuses the flags of one session (exit 2): its help does
/// not offer them, but they still parse so the refusal can name them.
#[test]
fn pool_create_help_hides_the_flags_it_refuses() {
    let mut cli = Cli::command();
    cli.build();
    let pool = cli.find_subcommand_mut("pool").unwrap();
    let help = pool.find_subcommand_mut("create").unwrap().render_long_help().to_string();
    for refused in ["--pool", "--no-fallback", "--session", "--ttl", "--persist", "--clone", "--setup"] {
        let offered = help.lines().any(|l| l.trim_start().split([' ', '\t']).next() == Some(refused));
        assert!(!offered, "{refused} is offered:\n{help}");
    }
    assert!(help.contains("--image") && help.contains("--runtime") && help.contains("--max-idle"), "{help}");
    let parsed = Cli::try_parse_from(["sbx", "pool", "create", "p", "--size", "1", "--image", "x", "--ttl", "5m"]);
    assert!(parsed.is_ok(), "{:?}", parsed.err());
}

//! The help texts: examples for every subcommand, described positionals.

use super::*;
use clap::CommandFactory;

/// Help texts: each listed subcommand has examples, each
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
        // `sbx pool`'s subcommands are commands of their own.
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

/// Every `sbx ...` example in the README and `docs/` parses as written: a
/// renamed flag or subcommand breaks the docs' examples here, not in an
/// operator's script. Synopsis lines (`[--flag]`, `...`) are not examples.
#[test]
fn every_documented_example_parses() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    if let Ok(d) = std::fs::read_dir(root.join("docs")) {
        let mut pages: Vec<_> =
            d.flatten().map(|e| e.path()).filter(|p| p.extension() == Some("md".as_ref())).collect();
        pages.sort();
        files.extend(pages);
    }
    let digest = "a".repeat(64);
    let mut checked = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let mut fenced = false;
        for (n, line) in text.lines().enumerate() {
            if line.starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if !fenced {
                continue;
            }
            for cmd in examples_in(line) {
                if cmd.contains("[--") || cmd.contains("...") || cmd.contains(" | ") {
                    continue;
                }
                let cmd = cmd
                    .replace("\"$id\"", "sbx-0123456789ab")
                    .replace("$id", "sbx-0123456789ab")
                    .replace("\"$img\"", &format!("sha256:{digest}"))
                    .replace("$img", &format!("sha256:{digest}"))
                    .replace("$IMG", &format!("sha256:{digest}"))
                    .replace("<digest>", &digest)
                    .replace("<64 hex>", &digest);
                let words =
                    shlex::split(&cmd).unwrap_or_else(|| panic!("{}:{}: unbalanced quotes: {cmd}", f.display(), n + 1));
                let words: Vec<std::ffi::OsString> = words.into_iter().map(Into::into).collect();
                same_as_the_whole_tree(&words);
                match Cli::try_parse_from(&words) {
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                        ) => {}
                    Err(e) => panic!("{}:{}: `{cmd}` does not parse:\n{e}", f.display(), n + 1),
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 40, "only {checked} examples found: is the extraction still right?");
}

/// The `sbx ...` command lines in one line of a code block: at its start,
/// or after `$(`, `|`, `;`, `&&`; each up to a comment, pipe, `)` or redirect.
fn examples_in(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let t = line.trim_start().trim_start_matches("$ ");
    let mut starts = vec![0usize];
    for pat in ["$(", "| ", "; ", "&& "] {
        starts.extend(t.match_indices(pat).map(|(i, p)| i + p.len()));
    }
    for s in starts {
        let rest = t[s..].trim_start();
        if !rest.starts_with("sbx ") {
            continue;
        }
        let end = rest.find([')', '|', ';', '>', '&']).unwrap_or(rest.len());
        let cmd = rest[..end].split(" #").next().unwrap_or("").trim();
        found.push(cmd.to_string());
    }
    found
}

#[test]
fn the_push_command_is_hidden_and_takes_nothing_but_stdin() {
    use clap::Parser;
    let cli = crate::cli::Cli::try_parse_from(["sbx", "__gate-vault"]).unwrap();
    assert!(matches!(cli.command, crate::cli::Command::GateVault));
    // Never a value on a command line.
    assert!(crate::cli::Cli::try_parse_from(["sbx", "__gate-vault", "real-value"]).is_err());
}

/// What [`fast_parse`] makes of `words` is what the whole tree makes, and
/// it makes nothing of what the whole tree refuses. True when it took it.
fn same_as_the_whole_tree(words: &[std::ffi::OsString]) -> bool {
    let Some(fast) = fast_parse(words) else { return false };
    match Cli::try_parse_from(words) {
        Ok(full) => assert_eq!(format!("{fast:?}"), format!("{full:?}"), "{words:?}"),
        Err(e) => panic!("{words:?}: the fast parse took what the whole tree refuses: {e}"),
    }
    true
}

#[test]
fn the_fast_parse_is_the_whole_tree_s() {
    let id = "sbx-0123456789ab";
    let img = format!("repo@sha256:{}", "a".repeat(64));
    let taken: &[&str] = &[
        "ls",
        "--json ls",
        "ls --json -vv",
        "-v --data-dir /tmp/d --socket-dir=/tmp/s ls",
        "--context=remote ls",
        "exec ID -- /bin/true",
        "exec -i -t -e A=1 -e B=2 -w /state -u 1234:1234 ID -- sh -c 'echo hi'",
        "--json exec -d ID -- sleep 9",
        "inspect ID",
        "inspect ID --json",
        "create --image IMG",
        "create --image IMG --route inference:proxy:8080 --ttl 10m --memory 512 --cpus 1.5 --json",
        "create --image IMG --allow pypi.org --allow 'files.example:80 GET /x' --label a=b -- serve",
        "create --image IMG --runtime runsc --private-routes --socket-wait 0",
    ];
    let words = |line: &str| -> Vec<std::ffi::OsString> {
        let line = line.replace("ID", id).replace("IMG", &img);
        shlex::split(&format!("sbx {line}")).unwrap().into_iter().map(Into::into).collect()
    };
    for line in taken {
        assert!(same_as_the_whole_tree(&words(line)), "the fast parse did not take `sbx {line}`");
    }
    // Help, the version, errors and other commands: the whole tree says them.
    let left: &[&str] = &[
        "--help",
        "--version",
        "ls --help",
        "ls extra",
        "exec ID",
        "exec --bogus ID -- true",
        "inspect",
        "inspect not-an-id",
        "create",
        "create --image IMG --memory lots",
        "destroy ID",
        "list",
        "--json",
        "--data-dir",
        "",
    ];
    for line in left {
        assert!(fast_parse(&words(line)).is_none(), "`sbx {line}` should have taken the whole tree");
    }
}

//! Completions and man pages, checked against the README's
//! table of commands: what a user reads there is what `sbx <TAB>` offers and
//! what `man sbx-...` has. Compared with the README, not with clap's own
//! list, which cannot disagree with itself.

use std::collections::BTreeSet;
use std::process::Command;

use crate::support::*;

/// The commands the README's table lists, each as its words (`["pool", "create"]`).
fn readme_commands() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let rows: Vec<Vec<String>> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `sbx "))
        .filter_map(|l| l.split_once('`'))
        .map(|(cmd, _)| cmd.split_whitespace().map(str::to_string).collect())
        .collect();
    assert!(rows.len() > 30, "the README's command table is missing or cut short: {rows:?}");
    rows
}

/// What bash completes after `sbx WORDS... <TAB>`, through the generated script.
fn bash_completes(script: &std::path::Path, words: &[&str]) -> BTreeSet<String> {
    let line = format!("sbx {} ", words.join(" "));
    let prog = format!(
        "source {}; COMP_WORDS=(sbx {} ''); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT={}; _sbx sbx '' {}; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words.join(" "),
        words.len() + 1,
        line.len(),
        words.last().unwrap_or(&"sbx"),
    );
    let out = Command::new("bash").arg("-c").arg(&prog).output().unwrap();
    assert_success(&out, "bash completion");
    stdout(&out).lines().filter(|w| !w.is_empty() && !w.starts_with('-')).map(str::to_string).collect()
}

#[test]
fn completions_offer_exactly_the_readme_commands() {
    let w = World::new();
    let rows = readme_commands();
    let script = w.socket_root.join("sbx.bash");
    let out = w.sbx(&["completions", "bash"]);
    assert_success(&out, "completions bash");
    std::fs::write(&script, &out.stdout).unwrap();

    let mut top: BTreeSet<String> = rows.iter().map(|r| r[0].clone()).collect();
    top.insert("help".into()); // clap's own `sbx help COMMAND`
    assert_eq!(bash_completes(&script, &[]), top, "`sbx <TAB>` against the README's table");
    for parent in ["pool", "egress", "volumes"] {
        let mut subs: BTreeSet<String> =
            rows.iter().filter(|r| r.len() == 2 && r[0] == parent).map(|r| r[1].clone()).collect();
        subs.insert("help".into());
        assert_eq!(bash_completes(&script, &[parent]), subs, "`sbx {parent} <TAB>` against the README's table");
    }

    for shell in ["zsh", "fish"] {
        let out = w.sbx(&["completions", shell]);
        assert_success(&out, shell);
        let text = stdout(&out);
        for r in &rows {
            for word in r {
                assert!(text.contains(word.as_str()), "{shell} completions lack {word:?} (README row {r:?})");
            }
        }
        assert!(!text.contains("__watchdog") && !text.contains("__pool-fill"), "{shell} offers internal commands");
    }
    let out = w.sbx(&["completions", "tcsh"]);
    assert_exit(&out, 2, "completions tcsh");
}

#[test]
fn man_pages_cover_exactly_the_readme_commands() {
    let w = World::new();
    let dir = w.socket_root.join("man/man1");
    let out = w.sbx(&["man", dir.to_str().unwrap()]);
    assert_success(&out, "sbx man");
    let pages: BTreeSet<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    let listed: BTreeSet<String> = stdout(&out).lines().map(|l| l.rsplit('/').next().unwrap().to_string()).collect();
    assert_eq!(pages, listed, "sbx man prints each page it wrote");

    let rows = readme_commands();
    let want: BTreeSet<String> = rows.iter().map(|r| format!("sbx-{}.1", r.join("-"))).collect();
    let parents: BTreeSet<String> = rows.iter().filter(|r| r.len() > 1).map(|r| format!("sbx-{}.1", r[0])).collect();
    for page in &want {
        assert!(pages.contains(page), "README lists a command with no man page {page}: {pages:?}");
    }
    for page in &pages {
        assert!(
            page == "sbx.1" || want.contains(page) || parents.contains(page),
            "man page {page} is for a command the README's table does not list"
        );
    }
    // A real page: roff with the command's name and its examples.
    let create = std::fs::read_to_string(dir.join("sbx-create.1")).unwrap();
    assert!(create.starts_with(".ie") || create.contains(".TH sbx-create"), "not roff: {}", &create[..80]);
    // roff escapes each `-` of an option: `\-\-image`.
    assert!(
        create.contains("\\-\\-image") && create.contains("Examples"),
        "sbx-create.1 lacks the options or examples"
    );

    let out = w.sbx(&["--json", "man", dir.to_str().unwrap()]);
    assert_success(&out, "sbx --json man");
    assert_eq!(json(&out)["written"].as_array().map(Vec::len), Some(pages.len()));
}

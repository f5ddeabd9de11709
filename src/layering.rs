//! The crate's layering, checked: each top-level module may import (`use
//! crate::X`) only modules listed before it in [`LAYERS`], so dependencies
//! point one way and a newcomer knows where a new piece goes. Also keeps
//! files small enough to read: over [`MAX_LINES`] lines a file must say why
//! in a `layout:` note.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Bottom to top. `model` imports nothing of the crate.
const LAYERS: &[&str] = &[
    "model",
    "spec",
    "docker",
    "error",
    "output",
    "host",
    "gate",
    "workbench",
    "sandbox",
    "checks",
    "cli",
    "commands",
];

const MAX_LINES: usize = 400;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules a file names through `crate::`, including inside
/// `use crate::{a, b::c}` groups. Comments are skipped.
fn imports(text: &str) -> BTreeSet<String> {
    let code: String = text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut found = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            let mut depth = 0;
            let mut item = String::new();
            for c in group[..end].chars().chain([',']) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let name: String =
                            item.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                        found.insert(name);
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
        } else {
            found.insert(rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect());
        }
    }
    found
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_imports_only_the_layers_below_it() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src()).unwrap();
        let top = rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        if matches!(top.as_str(), "lib" | "main" | "layering") {
            continue;
        }
        let Some(level) = LAYERS.iter().position(|l| *l == top) else {
            wrong.push(format!("{}: top-level module {top} is not in LAYERS", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for name in imports(&text) {
            match LAYERS.iter().position(|l| *l == name) {
                Some(at) if at > level => {
                    wrong.push(format!("{} ({top}) imports {name}, a layer above it", rel.display()))
                }
                _ => {}
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}

#[test]
fn files_stay_short_or_say_why() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let n = text.lines().count();
            (n > MAX_LINES && !text.contains("layout:")).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over {MAX_LINES} lines without a `layout:` note: {long:?}");
}

#[test]
fn the_import_reader_sees_groups_and_paths() {
    let text =
        "use crate::{model::Record, spec::{self, Route}, error};\nlet x = crate::docker::argv::run(); // crate::cli";
    let got: Vec<String> = imports(text).into_iter().collect();
    assert_eq!(got, ["docker", "error", "model", "spec"]);
}

//! The crate's layering, checked: each top-level module may import (`use
//! crate::X`) only modules listed before it in [`LAYERS`], so dependencies
//! point one way and a newcomer knows where a new piece goes. Also keeps
//! code small enough to read: no function over [`MAX_FN_LINES`] lines (from
//! its `fn` line to its closing brace) and no file over [`MAX_LINES`],
//! without exceptions; test files (`tests.rs`, anything under a `tests/`
//! folder) are not counted. `circles`: no files that name each other in a
//! circle. `operations`: an operation under `sandbox/ops/` names only
//! `sandbox/shared/` and `Driver`'s public API, never another operation.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

mod circles;
mod operations;

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
    "serve",
    "mcp",
    "commands",
];

const MAX_LINES: usize = 600;
const MAX_FN_LINES: usize = 120;

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

/// Whether `f` holds tests only, which the length caps leave alone.
fn is_test_file(f: &Path) -> bool {
    f.file_name().is_some_and(|n| n == "tests.rs") || f.components().any(|c| c.as_os_str() == "tests")
}

#[test]
fn files_stay_short() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter(|f| !is_test_file(f))
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:?}");
}

#[test]
fn functions_stay_short() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut long = Vec::new();
    for f in files.iter().filter(|f| !is_test_file(f)) {
        for (name, line, n) in long_functions(&std::fs::read_to_string(f).unwrap(), MAX_FN_LINES) {
            long.push(format!("{}:{line} fn {name} ({n} lines)", f.display()));
        }
    }
    assert!(long.is_empty(), "functions over {MAX_FN_LINES} lines, split them into named steps: {long:?}");
}

#[test]
fn a_planted_long_function_is_found() {
    let body = "    let x = \"}\"; // }\n".repeat(121);
    let text = format!(
        "/// doc {{\npub(crate) fn planted() {{\n{body}}}\nfn short() {{ let (c, q) = ('}}', '\\''); let s = \"}}\"; }}\n"
    );
    assert_eq!(long_functions(&text, MAX_FN_LINES), [("planted".to_string(), 2, 123)]);
    assert!(long_functions(&text, 200).is_empty());
}

/// `text` with comments, string and char literals blanked (newlines kept),
/// so braces inside them are not counted.
fn code_only(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        let rest = &b[i..];
        let end = if rest.starts_with(b"//") {
            i + rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len())
        } else if rest.starts_with(b"/*") {
            i + rest.windows(2).position(|w| w == b"*/").map_or(rest.len(), |p| p + 2)
        } else if rest.starts_with(b"r#\"") || rest.starts_with(b"r\"") || rest.starts_with(b"br\"") {
            let hashes = rest.iter().skip_while(|&&c| c == b'b' || c == b'r').take_while(|&&c| c == b'#').count();
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            let open = rest.iter().position(|&c| c == b'"').unwrap_or(0) + 1;
            i + open
                + rest[open..].windows(close.len()).position(|w| w == close).map_or(rest.len(), |p| p + close.len())
        } else if rest[0] == b'"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            i + j + 1
        } else if rest[0] == b'\'' && (rest.get(2) == Some(&b'\'') || rest.get(1) == Some(&b'\\')) {
            // A char literal ('}', '\n', '\'' or '\u{7d}'), not a lifetime: it
            // ends at the first quote after its character (after the
            // backslash and the escaped character when it is an escape).
            let from = if rest[1] == b'\\' { 3 } else { 2 };
            i + rest.get(from..).and_then(|r| r.iter().position(|&c| c == b'\'')).map_or(rest.len(), |p| from + p + 1)
        } else {
            i += 1;
            continue;
        };
        blank(&mut out, i, end);
        i = end;
    }
    out
}

/// Every function in `text` longer than `max` lines: (name, its `fn`
/// line, its length from that line to its closing brace).
fn long_functions(text: &str, max: usize) -> Vec<(String, usize, usize)> {
    let code = code_only(text);
    let code = String::from_utf8_lossy(&code);
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(k) = words.iter().position(|w| *w == "fn") else { continue };
        let before_ok = words[..k].iter().all(|w| {
            w.starts_with("pub") || ["const", "async", "unsafe", "extern", "\"C\""].contains(w) || w.starts_with('(')
        });
        let Some(name) = words.get(k + 1).map(|w| w.split(['(', '<']).next().unwrap_or_default()) else { continue };
        if !before_ok || name.is_empty() {
            continue;
        }
        // Its body: from the first `{` after the signature (a `;` first: no body).
        let (mut depth, mut opened) = (0usize, false);
        let mut end = None;
        'scan: for (n, l) in lines.iter().enumerate().skip(at) {
            let from = if n == at { line.find(" fn ").map_or(0, |p| p + 4) } else { 0 };
            for c in l[from.min(l.len())..].chars() {
                match c {
                    ';' if !opened => break 'scan,
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' if opened => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(n);
                            break 'scan;
                        }
                    }
                    _ => {}
                }
            }
        }
        if let Some(end) = end {
            let n = end - at + 1;
            if n > max {
                found.push((name.to_string(), at + 1, n));
            }
        }
    }
    found
}

#[test]
fn the_import_reader_sees_groups_and_paths() {
    let text =
        "use crate::{model::Record, spec::{self, Route}, error};\nlet x = crate::docker::argv::run(); // crate::cli";
    let got: Vec<String> = imports(text).into_iter().collect();
    assert_eq!(got, ["docker", "error", "model", "spec"]);
}

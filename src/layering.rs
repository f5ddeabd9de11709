//! The crate's layering, checked: each top-level module may import (`use
//! crate::X`) only modules listed before it in [`LAYERS`], so dependencies
//! point one way and a newcomer knows where a new piece goes. Also keeps
//! code small enough to read: no function over [`MAX_FN_LINES`] lines (from
//! its `fn` line to its closing brace) and no file over [`MAX_LINES`],
//! without exceptions; test files (`tests.rs`, anything under a `tests/`
//! folder) are not counted.

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

/// Where a file under `src/sandbox/` sits, for [`operation_violations`].
#[derive(Debug, PartialEq)]
enum Place {
    /// Under `ops/`: the operation's name (its file or folder).
    Op(String),
    /// Anything else that is not a test (`mod.rs`, `shared/`).
    Other,
    /// `testing.rs`, under `tests/`: free to reach into any operation.
    Test,
}

fn place_of(rel: &Path) -> Place {
    let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if is_test_file(rel) || parts.last().is_some_and(|p| p == "testing.rs") {
        return Place::Test;
    }
    match parts.as_slice() {
        [ops, op, ..] if ops == "ops" && op != "mod.rs" => Place::Op(op.trim_end_matches(".rs").to_string()),
        _ => Place::Other,
    }
}

/// How an item of an operation is named from elsewhere.
#[derive(Debug, PartialEq, Clone, Copy)]
enum ItemKind {
    /// A free function: `name(` or `path::name`.
    Fn,
    /// A method of an `impl Driver` block: `.name(` or `Self::name`.
    Method,
    /// A type, const or static: the word itself.
    Word,
}

/// `code` (from [`code_only`]) with every `#[cfg(test)]` item blanked: test
/// modules may use what they test.
fn without_tests(code: &str) -> String {
    let mut b = code.as_bytes().to_vec();
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]").map(|p| p + from) {
        let mut depth = 0usize;
        let mut end = b.len();
        for (i, &c) in b.iter().enumerate().skip(at + "#[cfg(test)]".len()) {
            match c {
                b';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        for c in &mut b[at..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// The items of an operation's file no other file may name: its top-level
/// functions, consts, statics and non-`pub` types, and the methods of its
/// `impl Driver` blocks that are not `pub`. What is left, `pub` methods of
/// `Driver` and the `pub` types they return, is the driver's public API.
fn op_items(code: &str) -> Vec<(String, ItemKind)> {
    let mut found = Vec::new();
    let (mut depth, mut driver_at) = (0usize, None);
    for line in code.lines() {
        let trimmed = line.trim_start();
        if depth == 0 && (trimmed.starts_with("impl Driver ") || trimmed.starts_with("impl crate::sandbox::Driver ")) {
            driver_at = Some(0);
        }
        if let Some((name, kind, public)) = item_of(trimmed) {
            match (depth, driver_at) {
                (0, _) if !(public && kind == ItemKind::Word && !trimmed.contains("const ")) => {
                    found.push((name, kind))
                }
                (1, Some(0)) if kind == ItemKind::Fn && !public => found.push((name, ItemKind::Method)),
                _ => {}
            }
        }
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        driver_at = None;
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// The item `line` starts, if any: its name, how it is named, whether it is
/// plain `pub`.
fn item_of(line: &str) -> Option<(String, ItemKind, bool)> {
    let mut rest = line;
    let mut public = false;
    if let Some(r) = rest.strip_prefix("pub(") {
        rest = &r[r.find(')')? + 1..];
    } else if let Some(r) = rest.strip_prefix("pub ") {
        public = true;
        rest = r;
    }
    let mut words = rest.split_whitespace().skip_while(|w| ["async", "unsafe", "extern"].contains(w)).peekable();
    let mut keyword = words.next()?;
    if keyword == "const" && words.peek() == Some(&"fn") {
        keyword = words.next()?;
    }
    let kind = match keyword {
        "fn" => ItemKind::Fn,
        "struct" | "enum" | "type" | "const" | "static" | "trait" => ItemKind::Word,
        _ => return None,
    };
    let name: String = words.next()?.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    (!name.is_empty()).then_some((name, kind, public))
}

/// Whether `code` names `name` the way `kind` is named.
fn names(code: &str, name: &str, kind: ItemKind) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.match_indices(name).any(|(at, _)| {
        let (before, after) = (&code[..at], &code[at + name.len()..]);
        if before.ends_with(ident) || after.starts_with(ident) {
            return false;
        }
        let called = after.starts_with('(') || after.starts_with("::<");
        // A path's last part (`destroy::private_of`), not a module (`gc::plan::Reap`).
        let path_end = before.ends_with("::") && !after.starts_with("::");
        // An entry of a `use` group: `{private_of, ...}`, `..., private_of}`.
        let grouped = before.trim_end().ends_with(['{', ','])
            && after.trim_start().starts_with([',', '}'])
            && before.rfind("use ").is_some_and(|u| !before[u..].contains(';'));
        match kind {
            ItemKind::Method => (before.ends_with('.') || before.ends_with("::")) && called,
            ItemKind::Fn => !before.ends_with('.') && (called || path_end || grouped),
            ItemKind::Word => !before.ends_with('.'),
        }
    })
}

/// Files under `src/sandbox/` (path relative to it, text) that name an item
/// of an operation they are not part of (see [`op_items`]): an operation
/// uses what `shared/` holds and `Driver`'s public API, never another
/// operation's helpers, and neither `shared/` nor the driver's own file
/// reaches into an operation.
fn operation_violations(files: &[(PathBuf, String)]) -> Vec<String> {
    let code: Vec<(&Path, Place, String)> = files
        .iter()
        .map(|(rel, text)| {
            let code = without_tests(&String::from_utf8_lossy(&code_only(text)));
            (rel.as_path(), place_of(rel), without_reexports(&code))
        })
        .filter(|(_, place, _)| *place != Place::Test)
        .collect();
    let mut wrong = Vec::new();
    for (owner, place, text) in &code {
        let Place::Op(op) = place else { continue };
        for (name, kind) in op_items(text) {
            for (user, at, used) in &code {
                let own = item_of_any(used, &name);
                if *at == Place::Op(op.clone()) || own || !names(used, &name, kind) {
                    continue;
                }
                wrong.push(format!(
                    "{} names {name} of operation {op} ({}): move it to sandbox/shared/, or use Driver's public API",
                    user.display(),
                    owner.display()
                ));
            }
        }
    }
    wrong
}

/// `code` without its `pub use` statements: a re-export is the public API
/// (`sandbox::whole_seconds`), not a use.
fn without_reexports(code: &str) -> String {
    code.lines().map(|l| if l.trim_start().starts_with("pub use ") { "" } else { l }).collect::<Vec<_>>().join("\n")
}

/// Whether `code` defines an item called `name` itself (at any depth), which
/// its own uses of the name then mean.
fn item_of_any(code: &str, name: &str) -> bool {
    code.lines().filter_map(|l| item_of(l.trim_start())).any(|(n, ..)| n == name)
}

#[test]
fn operations_name_only_shared_items_and_the_public_api() {
    let root = src().join("sandbox");
    let mut paths = Vec::new();
    rust_files(&root, &mut paths);
    let files: Vec<(PathBuf, String)> = paths
        .iter()
        .map(|p| (p.strip_prefix(&root).unwrap().to_path_buf(), std::fs::read_to_string(p).unwrap()))
        .collect();
    let wrong = operation_violations(&files);
    assert!(wrong.is_empty(), "operations reach into each other:\n{}", wrong.join("\n"));
}

#[test]
fn a_planted_reach_into_another_operation_is_found() {
    let destroy = "impl Driver {\n    pub fn destroy(&self) {}\n    pub(in crate::sandbox) fn remove_tolerant(&self) {}\n}\nfn private_of() {}\npub struct Destroyed {}\n#[cfg(test)]\nmod tests {\n    fn helper() {}\n}\n";
    let shared = "impl Driver {\n    pub(in crate::sandbox) fn remove_gates(&self) {}\n}\n";
    let egress = |body: &str| {
        format!("use crate::sandbox::Driver;\nimpl Driver {{\n    pub fn allow(&self) {{\n        {body}\n    }}\n}}\n")
    };
    let tree = |body: &str| {
        vec![
            (PathBuf::from("ops/destroy.rs"), destroy.to_string()),
            (PathBuf::from("shared/gates.rs"), shared.to_string()),
            (PathBuf::from("ops/egress.rs"), egress(body)),
            (PathBuf::from("tests/egress.rs"), "fn t() { rig.driver.remove_tolerant(); }".to_string()),
        ]
    };
    // The public API, shared helpers, and a comment or string naming a helper: fine.
    let fine = "self.destroy(); self.remove_gates(); // self.remove_tolerant()\n let s = \"private_of()\"; helper();";
    assert_eq!(operation_violations(&tree(fine)), Vec::<String>::new());
    let fine = format!("{fine}\n use crate::sandbox::ops::destroy::Destroyed; let private_of = 1; f(private_of);");
    let fine = format!("{fine}\npub use crate::sandbox::ops::destroy::private_of;");
    assert_eq!(operation_violations(&tree(&fine)), Vec::<String>::new());
    for planted in [
        "self.remove_tolerant();",
        "crate::sandbox::ops::destroy::private_of();",
        "use crate::sandbox::ops::destroy::{private_of, Destroyed};",
        "use crate::sandbox::ops::destroy::private_of;",
        "pub(crate) use crate::sandbox::ops::destroy::private_of;",
    ] {
        let got = operation_violations(&tree(planted));
        assert_eq!(got.len(), 1, "{planted}: {got:?}");
        assert!(got[0].starts_with("ops/egress.rs names ") && got[0].contains("of operation destroy"), "{got:?}");
    }
}

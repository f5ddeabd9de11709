//! Operations under `sandbox/ops/` name only `sandbox/shared/` and
//! `Driver`'s public API, never each other's items.

use std::path::{Path, PathBuf};

use super::{code_only, is_test_file, rust_files, src};

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
pub(super) fn without_tests(code: &str) -> String {
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
pub(super) fn without_reexports(code: &str) -> String {
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

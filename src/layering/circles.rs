//! No files that name each other in a circle.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::operations::{without_reexports, without_tests};
use super::{code_only, is_test_file, rust_files, src};

/// The module path of `rel` (relative to `src/`): `sandbox/ops/mod.rs` is
/// `[sandbox, ops]`, `lib.rs` is `[]`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap_or_default();
    if !matches!(last.as_str(), "mod.rs" | "lib.rs" | "main.rs") {
        parts.push(last.trim_end_matches(".rs").to_string());
    }
    parts
}

/// The modules `code` (of the file whose module is `me`) names through
/// `crate::` or `super::` paths, each as a full path (an item at its end
/// included; [`file_of`] finds the file).
fn paths_named(code: &str, me: &[String]) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::").chain(code.match_indices("super::")) {
        let before = &code[..at];
        if before.ends_with(ident) || before.ends_with("::") {
            continue;
        }
        let mut segs: Vec<String> = me.to_vec();
        let mut rest = &code[at..];
        if let Some(r) = rest.strip_prefix("crate::") {
            segs.clear();
            rest = r;
        }
        while let Some(r) = rest.strip_prefix("super::") {
            segs.pop();
            rest = r;
        }
        loop {
            let name: String = rest.chars().take_while(|c| ident(*c)).collect();
            if name.is_empty() {
                break;
            }
            rest = &rest[name.len()..];
            segs.push(name);
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `use super::{a, b::c}`: each entry's first segment.
            for entry in group[..group.find('}').unwrap_or(group.len())].split(',') {
                let name: String = entry.trim().chars().take_while(|c| ident(*c)).collect();
                if !name.is_empty() && name != "self" {
                    found.push(segs.iter().cloned().chain([name]).collect());
                }
            }
        }
        found.push(segs);
    }
    found
}

/// The file of the longest prefix of `path` that is a module in `modules`.
fn file_of<'a>(path: &[String], modules: &'a [(Vec<String>, PathBuf)]) -> Option<&'a (Vec<String>, PathBuf)> {
    (0..=path.len()).rev().find_map(|n| modules.iter().find(|(m, _)| m.as_slice() == &path[..n]))
}

/// Circles of files that name each other (through `crate::` and `super::`
/// paths; `pub use` re-exports and test code left out), each as its files.
/// A file naming its own ancestor (a child using `sandbox::Driver`) or
/// descendant is how modules nest, not a circle: only the files of
/// neither kind are joined.
fn file_circles(files: &[(PathBuf, String)]) -> Vec<Vec<PathBuf>> {
    let modules: Vec<(Vec<String>, PathBuf)> = files.iter().map(|(f, _)| (module_of(f), f.clone())).collect();
    let nested = |a: &[String], b: &[String]| a.starts_with(b) || b.starts_with(a);
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); files.len()];
    for (i, (rel, text)) in files.iter().enumerate() {
        let code = without_reexports(&without_tests(&String::from_utf8_lossy(&code_only(text))));
        let me = &modules[i].0;
        for path in paths_named(&code, me) {
            if let Some((m, f)) = file_of(&path, &modules) {
                if !nested(me, m) && f != rel {
                    edges[i].insert(modules.iter().position(|(_, g)| g == f).unwrap_or(i));
                }
            }
        }
    }
    // Each file's set of files it reaches; a circle is a set of files that reach each other.
    let reach = |from: usize| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(n) = todo.pop() {
            for &m in &edges[n] {
                if seen.insert(m) {
                    todo.push(m);
                }
            }
        }
        seen
    };
    let reached: Vec<BTreeSet<usize>> = (0..files.len()).map(reach).collect();
    let mut circles: Vec<Vec<PathBuf>> = Vec::new();
    for i in 0..files.len() {
        let circle: Vec<PathBuf> = (0..files.len())
            .filter(|&j| reached[i].contains(&j) && reached[j].contains(&i))
            .map(|j| files[j].0.clone())
            .collect();
        if !circle.is_empty() && !circles.contains(&circle) {
            circles.push(circle);
        }
    }
    circles
}

#[test]
fn no_files_name_each_other_in_a_circle() {
    let mut paths = Vec::new();
    rust_files(&src(), &mut paths);
    let files: Vec<(PathBuf, String)> = paths
        .iter()
        .map(|p| (p.strip_prefix(src()).unwrap().to_path_buf(), std::fs::read_to_string(p).unwrap()))
        .filter(|(rel, _)| !is_test_file(rel) && !rel.ends_with("sandbox/testing.rs"))
        .collect();
    let circles: Vec<String> = file_circles(&files)
        .iter()
        .map(|c| c.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(" <-> "))
        .collect();
    assert!(circles.is_empty(), "files that name each other:\n{}", circles.join("\n"));
}

#[test]
fn a_planted_file_circle_is_found() {
    let tree = |pool: &str| {
        vec![
            (PathBuf::from("lib.rs"), "pub mod commands;\nfn run() { commands::run(); }".to_string()),
            (
                PathBuf::from("commands/mod.rs"),
                "mod create;\nmod pool;\nuse crate::Env;\npub struct Context;".to_string(),
            ),
            (
                PathBuf::from("commands/create.rs"),
                "use super::Context;\npub fn exec() { super::pool::claim(); }".to_string(),
            ),
            (PathBuf::from("commands/pool.rs"), pool.to_string()),
        ]
    };
    // Naming a parent (`super::Context`, `crate::Env`) is nesting, not a circle.
    assert_eq!(file_circles(&tree("use super::Context;\npub fn claim() {}")), Vec::<Vec<PathBuf>>::new());
    for planted in [
        "pub fn claim() { super::create::exec(); }",
        "use super::{create, Context};",
        "use crate::commands::create::exec;",
    ] {
        let got = file_circles(&tree(planted));
        assert_eq!(got, [vec![PathBuf::from("commands/create.rs"), PathBuf::from("commands/pool.rs")]], "{planted}");
    }
}

//! One path at a time, through the helper's `stat`, `remove` and `move`
//! (helper/fsops.rs): what `sbx serve`'s envd filesystem API needs beside
//! [`listing`](super::listing). None follows a symlink at the path: a link
//! is stat'ed, removed and moved itself, never what it points to. The
//! helper's answer is parsed by [`lines`] and checked as a whole.

use crate::error::Result;

use super::helper::{check_helper, helper_argv, run, transfer_failure};
use super::lines::{self, Entry, ListLine};
use super::transfer::wire::refused;
use super::Target;

/// The one entry a `stat` (or `move`) answer holds: `ROOT T`, `E ...` of
/// `path`'s own name and kind, `END 1 0`; anything else is refused.
pub fn parse_stat(out: &[u8], path: &str) -> std::result::Result<Entry, String> {
    let base = path.rsplit('/').next().unwrap_or("").as_bytes();
    let mut root = None;
    let mut entry = None;
    let mut ended = false;
    let mut rest = out;
    while !rest.is_empty() {
        let Some(n) = rest.iter().position(|b| *b == b'\n') else { return Err("a cut-off line".into()) };
        let (line, tail) = (&rest[..n], &rest[n + 1..]);
        rest = tail;
        match (lines::parse_list(line).map_err(|m| m.0)?, &root, &entry, ended) {
            (ListLine::Root(k), None, None, false) => root = Some(k),
            (ListLine::Entry(e), Some(k), None, false) => {
                if e.kind != *k || e.path.0.len() != 1 || e.path.name() != base {
                    return Err("an entry that is not the path itself".into());
                }
                entry = Some(e);
            }
            (ListLine::End { count: 1, cut: 0 }, Some(_), Some(_), false) => ended = true,
            _ => return Err("not a single ROOT, entry and END".into()),
        }
    }
    match (entry, ended) {
        (Some(e), true) => Ok(e),
        _ => Err("the answer ended early".into()),
    }
}

fn one_entry(t: &Target, argv: &[std::ffi::OsString], path: &str, doing: &str) -> Result<Entry> {
    let out = run(t, argv)?;
    check_helper(t, argv, &out)?;
    parse_stat(&out.stdout, path).map_err(|m| {
        transfer_failure(
            format!("{doing} {}:{path}", t.sandbox),
            refused(std::io::ErrorKind::InvalidData, format!("refusing the helper's answer: {m}")),
        )
    })
}

/// `path` (canonical, not `/`) itself: its kind, mode, size, mtime and,
/// for a symlink, its target, never followed.
pub fn stat(t: &Target, path: &str) -> Result<Entry> {
    let argv = helper_argv(t, false, &["stat", path]);
    one_entry(t, &argv, path, "looking at")
}

/// Remove `path` (canonical, not `/`): a file or symlink (the link itself,
/// its target untouched) or a directory with all it holds.
pub fn remove(t: &Target, path: &str) -> Result<()> {
    let argv = helper_argv(t, false, &["remove", path]);
    let out = run(t, &argv)?;
    check_helper(t, &argv, &out)
}

/// Rename `from` to `to` (both canonical, not `/`), making `to`'s missing
/// parents, replacing what is at `to` as rename(2) does (a symlink there
/// is replaced, never written through). `to` as it is then.
pub fn rename(t: &Target, from: &str, to: &str) -> Result<Entry> {
    let argv = helper_argv(t, false, &["move", from, to]);
    one_entry(t, &argv, to, "moving to")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::fake::FakeDocker;
    use crate::docker::Output;
    use crate::workbench::lines::Kind;

    const ID: &str = "sbx-0123456789ab";

    #[test]
    fn stat_is_one_entry_of_the_path_itself() {
        let f = FakeDocker::new();
        f.push(Output::ok("ROOT l\nE l 777 4 10 6c 2f657463\nEND 1 0\n"));
        let e = stat(&Target::test(&f, ID), "/tmp/l").unwrap();
        assert_eq!((e.kind, e.target.as_deref()), (Kind::Symlink, Some(&b"/etc"[..])));
        assert_eq!(f.calls()[0], ["exec", "--", ID, "/run/sbx/helper", "stat", "/tmp/l"]);
        f.push(Output::fail(crate::workbench::helper_exit::NO_SUCH_PATH, ""));
        assert_eq!(stat(&Target::test(&f, ID), "/nope").unwrap_err().kind(), "no_such_path");
    }

    /// A forged answer is refused as a whole.
    #[test]
    fn hostile_stat_answers_are_refused() {
        for out in [
            "E f 644 3 10 61 -\nEND 1 0\n",
            "ROOT f\nE f 644 3 10 62 -\nEND 1 0\n",
            "ROOT d\nE f 644 3 10 61 -\nEND 1 0\n",
            "ROOT f\nE f 644 3 10 61 -\n",
            "ROOT f\nE f 644 3 10 61 -\nEND 1 0\nE f 644 3 10 61 -\n",
            "ROOT f\nE f 644 3 10 61 -\nEND 1 0",
            "ROOT f\nE f 644 3 10 61/62 -\nEND 1 0\n",
        ] {
            assert!(parse_stat(out.as_bytes(), "/tmp/a").is_err(), "{out:?}");
            let f = FakeDocker::new();
            f.push(Output::ok(out));
            let e = stat(&Target::test(&f, ID), "/tmp/a").unwrap_err();
            assert!(e.to_string().contains("refusing the helper's answer"), "{out:?}: {e}");
        }
    }

    #[test]
    fn remove_and_move_name_their_paths() {
        use crate::workbench::helper_exit::*;
        let f = FakeDocker::new();
        f.push(Output::ok(""));
        remove(&Target::test(&f, ID), "/tmp/a").unwrap();
        f.push(Output::fail(NO_SUCH_PATH, ""));
        assert_eq!(remove(&Target::test(&f, ID), "/tmp/b").unwrap_err().kind(), "no_such_path");
        f.push(Output::ok("ROOT f\nE f 644 3 10 63 -\nEND 1 0\n"));
        let e = rename(&Target::test(&f, ID), "/tmp/a", "/tmp/x/c").unwrap();
        assert_eq!((e.kind, e.size), (Kind::File, 3));
        f.push(Output::fail(EXISTS, ""));
        assert_eq!(rename(&Target::test(&f, ID), "/tmp/a", "/tmp/d").unwrap_err().kind(), "exists");
        let helper = |args: &str| format!("exec -- {ID} /run/sbx/helper {args}");
        assert_eq!(
            f.brief(),
            [
                helper("remove /tmp/a"),
                helper("remove /tmp/b"),
                helper("move /tmp/a /tmp/x/c"),
                helper("move /tmp/a /tmp/d")
            ]
        );
    }
}

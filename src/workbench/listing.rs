//! `sbx files` and `sbx mkdir`: a directory's entries and a new directory,
//! through the helper's `list` and `mkdir` (helper/fsops.rs), so they work
//! on an image with no tools. The helper's output is parsed by [`lines`]
//! and checked here as a whole: the order of its lines, the entry cap, the
//! depth, the count it claims.

use std::io::BufReader;

use crate::error::{Error, Explained, Invalid, Result};

use super::helper::{check_helper, helper_argv, run, run_stream, streamed, transfer_failure};
use super::lines::{self, Entry, Kind, ListLine, RelPath};
use super::transfer::wire::refused;
use super::Target;

/// How deep and how much `files` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListOpts {
    /// 1: the directory's own entries.
    pub max_depth: u32,
    pub limit: u64,
}

pub const DEFAULT_DEPTH: u32 = 16;
/// Deeper paths would not fit the helper's bounded lines ([`lines::MAX_LINE`]).
pub const MAX_DEPTH: u32 = 64;
pub const DEFAULT_LIMIT: u64 = 100_000;
/// The most `--limit` takes: the helper holds up to that many names of one directory to sort them.
pub const MAX_LIMIT: u64 = 10_000_000;

/// What a listing said besides its entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// PATH itself is a directory (its entries were listed), not one entry.
    pub root_is_dir: bool,
    pub count: u64,
    /// Stopped at the entry cap.
    pub truncated: bool,
    /// Directories at the depth limit, not descended into.
    pub cut: u64,
    /// Entries that could not be read (first 100), with their errno.
    pub unreadable: Vec<(RelPath, i32)>,
    pub unreadable_count: u64,
}

/// What a sink gets, in order: the root's kind, then each entry.
pub enum Item<'a> {
    Root(Kind),
    Entry(&'a Entry),
}

/// A sandbox path as the user gave it: absolute, no NUL, no `..`, at most
/// 4095 bytes; made canonical (`//`, `/./` and a trailing `/` dropped, so a
/// trailing slash never makes the helper follow a symlink).
pub fn sandbox_path(what: &'static str, s: &str) -> std::result::Result<String, Invalid> {
    if !s.starts_with('/') {
        return Err(Invalid::new(what, s, "it must be an absolute path in the sandbox, e.g. /tmp/work"));
    }
    if s.contains('\0') {
        return Err(Invalid::new(what, s, "it contains a NUL byte"));
    }
    if s.len() > 4095 {
        return Err(Invalid::new(what, s, "it is longer than PATH_MAX (4095 bytes)"));
    }
    let parts: Vec<&str> = s.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    if parts.contains(&"..") {
        return Err(Invalid::new(what, s, "it may not contain '..'; name the directory itself"));
    }
    Ok(format!("/{}", parts.join("/")))
}

/// Validate the helper's lines as one listing and hand each entry to `sink`.
/// Every refusal names what was wrong; nothing the sandbox claims sizes a buffer.
fn read_listing(
    r: &mut dyn std::io::Read,
    opts: ListOpts,
    path: &str,
    sum: &mut Summary,
    sink: &mut dyn FnMut(Item<'_>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let bad = |m: String| refused(std::io::ErrorKind::InvalidData, format!("refusing the helper's listing: {m}"));
    let mut r = BufReader::new(r);
    let mut buf = Vec::new();
    let mut root = None;
    let mut ended = false;
    let base = path.rsplit('/').next().unwrap_or("").as_bytes();
    // A last line cut off is `UnexpectedEof` (as in `watch`): the helper
    // killed mid-line, by its sandbox's end when that has ended (`streamed`).
    let read = |r: &mut BufReader<_>, buf: &mut Vec<u8>| {
        lines::read_line(r, buf).map_err(|m| match m.0 == lines::CUT_OFF {
            true => refused(std::io::ErrorKind::UnexpectedEof, format!("refusing the helper's listing: {}", m.0)),
            false => bad(m.0),
        })
    };
    while read(&mut r, &mut buf)?.is_some() {
        if ended {
            return Err(bad("a line after the end".into()));
        }
        let line = lines::parse_list(&buf).map_err(|m| bad(m.0))?;
        match (root, line) {
            (None, ListLine::Root(k)) => {
                root = Some(k);
                sum.root_is_dir = k == Kind::Dir;
                sink(Item::Root(k))?;
            }
            (None, _) | (Some(_), ListLine::Root(_)) => return Err(bad("no single ROOT line first".into())),
            (Some(k), ListLine::Entry(e)) => {
                if sum.count >= opts.limit {
                    return Err(bad(format!("more than the {} entries asked for", opts.limit)));
                }
                if e.path.0.len() as u64 > opts.max_depth as u64 {
                    return Err(bad("an entry deeper than asked for".into()));
                }
                if k != Kind::Dir && (sum.count > 0 || e.path.0.len() != 1 || e.path.name() != base || e.kind != k) {
                    return Err(bad("a single entry that is not the path itself".into()));
                }
                sum.count += 1;
                sink(Item::Entry(&e))?;
            }
            (Some(_), ListLine::Unreadable { path, errno }) => {
                sum.unreadable_count += 1;
                if sum.unreadable.len() < 100 {
                    sum.unreadable.push((path, errno));
                }
            }
            (Some(_), ListLine::Truncated) => sum.truncated = true,
            (Some(_), ListLine::End { count, cut }) => {
                if count != sum.count {
                    return Err(bad(format!("it claims {count} entries but sent {}", sum.count)));
                }
                sum.cut = cut;
                ended = true;
            }
        }
    }
    if !ended {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the listing ended early"));
    }
    Ok(())
}

/// List `path` (canonical, see [`sandbox_path`]) in sandbox `id`, streamed:
/// `sink` gets each entry as it is checked; a sink error (stdout closed)
/// stops the helper.
pub fn list(
    t: &Target,
    path: &str,
    opts: ListOpts,
    sink: &mut dyn FnMut(Item<'_>) -> std::io::Result<()>,
) -> Result<Summary> {
    let depth = opts.max_depth.to_string();
    let limit = opts.limit.to_string();
    let argv = helper_argv(t, false, &["list", path, &depth, &limit]);
    let mut sum = Summary::default();
    let mut output = |r: &mut dyn std::io::Read| read_listing(r, opts, path, &mut sum, sink);
    let r = run_stream(t, &argv, None, &mut output)?;
    if let Err(e) = &r.output {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Ok(sum); // `sbx files ... | head`: the helper was stopped
        }
    }
    streamed(t, &argv, r, || format!("listing {}:{path}", t.sandbox))?;
    Ok(sum)
}

/// Create directory `path` in sandbox `id` (`parents`: and its missing
/// parents; one already there is fine). Ok(true): it was created.
pub fn mkdir(t: &Target, path: &str, parents: bool) -> Result<bool> {
    let mut args = vec!["mkdir", path];
    if parents {
        args.push("-p");
    }
    let argv = helper_argv(t, false, &args);
    let out = run(t, &argv)?;
    match check_helper(t, &argv, &out) {
        Ok(()) => {}
        // ENOENT from mkdir(2) is the parent's: say so.
        Err(Error::Explained(Explained::NoSuchPath { id, path })) => {
            return Err(Explained::NoParent { id, path }.into())
        }
        Err(e) => return Err(e),
    }
    match out.stdout_str().trim() {
        "created" => Ok(true),
        "existed" => Ok(false),
        other => Err(transfer_failure(
            format!("creating {}:{path}", t.sandbox),
            refused(std::io::ErrorKind::InvalidData, format!("unexpected answer from the helper: {other:?}")),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::fake::FakeDocker;
    use crate::docker::Output;

    const ID: &str = "sbx-0123456789ab";

    fn collect(f: &FakeDocker, path: &str, opts: ListOpts) -> Result<(Summary, Vec<Entry>)> {
        let mut got = Vec::new();
        let sum = list(&Target::test(f, ID), path, opts, &mut |i| {
            if let Item::Entry(e) = i {
                got.push(e.clone());
            }
            Ok(())
        })?;
        Ok((sum, got))
    }

    const OPTS: ListOpts = ListOpts { max_depth: 2, limit: 10 };

    #[test]
    fn paths_are_checked_and_made_canonical() {
        assert_eq!(sandbox_path("path", "/tmp//a/./b/").unwrap(), "/tmp/a/b");
        assert_eq!(sandbox_path("path", "/").unwrap(), "/");
        assert_eq!(sandbox_path("path", "//").unwrap(), "/");
        for bad in ["tmp/a", "", "/a/../b", "/a\0b"] {
            assert!(sandbox_path("path", bad).is_err(), "{bad:?}");
        }
        assert!(sandbox_path("path", &format!("/{}", "a".repeat(4095))).is_err());
    }

    #[test]
    fn a_listing_streams_through_the_fake() {
        let f = FakeDocker::new();
        f.push(Output::ok(
            "ROOT d\nE f 644 3 10 61 -\nE d 755 0 10 62 -\nE l 777 4 10 62/63 2f657463\nW 62/64 13\nEND 3 1\n",
        ));
        let (sum, got) = collect(&f, "/tmp", OPTS).unwrap();
        assert_eq!(f.calls()[0], ["exec", "--", ID, "/run/sbx/helper", "list", "/tmp", "2", "10"]);
        assert_eq!(got.len(), 3);
        assert_eq!(got[2].target.as_deref(), Some(&b"/etc"[..]));
        assert_eq!((sum.root_is_dir, sum.count, sum.cut, sum.unreadable_count), (true, 3, 1, 1));
    }

    /// What a hostile helper may send is refused as a whole, in sbx's words.
    #[test]
    fn hostile_listings_are_refused() {
        for (out, why) in [
            ("E f 644 3 10 61 -\nEND 1 0\n", "no single ROOT"),
            ("ROOT d\nROOT d\nEND 0 0\n", "no single ROOT"),
            ("ROOT d\nE f 644 3 10 61 -\n", "ended early"),
            ("ROOT d\nEND 5 0\n", "claims 5"),
            ("ROOT d\nEND 0 0\nE f 644 3 10 61 -\n", "after the end"),
            ("ROOT d\nE f 644 3 10 61/62/63 -\nEND 1 0\n", "deeper"),
            ("ROOT f\nE f 644 3 10 6f -\nEND 1 0\n", "not the path itself"),
            ("ROOT d\nE f 644 3 10 2f -\nEND 1 0\n", "single path component"),
            ("ROOT d\nE f 644 3 10 61 -\r\nEND 1 0\n", "refusing"),
        ] {
            let f = FakeDocker::new();
            f.push(Output::ok(out));
            let e = collect(&f, "/tmp/a", OPTS).unwrap_err();
            assert!(e.to_string().contains(why), "{out:?}: {e}");
            assert!(e.to_string().starts_with(&format!("listing {ID}:/tmp/a")), "{e}");
            assert_eq!(f.calls(), [["exec", "--", ID, "/run/sbx/helper", "list", "/tmp/a", "2", "10"]]);
        }
        let many: String = (0..11).map(|i| format!("E f 644 0 0 {:02x} -\n", i + 0x41)).collect();
        let f = FakeDocker::new();
        f.push(Output::ok(&format!("ROOT d\n{many}END 11 0\n")));
        assert!(collect(&f, "/t", OPTS).unwrap_err().to_string().contains("more than the 10 entries"));
        assert_eq!(f.calls(), [["exec", "--", ID, "/run/sbx/helper", "list", "/t", "2", "10"]]);
    }

    #[test]
    fn a_single_entry_and_errors() {
        let f = FakeDocker::new();
        f.push(Output::ok("ROOT l\nE l 777 4 10 6c 2f657463\nEND 1 0\n"));
        let (sum, got) = collect(&f, "/tmp/l", OPTS).unwrap();
        assert!(!sum.root_is_dir);
        assert_eq!(got[0].kind, Kind::Symlink);
        f.push(Output::fail(super::super::helper_exit::NO_SUCH_PATH, ""));
        assert_eq!(collect(&f, "/nope", OPTS).unwrap_err().kind(), "no_such_path");
        f.push(Output::fail(1, "Error response from daemon: Container 0123abcd is not running"));
        assert_eq!(collect(&f, "/nope", OPTS).unwrap_err().kind(), "not_running");
        let list = |path: &str| format!("exec -- {ID} /run/sbx/helper list {path} 2 10");
        assert_eq!(f.brief(), [list("/tmp/l"), list("/nope"), list("/nope")], "no look-up after either failure");
    }

    /// A helper its sandbox stopped: cut off at the deadline, said as the helper's silence.
    #[test]
    fn a_silent_helper_is_a_helper_timeout() {
        let f = FakeDocker::new();
        f.push_timeout(std::time::Duration::from_secs(3));
        let e = collect(&f, "/tmp", OPTS).unwrap_err();
        assert_eq!(e.kind(), "helper_timeout");
        assert!(e.to_string().contains("did not answer for 3s while listing /tmp"), "{e}");
        f.push_timeout(std::time::Duration::from_secs(3));
        assert_eq!(mkdir(&Target::test(&f, ID), "/tmp/a", false).unwrap_err().kind(), "helper_timeout");
        let helper = |args: &str| format!("exec -- {ID} /run/sbx/helper {args}");
        assert_eq!(f.brief(), [helper("list /tmp 2 10"), helper("mkdir /tmp/a")]);
    }

    #[test]
    fn mkdir_says_what_went_wrong() {
        use super::super::helper_exit::*;
        let f = FakeDocker::new();
        f.push(Output::ok("created\n"));
        assert!(mkdir(&Target::test(&f, ID), "/tmp/a", false).unwrap());
        assert_eq!(f.calls()[0], ["exec", "--", ID, "/run/sbx/helper", "mkdir", "/tmp/a"]);
        f.push(Output::ok("existed\n"));
        assert!(!mkdir(&Target::test(&f, ID), "/tmp/a", true).unwrap());
        assert_eq!(f.calls()[1].last().unwrap(), "-p");
        for (code, kind) in [
            (EXISTS, "exists"),
            (NO_SUCH_PATH, "no_parent"),
            (READ_ONLY, "read_only"),
            (DENIED, "permission_denied"),
            (NOT_A_DIRECTORY, "not_a_directory"),
        ] {
            f.push(Output::fail(code, ""));
            let e = mkdir(&Target::test(&f, ID), "/x/y", false).unwrap_err();
            assert_eq!(e.kind(), kind);
            assert!(e.to_string().contains("/x/y"), "{e}");
        }
        f.push(Output::ok("\x1b[2Jforged\n"));
        let e = mkdir(&Target::test(&f, ID), "/x", false).unwrap_err();
        assert!(e.to_string().contains("unexpected answer"), "{e}");
    }
}

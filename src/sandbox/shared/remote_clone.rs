//! `--clone` into a `--persist` session on a remote engine: git
//! clones on this machine, as locally (`persist::clone`: same invocation,
//! same credentials), into a fresh 0700 directory of the data dir, and the
//! tree goes to the engine as a tar on `docker cp -a`'s stdin, through the
//! session's never-started filler (`remote_state`), into `upper/`: no path
//! of this machine is in any argv, and nothing of the sandbox runs.
//!
//! `upper/` is what the previous sandbox wrote (hostile), so its
//! `workspace` is only looked at, as a tar `docker cp` prints (a link as
//! itself), and read no further than needed: a non-empty directory is the
//! session's earlier work and kept, anything but a directory is refused
//! (as locally), and only an absent or empty one gets the tree.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::docker::argv::{remote, remote_state as rs};
use crate::docker::status_error;
use crate::error::{Error, Result, SessionError};
use crate::host::persist::{self, Cloned};
use crate::sandbox::Driver;
use crate::spec::{CloneSpec, UserSpec};

/// Bounds of the tree sent: a clone past them is refused before anything
/// reaches the engine (clone inside the sandbox instead).
const MAX_ENTRIES: usize = 1_000_000;
const MAX_BYTES: u64 = 4 << 30;
const MAX_DEPTH: usize = 256;

/// Where the sandbox sees what the filler finds at `DIR/upper/workspace`.
const SEEN_AS: &str = "/state/workspace";

/// What `upper/workspace` is, as far as sbx needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Workspace {
    Absent,
    Empty,
    /// A directory with something in it: the session's earlier work.
    Full,
    /// Not a directory: what it is.
    Other(String),
}

/// One entry of the clone, as it goes into the tar.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    /// Relative to the clone's parent: `workspace/...`.
    rel: PathBuf,
    kind: Kind,
    mode: u32,
    mtime: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Dir,
    File(u64),
    Link(PathBuf),
}

fn too_big(what: String) -> Error {
    Error::io(
        "sending the clone to the engine",
        std::io::Error::other(format!(
            "the clone is too large ({what}); clone inside the sandbox instead (`sbx exec ID -- git clone URL /state/workspace`)"
        )),
    )
}

/// The clone's entries under `parent/workspace`, never following a link,
/// within the bounds. Sockets, FIFOs and devices (git makes none) are left
/// out; a file linked twice goes as two files.
fn walk(parent: &Path) -> Result<Vec<Item>> {
    use std::os::unix::fs::MetadataExt;
    let mut items = Vec::new();
    let mut bytes = 0u64;
    let mut todo = vec![(PathBuf::from("workspace"), 0usize)];
    while let Some((rel, depth)) = todo.pop() {
        let path = parent.join(&rel);
        let md = std::fs::symlink_metadata(&path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let kind = if md.is_dir() {
            Kind::Dir
        } else if md.is_file() {
            bytes += md.len();
            Kind::File(md.len())
        } else if md.file_type().is_symlink() {
            Kind::Link(std::fs::read_link(&path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?)
        } else {
            continue;
        };
        if items.len() >= MAX_ENTRIES || bytes > MAX_BYTES || depth > MAX_DEPTH {
            return Err(too_big(format!("over {MAX_ENTRIES} entries, {} GiB or {MAX_DEPTH} levels", MAX_BYTES >> 30)));
        }
        // Permission bits and sticky; no setuid or setgid (the owner changes).
        items.push(Item {
            rel: rel.clone(),
            kind: kind.clone(),
            mode: md.mode() & 0o1777,
            mtime: md.mtime().max(0) as u64,
        });
        if kind == Kind::Dir {
            let mut names: Vec<_> = std::fs::read_dir(&path)
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?
                .map(|e| e.map(|e| e.file_name()))
                .collect::<std::io::Result<_>>()
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            names.sort();
            todo.extend(names.into_iter().rev().map(|n| (rel.join(n), depth + 1)));
        }
    }
    Ok(items)
}

/// `items` of `parent` as a tar onto `w`, every entry `user`'s.
fn write_tar(parent: &Path, items: &[Item], user: UserSpec, w: &mut dyn Write) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut b = tar::Builder::new(w);
    for it in items {
        let mut h = tar::Header::new_gnu();
        h.set_uid(user.uid.into());
        h.set_gid(user.gid.into());
        h.set_mode(it.mode);
        h.set_mtime(it.mtime);
        h.set_size(0);
        match &it.kind {
            Kind::Dir => {
                h.set_entry_type(tar::EntryType::Directory);
                b.append_data(&mut h, it.rel.join(""), std::io::empty())?;
            }
            Kind::Link(target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                b.append_link(&mut h, &it.rel, target)?;
            }
            Kind::File(size) => {
                let f = std::fs::File::options()
                    .read(true)
                    .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
                    .open(parent.join(&it.rel))?;
                if f.metadata()?.len() != *size {
                    return Err(std::io::Error::other(format!("{} changed while it was sent", it.rel.display())));
                }
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(*size);
                b.append_data(&mut h, &it.rel, f.take(*size))?;
            }
        }
    }
    b.finish()
}

/// Read what `docker cp FILLER:DIR/upper/workspace -` prints just far
/// enough to tell the [`Workspace`] (the first entry, and whether a second
/// follows), into `seen`. Err once it is told: docker need not send the rest.
fn look(r: &mut dyn Read, seen: &mut Option<Workspace>) -> std::io::Result<()> {
    let told = || std::io::Error::other("told");
    let mut a = tar::Archive::new(r);
    {
        let mut entries = a.entries()?;
        let first = entries.next().ok_or_else(|| std::io::Error::other("an empty archive"))??;
        let path = first.path()?.to_string_lossy().trim_end_matches('/').to_string();
        if path != "workspace" {
            return Err(std::io::Error::other(format!("its first entry is {path:?}")));
        }
        let t = first.header().entry_type();
        if !t.is_dir() {
            let what = match t {
                tar::EntryType::Symlink => "a symlink".into(),
                tar::EntryType::Regular | tar::EntryType::Continuous => "a regular file".into(),
                tar::EntryType::Link => "a hard link".into(),
                other => format!("a {other:?}"),
            };
            *seen = Some(Workspace::Other(what));
            return Err(told());
        }
        drop(first);
        if let Some(next) = entries.next() {
            next?;
            *seen = Some(Workspace::Full);
            return Err(told());
        }
    }
    *seen = Some(Workspace::Empty);
    // The end-of-archive blocks docker still writes.
    std::io::copy(&mut a.into_inner().take(1 << 20), &mut std::io::sink()).map(drop)
}

/// docker's answer to `docker cp` of a path the container does not have
/// (engine 20.10: "Could not find the file"; older CLIs: "No such container:path").
fn no_such_path(stderr: &str) -> bool {
    stderr.contains("Could not find the file") || stderr.contains("No such container:path")
}

impl Driver {
    /// What the session's `upper/workspace` is, through filler `cid`
    /// mounting the backing volume at `dir`.
    fn remote_workspace(&self, cid: &str, dir: &str) -> Result<Workspace> {
        let args = remote::copy_out(cid, &format!("{dir}/upper/workspace"));
        let mut seen = None;
        let out = self.docker.run_stream(&args, None, &mut |r| look(r, &mut seen))?;
        match seen {
            Some(Workspace::Empty) if out.status == 0 => Ok(Workspace::Empty),
            Some(Workspace::Empty) => {
                Err(status_error(&args, &crate::docker::Output::fail(out.status, &out.stderr_str())).into())
            }
            Some(w) => Ok(w),
            None if out.status != 0 && no_such_path(&out.stderr_str()) => Ok(Workspace::Absent),
            None if out.status != 0 => {
                Err(status_error(&args, &crate::docker::Output::fail(out.status, &out.stderr_str())).into())
            }
            None => Err(Error::io(
                format!("reading {SEEN_AS} of the session on the engine"),
                out.output.err().unwrap_or_else(|| std::io::Error::other("no answer")),
            )),
        }
    }

    /// `--clone` into the session whose backing volume filler `cid` mounts
    /// at `dir` (see the module docs). `scratch`: a private directory of this
    /// machine for the clone, removed after.
    pub(in crate::sandbox) fn clone_remote(
        &self,
        (cid, dir): (&str, &str),
        c: &CloneSpec,
        user: UserSpec,
        scratch: &Path,
    ) -> Result<Cloned> {
        match self.remote_workspace(cid, dir)? {
            Workspace::Full => return Ok(Cloned::Kept),
            Workspace::Other(found) => {
                return Err(Error::Session(SessionError::WorkspaceNotDirectory { path: SEEN_AS.into(), found }))
            }
            Workspace::Absent | Workspace::Empty => {}
        }
        let tmp = scratch.join(persist::scratch_name(""));
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&tmp)
                .map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
        }
        let sent = self.send_clone((cid, dir), c, user, &tmp);
        let _ = std::fs::remove_dir_all(&tmp);
        sent.map(|()| Cloned::Cloned)
    }

    fn send_clone(&self, (cid, dir): (&str, &str), c: &CloneSpec, user: UserSpec, tmp: &Path) -> Result<()> {
        let mut bar = crate::output::progress();
        bar.update(&format!("cloning {}", c.url));
        persist::clone(c, &tmp.join("workspace"))?;
        let items = walk(tmp)?;
        bar.update(&format!("copying the clone of {} to the engine", c.url));
        let args = rs::copy_in_archive(cid, &format!("{dir}/upper"));
        let mut input = |w: &mut dyn Write| {
            let mut w = std::io::BufWriter::new(w);
            write_tar(tmp, &items, user, &mut w)?;
            w.flush()
        };
        let mut drain = |r: &mut dyn Read| std::io::copy(r, &mut std::io::sink()).map(drop);
        let out = self.docker.run_stream(&args, Some(&mut input), &mut drain)?;
        if out.status != 0 {
            // A partial copy may be there now; the next create keeps it as work.
            return Err(status_error(&args, &crate::docker::Output::fail(out.status, &out.stderr_str())).into());
        }
        out.input.map_err(|e| Error::io(format!("sending the clone of {} to the engine", c.url), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// (path, type, uid, gid, mode, link target) of each entry.
    type Seen = (String, tar::EntryType, u64, u64, u32, Option<String>);

    fn entries(tar: &[u8]) -> Vec<Seen> {
        let mut a = tar::Archive::new(tar);
        a.entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                let link = e.link_name().unwrap().map(|l| l.display().to_string());
                let p = e.path().unwrap().display().to_string();
                (p, h.entry_type(), h.uid().unwrap(), h.gid().unwrap(), h.mode().unwrap(), link)
            })
            .collect()
    }

    /// A scratch directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new() -> Self {
            let p = std::env::temp_dir().join(format!("sbx-clone-unit-{:016x}", rand::random::<u64>()));
            std::fs::create_dir(&p).unwrap();
            Scratch(p)
        }
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_tree_goes_as_the_sandbox_user_s_links_as_links_without_setuid_bits() {
        use tar::EntryType::{Directory as D, Regular as F, Symlink as L};
        let t = Scratch::new();
        let ws = t.path().join("workspace");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("sub/run.sh"), b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(ws.join("sub/run.sh"), std::fs::Permissions::from_mode(0o6755)).unwrap();
        std::fs::write(ws.join("a"), b"a\n").unwrap();
        std::fs::set_permissions(ws.join("a"), std::fs::Permissions::from_mode(0o640)).unwrap();
        std::fs::hard_link(ws.join("a"), ws.join("a2")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", ws.join("out")).unwrap();
        std::fs::set_permissions(&ws, std::fs::Permissions::from_mode(0o755)).unwrap();
        let items = walk(t.path()).unwrap();
        let mut tar = Vec::new();
        write_tar(t.path(), &items, UserSpec { uid: 1000, gid: 1001 }, &mut tar).unwrap();
        let got = entries(&tar);
        let want: Vec<Seen> = vec![
            ("workspace".into(), D, 1000, 1001, 0o755, None),
            ("workspace/a".into(), F, 1000, 1001, 0o640, None),
            ("workspace/a2".into(), F, 1000, 1001, 0o640, None),
            ("workspace/out".into(), L, 1000, 1001, 0o777, Some("/etc/passwd".into())),
            ("workspace/sub".into(), D, 1000, 1001, 0o755, None),
            ("workspace/sub/run.sh".into(), F, 1000, 1001, 0o755, None),
        ];
        assert_eq!(got[0].0, "workspace/", "the top entry");
        assert_eq!(
            got.iter()
                .map(|g| (g.0.trim_end_matches('/').to_string(), g.1, g.2, g.3, g.4 & 0o7777, g.5.clone()))
                .collect::<Vec<_>>(),
            want
        );
        let mut a = tar::Archive::new(&tar[..]);
        let mut e = a.entries().unwrap().map(Result::unwrap).find(|e| e.path().unwrap().ends_with("a2")).unwrap();
        let mut s = String::new();
        e.read_to_string(&mut s).unwrap();
        assert_eq!(s, "a\n", "a hard link goes as its content");
    }

    fn tar_of(entries: &[(&str, tar::EntryType, &[u8], Option<&str>)]) -> Vec<u8> {
        let all: Vec<_> = entries.iter().map(|&(p, k, d, l)| (p, k, d, 0o755, l)).collect();
        crate::sandbox::testing::tar_of(&all)
    }

    #[test]
    fn the_workspace_is_told_from_as_little_of_the_copy_as_needed() {
        use tar::EntryType::{Directory as D, Regular as F, Symlink as L};
        let told = |t: Vec<u8>| {
            let mut seen = None;
            let r = look(&mut &t[..], &mut seen);
            (seen, r.is_ok())
        };
        assert_eq!(told(tar_of(&[("workspace/", D, b"", None)])), (Some(Workspace::Empty), true));
        let full = tar_of(&[("workspace/", D, b"", None), ("workspace/x", F, b"x", None)]);
        assert_eq!(told(full), (Some(Workspace::Full), false), "stops reading once told");
        let link = tar_of(&[("workspace", L, b"", Some("/etc"))]);
        assert_eq!(told(link), (Some(Workspace::Other("a symlink".into())), false));
        assert_eq!(told(tar_of(&[("workspace", F, b"x", None)])).0, Some(Workspace::Other("a regular file".into())));
        assert_eq!(told(tar_of(&[("elsewhere/", D, b"", None)])), (None, false));
        assert_eq!(told(Vec::new()), (None, false));
        assert!(no_such_path(
            "Error response from daemon: Could not find the file /sbx-fill-1/upper/workspace in container f"
        ));
        assert!(!no_such_path("Error: No such container: f"));
    }
}

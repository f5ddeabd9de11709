//! Persistent sessions: `/state` in a named volume per session, backed by a
//! directory sbx owns under the data dir (so sbx can give it to the sandbox
//! user, and `--clone` can fill it before the sandbox starts).
//!
//! One writer at a time: a create holds an exclusive lock on the session
//! while it checks that no running sandbox uses the volume and starts its
//! own, so two creates for one session cannot both get it.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::record;

pub fn volume_name(session: &str) -> String {
    format!("sbx-state-{session}")
}

pub fn host_dir(data_dir: &Path, session: &str) -> PathBuf {
    data_dir.join("volumes").join(session)
}

/// Held for the whole create: see the module docs.
pub fn lock(data_dir: &Path, session: &str) -> Result<Flock<File>> {
    let dir = data_dir.join("volumes");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let path = dir.join(format!("{session}.lock"));
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    Flock::lock(f, FlockArg::LockExclusive).map_err(|(_, e)| Error::io(format!("locking {}", path.display()), e.into()))
}

fn os(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

/// A named volume that is a bind of `dir` (the local driver's bind options).
pub fn create_argv(name: &str, dir: &Path, session: &str, owner: &str) -> Vec<OsString> {
    os(&[
        "volume",
        "create",
        "--driver",
        "local",
        "--opt",
        "type=none",
        "--opt",
        "o=bind",
        "--opt",
        &format!("device={}", dir.display()),
        "--label",
        &format!("{}={session}", record::SESSION),
        "--label",
        &format!("{}={owner}", record::OWNER),
        "--",
        name,
    ])
}

/// Running containers that have a volume mounted: one volume by what is
/// really mounted (a label is anyone's to set: issue 9 finding 5 blocked a
/// session with `LABEL sbx.volume=...`), all of sbx's by volume label.
pub fn users_argv(volume: Option<&str>) -> Vec<OsString> {
    let filter = match volume {
        Some(v) => format!("volume={v}"),
        None => format!("label={}", record::VOLUME),
    };
    os(&[
        "ps",
        "--filter",
        &filter,
        "--filter",
        "status=running",
        "--format",
        &format!("[{{{{json .Names}}}},{{{{json (.Label \"{}\")}}}}]", record::VOLUME),
    ])
}

pub fn list_argv() -> Vec<OsString> {
    os(&[
        "volume",
        "ls",
        "--filter",
        &format!("label={}", record::SESSION),
        "--format",
        &format!(
            "[{{{{json .Name}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{}\")}}}}]",
            record::SESSION,
            record::OWNER
        ),
    ])
}

pub fn remove_argv(name: &str) -> Vec<OsString> {
    os(&["volume", "rm", "--", name])
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VolumeInfo {
    pub name: String,
    pub session: String,
    pub path: String,
    pub bytes: u64,
    /// Running sandboxes using it (at most one).
    pub in_use_by: Vec<String>,
}

/// Total size of the regular files under `dir`, never following links.
pub fn du(dir: &Path) -> u64 {
    let Ok(md) = std::fs::symlink_metadata(dir) else { return 0 };
    if md.is_dir() {
        std::fs::read_dir(dir).map(|d| d.flatten().map(|e| du(&e.path())).sum()).unwrap_or(0)
    } else if md.is_file() {
        md.len()
    } else {
        0
    }
}

/// Give a tree to the sandbox user (as root; a no-op otherwise), links
/// themselves rather than what they point at.
pub fn chown_tree(path: &Path, uid: u32, gid: u32) {
    use nix::fcntl::AtFlags;
    use nix::unistd::{fchownat, Gid, Uid};
    let _ = fchownat(None, path, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)), AtFlags::AT_SYMLINK_NOFOLLOW);
    if std::fs::symlink_metadata(path).map(|m| m.is_dir()).unwrap_or(false) {
        for e in std::fs::read_dir(path).into_iter().flatten().flatten() {
            chown_tree(&e.path(), uid, gid);
        }
    }
}

/// `git clone` on the host, with git's command-running transports off.
pub fn clone(spec: &crate::spec::CloneSpec, into: &Path) -> Result<()> {
    let run = |args: &[&std::ffi::OsStr]| -> Result<()> {
        let out = std::process::Command::new("git")
            .args(args)
            .env("GIT_ALLOW_PROTOCOL", "file:git:http:https:ssh")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| Error::io("running git (is it installed?)", e))?;
        if !out.status.success() {
            return Err(Error::CommandFailed {
                command: "git".into(),
                code: out.status.code().unwrap_or(-1),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(())
    };
    let dir = into.as_os_str();
    run(&["clone".as_ref(), "--quiet".as_ref(), "--".as_ref(), spec.url.as_ref(), dir])?;
    if let Some(r) = &spec.reference {
        run(&["-C".as_ref(), dir, "checkout".as_ref(), "--quiet".as_ref(), r.as_ref(), "--".as_ref()])?;
    }
    Ok(())
}

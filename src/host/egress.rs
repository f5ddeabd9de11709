//! A sandbox's egress policy on the host: `<data dir>/egress/<id>/policy.json`,
//! the directory bind-mounted read-only at /policy in its gate. Rewritten
//! atomically (a new file renamed over the old one, inside the directory,
//! so the gate sees one whole policy or the other). 0755/0644: it holds no
//! secret and the gate reads it as its own uid. Changes (`update`) hold an
//! exclusive flock on `<data dir>/egress/<id>.lock` around the read, change
//! and write, so two `sbx allow`/`deny` at once cannot lose one; the lock
//! sits beside the directory, out of the gate's mount.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use crate::error::{EgressError, Error, Result};
use crate::spec::egress::Policy;

const FILE: &str = "policy.json";

/// The directory of all policy directories.
pub fn root(data: &Path) -> PathBuf {
    data.join("egress")
}

/// Sandbox `id`'s policy directory.
pub fn dir(data: &Path, id: &str) -> PathBuf {
    root(data).join(id)
}

/// Sandbox `id`'s lock file (see the module docs).
fn lock_path(data: &Path, id: &str) -> PathBuf {
    root(data).join(format!("{id}.lock"))
}

/// Change sandbox `id`'s policy with `change` under its lock; returns the
/// new policy and what `change` returned. A policy that is gone stays gone
/// (the read fails: no directory is made again for a removed gate).
pub fn update<T>(data: &Path, id: &str, change: impl FnOnce(&mut Policy) -> T) -> Result<(Policy, T)> {
    update_then(data, id, change, |_| Ok(()))
}

/// [`update`], handing the new policy to `publish` (a remote engine's gate:
/// `docker cp` into its volume) before it is written here, under the same
/// lock: a policy the gate did not get is never recorded as its policy.
pub fn update_then<T>(
    data: &Path,
    id: &str,
    change: impl FnOnce(&mut Policy) -> T,
    publish: impl FnOnce(&Policy) -> Result<()>,
) -> Result<(Policy, T)> {
    let path = lock_path(data, id);
    let _lock = crate::host::lockfile::exclusive(&path)?;
    let mut policy = match read(data, id) {
        Ok(p) => p,
        Err(e) => {
            // The policy was removed (revoke, destroy, gc): so goes its lock file.
            if !dir(data, id).exists() {
                let _ = std::fs::remove_file(&path);
            }
            return Err(e);
        }
    };
    let out = change(&mut policy);
    publish(&policy)?;
    write(data, id, &policy)?;
    Ok((policy, out))
}

/// Write `policy` for sandbox `id`, making its directory if needed; returns the directory.
pub fn write(data: &Path, id: &str, policy: &Policy) -> Result<PathBuf> {
    let d = dir(data, id);
    let io = |what: &str, p: &Path, e| Error::io(format!("{what} {}", p.display()), e);
    std::fs::DirBuilder::new().recursive(true).mode(0o755).create(&d).map_err(|e| io("creating", &d, e))?;
    let meta = std::fs::symlink_metadata(&d).map_err(|e| io("reading", &d, e))?;
    if !meta.is_dir() {
        return Err(io("using", &d, std::io::Error::other("not a directory")));
    }
    // Whatever the umask: the gate reads it as its own uid, not root.
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).map_err(|e| io("creating", &d, e))?;
    let tmp = d.join(format!(".{FILE}.{}", std::process::id()));
    let file = d.join(FILE);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o644).open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        f.write_all(policy.to_json().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &file)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("writing", &file, e));
    }
    Ok(d)
}

/// `policy` as a tar of one root-owned 0644 `policy.json`: what `docker cp`
/// extracts into a remote gate's /policy volume.
pub fn tar(policy: &Policy) -> Vec<u8> {
    super::tarball::root_file(FILE, 0o644, policy.to_json().as_bytes())
}

/// Sandbox `id`'s policy as the gate reads it.
pub fn read(data: &Path, id: &str) -> Result<Policy> {
    let file = dir(data, id).join(FILE);
    let text = std::fs::read_to_string(&file).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            EgressError::Policy { id: id.to_string(), reason: format!("{} is gone", file.display()) }.into()
        }
        _ => Error::io(format!("reading {}", file.display()), e),
    })?;
    Policy::from_json(&text).map_err(|reason| EgressError::Policy { id: id.to_string(), reason }.into())
}

/// Remove sandbox `id`'s policy directory and lock file; already gone is fine.
/// Under the lock when there is one, so a change in flight finishes first
/// (it would otherwise write the directory again).
/// A sandbox's secrets (`host::secrets`) go first, with its policy: every
/// path that ends a gate (rollback, revoke, destroy, gc) ends them too.
pub fn remove(data: &Path, id: &str) -> Result<()> {
    super::secrets::remove(data, id)?;
    let l = lock_path(data, id);
    let _lock = match File::options().write(true).open(&l) {
        Ok(f) => Some(
            Flock::lock(f, FlockArg::LockExclusive)
                .map_err(|(_, e)| Error::io(format!("locking {}", l.display()), e.into()))?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(format!("opening {}", l.display()), e)),
    };
    let d = dir(data, id);
    match std::fs::remove_dir_all(&d) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(Error::io(format!("removing {}", d.display()), e))
        }
        _ => {}
    }
    match std::fs::remove_file(&l) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(format!("removing {}", l.display()), e)),
        _ => Ok(()),
    }
}

/// At most this much of a removed gate's decision log is kept on the host
/// (its newest lines): the bound is sbx's, not the gate's.
pub const KEPT_LOG_MAX: usize = 16 << 20;

/// Where the decision log of sandbox `id`'s removed gate is kept:
/// `<data dir>/egress-logs/<id>.jsonl` (outside the directory the gate mounts).
pub fn kept_log(data: &Path, id: &str) -> PathBuf {
    data.join("egress-logs").join(format!("{id}.jsonl"))
}

/// Add `lines` (records sbx has checked, one JSON object each) to the kept
/// log of `id`, keeping at most [`KEPT_LOG_MAX`] bytes of the newest whole lines.
pub fn keep_log(data: &Path, id: &str, lines: &[String]) -> Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let path = kept_log(data, id);
    let dir = path.parent().unwrap_or(data);
    std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let mut text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    if text.len() > KEPT_LOG_MAX {
        let cut = text.len() - KEPT_LOG_MAX;
        let start = text[cut..].find('\n').map_or(text.len(), |n| cut + n + 1);
        text.drain(..start);
    }
    let tmp = dir.join(format!(".{id}.jsonl.tmp"));
    let written = File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, &path));
    written.map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

/// How long a kept decision log stays after its gate went; gc removes it then.
pub const KEPT_LOG_DAYS: u64 = 7;

/// Kept logs older than [`KEPT_LOG_DAYS`] (by when sbx last wrote them).
pub fn expired_logs(data: &Path) -> Vec<PathBuf> {
    let max_age = std::time::Duration::from_secs(KEPT_LOG_DAYS * 24 * 3600);
    let mut v: Vec<PathBuf> = std::fs::read_dir(data.join("egress-logs"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".jsonl"))
                .is_some_and(|id| crate::spec::parse_id(id).is_ok())
        })
        .filter(|e| {
            e.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age > max_age)
        })
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// The sandbox ids that have a policy directory (names sbx makes only).
pub fn ids(data: &Path) -> Vec<String> {
    crate::host::pool::ids_in(&root(data))
}

#[cfg(test)]
mod kept_log_tests {
    use super::*;

    #[test]
    fn kept_logs_are_bounded_and_expire() {
        let data = std::env::temp_dir().join(format!("sbx-kept-log-{}", std::process::id()));
        let id = "sbx-0123456789ab";
        let line = "x".repeat(1000);
        let lines: Vec<String> = (0..20_000).map(|i| format!("{i} {line}")).collect();
        keep_log(&data, id, &lines).unwrap();
        let text = std::fs::read_to_string(kept_log(&data, id)).unwrap();
        assert!(text.len() <= KEPT_LOG_MAX && text.len() > KEPT_LOG_MAX - 2000, "{}", text.len());
        assert!(text.starts_with(|c: char| c.is_ascii_digit()) && text.ends_with(&format!("19999 {line}\n")));
        assert!(expired_logs(&data).is_empty(), "a fresh log is kept");
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs((KEPT_LOG_DAYS + 1) * 24 * 3600);
        File::options().write(true).open(kept_log(&data, id)).unwrap().set_modified(old).unwrap();
        assert_eq!(expired_logs(&data), [kept_log(&data, id)]);
        std::fs::remove_dir_all(&data).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::egress::{AllowRule, Mode};

    #[test]
    fn write_read_remove() {
        let data = std::env::temp_dir().join(format!("sbx-egress-{}-{}", std::process::id(), rand::random::<u32>()));
        let id = "sbx-0123456789ab";
        let mut p = Policy { mode: Mode::Enforce, ..Policy::default() };
        p.allow(&[AllowRule::parse("pypi.org", false).unwrap()]);
        let d = write(&data, id, &p).unwrap();
        assert_eq!(read(&data, id).unwrap(), p);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&d), mode(&d.join(FILE))), (0o755, 0o644));
        p.deny(&p.rules.clone());
        write(&data, id, &p).unwrap();
        assert_eq!(read(&data, id).unwrap().rules, vec![]);
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "no temporary file left");
        std::fs::create_dir_all(root(&data).join("not-an-id")).unwrap();
        assert_eq!(ids(&data), [id]);
        remove(&data, id).unwrap();
        remove(&data, id).unwrap();
        assert!(matches!(read(&data, id), Err(Error::Egress(EgressError::Policy { .. }))));
        std::fs::remove_dir_all(&data).unwrap();
    }

    /// Many changes at once (threads, each with its own lock descriptor, as
    /// separate `sbx allow` processes): none is lost, no temporary file is left.
    #[test]
    fn concurrent_updates_lose_nothing() {
        let data = std::env::temp_dir().join(format!("sbx-egress-{}-{}", std::process::id(), rand::random::<u32>()));
        let id = "sbx-0123456789ab";
        write(&data, id, &Policy { mode: Mode::Enforce, ..Policy::default() }).unwrap();
        let n = 16;
        std::thread::scope(|s| {
            for i in 0..n {
                let data = &data;
                s.spawn(move || {
                    let rule = AllowRule::parse(&format!("h{i}.example"), false).unwrap();
                    update(data, id, |p| {
                        // Widen the window between read and write.
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        p.allow(&[rule]);
                    })
                    .unwrap();
                });
            }
        });
        let mut got: Vec<String> = read(&data, id).unwrap().rules.iter().map(ToString::to_string).collect();
        got.sort();
        let mut want: Vec<String> = (0..n).map(|i| format!("h{i}.example:443")).collect();
        want.sort();
        assert_eq!(got, want);
        assert_eq!(std::fs::read_dir(dir(&data, id)).unwrap().count(), 1, "no temporary file left");
        assert!(lock_path(&data, id).exists());
        assert_eq!(ids(&data), [id], "the lock file is not an id");
        remove(&data, id).unwrap();
        assert!(!lock_path(&data, id).exists(), "remove leaves the lock file");
        // A removed policy stays removed: update fails and makes nothing.
        assert!(matches!(update(&data, id, |_| ()), Err(Error::Egress(EgressError::Policy { .. }))));
        assert!(!dir(&data, id).exists() && !lock_path(&data, id).exists());
        std::fs::remove_dir_all(&data).unwrap();
    }

    /// A remove (destroy, revoke, gc) during a change waits for it, and the
    /// change does not write the directory again afterwards.
    #[test]
    fn remove_waits_for_a_change_in_flight() {
        let data = std::env::temp_dir().join(format!("sbx-egress-{}-{}", std::process::id(), rand::random::<u32>()));
        let id = "sbx-0123456789ab";
        write(&data, id, &Policy { mode: Mode::Enforce, ..Policy::default() }).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let changing = s.spawn(|| {
                update(&data, id, |_| {
                    tx.send(()).unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(200));
                })
            });
            rx.recv().unwrap();
            remove(&data, id).unwrap();
            changing.join().unwrap().unwrap();
        });
        assert!(!dir(&data, id).exists() && !lock_path(&data, id).exists());
        std::fs::remove_dir_all(&data).unwrap();
    }
}

//! The in-sandbox helper (`helper/sbx_helper.rs`, built static by build.rs
//! and embedded here): installed once per version under the data dir and
//! bind-mounted read-only at /run/sbx/helper in every sandbox, so exec -d,
//! ps, kill, logs, cp, wait-port, port-forward, backup and restore work on an
//! image with no shell, no coreutils and no tar.
//!
//! The helper sbx runs must be the one it mounted. So:
//! - the host directory holds nothing but the helper, is owned by sbx's user
//!   or root and writable by nobody else, and its content is compared with
//!   the embedded bytes before every create ([`install`]);
//! - that directory is mounted read-only AT /run/sbx (not a file mount at
//!   /run/sbx/helper): /run/sbx is then a mount point, which the sandbox
//!   cannot rename (EBUSY), and its parent /run lies on the read-only root;
//! - runc follows the image's symlinks when it places a mount, so after
//!   start sbx reads where the kernel put the mounts (`mounts::check_mounts`, from
//!   the host's /proc/PID/mountinfo, which the sandbox cannot forge) and
//!   refuses an image that moved them.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::error::{HostError, SandboxError};

pub const BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sbx-helper"));
const KEY: &str = include_str!(concat!(env!("OUT_DIR"), "/sbx-helper.key"));
pub use crate::model::paths::{HELPER_DIR as SANDBOX_DIR, HELPER_PATH as SANDBOX_PATH};
/// The helper's name inside its directory.
const FILE: &str = "helper";
/// Execute-only for the sandbox (deeper): the running
/// helper is a process of the sandbox's user, which any process there could
/// ptrace to write its answers. exec of a file the caller cannot read makes
/// the process non-dumpable from the start (no window), and without
/// CAP_SYS_PTRACE nothing in the sandbox can attach to it.
const MODE: u32 = 0o511;
/// Under gVisor: the Sentry's loader reads the binary as the
/// calling user, so an execute-only file fails with "failed to load:
/// permission denied" (exit 126) and every helper command with it
/// (measured, runsc 20221219). There the helper must be readable; a copy of
/// its own, in its own directory, so runc sandboxes keep the 0511 one. The
/// helper makes itself non-dumpable first thing (PR_SET_DUMPABLE), which
/// leaves a window of a few instructions after exec that 0511 closes under runc.
const MODE_READABLE: u32 = 0o555;

/// The helper's directory on the host (holding only `helper`), installed on
/// first use and verified every time. `None` when this sbx was built without
/// one (no static libc at build time). `readable`: the runtime cannot exec
/// an execute-only file (gVisor).
pub fn install(data_dir: &Path, readable: bool) -> Result<Option<PathBuf>> {
    if BYTES.is_empty() {
        return Ok(None);
    }
    install_bytes(data_dir, KEY.trim(), BYTES, readable).map(Some)
}

fn install_bytes(data_dir: &Path, key: &str, bytes: &[u8], readable: bool) -> Result<PathBuf> {
    let base = data_dir.join("helper");
    let (dir, mode) = match readable {
        false => (base.join(format!("v-{key}")), MODE),
        true => (base.join(format!("v-{key}-r")), MODE_READABLE),
    };
    let untrusted =
        |path: &Path, reason: String| Error::Host(HostError::HelperUntrusted { path: path.to_path_buf(), reason });
    let io = |what: &str, p: &Path, e| Error::io(format!("{what} {}", p.display()), e);
    std::fs::DirBuilder::new().recursive(true).mode(0o755).create(&base).map_err(|e| io("creating", &base, e))?;
    // Whoever may write a parent may swap the directory between this check and the mount.
    for p in [data_dir, &base] {
        let md = std::fs::symlink_metadata(p).map_err(|e| io("reading", p, e))?;
        trusted(&md).map_err(|r| untrusted(p, r))?;
    }
    match verify(&dir, bytes, mode) {
        Ok(()) => return Ok(dir),
        Err(None) => {}
        Err(Some(reason)) => {
            // Stale or tampered: set it aside (a running sandbox may still
            // have it mounted) and install afresh.
            tracing::warn!(dir = %dir.display(), %reason, "reinstalling the helper");
            let aside = base.join(format!(".bad-{}-{:x}", std::process::id(), rand::random::<u32>()));
            if std::fs::rename(&dir, &aside).is_ok() {
                let _ = std::fs::remove_dir_all(&aside);
            }
        }
    }
    let tmp = base.join(format!(".new-{}-{:x}", std::process::id(), rand::random::<u32>()));
    std::fs::DirBuilder::new().mode(0o755).create(&tmp).map_err(|e| io("creating", &tmp, e))?;
    let written = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(tmp.join(FILE))?;
        f.write_all(bytes)?;
        // create_new's mode passes through the umask: set it exactly.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(io("writing", &tmp, e));
    }
    // A concurrent create may have installed it first: then use theirs.
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    verify(&dir, bytes, mode)
        .map_err(|r| untrusted(&dir, r.unwrap_or_else(|| "it vanished while installing".into())))?;
    Ok(dir)
}

/// Owned by this user or root, writable by nobody else.
fn trusted(md: &std::fs::Metadata) -> std::result::Result<(), String> {
    let me = nix::unistd::geteuid().as_raw();
    if md.uid() != me && md.uid() != 0 {
        return Err(format!("it is owned by uid {}, not by you or root", md.uid()));
    }
    if md.mode() & 0o022 != 0 {
        return Err(format!("its mode {:o} lets others write it", md.mode() & 0o7777));
    }
    Ok(())
}

/// `Err(None)`: not installed. `Err(Some(why))`: there, but not exactly
/// the embedded helper alone in a trusted directory.
fn verify(dir: &Path, bytes: &[u8], mode: u32) -> std::result::Result<(), Option<String>> {
    let md = match std::fs::symlink_metadata(dir) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(None),
        Err(e) => return Err(Some(e.to_string())),
    };
    if !md.is_dir() {
        return Err(Some("it is not a directory".into()));
    }
    trusted(&md)?;
    let names: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Some(e.to_string()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<_>>()
        .map_err(|e| Some(e.to_string()))?;
    if names != [FILE] {
        return Err(Some(format!("it holds {names:?}, not just {FILE:?}")));
    }
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(dir.join(FILE))
        .map_err(|e| Some(e.to_string()))?;
    let fm = f.metadata().map_err(|e| Some(e.to_string()))?;
    if !fm.is_file() {
        return Err(Some("the helper is not a regular file".into()));
    }
    trusted(&fm)?;
    if fm.mode() & 0o7777 != mode {
        return Err(Some(format!("the helper's mode is {:o}, not {mode:o}", fm.mode() & 0o7777)));
    }
    if fm.len() != bytes.len() as u64 {
        return Err(Some(format!("the helper has {} bytes, not {}", fm.len(), bytes.len())));
    }
    // The whole content, not a hash of it: no collision question.
    same_content(&mut f, bytes)
        .map_err(|e| Some(e.to_string()))?
        .then_some(())
        .ok_or_else(|| Some("the helper's content differs from this sbx's".to_string()))
}

/// Whether `f` holds exactly `bytes`, read through one 64 KiB buffer: a
/// buffer of the whole 1.5 MB was a fresh mapping at every create, its
/// page faults and its unmapping (a TLB shootdown across the cores while
/// docker's threads run) most of what the compare cost.
fn same_content(f: &mut impl Read, bytes: &[u8]) -> std::io::Result<bool> {
    let mut buf = vec![0u8; 64 << 10];
    let mut at = 0;
    loop {
        let n = match f.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(at == bytes.len());
        }
        if bytes.get(at..at + n) != Some(&buf[..n]) {
            return Ok(false);
        }
        at += n;
    }
}

/// The helper's content key (a hash of its bytes, from build.rs): names
/// its directory here and its volume on a remote engine.
pub fn key() -> &'static str {
    KEY.trim()
}

/// The helper file's mode: execute-only, or readable where the runtime
/// must read it to exec it (gVisor).
pub fn mode(readable: bool) -> u32 {
    if readable {
        MODE_READABLE
    } else {
        MODE
    }
}

/// The helper as a tar of one root-owned file named `helper` (what `docker
/// cp` extracts into a remote engine's helper volume).
pub fn tar(readable: bool) -> Vec<u8> {
    super::tarball::root_file(FILE, mode(readable), BYTES)
}

/// Whether `entry` (read from a remote engine's `docker cp`) is exactly
/// this sbx's helper: a regular file, root-owned, of the right mode, with
/// the embedded bytes. The reason when it is not.
pub fn check_entry<R: Read>(entry: &mut tar::Entry<'_, R>, readable: bool) -> std::result::Result<(), String> {
    let h = entry.header();
    if h.entry_type() != tar::EntryType::Regular {
        return Err(format!("the helper is a {:?}, not a regular file", h.entry_type()));
    }
    let (uid, m, size) = (h.uid().unwrap_or(u64::MAX), h.mode().unwrap_or(0) & 0o7777, h.size().unwrap_or(0));
    if uid != 0 {
        return Err(format!("the helper is owned by uid {uid}, not root"));
    }
    if m != mode(readable) {
        return Err(format!("the helper's mode is {m:o}, not {:o}", mode(readable)));
    }
    if size != BYTES.len() as u64 {
        return Err(format!("the helper has {size} bytes, not {}", BYTES.len()));
    }
    let mut got = Vec::with_capacity(BYTES.len());
    entry.take(BYTES.len() as u64 + 1).read_to_end(&mut got).map_err(|e| e.to_string())?;
    if got != BYTES {
        return Err("the helper's content differs from this sbx's".into());
    }
    Ok(())
}

/// The error for a sandbox that has no helper (built without one, or made by
/// an sbx before the helper existed).
pub fn missing(id: &str) -> Error {
    Error::Sandbox(SandboxError::HelperMissing { id: id.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compare_takes_exactly_the_bytes() {
        let want: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        assert!(same_content(&mut &want[..], &want).unwrap());
        assert!(!same_content(&mut &want[..want.len() - 1], &want).unwrap(), "shorter");
        let mut longer = want.clone();
        longer.push(0);
        assert!(!same_content(&mut &longer[..], &want).unwrap(), "longer");
        let mut changed = want.clone();
        changed[150_000] ^= 1;
        assert!(!same_content(&mut &changed[..], &want).unwrap(), "one bit past the first buffer");
        assert!(same_content(&mut &b""[..], b"").unwrap());
    }

    fn tmp() -> PathBuf {
        let d = std::env::temp_dir().join(format!("sbx-helper-{}-{:x}", std::process::id(), rand::random::<u32>()));
        std::fs::DirBuilder::new().mode(0o700).create(&d).unwrap();
        d
    }

    #[test]
    fn installs_once_and_reinstalls_a_tampered_helper() {
        let d = tmp();
        let dir = install_bytes(&d, "k1", b"real helper", false).unwrap();
        assert_eq!(std::fs::read(dir.join(FILE)).unwrap(), b"real helper");
        assert_eq!(install_bytes(&d, "k1", b"real helper", false).unwrap(), dir);
        // Same size, other content: replaced.
        std::fs::remove_file(dir.join(FILE)).unwrap();
        std::fs::write(dir.join(FILE), b"evil helper").unwrap();
        let again = install_bytes(&d, "k1", b"real helper", false).unwrap();
        assert_eq!(std::fs::read(again.join(FILE)).unwrap(), b"real helper");
        // Readable (and so traceable) inside the sandbox: reinstalled execute-only.
        assert_eq!(std::fs::metadata(again.join(FILE)).unwrap().mode() & 0o7777, 0o511);
        std::fs::set_permissions(again.join(FILE), std::fs::Permissions::from_mode(0o555)).unwrap();
        install_bytes(&d, "k1", b"real helper", false).unwrap();
        assert_eq!(std::fs::metadata(again.join(FILE)).unwrap().mode() & 0o7777, 0o511);
        // An extra entry (something to mount over, or run instead): replaced.
        std::fs::write(again.join("extra"), b"x").unwrap();
        install_bytes(&d, "k1", b"real helper", false).unwrap();
        assert_eq!(std::fs::read_dir(&again).unwrap().count(), 1);
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn gvisor_gets_a_readable_copy_of_its_own() {
        let d = tmp();
        let plain = install_bytes(&d, "k1", b"real helper", false).unwrap();
        let readable = install_bytes(&d, "k1", b"real helper", true).unwrap();
        assert_ne!(plain, readable, "runc sandboxes keep the execute-only one");
        assert_eq!(std::fs::metadata(readable.join(FILE)).unwrap().mode() & 0o7777, 0o555);
        assert_eq!(std::fs::metadata(plain.join(FILE)).unwrap().mode() & 0o7777, 0o511);
        // Execute-only where it must be readable: reinstalled readable.
        std::fs::set_permissions(readable.join(FILE), std::fs::Permissions::from_mode(0o511)).unwrap();
        install_bytes(&d, "k1", b"real helper", true).unwrap();
        assert_eq!(std::fs::metadata(readable.join(FILE)).unwrap().mode() & 0o7777, 0o555);
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn refuses_a_data_dir_others_can_write() {
        use std::os::unix::fs::PermissionsExt;
        let d = tmp();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = install_bytes(&d, "k1", b"h", false).unwrap_err();
        assert!(
            matches!(&err, Error::Host(HostError::HelperUntrusted { reason, .. }) if reason.contains("lets others write")),
            "{err}"
        );
        std::fs::remove_dir_all(d).unwrap();
    }
}

//! sbx's own seccomp profile (`assets/seccomp.json`), passed to every
//! sandbox instead of whatever default the engine has.
//!
//! The profile is Docker's current default (moby/profiles `seccomp` v0.2.3,
//! as vendored by moby master) plus one explicit rule. Against engine
//! 20.10's built-in default it additionally refuses:
//! - `io_uring_setup`, `io_uring_enter`, `io_uring_register`: the source of
//!   many recent kernel escapes (CVE-2022-29582, CVE-2023-2598,
//!   CVE-2024-0582; Google found most kCTF exploits used it). moby 25+ drops
//!   them from its default; sbx also answers ENOSYS explicitly, as a kernel
//!   built without io_uring does, so programs take the fallback path they
//!   already have (libuv, liburing users) and a later upstream change cannot
//!   re-open it.
//! - `socket(AF_ALG)` and `socket(AF_VSOCK)` (families 38 and 40), which the
//!   current default refuses and 20.10's allows.
//!
//! The docker CLI reads `--security-opt seccomp=FILE` on the client and sends
//! the content, so the profile works on any engine; sbx writes it once under
//! the data dir, named by its hash, and checks the bytes before each use.
//! `docker inspect` then shows the content in `HostConfig.SecurityOpt`, which
//! is what `sbx audit` compares with this profile.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::HostError;
use crate::error::{Error, Result};

pub const PROFILE: &str = include_str!("../../assets/seccomp.json");
/// Syscalls sbx's profile refuses that the engine's default may allow.
pub const REFUSED: &[&str] = &["io_uring_setup", "io_uring_enter", "io_uring_register"];

fn digest() -> String {
    let h = Sha256::digest(PROFILE.as_bytes());
    h.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The profile's path on the host, written on first use and verified on
/// every use: a regular file (not a link), owned by us, writable by nobody
/// else, with exactly the embedded bytes. Anything else is replaced.
pub fn install(data_dir: &Path) -> Result<PathBuf> {
    let dir = data_dir.join("seccomp");
    let path = dir.join(format!("sbx-seccomp-{}.json", digest()));
    if verify(&path) {
        return Ok(path);
    }
    let io = |what: &str, e| Error::io(format!("{what} {}", path.display()), e);
    std::fs::create_dir_all(&dir).map_err(|e| io("creating the directory of", e))?;
    let tmp = dir.join(format!(".sbx-seccomp.{}.{:x}", std::process::id(), rand::random::<u32>()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)
        .map_err(|e| io("writing", e))?;
    // The umask must not leave it unreadable for the docker CLI, nor writable.
    f.set_permissions(std::fs::Permissions::from_mode(0o644)).map_err(|e| io("writing", e))?;
    f.write_all(PROFILE.as_bytes()).and_then(|()| f.sync_all()).map_err(|e| io("writing", e))?;
    std::fs::rename(&tmp, &path).map_err(|e| io("installing", e))?;
    if !verify(&path) {
        return Err(Error::Host(HostError::SeccompChanged { path }));
    }
    Ok(path)
}

fn verify(path: &Path) -> bool {
    let Ok(mut f) =
        std::fs::OpenOptions::new().read(true).custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits()).open(path)
    else {
        return false;
    };
    let Ok(meta) = f.metadata() else { return false };
    let euid = nix::unistd::geteuid().as_raw();
    if !meta.is_file() || meta.uid() != euid || meta.mode() & 0o022 != 0 || meta.len() != PROFILE.len() as u64 {
        return false;
    }
    let mut buf = Vec::with_capacity(PROFILE.len());
    f.read_to_end(&mut buf).is_ok() && buf == PROFILE.as_bytes()
}

/// Whether a container's `HostConfig.SecurityOpt` carries exactly sbx's
/// profile (the CLI sends it compacted: compared as JSON values).
pub fn is_sbx_profile(security_opt: &[String]) -> bool {
    let Ok(ours) = serde_json::from_str::<serde_json::Value>(PROFILE) else { return false };
    let profiles: Vec<&str> =
        security_opt.iter().filter_map(|s| s.strip_prefix("seccomp=").or_else(|| s.strip_prefix("seccomp:"))).collect();
    matches!(profiles.as_slice(), [one] if serde_json::from_str::<serde_json::Value>(one).is_ok_and(|v| v == ours))
}

pub use crate::spec::seccomp::{check_custom, CustomProfile};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_is_docker_format_and_refuses_io_uring() {
        let v: serde_json::Value = serde_json::from_str(PROFILE).unwrap();
        assert_eq!(v["defaultAction"], "SCMP_ACT_ERRNO");
        let allowed: Vec<&str> = v["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["action"] == "SCMP_ACT_ALLOW")
            .flat_map(|r| r["names"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()))
            .collect();
        for s in REFUSED {
            assert!(!allowed.contains(s), "{s} is allowed");
        }
        assert!(allowed.contains(&"read") && allowed.contains(&"execve"));
    }

    #[test]
    fn install_writes_once_and_replaces_a_tampered_copy() {
        let dir = std::env::temp_dir().join(format!("sbx-seccomp-test-{:x}", rand::random::<u64>()));
        let p = install(&dir).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), PROFILE);
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o644);
        std::fs::write(&p, r#"{"defaultAction":"SCMP_ACT_ALLOW"}"#).unwrap();
        assert_eq!(install(&dir).unwrap(), p);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), PROFILE, "a tampered profile is rewritten");
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", &p).unwrap();
        install(&dir).unwrap();
        assert!(std::fs::symlink_metadata(&p).unwrap().is_file(), "a link is replaced, not followed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_the_exact_profile_counts_as_sbx_s() {
        let compact = serde_json::to_string(&serde_json::from_str::<serde_json::Value>(PROFILE).unwrap()).unwrap();
        assert!(is_sbx_profile(&["no-new-privileges".into(), format!("seccomp={compact}")]));
        assert!(!is_sbx_profile(&["no-new-privileges".into()]), "the engine's default");
        assert!(!is_sbx_profile(&["seccomp=unconfined".into()]));
        let edited = compact.replacen("\"SCMP_ACT_ERRNO\"", "\"SCMP_ACT_ALLOW\"", 1);
        assert!(!is_sbx_profile(&[format!("seccomp={edited}")]));
        assert!(!is_sbx_profile(&[format!("seccomp={compact}"), "seccomp=unconfined".into()]));
    }
}

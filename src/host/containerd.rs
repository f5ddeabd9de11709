//! What containerd still keeps of a container's last checkpoint. Engine
//! 20.10's `docker checkpoint` leaves the checkpoint's blobs (its tar, the
//! container's OCI spec, an index naming both) in containerd's content
//! store until containerd's collector runs, which on a busy engine is
//! seconds later (it runs at an interval of about fifty times its own last
//! durations). A second checkpoint of the same container writes the same
//! spec, and containerd refuses it ("content sha256:...: already exists")
//! only after runsc has saved and stopped the sandbox: its memory is lost
//! (measured with the blobs held). So a checkpoint waits until no spec of
//! the container's is left. The store is read, never written: each
//! checkpoint index (a small JSON blob) names its spec's digest, and a
//! spec is the container's when it names the full id (in its cgroup path
//! and hooks). Image layers are never read: only small blobs and the specs
//! indexes name.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// An index is a few hundred bytes; other blobs this small are read too
/// (a spec without the environment is a few KiB).
const SMALL_MAX: u64 = 64 << 10;

/// A spec carries the sandbox's environment (`sbx serve` takes up to 8 MiB of it).
const SPEC_MAX: u64 = 64 << 20;

/// What containerd names a checkpoint's spec in its index.
const CONFIG_TYPE: &str = "application/vnd.containerd.container.checkpoint.config.v1+proto";

/// dockerd's own containerd, when dockerd started one (without
/// `--containerd`): its socket under dockerd's exec root.
pub const OWN_SOCKET: &str = "/var/run/docker/containerd/containerd.sock";

/// The content store the local engine's containerd uses: the one dockerd
/// runs itself (`own_running`: its socket is there), else the system's,
/// which may hold every image of other clients.
pub fn blob_dir(docker_root: &Path, own_running: bool) -> PathBuf {
    const BLOBS: &str = "io.containerd.content.v1.content/blobs/sha256";
    if own_running {
        docker_root.join("containerd/daemon").join(BLOBS)
    } else {
        Path::new("/var/lib/containerd").join(BLOBS)
    }
}

/// Whether a checkpoint spec naming container `cid` is in `dir`, found
/// through the indexes there or as a small blob itself. A dir that does
/// not exist holds none; a blob that vanishes while read was collected.
/// Links are never followed.
pub fn holds(dir: &Path, cid: &str) -> std::io::Result<bool> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let names = |bytes: &[u8]| bytes.windows(cid.len()).any(|w| w == cid.as_bytes());
    let (mut specs, mut read_already) = (Vec::new(), std::collections::BTreeSet::new());
    for entry in entries {
        let entry = entry?;
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() || meta.len() > SMALL_MAX {
            continue;
        }
        let Some(bytes) = read(&entry.path(), SMALL_MAX)? else { continue };
        if names(&bytes) {
            return Ok(true);
        }
        specs.extend(spec_of(&bytes));
        read_already.insert(entry.file_name());
    }
    // A small spec an index names was read above already.
    for digest in specs.into_iter().filter(|d| !read_already.contains(std::ffi::OsStr::new(d))) {
        if let Some(bytes) = read(&dir.join(&digest), SPEC_MAX)? {
            if names(&bytes) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The hex digest of the spec a checkpoint index names, if `bytes` is one.
fn spec_of(bytes: &[u8]) -> Option<String> {
    let index: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let spec = index["manifests"].as_array()?.iter().find(|m| m["mediaType"] == CONFIG_TYPE)?;
    let hex = spec["digest"].as_str()?.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| hex.to_string())
}

/// At most `max` bytes of the regular file at `path`; None once it is gone.
fn read(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    let file =
        std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK).open(path);
    let mut bytes = Vec::new();
    match file.and_then(|f| {
        if !f.metadata()?.is_file() {
            return Ok(None);
        }
        f.take(max).read_to_end(&mut bytes).map(Some)
    }) {
        Ok(Some(_)) => Ok(Some(bytes)),
        Ok(None) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CID: &str = "9e71562bfb41bd57a3b99e0667b6a909c7396a6d1272b25770ec702e2698a365";

    /// A directory removed when the test ends.
    struct Tmp(PathBuf);

    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tmp() -> Tmp {
        let t = Tmp(std::env::temp_dir().join(format!("sbx-ctd-{:016x}", rand::random::<u64>())));
        std::fs::create_dir_all(&t.0).unwrap();
        t
    }

    fn index(spec: &str) -> String {
        format!(
            r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.containerd.container.criu.checkpoint.criu.tar","digest":"sha256:{}","size":1}},{{"mediaType":"{CONFIG_TYPE}","digest":"sha256:{spec}","size":2}}]}}"#,
            "0".repeat(64)
        )
    }

    #[test]
    fn a_small_blob_naming_the_container_is_held_and_others_are_not() {
        let tmp = tmp();
        let dir = tmp.0.join("blobs");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a"), b"{\"linux\":{\"cgroupsPath\":\"/docker/other\"}}").unwrap();
        assert!(!holds(&dir, CID).unwrap());
        assert!(!holds(&tmp.0.join("absent"), CID).unwrap());
        // A layer naming it, not named by an index, is never read.
        let mut big = vec![b'x'; (SMALL_MAX + 1) as usize];
        big[..CID.len()].copy_from_slice(CID.as_bytes());
        std::fs::write(dir.join("b"), &big).unwrap();
        assert!(!holds(&dir, CID).unwrap());
        // A link is not followed, whatever it points at.
        std::fs::write(tmp.0.join("outside"), CID).unwrap();
        std::os::unix::fs::symlink(tmp.0.join("outside"), dir.join("c")).unwrap();
        assert!(!holds(&dir, CID).unwrap());
        std::fs::write(dir.join("d"), format!("{{\"cgroupsPath\":\"/docker/{CID}\"}}")).unwrap();
        assert!(holds(&dir, CID).unwrap());
    }

    /// A spec too large to be read as a small blob (a large environment)
    /// is found through the index that names it.
    #[test]
    fn a_large_spec_is_found_through_its_index() {
        let one = tmp();
        let spec = "ab".repeat(32);
        let mut bytes = vec![b'e'; (SMALL_MAX * 4) as usize];
        bytes.extend_from_slice(format!("/docker/{CID}").as_bytes());
        std::fs::write(one.0.join(&spec), &bytes).unwrap();
        assert!(!holds(&one.0, CID).unwrap(), "no index names it");
        std::fs::write(one.0.join("cd".repeat(32)), index(&spec)).unwrap();
        assert!(holds(&one.0, CID).unwrap());
        // An index naming a path, not a digest, is not followed.
        let other = tmp();
        std::fs::write(other.0.join("ef".repeat(32)), index("../outside")).unwrap();
        assert!(!holds(&other.0, CID).unwrap());
    }

    #[test]
    fn the_store_is_the_one_of_the_containerd_dockerd_runs() {
        let root = Path::new("/var/lib/docker");
        assert_eq!(
            blob_dir(root, true),
            PathBuf::from("/var/lib/docker/containerd/daemon/io.containerd.content.v1.content/blobs/sha256")
        );
        assert_eq!(
            blob_dir(root, false),
            PathBuf::from("/var/lib/containerd/io.containerd.content.v1.content/blobs/sha256")
        );
    }
}

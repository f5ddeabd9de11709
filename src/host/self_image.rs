//! sbx's own image: this executable (and the shared libraries it needs)
//! packed with `docker import`, so no registry is involved. Doctor's probe
//! runs it as `/sbx __probe`, the egress gate as `/sbx __gate`; both use the
//! same image, found again by a label carrying the tar's content hash.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::docker::{argv, parse, DockerExec};
use crate::error::{Error, Result};

/// The label key that marks sbx's own images (value: the content hash).
pub const LABEL: &str = "sbx-probe.hash";

/// The image made from `exe`, imported on first use and cached by content;
/// images of other sbx builds are dropped (docker refuses one in use, which
/// then stays).
pub fn ensure(exec: &dyn DockerExec, exe: &Path) -> Result<String> {
    ensure_cached(exec, exe, None)
}

/// [`ensure`], remembering the content hash in `cache` (a file in sbx's
/// data dir) under the executable's identity (device, inode, size, mtime):
/// packing and hashing sbx and its libraries costs every `create --allow`
/// ~20 ms of CPU and an `ldd` run otherwise. A stale entry only costs the
/// full path: the image is still looked up by its label.
pub fn ensure_cached(exec: &dyn DockerExec, exe: &Path, cache: Option<&Path>) -> Result<String> {
    let key = exe_key(exe);
    if let (Some(cache), Some(key)) = (cache, &key) {
        let remembered = std::fs::read_to_string(cache).ok();
        if let Some(hash) = remembered.as_deref().and_then(|t| t.strip_prefix(key.as_str())) {
            let hash = hash.trim();
            if !hash.is_empty() && hash.chars().all(|c| c.is_ascii_hexdigit()) {
                if let Some(id) = lookup(exec, hash)? {
                    return Ok(id);
                }
            }
        }
    }
    // Doctor's probe and the egress gate wait for this on a first run.
    let mut bar = crate::output::progress();
    bar.update("building sbx's own image (packing this executable)");
    let (tar, hash) =
        image_tar(exe).map_err(|e| Error::io(format!("packing {} into the probe image", exe.display()), e))?;
    if let (Some(cache), Some(key)) = (cache, &key) {
        // Best effort: without it the next create packs and hashes again.
        let _ = std::fs::write(cache, format!("{key}{hash}\n"));
    }
    if let Some(id) = lookup(exec, &hash)? {
        return Ok(id);
    }
    let label = format!("{LABEL}={hash}");
    let args = argv::import(&label);
    bar.update("building sbx's own image (docker import)");
    let out = exec.run_input(&args, &tar)?;
    if out.status != 0 {
        return Err(crate::docker::status_error(&args, &out).into());
    }
    let id = out.stdout_str().trim().to_string();
    // Best effort: an image in use stays (docker refuses), and so does any
    // when a listing fails.
    if let Ok(stale) = other_builds(exec, &id, &hash) {
        if !stale.is_empty() {
            let _ = exec.run(&argv::remove_images(&stale));
        }
    }
    Ok(id)
}

/// Whether `e`, docker's refusal of a `create`/`run` of sbx's image, says
/// that image is not there: another sbx build on this engine dropped it
/// meanwhile (`ensure` keeps one build's image at a time).
pub fn is_gone(e: &Error) -> bool {
    match e {
        Error::Image(crate::error::ImageError::Missing { .. }) => true,
        Error::Docker(crate::docker::DockerError::Status { stderr, .. }) => parse::image_missing_at_run(stderr),
        _ => parse::image_missing_at_run(&e.to_string()),
    }
}

/// What every user of sbx's image (the egress gate, audit's probe,
/// doctor's probe) does with the result of a `create`/`run` of it: when
/// docker said the image is gone ([`is_gone`]), import it again and
/// `retry` with it, once; any other result stands.
pub fn again_if_gone<T>(
    first: Result<T>,
    exec: &dyn DockerExec,
    exe: &Path,
    cache: Option<&Path>,
    retry: impl FnOnce(&str) -> Result<T>,
) -> Result<T> {
    match first {
        Err(e) if is_gone(&e) => retry(&ensure_cached(exec, exe, cache)?),
        r => r,
    }
}

/// sbx images of other builds, judged by each image's own label: two sbx
/// processes that missed the look-up at once each import the same content
/// under an id of its own, and the other's is about to run (seen twice in the
/// full suite as an egress gate's "No such image"; a listing by this hash
/// raced the other import).
fn other_builds(exec: &dyn DockerExec, id: &str, hash: &str) -> Result<Vec<String>> {
    let all = crate::docker::run_ok(exec, &argv::images_labelled(LABEL))?;
    let others: Vec<String> = parse::image_ids(&all.stdout_str()).into_iter().filter(|l| l != id).collect();
    if others.is_empty() {
        return Ok(others);
    }
    let out = crate::docker::run_ok(exec, &argv::image_label_values(LABEL, &others))?;
    Ok(out
        .stdout_str()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(img, h)| img.starts_with("sha256:") && h.trim() != hash)
        .map(|(img, _)| img.to_string())
        .collect())
}

/// The image carrying this content hash, if the engine has it.
fn lookup(exec: &dyn DockerExec, hash: &str) -> Result<Option<String>> {
    let out = crate::docker::run_ok(exec, &argv::images_labelled(&format!("{LABEL}={hash}")))?;
    Ok(parse::image_ids(&out.stdout_str()).into_iter().next())
}

/// What identifies this build of the executable on this host, as the
/// cache's key prefix (`dev:ino:size:mtime_ns `).
fn exe_key(exe: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(exe).ok()?;
    Some(format!("{}:{}:{}:{}.{} ", m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
}

/// The files of the image: the sbx executable at /sbx, the shared objects
/// `ldd` names at their own paths, and empty 0755 /tmp, /etc, /state (as
/// many images have, so the probe also checks that /tmp is writable anyway).
pub fn image_tar(exe: &Path) -> std::io::Result<(Vec<u8>, String)> {
    let mut files: Vec<(PathBuf, PathBuf)> = vec![(PathBuf::from("sbx"), exe.to_path_buf())];
    for lib in shared_objects(exe) {
        files.push((lib.strip_prefix("/").unwrap_or(&lib).to_path_buf(), lib));
    }
    let mut b = tar::Builder::new(Vec::new());
    for dir in ["tmp", "etc", "state"] {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        h.set_mtime(0);
        b.append_data(&mut h, dir, std::io::empty())?;
    }
    for (inside, host) in files {
        let data = std::fs::read(&host)?;
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o755);
        h.set_size(data.len() as u64);
        // Fixed metadata, so the same binary gives the same tar and cache key.
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        b.append_data(&mut h, inside, data.as_slice())?;
    }
    let tar = b.into_inner()?;
    let hash: String = Sha256::digest(&tar).iter().take(8).map(|x| format!("{x:02x}")).collect();
    Ok((tar, hash))
}

/// Absolute paths of the shared objects a dynamic executable loads; none
/// for a static one (or where `ldd` is missing, when the image may lack
/// them and the probe says so by failing to start).
fn shared_objects(exe: &Path) -> Vec<PathBuf> {
    let Ok(out) = std::process::Command::new("ldd").arg(exe).output() else { return Vec::new() };
    parse_ldd(&String::from_utf8_lossy(&out.stdout))
}

pub fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::fake::FakeDocker;
    use crate::docker::Output;

    #[test]
    fn the_content_hash_is_remembered_by_the_executable_s_identity() {
        let dir = std::env::temp_dir().join(format!("sbx-self-image-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("sbx");
        std::fs::write(&exe, b"not really sbx").unwrap();
        let cache = dir.join("self-image");
        let (_, hash) = image_tar(&exe).unwrap();
        let id = format!("sha256:{}", "a".repeat(64));
        let label = format!("label={LABEL}={hash}");
        // First: packed and hashed, found by its label, the hash remembered.
        let fake = FakeDocker::new();
        fake.push(Output::ok(&format!("{id}\n")));
        assert_eq!(ensure_cached(&fake, &exe, Some(&cache)).unwrap(), id);
        assert!(std::fs::read_to_string(&cache).unwrap().trim_end().ends_with(&hash));
        // Then: the remembered hash, one look-up, nothing packed.
        let fake = FakeDocker::new();
        fake.push(Output::ok(&format!("{id}\n")));
        assert_eq!(ensure_cached(&fake, &exe, Some(&cache)).unwrap(), id);
        assert_eq!(fake.calls().len(), 1);
        assert!(fake.calls()[0].contains(&label), "{:?}", fake.calls());
        // A changed executable is a new key: the stale hash is never used.
        std::fs::write(&exe, b"another build of sbx").unwrap();
        let (_, new_hash) = image_tar(&exe).unwrap();
        let fake = FakeDocker::new();
        fake.push(Output::ok(&format!("{id}\n")));
        ensure_cached(&fake, &exe, Some(&cache)).unwrap();
        assert!(fake.calls()[0].contains(&format!("label={LABEL}={new_hash}")), "{:?}", fake.calls());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Two sbx processes that both missed the look-up import the same
    /// content under two ids: neither removes the other's (it is about to run).
    #[test]
    fn an_import_removes_other_builds_images_never_a_concurrent_one_of_the_same_content() {
        let dir = std::env::temp_dir().join(format!("sbx-self-image-race-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("sbx");
        std::fs::write(&exe, b"not really sbx").unwrap();
        let [mine, twin, old] = ["a", "b", "c"].map(|c| format!("sha256:{}", c.repeat(64)));
        let fake = FakeDocker::new();
        let (_, hash) = image_tar(&exe).unwrap();
        fake.push(Output::ok("")); // the look-up: nothing yet
        fake.push(Output::ok(&format!("{mine}\n"))); // the import
        fake.push(Output::ok(&format!("{mine}\n{twin}\n{old}\n"))); // every sbx image
        fake.push(Output::ok(&format!("{twin} {hash}\n{old} 0123456789abcdef\n"))); // their hashes
        fake.push(Output::ok(""));
        assert_eq!(ensure(&fake, &exe).unwrap(), mine);
        let calls = fake.calls();
        let rmi = calls.last().unwrap();
        assert!(rmi.contains(&old) && !rmi.contains(&twin) && !rmi.contains(&mine), "{calls:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ldd_output_parses() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f8f)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f8f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f8f)\n";
        assert_eq!(
            parse_ldd(text),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        assert!(parse_ldd("\tnot a dynamic executable\n").is_empty());
    }

    #[test]
    fn image_tar_is_deterministic() {
        let exe = std::env::current_exe().unwrap();
        let (a, ha) = image_tar(&exe).unwrap();
        let (b, hb) = image_tar(&exe).unwrap();
        assert_eq!((a.len(), ha), (b.len(), hb));
        let mut names = Vec::new();
        for e in tar::Archive::new(a.as_slice()).entries().unwrap() {
            names.push(e.unwrap().path().unwrap().display().to_string());
        }
        assert!(names.contains(&"sbx".to_string()) && names.contains(&"tmp".to_string()), "{names:?}");
    }
}

#[cfg(test)]
mod probe_label {
    /// `sbx events` recognises doctor's probe by this label without importing host.
    #[test]
    fn events_knows_the_probe_images_label() {
        assert_eq!(super::LABEL, crate::docker::parse::PROBE_IMAGE_LABEL);
    }
}

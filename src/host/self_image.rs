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
    let (tar, hash) =
        image_tar(exe).map_err(|e| Error::io(format!("packing {} into the probe image", exe.display()), e))?;
    let label = format!("{LABEL}={hash}");
    let out = crate::docker::run_ok(exec, &argv::images_labelled(&label))?;
    if let Some(id) = parse::image_ids(&out.stdout_str()).into_iter().next() {
        return Ok(id);
    }
    let args = argv::import(&label);
    let out = exec.run_input(&args, &tar)?;
    if out.status != 0 {
        return Err(crate::docker::status_error(&args, &out).into());
    }
    let id = out.stdout_str().trim().to_string();
    if let Ok(all) = crate::docker::run_ok(exec, &argv::images_labelled(LABEL)) {
        let stale: Vec<String> = parse::image_ids(&all.stdout_str()).into_iter().filter(|l| *l != id).collect();
        if !stale.is_empty() {
            let _ = exec.run(&argv::remove_images(&stale));
        }
    }
    Ok(id)
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

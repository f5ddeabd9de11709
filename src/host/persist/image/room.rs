//! Whether the disk under the data dir can hold a session's bound. The
//! image is sparse: a bound past the disk's free space is no bound, since
//! the disk fills (the engine's with it) before the sandbox sees ENOSPC,
//! and the sandbox's writes then fail as I/O errors in its file system. A
//! 16 TiB bound failed half-way as "File too large" with a `.part` left.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::error::Result;
use crate::model::invalid::Invalid;

/// Refused (exit 2, before anything is made or grown) when the image of
/// `session`, at `img` (None: not made yet), cannot get to `want` bytes in
/// what is free on the file system of `volumes`. Each session is checked
/// alone: sparse images of many sessions together can still promise more
/// than the disk has (`sbx volumes` lists each one's bound).
pub fn check(volumes: &Path, session: &str, img: Option<&Path>, want: u64) -> Result<()> {
    let Ok(v) = nix::sys::statvfs::statvfs(volumes) else { return Ok(()) };
    let free = v.blocks_available().saturating_mul(v.fragment_size());
    let held = img.and_then(|p| std::fs::symlink_metadata(p).ok()).map_or(0, |m| m.blocks().saturating_mul(512));
    let need = want.saturating_sub(held);
    if need <= free {
        return Ok(());
    }
    Err(Invalid::new(
        "--persist-size",
        want.to_string(),
        format!(
            "session {session}'s /state would need {need} bytes more of {}, which has {free} free: \
             the disk would fill before the bound",
            volumes.display()
        ),
    )
    .hint("give a smaller --persist-size, or free space on the disk under sbx's data dir (--data-dir)")
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_past_the_free_space_is_refused_and_what_the_image_holds_counts() {
        let dir = std::env::temp_dir().join(format!("sbx-room-{:016x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(check(&dir, "s1", None, 16 << 20).is_ok());
        let e = check(&dir, "s1", None, u64::MAX).unwrap_err().to_string();
        assert!(e.contains("--persist-size") && e.contains("free"), "{e}");
        let img = dir.join("s1.img");
        std::fs::write(&img, vec![1u8; 1 << 20]).unwrap();
        let v = nix::sys::statvfs::statvfs(&dir).unwrap();
        let free = v.blocks_available() * v.fragment_size();
        // Exactly the free space plus what the image already holds: it fits.
        let held = std::fs::metadata(&img).unwrap().blocks() * 512;
        assert!(check(&dir, "s1", Some(&img), free + held - (1 << 20)).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

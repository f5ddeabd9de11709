//! How big the ext4 in a session's image is, read from its superblock:
//! the image file's length is what sbx asked for, not what the file
//! system became. A grow is two steps (the file lengthened, then
//! resize2fs), and an sbx killed between them left a file of the new
//! length holding the old file system, which no later create grew, while
//! `sbx volumes` and the record showed the new bound.

use std::os::unix::fs::FileExt;
use std::path::Path;

/// Where ext4's primary superblock starts, and the fields read from it.
const OFFSET: u64 = 1024;
const BLOCKS_LO: usize = 0x04;
const LOG_BLOCK_SIZE: usize = 0x18;
const MAGIC: usize = 0x38;
const FEATURE_INCOMPAT: usize = 0x60;
const BLOCKS_HI: usize = 0x150;
const EXT4_MAGIC: u16 = 0xEF53;
const INCOMPAT_64BIT: u32 = 0x80;

/// Bytes the file system in `img` spans (blocks times block size), or None
/// when it holds no ext4 superblock sbx can read. Never through a link.
pub fn fs_bytes(img: &Path) -> Option<u64> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::File::options().read(true).custom_flags(nix::libc::O_NOFOLLOW).open(img).ok()?;
    let mut sb = [0u8; 1024];
    f.read_exact_at(&mut sb, OFFSET).ok()?;
    parse(&sb)
}

fn parse(sb: &[u8; 1024]) -> Option<u64> {
    let u32_at = |o: usize| u32::from_le_bytes([sb[o], sb[o + 1], sb[o + 2], sb[o + 3]]);
    if u16::from_le_bytes([sb[MAGIC], sb[MAGIC + 1]]) != EXT4_MAGIC {
        return None;
    }
    let log = u32_at(LOG_BLOCK_SIZE);
    // ext4 blocks are 1 KiB to 64 KiB.
    if log > 6 {
        return None;
    }
    let hi = match u32_at(FEATURE_INCOMPAT) & INCOMPAT_64BIT {
        0 => 0,
        _ => u64::from(u32_at(BLOCKS_HI)),
    };
    let blocks = (hi << 32) | u64::from(u32_at(BLOCKS_LO));
    blocks.checked_mul(1024 << log)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb(blocks: u64, log: u32, incompat: u32) -> [u8; 1024] {
        let mut b = [0u8; 1024];
        b[BLOCKS_LO..BLOCKS_LO + 4].copy_from_slice(&(blocks as u32).to_le_bytes());
        b[BLOCKS_HI..BLOCKS_HI + 4].copy_from_slice(&((blocks >> 32) as u32).to_le_bytes());
        b[LOG_BLOCK_SIZE..LOG_BLOCK_SIZE + 4].copy_from_slice(&log.to_le_bytes());
        b[FEATURE_INCOMPAT..FEATURE_INCOMPAT + 4].copy_from_slice(&incompat.to_le_bytes());
        b[MAGIC..MAGIC + 2].copy_from_slice(&EXT4_MAGIC.to_le_bytes());
        b
    }

    #[test]
    fn the_size_is_blocks_times_block_size_and_nothing_without_the_magic() {
        assert_eq!(parse(&sb(16384, 0, INCOMPAT_64BIT)), Some(16 << 20));
        assert_eq!(parse(&sb(524288, 2, 0)), Some(2 << 30));
        assert_eq!(parse(&sb(1 << 32, 2, INCOMPAT_64BIT)), Some(16 << 40), "the high word with 64bit");
        assert_eq!(parse(&sb(1 << 32, 2, 0)), Some(0), "no high word without 64bit");
        let mut bad = sb(16384, 0, 0);
        bad[MAGIC] = 0;
        assert_eq!(parse(&bad), None);
        assert_eq!(parse(&sb(16384, 40, 0)), None);
        let missing = std::env::temp_dir().join(format!("sbx-sb-{:016x}", rand::random::<u64>()));
        assert_eq!(fs_bytes(&missing), None);
    }
}

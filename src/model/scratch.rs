//! The sizes of a sandbox's RAM-backed scratch (its tmpfs mounts and
//! /dev/shm), all carved out of its `--memory`.
//!
//! Every tmpfs page a sandbox writes is charged to its memory cgroup and
//! cannot be reclaimed without swap (sbx gives none). Sized past the limit,
//! a full /tmp did not fail with ENOSPC: the writer was OOM-killed and the
//! cgroup stayed pinned at its limit, so every later `sbx exec` was killed
//! too (runc; under runsc the whole sandbox died). Sized inside it, a full
//! tmpfs refuses the write and the sandbox's processes keep the rest.

/// What the sandbox's scratch mounts get, in KiB, for a `--memory` of
/// `memory_mib` and `volumes` image VOLUMEs (each a tmpfs of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scratch {
    pub tmp_kib: u64,
    /// /state when it is a tmpfs (neither --persist nor --state-dir).
    pub state_kib: u64,
    /// The helper's background-process state (/run/sbx-bg): small records
    /// and the processes' output.
    pub bg_kib: u64,
    pub shm_kib: u64,
    /// Each image VOLUME: one share of VOLUMES_SHARE split between them.
    pub volume_kib: u64,
}

/// Shares of `--memory`, in 32nds: /tmp 8, /state 4, the image VOLUMEs 4
/// together, /dev/shm 2, /run/sbx-bg 1. 19/32 (59%) in all, plus the 1 MiB
/// socket tmpfs at most, so full scratch still leaves 40% for processes.
const TMP_SHARE: u64 = 8;
const STATE_SHARE: u64 = 4;
const VOLUMES_SHARE: u64 = 4;
const SHM_SHARE: u64 = 2;
const BG_SHARE: u64 = 1;
pub const SHARES_OF_32: u64 = TMP_SHARE + STATE_SHARE + VOLUMES_SHARE + SHM_SHARE + BG_SHARE;

/// Bytes of tmpfs per inode: an empty file or directory still costs about
/// 1 KiB of the cgroup's kernel memory (inode and dentry) and none of the
/// tmpfs's size, so the default (half the host's RAM pages, per mount)
/// would let a file flood reach the OOM killer. One inode per 8 KiB keeps a
/// flood's cost within an eighth of the mount's size, and any non-empty
/// file takes at least a 4 KiB page anyway.
pub const BYTES_PER_INODE: u64 = 8 * 1024;
/// No tmpfs gets fewer inodes than this (a tiny --memory still holds a
/// helper's few records).
pub const MIN_INODES: u64 = 64;

impl Scratch {
    pub fn for_memory(memory_mib: u64, volumes: usize) -> Scratch {
        let share = |n: u64| (memory_mib * 1024 * n / 32).max(4);
        Scratch {
            tmp_kib: share(TMP_SHARE),
            state_kib: share(STATE_SHARE),
            bg_kib: share(BG_SHARE),
            shm_kib: share(SHM_SHARE),
            volume_kib: (share(VOLUMES_SHARE) / volumes.max(1) as u64).max(4),
        }
    }
}

/// `size=…k,nr_inodes=…` for a tmpfs of `kib` KiB: never 0, which means
/// unlimited to tmpfs.
pub fn tmpfs_bounds(kib: u64) -> String {
    let inodes = (kib * 1024 / BYTES_PER_INODE).max(MIN_INODES);
    format!("size={}k,nr_inodes={inodes}", kib.max(4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mount_together_stays_inside_the_memory_limit() {
        for (m, vols) in [(6, 32), (64, 0), (64, 32), (4096, 1), (4096, 32), (16 * 1024 * 1024, 3)] {
            let s = Scratch::for_memory(m, vols);
            let sum = s.tmp_kib + s.state_kib + s.bg_kib + s.shm_kib + s.volume_kib * vols as u64 + 1024;
            // Inodes cost kernel memory on top: at most 1 KiB per BYTES_PER_INODE.
            let with_inodes = sum + sum / 8;
            assert!(with_inodes < m * 1024, "{m} MiB, {vols} volumes: {s:?}");
            if m >= 64 {
                assert!(with_inodes < m * 1024 * 3 / 4, "{m} MiB, {vols} volumes: {s:?}");
            }
        }
        assert_eq!(
            Scratch::for_memory(4096, 2),
            Scratch { tmp_kib: 1 << 20, state_kib: 1 << 19, bg_kib: 1 << 17, shm_kib: 1 << 18, volume_kib: 1 << 18 }
        );
        assert_eq!(SHARES_OF_32, 19);
    }

    #[test]
    fn bounds_are_never_zero_which_tmpfs_reads_as_unlimited() {
        assert_eq!(tmpfs_bounds(1 << 20), "size=1048576k,nr_inodes=131072");
        assert_eq!(tmpfs_bounds(0), "size=4k,nr_inodes=64");
        let tiny = Scratch::for_memory(6, 32);
        assert!(tiny.volume_kib >= 4 && tiny.bg_kib >= 4, "{tiny:?}");
    }
}

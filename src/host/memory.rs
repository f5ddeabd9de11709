//! The host's memory, for the default `--memory`: read from this machine's
//! /proc/meminfo, which is the engine's host only when the engine is local.

use crate::model::engine::Engine;
use crate::spec::DEFAULT_MEMORY_MIB;

/// The default `--memory` is an eighth of the host's RAM (multiples of 64
/// MiB), between 256 MiB and DEFAULT_MEMORY_MIB: a fixed 4 GiB let 6 default
/// sandboxes commit a 24 GiB host. Unknown (a remote engine): the fixed value.
pub fn default_memory_mib(total_mib: Option<u64>) -> u64 {
    match total_mib {
        Some(t) => (t / 8 / 64 * 64).clamp(256, DEFAULT_MEMORY_MIB),
        None => DEFAULT_MEMORY_MIB,
    }
}

/// MemTotal in MiB from the text of /proc/meminfo.
pub fn mem_total_mib(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// The engine's host's RAM in MiB, when sbx can know it without asking the
/// engine: a local engine shares this machine's kernel.
pub fn engine_mem_total_mib(engine: &Engine) -> Option<u64> {
    if engine.is_remote() {
        return None;
    }
    mem_total_mib(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_an_eighth_of_the_host_within_bounds() {
        let info = "MemTotal:       24684084 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total_mib(info), Some(24105));
        assert_eq!(default_memory_mib(mem_total_mib(info)), 3008);
        assert_eq!(default_memory_mib(Some(1024)), 256, "a small host still gets a usable sandbox");
        assert_eq!(default_memory_mib(Some(256 * 1024)), 4096);
        assert_eq!(default_memory_mib(None), 4096);
        assert_eq!(mem_total_mib("MemFree: 1 kB\n"), None);
    }
}

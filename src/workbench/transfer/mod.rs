//! Files between host and sandbox, in the record stream the in-sandbox
//! helper speaks ([`wire`], shared with `helper/sbx_helper.rs`), and to and
//! from tar for `backup`/`restore` ([`archive`]).
//!
//! The sandbox is untrusted: the helper may have been replaced and
//! its stream may name `../../etc/passwd`, a sibling of what was asked for,
//! `.git/hooks/pre-commit`, a symlink and then a file "inside" it, or a
//! terabyte. So the stream is decoded entry by entry, never held whole;
//! every name is checked before anything is created (relative, no `..`, `.`
//! or empty component, and its first component is exactly the name that
//! was asked for); sizes and the entry count are capped ([`Limits`]). Host
//! writes go through descriptors ([`host`]), never check-then-open by path.

pub mod archive;
pub mod host;
pub mod wire;

pub use wire::{human, root_name, Decoder, Encoder, Kind, Limits, Skipped};

/// The refusal an `io::Error` from the readers carries, if it is one (see
/// [`wire::Refused`]); host side only, the helper has no use for it.
pub fn refusal(e: &std::io::Error) -> Option<&wire::Refused> {
    e.get_ref().and_then(|i| i.downcast_ref::<wire::Refused>())
}

/// The warning for what a copy or backup left out, if it left anything out.
pub fn skipped_warning(s: &Skipped) -> Option<String> {
    if s.count == 0 {
        return None;
    }
    let names: Vec<String> = s.first.iter().map(|p| wire::shown(p)).collect();
    let more = s.count - s.first.len() as u64;
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    Some(format!(
        "left out {} {} that {} not a file, directory or symlink (fifos, sockets, devices): {}{more}",
        s.count,
        if s.count == 1 { "entry" } else { "entries" },
        if s.count == 1 { "is" } else { "are" },
        names.join(", ")
    ))
}

/// The mode an entry from a sandbox gets on the host, written by `cp` or
/// in a tar that `backup` and `cp ID:PATH -` write: no setuid or setgid
/// and no group or other write. sbx often runs as root, and so does the
/// `tar -x` of a backup: a sandbox's `chmod 4755 rootshell` must not come
/// out as a root-owned setuid binary, nor `chmod 0777 drop/` as a
/// root-owned directory anyone can write. The sticky bit stays (harmless
/// without the write bits). `restore` takes modes back as the tar has them.
pub fn host_mode(mode: u32) -> u32 {
    mode & 0o1777 & !0o022
}

/// `--max-bytes`: a number of bytes with an optional K/M/G/T suffix
/// (powers of 1024; `KiB`, `K`, `KB` all mean 1024).
pub fn parse_max_bytes(s: &str) -> Result<u64, crate::error::Invalid> {
    crate::model::size::parse_bytes(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!(parse_max_bytes("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_max_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_max_bytes("1t").unwrap(), 1 << 40);
        assert_eq!(parse_max_bytes("100").unwrap(), 100);
        for bad in ["", "0", "x", "1.5G", "1Q", "99999999999999999999", "-1"] {
            assert!(parse_max_bytes(bad).is_err(), "{bad}");
        }
        assert_eq!(human(1 << 30), "1.0 GiB");
        assert_eq!(human(12), "12 B");
    }
}

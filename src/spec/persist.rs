//! `--persist-size`: how much host disk a persistent session may take, and
//! where sbx can enforce it. As root with a local engine the session's
//! /state is a file system of its own (an ext4 image on a loop device,
//! `host::persist::image`), so a write past the bound gets ENOSPC inside
//! the sandbox. A non-root operator cannot mount one, and a remote engine's
//! disk is not this machine's: there `--persist` is refused unless the
//! operator says `--persist-size unbounded`, and `sbx audit` fails the
//! sandbox (its `sbx.persist-size` label records the choice).

use crate::model::invalid::Invalid;

/// What a session's /state may hold when `--persist-size` is not given.
pub const DEFAULT_PERSIST_BYTES: u64 = 2 << 30;
/// The smallest bound: an ext4 with its journal and inode tables fits, and
/// leaves room for work.
pub const MIN_PERSIST_BYTES: u64 = 16 << 20;
/// The largest: ext4's limit with 4 KiB blocks.
pub const MAX_PERSIST_BYTES: u64 = 16 << 40;
/// `--persist-size`'s word (and the label's value) for no bound.
pub const UNBOUNDED: &str = "unbounded";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersistSize {
    /// At most this many bytes (a multiple of 1 MiB).
    Bytes(u64),
    /// As large as the disk under the data dir (or the remote engine's).
    Unbounded,
}

impl PersistSize {
    /// `--persist-size SIZE|unbounded`: sizes as `--max-bytes` takes them
    /// (512MiB, 2G), rounded down to whole MiB, between 16 MiB and 16 TiB.
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        if s.trim().eq_ignore_ascii_case(UNBOUNDED) {
            return Ok(PersistSize::Unbounded);
        }
        let hint = "give a size such as 512MiB or 4GiB, or `unbounded`";
        let n =
            crate::model::size::parse_bytes(s).map_err(|e| Invalid::new("--persist-size", s, e.reason).hint(hint))?;
        let n = n & !((1 << 20) - 1);
        if !(MIN_PERSIST_BYTES..=MAX_PERSIST_BYTES).contains(&n) {
            return Err(Invalid::new("--persist-size", s, "it must be between 16MiB and 16TiB").hint(hint));
        }
        Ok(PersistSize::Bytes(n))
    }

    /// The `sbx.persist-size` label's value: bytes, or `unbounded`.
    pub fn label(self) -> String {
        match self {
            PersistSize::Bytes(n) => n.to_string(),
            PersistSize::Unbounded => UNBOUNDED.into(),
        }
    }
}

/// The bound a `--persist` create gets, before anything is made: `given` is
/// `--persist-size`, `enforceable` whether sbx can mount a file system of
/// the session's own (root, local engine). Where it cannot, only an
/// explicit `unbounded` is taken; `why` says why not, for the refusal.
pub fn persist_bound(given: Option<PersistSize>, enforceable: Result<(), String>) -> Result<PersistSize, Invalid> {
    match (given, enforceable) {
        (Some(PersistSize::Unbounded), _) => Ok(PersistSize::Unbounded),
        (Some(s), Ok(())) => Ok(s),
        (None, Ok(())) => Ok(PersistSize::Bytes(DEFAULT_PERSIST_BYTES)),
        (Some(s), Err(why)) => Err(refusal(&s.label(), &why)),
        (None, Err(why)) => Err(refusal("", &why)),
    }
}

fn refusal(value: &str, why: &str) -> Invalid {
    Invalid::new("--persist-size", value, format!("sbx cannot bound a persistent /state here: {why}")).hint(
        "run sbx as root on the engine's machine for a bounded /state, or pass --persist-size unbounded \
         to take an unbounded one (a warning on create; sbx audit fails the sandbox)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_to_whole_mib_within_bounds() {
        assert_eq!(PersistSize::parse("64MiB").unwrap(), PersistSize::Bytes(64 << 20));
        assert_eq!(PersistSize::parse("2G").unwrap(), PersistSize::Bytes(2 << 30));
        assert_eq!(PersistSize::parse("16777217").unwrap(), PersistSize::Bytes(16 << 20));
        assert_eq!(PersistSize::parse("Unbounded").unwrap(), PersistSize::Unbounded);
        for bad in ["", "0", "15MiB", "17T", "1.5G", "lots", "-1", "99999999999999999999"] {
            let e = PersistSize::parse(bad).unwrap_err();
            assert_eq!(e.what, "--persist-size", "{bad}");
        }
        assert_eq!(PersistSize::Bytes(64 << 20).label(), "67108864");
        assert_eq!(PersistSize::Unbounded.label(), "unbounded");
    }

    #[test]
    fn where_no_bound_can_be_enforced_only_an_explicit_unbounded_is_taken() {
        let here = || Ok(());
        let not = || Err("the engine is remote".to_string());
        assert_eq!(persist_bound(None, here()).unwrap(), PersistSize::Bytes(DEFAULT_PERSIST_BYTES));
        assert_eq!(persist_bound(Some(PersistSize::Bytes(1 << 30)), here()).unwrap(), PersistSize::Bytes(1 << 30));
        assert_eq!(persist_bound(Some(PersistSize::Unbounded), here()).unwrap(), PersistSize::Unbounded);
        assert_eq!(persist_bound(Some(PersistSize::Unbounded), not()).unwrap(), PersistSize::Unbounded);
        for given in [None, Some(PersistSize::Bytes(1 << 30))] {
            let e = persist_bound(given, not()).unwrap_err();
            assert!(e.reason.contains("the engine is remote"), "{e}");
            assert!(e.hint.unwrap().contains("--persist-size unbounded"));
        }
    }
}

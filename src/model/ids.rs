//! Ids no sandbox may run as: the uid and groups of the user running sbx,
//! and the owner and group of the docker socket sbx reaches the engine
//! through. A sandbox with one of them shares that user's files in every
//! mount (a link it plants there is the operator's own; `sbx cp` once
//! followed such a link and replaced `~/.ssh/authorized_keys`), the user's
//! per-uid kernel limits (inotify instances, processes) and, with the
//! socket's group, whatever that group may open on the host. 0 is not
//! listed here: root has rules of its own (`--user 0` only).
//!
//! [`SBX_UIDS`] is the range sbx gives its sandboxes and its own services
//! ids from, one uid (gid alike) each (`host::uids`): every id there is
//! one sandbox's, so none is a user's or an image's to take.

/// The first uid (and gid) of sbx's range: above systemd's container
/// range (0x0008_0000..0x6fff_ffff at most) and below 2^31, where some
/// tools read a uid as negative.
pub const SBX_UID_BASE: u32 = 0x7000_0000;
/// How many uids the range holds (2^24).
pub const SBX_UID_COUNT: u32 = 1 << 24;

const _: () = assert!(SBX_UID_BASE + SBX_UID_COUNT <= 1 << 31);

/// Whether `id` (a uid or a gid) is in sbx's range.
pub fn in_sbx_range(id: u32) -> bool {
    (SBX_UID_BASE..SBX_UID_BASE + SBX_UID_COUNT).contains(&id)
}

/// The range as the operator reads it.
pub fn sbx_range_text() -> String {
    format!("{SBX_UID_BASE}-{}", SBX_UID_BASE + SBX_UID_COUNT - 1)
}

/// Reserved uids and gids, each with why (said in the refusal).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reserved {
    uids: Vec<(u32, String)>,
    gids: Vec<(u32, String)>,
}

impl Reserved {
    /// Reserve `uid` because of `why` (0 is ignored, see the module docs).
    pub fn uid(&mut self, uid: u32, why: impl Into<String>) {
        if uid != 0 && self.why_uid(uid).is_none() {
            self.uids.push((uid, why.into()));
        }
    }

    /// Reserve `gid` because of `why` (0 is ignored).
    pub fn gid(&mut self, gid: u32, why: impl Into<String>) {
        if gid != 0 && self.why_gid(gid).is_none() {
            self.gids.push((gid, why.into()));
        }
    }

    /// Why `uid` is reserved, if it is.
    pub fn why_uid(&self, uid: u32) -> Option<&str> {
        self.uids.iter().find(|(u, _)| *u == uid).map(|(_, w)| w.as_str())
    }

    /// Why `gid` is reserved, if it is.
    pub fn why_gid(&self, gid: u32) -> Option<&str> {
        self.gids.iter().find(|(g, _)| *g == gid).map(|(_, w)| w.as_str())
    }

    /// Why `uid:gid` may not be a sandbox's user, if it may not.
    pub fn refuses(&self, uid: u32, gid: u32) -> Option<String> {
        if let Some(w) = self.why_uid(uid) {
            return Some(format!("uid {uid} is {w}"));
        }
        self.why_gid(gid).map(|w| format!("gid {gid} is {w}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_never_reserved_and_the_first_reason_is_kept() {
        let mut r = Reserved::default();
        r.uid(0, "root");
        r.gid(0, "root");
        r.uid(1003, "yours");
        r.uid(1003, "the socket's owner");
        r.gid(999, "the docker socket's group");
        assert_eq!(r.refuses(0, 0), None);
        assert_eq!(r.refuses(1003, 5).as_deref(), Some("uid 1003 is yours"));
        assert_eq!(r.refuses(5, 999).as_deref(), Some("gid 999 is the docker socket's group"));
        assert_eq!(r.refuses(999, 1003), None, "uids and gids are apart");
    }

    #[test]
    fn the_range_is_below_2_31_and_above_systemds() {
        assert!(in_sbx_range(SBX_UID_BASE) && in_sbx_range(SBX_UID_BASE + SBX_UID_COUNT - 1));
        assert!(!in_sbx_range(SBX_UID_BASE - 1) && !in_sbx_range(SBX_UID_BASE + SBX_UID_COUNT));
        assert_eq!(sbx_range_text(), "1879048192-1895825407");
    }
}

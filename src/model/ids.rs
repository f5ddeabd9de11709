//! Ids no sandbox may run as: the uid and groups of the user running sbx,
//! and the owner and group of the docker socket sbx reaches the engine
//! through. A sandbox with one of them shares that user's files in every
//! mount (a link it plants there is the operator's own; `sbx cp` once
//! followed such a link and replaced `~/.ssh/authorized_keys`), the user's
//! per-uid kernel limits (inotify instances, processes) and, with the
//! socket's group, whatever that group may open on the host. 0 is not
//! listed here: root has rules of its own (`--user 0` only).

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
}

//! Fillers left behind: the never-started container a remote
//! create fills a volume through (the helper volume,
//! `ops::create::remote::helper_volume`, and a `--persist` session's backing
//! volume, `remote_state`) is removed right after the fill, but not when
//! sbx is killed mid-fill. Each carries `sbx.helper.filler` =
//! `CREATED BOOT PID START` (when it was made, and the creating process as
//! this machine's boot id, pid and start time) and `sbx.owner`, an HMAC of
//! its name and that value under this data dir's key, so gc removes only
//! sbx's own and never one a create is filling now: its creator (on this
//! machine, this boot) must be gone, or it must be older than any fill.
//! Its age is docker's (`Created` against the engine's clock), never the
//! label's `CREATED`: that is the creating machine's clock, and any
//! machine sharing the key may run ahead or behind.

use std::time::{Duration, SystemTime};

use crate::docker::argv::remote::{self};
use crate::docker::run_ok;
use crate::error::Result;
use crate::host::state::ProcId;
use crate::sandbox::shared::fillers::{boot_id, token};
use crate::sandbox::Driver;
use crate::sandbox::{GcFailure, GcReport};

/// A fill is a few `docker cp`s; one whose creator cannot be checked from
/// here (another machine sharing the key) is left this long.
pub const MAX_FILL: Duration = Duration::from_secs(3600);

/// A filler as `argv::remote::fillers` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Row {
    pub name: String,
    pub value: String,
    pub owner: String,
    /// Docker's `.CreatedAt`: when the engine made it, by the engine's clock.
    pub created: String,
}

/// What gc does with a filler, from what this machine can check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Not sbx's under this key, unreadable, or its create still runs here.
    Keep,
    /// Its create is gone (why).
    Reap(String),
    /// Made by another machine or boot: goes once it is older than [`MAX_FILL`] ([`too_old`]).
    IfOld,
}

/// Filler `row` is sbx's (under `key`) and no create is filling it: its
/// creator is gone (`alive` says, for a process of this boot), or, when
/// that cannot be checked from here, it is old ([`too_old`]).
pub fn fate(row: &Row, key: &[u8], boot: &str, alive: &dyn Fn(&ProcId) -> bool) -> Fate {
    if row.owner != token(key, &row.name, &row.value) {
        return Fate::Keep;
    }
    // The label's own time (the first field) is the creating machine's
    // clock: never an age (see `too_old`).
    let mut it = row.value.split(' ').skip(1);
    let (Some(by_boot), Some(Ok(pid)), Some(Ok(start))) =
        (it.next(), it.next().map(str::parse::<i32>), it.next().map(str::parse::<u64>))
    else {
        return Fate::Keep;
    };
    if !boot.is_empty() && by_boot == boot && pid != 0 {
        return match alive(&ProcId { pid, start }) {
            true => Fate::Keep,
            false => Fate::Reap(format!("filler whose create (pid {pid}) is gone")),
        };
    }
    Fate::IfOld
}

/// Why filler `row` may go by age: docker made it more than [`MAX_FILL`]
/// before `engine_now`. Both times are the engine's: a machine sharing the
/// key whose clock is off can neither keep its fillers for ever nor have
/// another's reaped mid-fill. An unreadable time keeps it.
pub fn too_old(row: &Row, engine_now: SystemTime) -> Option<String> {
    let created = crate::docker::parse::docker_time(&row.created)?;
    let age = engine_now.duration_since(created).ok()?;
    (age > MAX_FILL).then(|| format!("filler older than {}", humantime::format_duration(MAX_FILL)))
}

impl Driver {
    /// Remove sbx's fillers no create is filling (one `docker ps`, one
    /// `docker rm -f`; one `docker info` for the engine's clock only when
    /// a filler's age decides). Only against a remote engine: only there
    /// are they made.
    pub(in crate::sandbox) fn gc_fillers(&self, key: &[u8], dry_run: bool, report: &mut GcReport) -> Result<()> {
        let out = run_ok(&*self.docker, &remote::fillers())?;
        let boot = boot_id();
        let rows = crate::docker::parse::rows::<Row>(&out.stdout_str());
        let fates: Vec<(Fate, Row)> =
            rows.into_iter().map(|r| (fate(&r, key, &boot, &|p: &ProcId| p.is_alive()), r)).collect();
        let mut engine_now = None;
        if fates.iter().any(|(f, _)| *f == Fate::IfOld) {
            let out = run_ok(&*self.docker, &crate::docker::argv::engine_time())?;
            engine_now = crate::docker::parse::engine_time(&out.stdout_str());
            if engine_now.is_none() {
                let error =
                    format!("docker info gave no readable engine time ({:?}); they stay", out.stdout_str().trim());
                report.failed.push(GcFailure { item: "fillers of other machines".into(), error });
            }
        }
        let gone: Vec<String> = fates
            .into_iter()
            .filter(|(f, r)| match f {
                Fate::Keep => false,
                Fate::Reap(_) => true,
                Fate::IfOld => engine_now.is_some_and(|now| too_old(r, now).is_some()),
            })
            .map(|(_, r)| r.name)
            .collect();
        if gone.is_empty() || dry_run {
            report.fillers = gone;
            return Ok(());
        }
        match self.remove_tolerant(&gone) {
            Ok(()) => report.fillers = gone,
            Err(e) => {
                report.failed.push(GcFailure { item: format!("fillers {}", gone.join(" ")), error: e.to_string() })
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &[u8], value: &str, created: &str) -> Row {
        Row {
            name: "sbx-fill-1".into(),
            value: value.into(),
            owner: token(key, "sbx-fill-1", value),
            created: created.into(),
        }
    }

    #[test]
    fn only_sbx_s_fillers_whose_create_is_gone_go_at_once() {
        let key = [7u8; 32];
        let at = "2026-11-30 13:45:26 +0000 UTC";
        let alive = |p: &ProcId| p.pid == 1;
        // Its create still runs on this boot: kept, however old.
        assert_eq!(fate(&row(&key, "999990 b 1 5", at), &key, "b", &alive), Fate::Keep);
        // Its create is gone: at once.
        let Fate::Reap(why) = fate(&row(&key, "999990 b 2 5", at), &key, "b", &alive) else { panic!() };
        assert!(why.contains("pid 2"), "{why}");
        // Another boot or machine, or no boot id here: only by age.
        assert_eq!(fate(&row(&key, "999990 other 2 5", at), &key, "b", &alive), Fate::IfOld);
        assert_eq!(fate(&row(&key, "999990 b 2 5", at), &key, "", &alive), Fate::IfOld);
        // Not sbx's (another key, or a value changed after the fact), or unreadable: never.
        let mut forged = row(&key, "999990 other 2 5", at);
        forged.owner = token(&[8u8; 32], "sbx-fill-1", &forged.value);
        assert_eq!(fate(&forged, &key, "b", &alive), Fate::Keep);
        let mut moved = row(&key, "999990 b 2 5", at);
        moved.value = "999990 other 2 5".into();
        assert_eq!(fate(&moved, &key, "b", &alive), Fate::Keep);
        assert_eq!(fate(&row(&key, "1 b x 5", at), &key, "b", &alive), Fate::Keep);
        assert_eq!(fate(&row(&key, "1 b 2", at), &key, "b", &alive), Fate::Keep);
    }

    /// The age is docker's `Created` against the engine's clock; the
    /// label's time (the creating machine's clock) counts for nothing.
    #[test]
    fn a_filler_s_age_is_the_engine_s_never_the_label_s() {
        let key = [7u8; 32];
        let engine_now = humantime::parse_rfc3339("2026-11-30T13:45:26Z").unwrap();
        // Made 61 minutes ago by the engine, by a machine whose clock ran a
        // year ahead: it goes.
        let ahead = row(&key, "1827754000 other 2 5", "2026-11-30 12:44:26 +0000 UTC");
        assert!(too_old(&ahead, engine_now).unwrap().contains("older than 1h"));
        // Made a minute ago (said in another zone), by a machine whose clock
        // ran behind by years: it stays.
        let behind = row(&key, "1 other 2 5", "2026-11-30 19:14:26 +0530 IST");
        assert_eq!(too_old(&behind, engine_now), None);
        // Exactly the limit, a time after the engine's now, or an unreadable one: it stays.
        assert_eq!(too_old(&row(&key, "1 o 2 5", "2026-11-30 12:45:26 +0000 UTC"), engine_now), None);
        assert_eq!(too_old(&row(&key, "1 o 2 5", "2026-12-30 12:45:26 +0000 UTC"), engine_now), None);
        assert_eq!(too_old(&row(&key, "1 o 2 5", "a while ago"), engine_now), None);
    }
}

//! Fillers left behind (issue 16): the never-started container a remote
//! create fills a volume through (the helper volume,
//! `create::remote::helper_volume`, and a `--persist` session's backing
//! volume, `remote_state`) is removed right after the fill, but not when
//! sbx is killed mid-fill. Each carries `sbx.helper.filler` =
//! `CREATED BOOT PID START` (when it was made, and the creating process as
//! this machine's boot id, pid and start time) and `sbx.owner`, an HMAC of
//! its name and that value under this data dir's key, so gc removes only
//! sbx's own and never one a create is filling now: its creator (on this
//! machine, this boot) must be gone, or it must be older than any fill.

use std::time::{Duration, SystemTime};

use super::{GcFailure, GcReport};
use crate::docker::argv::remote::{self, FillerId};
use crate::docker::run_ok;
use crate::error::Result;
use crate::host::state::{owner_token, ProcId};
use crate::sandbox::Driver;

/// A fill is a few `docker cp`s; one whose creator cannot be checked from
/// here (another machine sharing the key) is left this long.
pub const MAX_FILL: Duration = Duration::from_secs(3600);

/// What identifies this machine's current boot (pids mean nothing across
/// machines or reboots).
fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// `sbx.helper.filler`'s value for a filler made now by this process.
pub fn label_value(now: SystemTime) -> String {
    let secs = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
    let me = ProcId::current().unwrap_or(ProcId { pid: 0, start: 0 });
    format!("{secs} {} {} {}", boot_id(), me.pid, me.start)
}

/// The owner token of filler `name` carrying `value`.
pub fn token(key: &[u8], name: &str, value: &str) -> String {
    owner_token(key, &format!("helper-filler {name} {value}"))
}

/// A fresh filler's name, label value and owner token under `key`.
pub fn new_id(key: &[u8]) -> FillerId {
    let name = format!("sbx-fill-{:016x}", rand::random::<u64>());
    let value = label_value(SystemTime::now());
    let owner = token(key, &name, &value);
    FillerId { name, value, owner }
}

/// A filler as `argv::remote::fillers` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Row {
    pub name: String,
    pub value: String,
    pub owner: String,
}

/// Filler `row` is sbx's (under `key`) and no create is filling it: its
/// creator is gone (`alive` says, for a process of this boot), or it is
/// older than [`MAX_FILL`]. Why, when it may go.
pub fn reapable(row: &Row, key: &[u8], now: SystemTime, boot: &str, alive: &dyn Fn(&ProcId) -> bool) -> Option<String> {
    if row.owner != token(key, &row.name, &row.value) {
        return None;
    }
    let mut it = row.value.split(' ');
    let created: u64 = it.next()?.parse().ok()?;
    let (by_boot, pid, start) = (it.next()?, it.next()?.parse().ok()?, it.next()?.parse().ok()?);
    let age = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs().saturating_sub(created);
    if !boot.is_empty() && by_boot == boot && pid != 0 && !alive(&ProcId { pid, start }) {
        return Some(format!("filler whose create (pid {pid}) is gone"));
    }
    (age > MAX_FILL.as_secs()).then(|| format!("filler older than {}", humantime::format_duration(MAX_FILL)))
}

impl Driver {
    /// Remove sbx's fillers no create is filling (one `docker ps`, one
    /// `docker rm -f`). Only against a remote engine: only there are they made.
    pub(super) fn gc_fillers(&self, key: &[u8], dry_run: bool, report: &mut GcReport) -> Result<()> {
        let out = run_ok(&*self.exec, &remote::fillers())?;
        let boot = boot_id();
        let now = SystemTime::now();
        let gone: Vec<String> = crate::docker::parse::rows::<Row>(&out.stdout_str())
            .into_iter()
            .filter(|r| reapable(r, key, now, &boot, &|p: &ProcId| p.is_alive()).is_some())
            .map(|r| r.name)
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

    #[test]
    fn only_sbx_s_fillers_whose_create_is_gone_or_that_are_old_go() {
        let key = [7u8; 32];
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let row = |value: &str| Row {
            name: "sbx-fill-1".into(),
            value: value.into(),
            owner: token(&key, "sbx-fill-1", value),
        };
        let alive = |p: &ProcId| p.pid == 1;
        // Its create still runs on this boot: kept, however old.
        assert_eq!(reapable(&row("999990 b 1 5"), &key, now, "b", &alive), None);
        // Its create is gone: at once.
        assert!(reapable(&row("999990 b 2 5"), &key, now, "b", &alive).unwrap().contains("pid 2"));
        // Another boot or machine: only by age.
        assert_eq!(reapable(&row("999990 other 2 5"), &key, now, "b", &alive), None);
        let old = format!("{} other 2 5", 1_000_000 - 3601);
        assert!(reapable(&row(&old), &key, now, "b", &alive).unwrap().contains("older than"));
        // Not sbx's (another key, or a value changed after the fact), or unreadable: never.
        let mut forged = row(&old);
        forged.owner = token(&[8u8; 32], "sbx-fill-1", &old);
        assert_eq!(reapable(&forged, &key, now, "b", &alive), None);
        let mut moved = row("999990 b 2 5");
        moved.value = old.clone();
        assert_eq!(reapable(&moved, &key, now, "b", &alive), None);
        assert_eq!(reapable(&row("x b 2 5"), &key, now, "b", &alive), None);
    }
}

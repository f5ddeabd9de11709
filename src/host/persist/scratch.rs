//! Clone scratch directories: `--clone` clones into one next to the
//! session's directory (`volumes/`, or `volumes/.remote/` for a remote
//! engine) and moves the result in; one an sbx killed mid-clone left holds
//! a full, possibly private clone, which gc removes (`stale_scratch`).

use std::path::{Path, PathBuf};

/// The prefix of a clone's scratch directory (`scratch_name`).
const SCRATCH: &str = ".sbx-clone-";

/// A fresh name for a clone's scratch directory: `.sbx-clone-PID.START-TAGRAND`,
/// naming the process that clones, so `gc` can remove one an sbx killed
/// mid-clone left (`stale_scratch`): a full, possibly private clone.
pub fn scratch_name(tag: &str) -> String {
    let by = crate::host::state::ProcId::current().map_or_else(|| "0.0".into(), |p| format!("{}.{}", p.pid, p.start));
    format!("{SCRATCH}{by}-{tag}{:016x}", rand::random::<u64>())
}

/// How long a clone scratch directory whose process sbx cannot judge (an
/// older sbx named it `.sbx-clone-HEX` or `.sbx-clone-SESSION-HEX`) must
/// have stood untouched before gc takes it: no clone runs that long.
pub const UNJUDGED_SCRATCH_AGE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Clone scratch directories in `dir` that no clone uses any more: those
/// whose cloning process is gone (by pid and start time), and those whose
/// name names no process (older sbx) once [`UNJUDGED_SCRATCH_AGE`] old.
pub fn stale_scratch(dir: &Path) -> Vec<PathBuf> {
    stale_scratch_at(dir, std::time::SystemTime::now(), nix::unistd::geteuid().as_raw())
}

/// [`stale_scratch`] at `now`, for directories owned by `uid`.
fn stale_scratch_at(dir: &Path, now: std::time::SystemTime, uid: u32) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(SCRATCH)) else { return false };
            let by = rest.split('-').next().unwrap_or_default();
            let process = by.split_once('.').and_then(|(pid, start)| Some((pid.parse().ok()?, start.parse().ok()?)));
            if let Some((pid, start)) = process.filter(|(pid, _)| *pid > 0) {
                return !crate::host::state::ProcId { pid, start }.is_alive();
            }
            // No process to ask: by the directory's own times, read without
            // following a link; the newer of mtime and ctime, since ctime
            // cannot be set back. Only a real directory of this user's.
            let Ok(m) = std::fs::symlink_metadata(e.path()) else { return false };
            let at = |secs: i64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs.max(0) as u64);
            let touched = at(m.mtime()).max(at(m.ctime()));
            m.file_type().is_dir()
                && m.uid() == uid
                && now.duration_since(touched).is_ok_and(|age| age > UNJUDGED_SCRATCH_AGE)
        })
        // Never through a link: only directories sbx made. (gc's
        // `remove_dir_all` follows no link inside either.)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// gc's sweep takes the scratch of a cloning process that is gone, and
    /// nothing else: not a live clone's, not an older name it cannot judge,
    /// not a file or a link.
    #[test]
    fn only_scratch_of_a_gone_clone_is_stale() {
        let dir = std::env::temp_dir().join(format!("sbx-scratch-{:016x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let live = dir.join(scratch_name("s-"));
        let gone = dir.join(".sbx-clone-999999999.1-s-00000000000000aa");
        let old = dir.join(".sbx-clone-00000000000000bb");
        for d in [&live, &gone, &old] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(dir.join(".sbx-clone-999999998.1-00000000000000cc"), b"").unwrap();
        std::os::unix::fs::symlink("/etc", dir.join(".sbx-clone-999999997.1-00000000000000dd")).unwrap();
        std::fs::create_dir(dir.join("session-1")).unwrap();
        assert_eq!(stale_scratch(&dir), std::slice::from_ref(&gone));
        // A day on, the older name goes too (not the live clone, the file or the link).
        let later = std::time::SystemTime::now() + UNJUDGED_SCRATCH_AGE + std::time::Duration::from_secs(60);
        let mut stale = stale_scratch_at(&dir, later, nix::unistd::geteuid().as_raw());
        stale.sort();
        assert_eq!(stale, [old.clone(), gone.clone()]);
        assert!(live
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(&format!(".sbx-clone-{}.", std::process::id())));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Scratch whose name names no process (older sbx: `.sbx-clone-HEX`,
    /// `.sbx-clone-SESSION-HEX`; or `0.0`, no process known) goes once a
    /// day old by its own times: a real directory of this user's only,
    /// never a link to one, never another user's, never a file.
    #[test]
    fn scratch_that_names_no_process_goes_once_a_day_old() {
        let dir = std::env::temp_dir().join(format!("sbx-scratch-{:016x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let names =
            [".sbx-clone-00000000000000bb", ".sbx-clone-s-1-00000000000000cc", ".sbx-clone-0.0-s-00000000000000dd"];
        for n in names {
            std::fs::create_dir(dir.join(n)).unwrap();
        }
        // Its clone inside: a link out of it is removed, never followed.
        let outside = dir.join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), b"").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join(names[0]).join("workspace")).unwrap();
        std::os::unix::fs::symlink(dir.join(names[1]), dir.join(".sbx-clone-00000000000000ee")).unwrap();
        std::fs::write(dir.join(".sbx-clone-00000000000000ff"), b"").unwrap();
        let me = nix::unistd::geteuid().as_raw();
        let now = std::time::SystemTime::now();
        let day = UNJUDGED_SCRATCH_AGE;
        assert_eq!(stale_scratch_at(&dir, now, me), Vec::<PathBuf>::new(), "fresh: a clone may be running");
        assert_eq!(stale_scratch_at(&dir, now + day - std::time::Duration::from_secs(60), me), Vec::<PathBuf>::new());
        let later = now + day + std::time::Duration::from_secs(60);
        assert_eq!(stale_scratch_at(&dir, later, me.wrapping_add(1)), Vec::<PathBuf>::new(), "another user's");
        let mut stale = stale_scratch_at(&dir, later, me);
        stale.sort();
        let mut want: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
        want.sort();
        assert_eq!(stale, want);
        // As gc removes them.
        for p in &stale {
            std::fs::remove_dir_all(p).unwrap();
        }
        assert!(outside.join("keep").exists(), "removal followed a link inside");
        assert!(dir.join(".sbx-clone-00000000000000ee").symlink_metadata().is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! The event journal: the lifecycle events only sbx knows (a route revoked,
//! a TTL expired), kept in the state dir for `sbx events`, which merges them
//! with the engine's (`docker events`).
//!
//! ```text
//! events.jsonl     one `model::event::Event` per line, 0600, append-only
//! events.jsonl.1   the previous file, once the current one passed CAP
//! events.lock      taken (flock) only to rotate
//! ```
//!
//! Each line is one `write(2)` on an `O_APPEND` descriptor and well under
//! PIPE_BUF, so lines of concurrent writers (a watchdog, gc, revoke) never
//! interleave. The journal is sbx's own, yet read with bounds all the same.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::model::event::Event;

pub const FILE: &str = "events.jsonl";
const OLD: &str = "events.jsonl.1";
const LOCK: &str = "events.lock";
/// Past this size the journal is rotated: at most twice this is kept.
pub const CAP: u64 = 1024 * 1024;
/// Far below PIPE_BUF (4096): ids, kinds (32) and sessions (128) are short.
const MAX_LINE: usize = 1024;

/// Append `e` to the journal in `dir` (the state dir).
pub fn append(dir: &Path, e: &Event) -> Result<()> {
    let mut line = serde_json::to_string(e)
        .map_err(|source| Error::Host(crate::error::HostError::Json { context: "encoding an event".into(), source }))?;
    line.push('\n');
    if line.len() > MAX_LINE {
        return Ok(());
    }
    let path = dir.join(FILE);
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    // One write: a short write of a regular file is a full disk, not a split line.
    let n = f.write(line.as_bytes()).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    if n != line.len() {
        return Err(Error::io(format!("writing {}", path.display()), std::io::Error::from(ErrorKind::WriteZero)));
    }
    if f.metadata().map(|m| m.len()).unwrap_or(0) > CAP {
        rotate(dir);
    }
    Ok(())
}

/// Append, and say on stderr when it failed: the event is a record of what
/// was done, never a reason for the operation itself to fail.
pub fn record(dir: &Path, e: &Event) {
    if let Err(err) = append(dir, e) {
        crate::output::warn(
            "events_journal",
            &format!("could not record the {} event of {}: {err}", e.event.name(), e.id),
        );
    }
}

/// Move the full journal aside. Under the lock, and only if the file is
/// still over the cap: two writers that both saw it full rotate it once.
fn rotate(dir: &Path) {
    let Ok(lock) = OpenOptions::new().write(true).create(true).truncate(false).mode(0o600).open(dir.join(LOCK)) else {
        return;
    };
    let Ok(_held) = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive) else { return };
    if std::fs::metadata(dir.join(FILE)).is_ok_and(|m| m.len() > CAP) {
        let _ = std::fs::rename(dir.join(FILE), dir.join(OLD));
    }
}

/// Reads the journal from a time on and follows it: [`Follower::poll`]
/// returns what was appended since the last call, across rotations.
pub struct Follower {
    dir: PathBuf,
    file: Option<(File, u64)>,
    /// The unfinished last line.
    partial: Vec<u8>,
    since: Option<SystemTime>,
    /// The rotated file was read (a replay reads it first, once).
    replayed_old: bool,
    /// Lines that were not events (or over-long): skipped.
    pub skipped: usize,
}

impl Follower {
    /// From `since` (both files), else from the current end: only new events.
    pub fn new(dir: &Path, since: Option<SystemTime>) -> Self {
        let mut f = Follower {
            dir: dir.to_path_buf(),
            file: None,
            partial: Vec::new(),
            since,
            replayed_old: since.is_none(),
            skipped: 0,
        };
        if since.is_none() {
            if let Some((mut file, ino)) = f.open() {
                let _ = file.seek(SeekFrom::End(0));
                f.file = Some((file, ino));
            }
        }
        f
    }

    fn open(&self) -> Option<(File, u64)> {
        let file = File::open(self.dir.join(FILE)).ok()?;
        let ino = file.metadata().ok()?.ino();
        Some((file, ino))
    }

    /// The events appended since the last call (the first call: since `since`).
    pub fn poll(&mut self) -> Vec<Event> {
        let mut bytes = Vec::new();
        if !self.replayed_old {
            // The first read of a replay starts with the rotated file.
            self.replayed_old = true;
            if let Ok(mut old) = File::open(self.dir.join(OLD)) {
                let _ = (&mut old).take(2 * CAP).read_to_end(&mut bytes);
                if !bytes.ends_with(b"\n") && !bytes.is_empty() {
                    bytes.push(b'\n');
                }
            }
        }
        let current = std::fs::metadata(self.dir.join(FILE)).ok().map(|m| m.ino());
        if let Some((file, ino)) = &mut self.file {
            let _ = file.take(2 * CAP).read_to_end(&mut bytes);
            if current != Some(*ino) {
                // Rotated (or removed): the old descriptor had the last lines.
                self.file = None;
            }
        }
        if self.file.is_none() {
            if let Some((mut file, ino)) = self.open() {
                let _ = (&mut file).take(2 * CAP).read_to_end(&mut bytes);
                self.file = Some((file, ino));
            }
        }
        self.lines(&bytes)
    }

    fn lines(&mut self, bytes: &[u8]) -> Vec<Event> {
        self.partial.extend_from_slice(bytes);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            if self.partial.len() > MAX_LINE {
                self.partial.clear();
                self.skipped += 1;
            }
            return Vec::new();
        };
        let whole: Vec<u8> = self.partial.drain(..=end).collect();
        let mut out = Vec::new();
        for line in whole.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            match (line.len() <= MAX_LINE).then(|| serde_json::from_slice::<Event>(line).ok()).flatten() {
                Some(e) if self.since.is_none_or(|s| e.at() >= s) => out.push(e),
                Some(_) => {}
                None => self.skipped += 1,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::Kind;
    use std::time::Duration;

    struct Scratch(PathBuf);
    impl Scratch {
        fn new() -> Self {
            let d =
                std::env::temp_dir().join(format!("sbx-journal-{}-{:x}", std::process::id(), rand::random::<u64>()));
            std::fs::create_dir_all(&d).unwrap();
            Scratch(d)
        }
        fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn ev(at: SystemTime, id: &str, kind: Kind) -> Event {
        Event::new(at, id, kind)
    }

    #[test]
    fn appended_events_are_followed_across_a_rotation() {
        let dir = Scratch::new();
        let t0 = SystemTime::now();
        append(dir.path(), &ev(t0 - Duration::from_secs(60), "sbx-000000000001", Kind::Expired)).unwrap();
        let mut live = Follower::new(dir.path(), None);
        let mut replay = Follower::new(dir.path(), Some(t0 - Duration::from_secs(120)));
        let mut recent = Follower::new(dir.path(), Some(t0 - Duration::from_secs(10)));
        assert_eq!(live.poll(), vec![]);
        assert_eq!(replay.poll().len(), 1);
        assert_eq!(recent.poll(), vec![]);
        let mut r = ev(t0, "sbx-000000000002", Kind::Revoked);
        r.route = Some("inference".into());
        append(dir.path(), &r).unwrap();
        assert_eq!(live.poll(), vec![r.clone()]);
        assert_eq!(recent.poll(), vec![r.clone()]);
        // Fill past the cap: the follower reads the old file's tail, then the new one.
        let filler = ev(t0, "sbx-000000000003", Kind::Expired);
        let n = CAP as usize / serde_json::to_string(&filler).unwrap().len() + 2;
        for _ in 0..n {
            append(dir.path(), &filler).unwrap();
        }
        assert!(dir.path().join(OLD).exists());
        let after = ev(t0, "sbx-000000000004", Kind::Expired);
        append(dir.path(), &after).unwrap();
        let got = live.poll();
        assert_eq!(got.len(), n + 1);
        assert_eq!(got.last(), Some(&after));
        let mode = std::fs::metadata(dir.path().join(FILE)).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_partial_or_foreign_line_is_not_an_event() {
        let dir = Scratch::new();
        let path = dir.path().join(FILE);
        std::fs::write(&path, "not json\n{\"time\":\"2026-11-30T00:00:00.000Z\",\"id\":\"sbx-000000000001\"").unwrap();
        let mut f = Follower::new(dir.path(), Some(SystemTime::UNIX_EPOCH));
        assert_eq!(f.poll(), vec![]);
        assert_eq!(f.skipped, 1);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b",\"event\":\"expired\"}\n").unwrap();
        let got = f.poll();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].event, Kind::Expired);
    }
}

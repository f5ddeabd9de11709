//! TTLs: `sbx ttl` moves the expiry, the watchdog waits for it.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::error::Result;
use crate::host::state::ProcId;
use crate::model::record;
use crate::sandbox::Driver;

impl Driver {
    /// The TTL watchdog's loop: sleeps until the expiry (re-read every
    /// second, so `sbx ttl` moves it), then destroys the sandbox. Ends early
    /// when the sandbox is destroyed by anyone else (`socket_dir`, or a
    /// remote sandbox's expiry file, is gone: see [`Self::watched`]).
    pub fn watch(&self, id: &str, socket_dir: &Path) -> Result<()> {
        let state = &self.state()?.state;
        if let Some(me) = ProcId::current() {
            state.set_watchdog(id, me)?;
        }
        loop {
            let Some(expiry) = state.expiry(id) else { return Ok(()) };
            if !socket_dir.exists() {
                return Ok(());
            }
            let now = SystemTime::now();
            match expiry.duration_since(now) {
                Ok(left) if !left.is_zero() => std::thread::sleep(left.min(Duration::from_secs(1))),
                _ => {
                    // The sandbox record makes this one `docker rm`, close to the expiry.
                    tracing::info!(id, "TTL expired; destroying");
                    let session = state.record(id).and_then(|r| r.session);
                    crate::sandbox::shared::removal::journal_expired(&state.dir, id, session);
                    self.destroy(&[id.to_string()])?;
                    return Ok(());
                }
            }
        }
    }

    /// What sandbox `id`'s TTL watchdog watches, ending when it is gone: a
    /// local sandbox's socket directory; for one on a remote engine, its
    /// expiry file in the data dir (destroy and gc forget it), since
    /// nothing sbx makes for a remote sandbox belongs on this machine's
    /// file system (a marker directory under the socket root was).
    pub fn watched(&self, state: &crate::host::state::State, id: &str) -> Result<PathBuf> {
        Ok(match self.engine()?.is_remote() {
            true => state.expiry_file(id),
            false => self.roots.resolve()?.join(id),
        })
    }

    /// Move a sandbox's expiry to `ttl` from now. Returns the new expiry,
    /// and what a watchdog watches when one must be started (none is alive).
    pub fn set_ttl(&self, id: &str, ttl: Duration) -> Result<(SystemTime, Option<PathBuf>)> {
        let raw = self.inspect_one(id)?;
        let state = &self.state()?.state;
        let at = SystemTime::now() + ttl;
        // The expiry is this engine's sandbox's: gc judges it by this engine.
        state.set_engine(id, &self.engine()?.endpoint)?;
        state.set_expiry(id, at)?;
        let watched = state.watchdog(id).is_some_and(|w| w.is_alive());
        // A relayed remote sandbox's label names its socket inside it; its
        // watchdog watches its expiry here.
        let dir = match raw.labels.get(record::SOCKET).map(String::as_str) {
            Some(crate::model::paths::SANDBOX_SOCKET) => Some(state.expiry_file(id)),
            s => s.map(|s| Path::new(s).parent().unwrap_or(Path::new(s)).to_path_buf()),
        };
        Ok((at, if watched { None } else { dir }))
    }
}

//! TTLs: `sbx ttl` moves the expiry, the watchdog waits for it.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::Driver;
use crate::error::Result;
use crate::host::state::ProcId;
use crate::model::record;

impl Driver {
    /// The TTL watchdog's loop: sleeps until the expiry (re-read every
    /// second, so `sbx ttl` moves it), then destroys the sandbox. Ends early
    /// when the sandbox is destroyed by anyone else.
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
                    super::gc::journal_expired(&state.dir, id, session);
                    self.destroy(&[id.to_string()])?;
                    return Ok(());
                }
            }
        }
    }

    /// Move a sandbox's expiry to `ttl` from now. Returns the new expiry,
    /// and the socket path when a watchdog must be started (none is alive).
    pub fn set_ttl(&self, id: &str, ttl: Duration) -> Result<(SystemTime, Option<PathBuf>)> {
        let raw = self.inspect_one(id)?;
        let state = &self.state()?.state;
        let at = SystemTime::now() + ttl;
        // The expiry is this engine's sandbox's (issue 16): gc judges it by this engine.
        state.set_engine(id, &self.engine()?.endpoint)?;
        state.set_expiry(id, at)?;
        let watched = state.watchdog(id).is_some_and(|w| w.is_alive());
        // A relayed remote sandbox's label names its socket inside it; the
        // watchdog watches its marker here (made again if a reboot emptied
        // /run, or the watchdog would end at once).
        let socket = match raw.labels.get(record::SOCKET).map(String::as_str) {
            Some(crate::model::paths::SANDBOX_SOCKET) => {
                let root = self.roots.resolve()?;
                if !root.join(id).is_dir() {
                    crate::host::socket::make_marker_dir(&root, id)?;
                }
                Some(root.join(id).join(crate::host::socket::SOCKET_NAME))
            }
            s => s.map(PathBuf::from),
        };
        Ok((at, if watched { None } else { socket }))
    }
}

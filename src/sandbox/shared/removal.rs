//! Removing sandbox containers the way destroy, gc, the watchdog and a
//! failed create all do: thawed first, tolerant of a racing removal,
//! paced in batches; and the journal line of an expiry.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use crate::docker::{argv, parse, status_error};
use crate::error::{Error, Result};
use crate::host::state::Mark;
use crate::sandbox::{is_timeout, Driver};

impl Driver {
    /// Thaw the targets `sbx pause` froze: `docker rm -f` of a paused
    /// gVisor sandbox waits out a 10 s kill timeout (see `Mark::Paused`).
    /// Best effort: the removal that follows works either way.
    /// Takes (sandbox id, container) pairs.
    pub(in crate::sandbox) fn thaw<'a>(&self, targets: impl Iterator<Item = (&'a str, &'a str)>) {
        let Ok(h) = self.state() else { return };
        for (_, container) in targets.filter(|(id, _)| h.state.marked(id, Mark::Paused)) {
            let _ = self.docker.run(&argv::unpause(container));
        }
    }

    /// [`remove_tolerant`](Self::remove_tolerant) in paced batches (
    /// never one `docker rm` of many, see `docker::pace`). Every batch runs
    /// even when one fails, except after the engine stopped answering (each
    /// would only wait out its deadline). Returns the batches not removed,
    /// each with its error, or None for a batch never tried.
    pub(in crate::sandbox) fn remove_paced(&self, ids: &[String]) -> Vec<(Vec<String>, Option<Error>)> {
        self.pace
            .run_until(ids, |batch| self.remove_tolerant(batch), |r| r.as_ref().is_err_and(is_timeout))
            .into_iter()
            .filter_map(|(batch, r)| match r {
                Some(Ok(())) => None,
                Some(Err(e)) => Some((batch.to_vec(), Some(e))),
                None => Some((batch.to_vec(), None)),
            })
            .collect()
    }

    /// `docker rm -f` that counts "no such container" as done, and waits
    /// out "removal already in progress" (a racing destroy, watchdog or gc
    /// got there first) so the container is gone when this returns.
    pub(in crate::sandbox) fn remove_tolerant(&self, ids: &[String]) -> Result<()> {
        let args = argv::remove(ids);
        let out = self.docker.run(&args)?;
        if out.status == 0 {
            return Ok(());
        }
        let Some(mut racing) = parse::removal_races(&out.stderr_str(), ids) else {
            return Err(status_error(&args, &out).into());
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !racing.is_empty() {
            if Instant::now() > deadline {
                return Err(status_error(&args, &out).into());
            }
            std::thread::sleep(Duration::from_millis(50));
            let out = self.docker.run(&argv::inspect(&racing))?;
            let still: Vec<String> =
                crate::docker::parse::parse_inspect(&out.stdout_str(), "docker container inspect")?
                    .into_iter()
                    .map(|r| r.name)
                    .collect();
            racing.retain(|id| still.contains(id));
        }
        Ok(())
    }
}

/// Record that sandbox `id` expired and is being removed (`sbx events`).
pub(crate) fn journal_expired(dir: &Path, id: &str, session: Option<String>) {
    let mut e = crate::model::event::Event::new(SystemTime::now(), id, crate::model::event::Kind::Expired);
    e.session = session.filter(|s| !s.is_empty());
    crate::host::journal::record(dir, &e);
}

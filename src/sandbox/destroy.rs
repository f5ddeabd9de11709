//! `destroy`: remove sandboxes, their private route networks, socket
//! directories and state, and with `--purge` their session volumes.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::networks::private_of;
use super::{is_timeout, Driver, NOT_TRIED};
use crate::docker::{argv, parse, status_error};
use crate::error::{Error, Result};
use crate::host::socket;
use crate::model::record::{self, RawContainer};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Destroyed {
    pub removed: Vec<String>,
    pub already_gone: Vec<String>,
}

impl Driver {
    /// Remove sandboxes and their socket directories. Already gone is fine:
    /// scripts call this from `trap ... EXIT`, and two destroys may race.
    pub fn destroy(&self, ids: &[String]) -> Result<Destroyed> {
        self.destroy_purging(ids, false)
    }

    /// `destroy --purge`: also the persistent volumes of their sessions.
    pub fn destroy_purging(&self, ids: &[String], purge: bool) -> Result<Destroyed> {
        let mut ids: Vec<String> = ids.to_vec();
        ids.dedup();
        // Sandboxes this host recorded go in one `docker rm` by container id;
        // the rest are inspected first to prove they are sbx's.
        let state = &self.state()?.state;
        let (recorded, ids): (Vec<_>, Vec<_>) =
            ids.into_iter().map(|id| (state.record(&id), id)).partition(|(r, _)| r.is_some());
        let ids: Vec<String> = ids.into_iter().map(|(_, id)| id).collect();
        let mut removed = Vec::new();
        let mut failure = None;
        if !recorded.is_empty() {
            let cids: Vec<String> =
                recorded.iter().filter_map(|(r, _)| r.as_ref().map(|r| r.container.clone())).collect();
            // Paced (issue 10); what a failed batch held stays recorded.
            let failed = self.remove_paced(&cids);
            let kept: BTreeSet<String> = failed.iter().flat_map(|(b, _)| b.iter().cloned()).collect();
            // Named by sandbox id, not container id, in what the user reads.
            let name = |cid: &String| {
                recorded.iter().find(|(r, _)| r.as_ref().is_some_and(|r| r.container == *cid)).map(|(_, id)| id.clone())
            };
            failure =
                first_failure(failed.into_iter().map(|(b, e)| (b.iter().filter_map(name).collect(), e)).collect());
            for (r, id) in &recorded {
                let Some(r) = r else { continue };
                if kept.contains(&r.container) {
                    continue;
                }
                self.remove_private(&r.private)?;
                socket::remove_dir(&r.socket_dir, id)?;
                if purge {
                    if let (Some(vol), Some(session)) = (&r.volume, &r.session) {
                        self.purge_volume(vol, session)?;
                    }
                }
                state.forget(id);
                removed.push(id.clone());
            }
        }
        if let Some(e) = failure {
            // The rest still goes; the first failure is the answer.
            if !ids.is_empty() {
                if let Err(more) = self.destroy_inspected(&ids, purge) {
                    eprintln!("sbx: warning: {more}");
                }
            }
            return Err(e);
        }
        if ids.is_empty() {
            return Ok(Destroyed { removed, already_gone: Vec::new() });
        }
        let mut rest = self.destroy_inspected(&ids, purge)?;
        rest.removed.splice(0..0, removed);
        Ok(rest)
    }

    fn destroy_inspected(&self, ids: &[String], purge: bool) -> Result<Destroyed> {
        let ids = ids.to_vec();
        let raws = self.inspect_many(&ids)?;
        let present: Vec<String> = raws.iter().map(|r| r.name.clone()).collect();
        // Paced (issue 10); a sandbox of a failed batch keeps its directory,
        // networks and state, and the first failure is returned at the end.
        let failed = self.remove_paced(&present);
        let kept: BTreeSet<String> = failed.iter().flat_map(|(b, _)| b.iter().cloned()).collect();
        let failure = first_failure(failed);
        let raws: Vec<RawContainer> = raws.into_iter().filter(|r| !kept.contains(&r.name)).collect();
        let private: Vec<(String, String)> = raws.iter().flat_map(private_of).collect();
        self.remove_private(&private)?;
        for r in &raws {
            if let Some(dir) = r.labels.get(record::SOCKET).and_then(|s| Path::new(s).parent()) {
                socket::remove_dir(dir, &r.name)?;
            }
        }
        let state = &self.state()?.state;
        for id in ids.iter().filter(|id| !kept.contains(*id)) {
            state.forget(id);
        }
        if purge {
            for r in &raws {
                if let (Some(vol), Some(session)) = (r.labels.get(record::VOLUME), r.labels.get(record::SESSION)) {
                    self.purge_volume(vol, session)?;
                }
            }
        }
        let already_gone: Vec<String> = ids.iter().filter(|i| !present.contains(i)).cloned().collect();
        if !already_gone.is_empty() {
            // A create killed before its container existed may have left the
            // directory under the root this environment resolves to.
            if let Ok(root) = self.roots.resolve() {
                for id in &already_gone {
                    socket::remove_dir(&root.join(id), id)?;
                }
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(Destroyed { removed: present, already_gone })
    }

    /// [`remove_tolerant`](Self::remove_tolerant) in paced batches (issue 10:
    /// never one `docker rm` of many, see `docker::pace`). Every batch runs
    /// even when one fails, except after the engine stopped answering (each
    /// would only wait out its deadline). Returns the batches not removed,
    /// each with its error, or None for a batch never tried.
    pub(super) fn remove_paced(&self, ids: &[String]) -> Vec<(Vec<String>, Option<Error>)> {
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
    fn remove_tolerant(&self, ids: &[String]) -> Result<()> {
        let args = argv::remove(ids);
        let out = self.exec.run(&args)?;
        if out.status == 0 {
            return Ok(());
        }
        let stderr = out.stderr_str();
        let mut racing = Vec::new();
        for line in stderr.lines().filter(|l| !parse::is_trailer(l)) {
            if parse::no_such_container(line) {
                continue;
            }
            match ids.iter().find(|id| parse::removal_in_progress(line, id)) {
                Some(id) => racing.push(id.clone()),
                None => return Err(status_error(&args, &out).into()),
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while !racing.is_empty() {
            if Instant::now() > deadline {
                return Err(status_error(&args, &out).into());
            }
            std::thread::sleep(Duration::from_millis(50));
            let out = self.exec.run(&argv::inspect(&racing))?;
            let still: Vec<String> = record::parse_inspect(&out.stdout_str(), "docker container inspect")?
                .into_iter()
                .map(|r| r.name)
                .collect();
            racing.retain(|id| still.contains(id));
        }
        Ok(())
    }
}

/// The error to answer with after paced removals: the first failed batch's
/// (its kind and hint stay, e.g. `engine_timeout`), after a warning naming
/// the sandboxes of every other batch left in place.
fn first_failure(failed: Vec<(Vec<String>, Option<Error>)>) -> Option<Error> {
    let mut first: Option<Error> = None;
    let mut left = Vec::new();
    for (ids, e) in failed {
        left.extend(ids);
        first = first.or(e);
    }
    if !left.is_empty() {
        eprintln!("sbx: warning: not removed: {}; `sbx destroy` them again once the engine answers", left.join(" "));
    }
    first.or_else(|| (!left.is_empty()).then(|| Error::io("removing sandboxes", std::io::Error::other(NOT_TRIED))))
}

//! `destroy`: remove sandboxes, their egress gates and policy files, their
//! private route networks, socket directories and state, and with `--purge` their session volumes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::docker::parse::RawContainer;
use crate::error::{Error, Result, SandboxError};
use crate::host::socket;
use crate::host::state::SandboxRecord;
use crate::model::record::PrivateRoute;
use crate::model::{gate, record};
use crate::sandbox::shared::networks::private_of;
use crate::sandbox::Driver;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Destroyed {
    pub removed: Vec<String>,
    pub already_gone: Vec<String>,
}

/// One sandbox to remove, and what goes with it, as its record or its
/// inspect says.
struct Removal {
    id: String,
    /// What `docker rm` is given: the container id from the record (a
    /// container later given the same name is never touched), else the name.
    container: String,
    private: Vec<PrivateRoute>,
    socket_dir: Option<PathBuf>,
    /// Made against a remote engine: its socket is inside the
    /// sandbox, and this machine holds only its marker directory (under
    /// the socket root, named by its id) and its state.
    relayed_remote: bool,
    /// (volume, session) of a persistent session.
    volume: Option<(String, String)>,
    /// It has an egress gate; with its container id when recorded.
    gate: Option<Option<String>>,
}

impl Removal {
    fn recorded(id: String, r: SandboxRecord) -> Self {
        // A gate's internal network is among the private ones.
        let gate = match r.gate {
            Some(cid) => Some(Some(cid)),
            None => r.private.iter().any(|p| p.network == gate::network(&id)).then_some(None),
        };
        Removal {
            id,
            container: r.container,
            private: r.private,
            socket_dir: Some(r.socket_dir),
            relayed_remote: false,
            volume: r.volume.zip(r.session),
            gate,
        }
    }

    fn inspected(raw: &RawContainer) -> Self {
        let label = |k: &str| raw.labels.get(k).cloned();
        Removal {
            id: raw.name.clone(),
            // The id the inspect that proved it sbx's gave: a container given
            // the name after that inspect is never the one removed.
            container: crate::sandbox::acted_on(raw),
            private: private_of(raw),
            socket_dir: raw
                .labels
                .get(record::SOCKET)
                .filter(|s| *s != crate::model::paths::SANDBOX_SOCKET)
                .and_then(|s| Path::new(s).parent())
                .map(Path::to_path_buf),
            relayed_remote: label(record::SOCKET).as_deref() == Some(crate::model::paths::SANDBOX_SOCKET),
            volume: label(record::VOLUME).zip(label(record::SESSION)),
            gate: raw.labels.contains_key(record::EGRESS).then_some(None),
        }
    }
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
        let local = !self.engine()?.is_remote();
        // Sandboxes this host recorded are removed by container id with no
        // docker call before; the rest are inspected first to prove they are
        // sbx's. On a remote engine they are all inspected, and
        // a record of another engine's sandbox names a container this
        // engine does not have: `docker rm` would call it removed.
        let state = &self.state()?.state;
        let endpoint = &self.engine()?.endpoint;
        let mut recorded = Vec::new();
        let mut rest = Vec::new();
        for id in ids {
            match state.record(&id).filter(|_| local && state.belongs(&id, endpoint)) {
                Some(r) => recorded.push(Removal::recorded(id, r)),
                None => rest.push(id),
            }
        }
        let (removed, failure) = self.remove_targets(recorded, purge)?;
        if let Some(e) = failure {
            // The rest still goes; the first failure is the answer.
            if !rest.is_empty() {
                if let Err(more) = self.destroy_inspected(rest, purge) {
                    self.warn("not_removed", &more.to_string());
                }
            }
            return Err(e);
        }
        if rest.is_empty() {
            return Ok(Destroyed { removed, already_gone: Vec::new() });
        }
        let mut done = self.destroy_inspected(rest, purge)?;
        done.removed.splice(0..0, removed);
        Ok(done)
    }

    fn destroy_inspected(&self, ids: Vec<String>, purge: bool) -> Result<Destroyed> {
        let raws = self.inspect_many(&ids)?;
        let (removed, failure) = self.remove_targets(raws.iter().map(Removal::inspected).collect(), purge)?;
        let present: Vec<&String> = raws.iter().map(|r| &r.name).collect();
        let already_gone: Vec<String> = ids.into_iter().filter(|i| !present.contains(&i)).collect();
        // This machine's files for an id gone from this engine, if they
        // are attributed to it (another engine's sandbox is
        // alive where this destroy did not look).
        let state = &self.state()?.state;
        let endpoint = &self.engine()?.endpoint;
        let mine: Vec<&String> = already_gone.iter().filter(|id| state.belongs(id, endpoint)).collect();
        if !mine.is_empty() {
            // A create killed before its container existed may have left the
            // directory under the root this environment resolves to; the
            // directory first, its attribution with the rest after.
            if let Ok(root) = self.roots.resolve() {
                for id in &mine {
                    socket::remove_dir(&root.join(id), id)?;
                }
            }
            for id in &mine {
                state.forget(id);
            }
            self.release_sandbox_uids(&mine.iter().map(|id| id.to_string()).collect::<Vec<_>>());
        }
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(Destroyed { removed, already_gone })
    }

    /// Remove the targets' containers in paced batches, then what
    /// goes with each removed one: private networks, socket directory, with
    /// `purge` its session's volume, and its state. A sandbox of a failed
    /// batch keeps all of it. Returns the ids removed and the first removal
    /// failure (the rest were still tried); Err when a cleanup step fails.
    fn remove_targets(&self, targets: Vec<Removal>, purge: bool) -> Result<(Vec<String>, Option<Error>)> {
        if targets.is_empty() {
            return Ok((Vec::new(), None));
        }
        let containers: Vec<String> = targets.iter().map(|t| t.container.clone()).collect();
        self.thaw(targets.iter().map(|t| (t.id.as_str(), t.container.as_str())));
        let failed = self.remove_paced(&containers);
        let kept: BTreeSet<String> = failed.iter().flat_map(|(b, _)| b.iter().cloned()).collect();
        // Named by sandbox id, not container id, in what the user reads.
        let name = |c: &String| targets.iter().find(|t| t.container == *c).map(|t| t.id.clone());
        let failure =
            self.first_failure(failed.into_iter().map(|(b, e)| (b.iter().filter_map(name).collect(), e)).collect());
        let gone: Vec<Removal> = targets.into_iter().filter(|t| !kept.contains(&t.container)).collect();
        self.release_sandbox_uids(&gone.iter().map(|t| t.id.clone()).collect::<Vec<_>>());
        let gated: Vec<&Removal> = gone.iter().filter(|t| t.gate.is_some()).collect();
        if !gated.is_empty() {
            let ids: Vec<String> = gated.iter().map(|t| t.id.clone()).collect();
            let known: Vec<String> = gated.iter().filter_map(|t| t.gate.clone().flatten()).collect();
            self.remove_gates(&ids, &known)?;
        }
        let private: Vec<PrivateRoute> = gone.iter().flat_map(|t| t.private.iter().cloned()).collect();
        // Forwarders before their networks.
        let forwarded: Vec<String> = gone
            .iter()
            .filter(|t| t.private.iter().any(crate::model::forward::is_forwarder))
            .map(|t| t.id.clone())
            .collect();
        if !forwarded.is_empty() {
            self.remove_forwarders(&forwarded, None)?;
        }
        self.remove_private(&private)?;
        // A remote create's marker here is named by the sandbox's id: it
        // is that sandbox's, now gone, whichever engine sbx drives now.
        let relayed: Vec<&Removal> = gone.iter().filter(|t| t.relayed_remote).collect();
        if !relayed.is_empty() {
            if let Ok(root) = self.roots.resolve() {
                for t in &relayed {
                    socket::remove_dir(&root.join(&t.id), &t.id)?;
                }
            }
            let state = &self.state()?.state;
            for t in &relayed {
                state.forget(&t.id);
            }
        }
        // A gated sandbox's policy directory here is its, on any engine
        // (a remote gate gets a copy).
        let data = &self.state()?.state.dir;
        for t in &gated {
            crate::host::egress::remove(data, &t.id)?;
        }
        if self.engine()?.is_remote() {
            // Its labels name paths on the engine's machine, not on this one;
            // its session's volumes are the engine's.
            if purge {
                for (_, session) in gone.iter().filter_map(|t| t.volume.as_ref()) {
                    self.remove_remote_state(session, true)?;
                }
            }
            return Ok((gone.into_iter().map(|t| t.id).collect(), failure));
        }
        for t in &gone {
            if let Some(dir) = &t.socket_dir {
                socket::remove_dir(dir, &t.id)?;
            }
        }
        if purge {
            for (volume, session) in gone.iter().filter_map(|t| t.volume.as_ref()) {
                self.purge_volume(volume, session)?;
            }
        }
        let state = &self.state()?.state;
        for t in &gone {
            state.forget(&t.id);
        }
        Ok((gone.into_iter().map(|t| t.id).collect(), failure))
    }

    /// The error to answer with after paced removals: the first failed batch's
    /// (its kind and hint stay, e.g. `engine_timeout`), after a warning naming
    /// the sandboxes of every other batch left in place.
    fn first_failure(&self, failed: Vec<(Vec<String>, Option<Error>)>) -> Option<Error> {
        let mut first: Option<Error> = None;
        let mut left = Vec::new();
        for (ids, e) in failed {
            left.extend(ids);
            first = first.or(e);
        }
        if !left.is_empty() {
            let msg = format!("not removed: {}; `sbx destroy` them again once the engine answers", left.join(" "));
            self.warn("not_removed", &msg);
        }
        first.or_else(|| (!left.is_empty()).then_some(Error::Sandbox(SandboxError::NotTried)))
    }
}

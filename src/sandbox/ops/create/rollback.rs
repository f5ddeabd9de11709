//! Create's undo: a guard that removes what a failed create made when it
//! drops, unless the create committed. Armed once the create is recorded as
//! in flight; if the undo leaves something behind, that record stays, so
//! `gc` reaps the rest once this process is gone.

use std::path::{Path, PathBuf};

use crate::docker::{argv, parse};
use crate::host::socket;
use crate::host::state::State;
use crate::model::record::PrivateRoute;
use crate::sandbox::Driver;

pub(super) struct Rollback<'a> {
    driver: &'a Driver,
    state: &'a State,
    id: &'a str,
    root: &'a Path,
    /// The socket directory and the private route networks, once the
    /// directory exists: from then on the container (made or not) and the
    /// networks are removed too.
    made: Option<(PathBuf, &'a [PrivateRoute])>,
    /// An egress gate may exist: its container and policy directory go too
    /// (its internal network is among the private ones).
    gate: bool,
    /// Forwarders may exist: they go before their networks.
    forwarders: bool,
    committed: bool,
}

impl<'a> Rollback<'a> {
    pub(super) fn new(driver: &'a Driver, state: &'a State, id: &'a str, root: &'a Path) -> Self {
        Rollback { driver, state, id, root, made: None, gate: false, forwarders: false, committed: false }
    }

    /// The socket directory `dir` exists; the container may follow.
    pub(super) fn made(&mut self, dir: PathBuf, private: &'a [PrivateRoute]) {
        self.made = Some((dir, private));
    }

    /// The gate's policy directory is about to be written; the gate may follow.
    pub(super) fn gate(&mut self) {
        self.gate = true;
    }

    /// The private routes' forwarders are about to start (`any`: there are some).
    pub(super) fn forwarders(&mut self, any: bool) {
        self.forwarders = any;
    }

    /// The sandbox stands: keep everything, and it is no longer in flight.
    /// Kept; `in_flight`: still marked in flight by this process, as a
    /// fork's child is until its siblings are made (`Driver::fork` ends the
    /// marks), so sbx killed part way leaves gc the whole fork to undo.
    pub(super) fn commit(mut self, in_flight: bool) {
        self.committed = true;
        if !in_flight {
            self.state.end_create(self.id);
        }
    }
}

impl Drop for Rollback<'_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        // The gate first: egress is cut before anything else goes.
        let gate = !self.gate || self.driver.remove_gate(self.id, self.state, None);
        let forwarders = !self.forwarders || self.driver.remove_forwarders_warning(self.id);
        let clean = match &self.made {
            None => socket::remove_dir(&self.root.join(self.id), self.id).is_ok(),
            Some((dir, private)) => self.driver.teardown(self.id, dir, private),
        };
        let clean = gate && forwarders && clean;
        if clean {
            self.state.forget(self.id);
        }
    }
}

impl Driver {
    /// Undo a failed create. Runs to the end whatever fails or is signalled;
    /// true when nothing is left.
    fn teardown(&self, id: &str, dir: &Path, private: &[PrivateRoute]) -> bool {
        let mut clean = true;
        match self.docker.run(&argv::remove(&[id])) {
            Ok(out) if out.status == 0 || parse::no_such_container(&out.stderr_str()) => {}
            Ok(out) => {
                let why = crate::docker::explain::first_line(&out.stderr_str());
                self.warn("cleanup", &format!("could not remove {id}: {why}; `sbx gc` will"));
                clean = false;
            }
            Err(e) => {
                self.warn("cleanup", &format!("could not remove {id}: {e}; `sbx gc` will"));
                clean = false;
            }
        }
        if let Err(e) = self.remove_private(private) {
            self.warn("cleanup", &format!("could not remove the private route networks of {id}: {e}; `sbx gc` will"));
            clean = false;
        }
        if let Err(e) = socket::remove_dir(dir, id) {
            self.warn("cleanup", &format!("could not remove {}: {e}", dir.display()));
            clean = false;
        }
        clean
    }
}

//! The driver's side of `host::uids`: where its table is, a uid claimed
//! for a create (freed when the create fails), freed at destroy, pruned
//! after a listing.

use std::path::PathBuf;

use crate::docker::parse::RawContainer;
use crate::error::Result;
use crate::host::uids::{self, Holder, Live, Place, Table};
use crate::sandbox::Driver;

/// A uid a create holds; freed on drop unless [`Lease::keep`] was called
/// or it was not made by this create (a session's, from an earlier one).
pub(in crate::sandbox) struct Lease<'a> {
    driver: &'a Driver,
    holder: Holder,
    pub(in crate::sandbox) uid: u32,
    fresh: bool,
}

impl Lease<'_> {
    /// The sandbox exists: its uid is held until it is destroyed.
    pub(in crate::sandbox) fn keep(mut self) {
        self.fresh = false;
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if self.fresh {
            self.driver.release_uids(std::slice::from_ref(&self.holder));
        }
    }
}

impl Driver {
    /// The table: the explicit one (tests), else for root on a local engine
    /// the machine's ([`uids::HOST_WIDE`]), else the data dir's.
    fn uid_table(&self) -> Result<Table> {
        if let Some(t) = &self.uid_table {
            return Ok(Table::at(t.clone()));
        }
        let local = !self.engine()?.is_remote();
        Ok(Table::at(match local && nix::unistd::geteuid().is_root() {
            true => PathBuf::from(uids::HOST_WIDE),
            false => self.state()?.state.dir.join("uids"),
        }))
    }

    /// A uid for `holder`: its own if it holds one (a persisted session),
    /// else a free one at random, never a reserved id or a host account's.
    /// `prefer`: tried first (a session's directory's owner, should the
    /// table have lost its entry).
    pub(in crate::sandbox) fn claim_uid(&self, holder: Holder, prefer: Option<u32>) -> Result<Lease<'_>> {
        let reserved = self.reserved_ids()?;
        let local = !self.engine()?.is_remote();
        let refuse = uids::refused(&reserved, local);
        let start = match prefer.filter(|u| crate::model::ids::in_sbx_range(*u)) {
            Some(u) => u - crate::model::ids::SBX_UID_BASE,
            None => (self.uid_start)(),
        };
        let data = &self.state()?.state.dir;
        let place = Place { engine: &self.engine()?.endpoint, data };
        let (uid, fresh) = self.uid_table()?.claim(&place, holder.clone(), start, &refuse)?;
        // A session's uid outlives a failed create: its files are the uid's.
        let fresh = fresh && !matches!(holder, Holder::Session(_));
        Ok(Lease { driver: self, holder, uid, fresh })
    }

    /// The owner of what `session`'s volume binds in `data` (the `data`
    /// directory inside a bounded session's mounted image; the session's
    /// directory itself when unbounded), if it is there: the uid its files
    /// are (the table is the record; this is its backup). A bounded
    /// session's bare mount point is root's and says nothing.
    pub(in crate::sandbox) fn session_uid(&self, data: &std::path::Path, session: &str) -> Option<u32> {
        use std::os::unix::fs::MetadataExt;
        let bound = crate::host::persist::image::volume_device(data, session);
        std::fs::symlink_metadata(bound).ok().map(|m| m.uid()).filter(|u| crate::model::ids::in_sbx_range(*u))
    }

    /// Free what `holders` hold; a failure is a warning (gc prunes it).
    pub(in crate::sandbox) fn release_uids(&self, holders: &[Holder]) {
        let done = (|| {
            let data = &self.state()?.state.dir;
            let place = Place { engine: &self.engine()?.endpoint, data };
            self.uid_table()?.release(&place, holders)
        })();
        if let Err(e) = done {
            self.warn("uid_table", &format!("could not free the sandbox's uids ({e}); `sbx gc` frees them later"));
        }
    }

    /// The uids of sandboxes `ids`, and of their gates and forwarders.
    pub(in crate::sandbox) fn release_sandbox_uids(&self, ids: &[String]) {
        if ids.is_empty() {
            return;
        }
        let holders: Vec<Holder> =
            ids.iter().flat_map(|id| [Holder::Sandbox(id.clone()), Holder::Service(id.clone())]).collect();
        self.release_uids(&holders);
    }

    /// After a listing of every sbx container on the engine (`raws`,
    /// whoever's): the table drops what none of them holds.
    pub(in crate::sandbox) fn prune_uids(&self, raws: &[RawContainer]) {
        let live: Vec<Live> = raws
            .iter()
            .map(|r| Live {
                name: r.name.clone(),
                uid: r.labels.get(crate::model::record::USER).and_then(|u| u.split(':').next()?.parse().ok()),
            })
            .collect();
        let done = (|| {
            let data = &self.state()?.state.dir;
            let place = Place { engine: &self.engine()?.endpoint, data };
            self.uid_table()?.prune(&place, &live, &|p| p.is_alive())
        })();
        if let Err(e) = done {
            self.warn("uid_table", &format!("could not prune the uid table ({e})"));
        }
    }
}

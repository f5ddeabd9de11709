//! What gc reaps of warm pools (see `Driver::pool_reaps`).

use std::collections::BTreeMap;

use crate::docker::parse::RawContainer;
use crate::host::pool::{unix_now, Member, Pool};
use crate::host::state::State;
use crate::model::record;
use crate::sandbox::gc::plan::Reap;
use crate::sandbox::shared::members::{alive, claimer_alive, is_remote};
use crate::sandbox::Driver;

impl Driver {
    /// What `gc` reaps of pools: members whose claim never finished (the
    /// claimer is gone), found dead or idle too long, of a pool that is
    /// gone, or left unrecorded by a refiller that died; never a healthy
    /// unclaimed member of a live pool, nor one a live refiller is making.
    /// With `dry_run` nothing moves. A remote pool's members are judged
    /// by the engine (one inspect per pool), never this machine's /proc.
    pub fn pool_reaps(
        &self,
        state: &State,
        owned: &[RawContainer],
        live_creates: &[String],
        dry_run: bool,
    ) -> Vec<Reap> {
        let data = &state.dir;
        let now = unix_now();
        let mut reaps = Vec::new();
        let mut reap = |id: &str, why: String| reaps.push(Reap { id: id.to_string(), reason: why });
        // Per remote pool: its ready members the engine reports alive; None when it did not answer.
        let mut live: BTreeMap<String, Option<Vec<String>>> = BTreeMap::new();
        for c in owned {
            let Some(name) = c.labels.get(record::POOL) else { continue };
            let id = c.name.as_str();
            if let Some(claim) = state.claim(id) {
                if !claim.complete && !claimer_alive(&claim) {
                    reap(
                        id,
                        format!("claim from pool {name} never finished (its process, pid {}, is gone)", claim.pid),
                    );
                }
                continue;
            }
            if live_creates.iter().any(|l| l == id) {
                continue;
            }
            let pool = Pool::at(data, name);
            let Ok(spec) = pool.spec() else {
                reap(id, format!("its pool {name} is gone"));
                continue;
            };
            if let Some(m) = pool.member("ready", id) {
                let dead = if is_remote(&spec) {
                    let l = live.entry(name.clone()).or_insert_with(|| {
                        let ms: Vec<Member> = pool.ready().iter().filter_map(|i| pool.member("ready", i)).collect();
                        self.remote_alive(name, &ms).ok()
                    });
                    // Unknown is not dead.
                    l.as_ref().is_some_and(|l| !l.contains(&m.id))
                } else {
                    !alive(&m)
                };
                let why = if dead {
                    format!("pool {name} member is no longer alive")
                } else if spec.max_idle_secs.is_some_and(|d| now.saturating_sub(m.ready_at) > d) {
                    format!("pool {name} member idle longer than its max-idle")
                } else {
                    continue;
                };
                // Won from the claimers first (the rename a claim makes): one
                // that took it since it was read keeps it.
                if dry_run || pool.shift(id, "ready", "dead") {
                    reap(id, why);
                }
            } else if pool.member("dead", id).is_some() {
                reap(id, format!("pool {name} member found dead by a claim"));
            } else if let Some((_, by)) = pool.claimed().into_iter().find(|(c, _)| c == id) {
                if !by.is_alive() {
                    reap(id, format!("claim from pool {name} never finished (its process, pid {}, is gone)", by.pid));
                }
            } else if !pool.filling() {
                reap(id, format!("pool {name}'s refiller died before recording it"));
            }
        }
        reaps
    }
}

//! What `sbx gc` removes, decided by a pure function over what docker and
//! the host report, so every rule is unit-tested without a daemon.
//!
//! Removed: sandboxes past their expiry; sandboxes whose create never
//! finished (its process is gone: the pid is dead or now names another
//! process); sandboxes never started that no create is making (a killed
//! create's `docker create` that ended after the gc that forgot its mark);
//! socket directories that belong to no sandbox; state files of sandboxes
//! that no longer exist. Never touched: containers sbx did not create (the
//! caller passes only owned ones) and anything whose create is still running.

use std::collections::BTreeSet;
use std::time::SystemTime;

use serde::Serialize;

use crate::docker::parse::{PrivateNetwork, RawContainer};
use crate::host::state::{Creating, ProcId};
use crate::model::record::PrivateRoute;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reap {
    pub id: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GcPlan {
    /// Containers to remove, with why.
    pub containers: Vec<Reap>,
    /// Socket directories (by sandbox id) under the socket root that belong
    /// to no sandbox, pending a last check that no such container exists.
    pub orphan_dirs: Vec<String>,
    /// Ids whose state files can go.
    pub forget: Vec<String>,
    /// Private route networks whose sandbox is gone or being reaped.
    pub networks: Vec<PrivateRoute>,
    /// Of `containers`, those reaped for never having started with no create
    /// marked for them, pending a last look that they still have not: a
    /// create may have started its own and ended its mark between `docker ps`
    /// and reading the marks.
    pub unstarted: Vec<String>,
}

pub struct Inputs<'a> {
    /// Containers sbx owns (ownership already checked).
    pub containers: &'a [RawContainer],
    /// Creates recorded as in flight, read after `containers`.
    pub creating: &'a [Creating],
    /// Ids with a create mark, live or dead, whichever engine it names.
    pub marked: &'a BTreeSet<String>,
    /// Ids with a state-dir expiry.
    pub expiring: &'a [String],
    /// Entries of the socket root, read before `containers`.
    pub socket_entries: &'a [String],
    /// sbx's private route networks, read before `containers`; ownership
    /// already checked.
    pub private_networks: &'a [PrivateNetwork],
    pub expiry: &'a dyn Fn(&RawContainer) -> Option<SystemTime>,
    pub alive: &'a dyn Fn(&ProcId) -> bool,
    /// Whether a process on this machine still names the id in its argv:
    /// a killed create's docker CLI, whose container may yet appear.
    pub calling: &'a dyn Fn(&str) -> bool,
    pub now: SystemTime,
}

pub fn plan(i: &Inputs) -> GcPlan {
    let mut live: BTreeSet<&str> =
        i.creating.iter().filter(|c| c.by.as_ref().is_some_and(|p| (i.alive)(p))).map(|c| c.id.as_str()).collect();
    let dead: Vec<&Creating> = i.creating.iter().filter(|c| !live.contains(c.id.as_str())).collect();
    let names: BTreeSet<&str> = i.containers.iter().map(|c| c.name.as_str()).collect();
    // SIGKILL ends sbx, not the docker CLIs it started: a `docker run`
    // still in flight makes its container after this gc looked. Its dead
    // mark stays (and its directory, its networks) for a gc after it.
    live.extend(dead.iter().map(|d| d.id.as_str()).filter(|id| !names.contains(id) && (i.calling)(id)));

    let mut plan = GcPlan::default();
    for c in i.containers {
        if live.contains(c.name.as_str()) {
            continue;
        }
        if let Some(dead) = dead.iter().find(|d| d.id == c.name) {
            let who = dead.by.as_ref().map(|p| format!("pid {}", p.pid)).unwrap_or_else(|| "unknown".into());
            plan.containers.push(Reap {
                id: c.name.clone(),
                reason: format!("create never finished (its process, {who}, is gone)"),
            });
        } else if let Some(e) = (i.expiry)(c).filter(|e| *e <= i.now) {
            plan.containers.push(Reap {
                id: c.name.clone(),
                reason: format!("expired at {}", humantime::format_rfc3339_seconds(e)),
            });
        } else if c.state == "created" && !i.marked.contains(&c.name) {
            // SIGKILL leaves a create's `docker create` running in its CLI
            // and the engine; one that ends after a gc forgot the dead mark
            // (no container had the name yet) is a sandbox nothing will
            // start, its owner never told its id.
            plan.containers.push(Reap {
                id: c.name.clone(),
                reason: "never started, and no create is making it (a killed create's)".into(),
            });
            plan.unstarted.push(c.name.clone());
        }
    }
    for e in i.socket_entries {
        if crate::spec::parse_id(e).is_ok() && !names.contains(e.as_str()) && !live.contains(e.as_str()) {
            plan.orphan_dirs.push(e.clone());
        }
    }
    let reaped: BTreeSet<&str> = plan.containers.iter().map(|r| r.id.as_str()).collect();
    let mut forget: BTreeSet<String> = reaped.iter().map(|s| s.to_string()).collect();
    for id in dead.iter().map(|d| d.id.as_str()).chain(i.expiring.iter().map(String::as_str)) {
        if !names.contains(id) && !live.contains(id) {
            forget.insert(id.to_string());
        }
    }
    plan.forget = forget.into_iter().collect();
    plan.networks = i
        .private_networks
        .iter()
        .filter(|n| {
            let id = n.sandbox.as_str();
            reaped.contains(id) || (!names.contains(id) && !live.contains(id))
        })
        .map(|n| PrivateRoute { network: n.name.clone(), service: n.service.clone() })
        .collect();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::shared::creating::mark_creates;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn c(name: &str, expires: Option<&str>) -> RawContainer {
        let mut labels = BTreeMap::new();
        if let Some(e) = expires {
            labels.insert(crate::model::record::EXPIRES.to_string(), e.to_string());
        }
        RawContainer {
            name: name.into(),
            state: "running".into(),
            networks: vec![],
            labels,
            full: serde_json::Value::Null,
        }
    }

    /// Made by `docker create`, never started.
    fn unstarted(name: &str) -> RawContainer {
        RawContainer { state: "created".into(), ..c(name, None) }
    }

    fn in_flight(id: &str, by: Option<ProcId>) -> Creating {
        Creating { id: id.to_string(), by }
    }

    const A: &str = "sbx-00000000000a";
    const B: &str = "sbx-00000000000b";
    const C: &str = "sbx-00000000000c";
    const D: &str = "sbx-00000000000d";

    fn now() -> SystemTime {
        humantime::parse_rfc3339("2026-11-29T10:00:00Z").unwrap()
    }

    fn run(containers: &[RawContainer], creating: &[Creating], expiring: &[String], entries: &[&str]) -> GcPlan {
        run_calling(containers, creating, expiring, entries, false)
    }

    /// `run`, where a process still names C in its argv when `calling_c`.
    fn run_calling(
        containers: &[RawContainer],
        creating: &[Creating],
        expiring: &[String],
        entries: &[&str],
        calling_c: bool,
    ) -> GcPlan {
        let entries: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
        let moved = |r: &RawContainer| -> Option<SystemTime> {
            // B's TTL was extended by `sbx ttl`: the state file wins over the label.
            if r.name == B {
                Some(now() + Duration::from_secs(60))
            } else {
                r.expiry(None)
            }
        };
        let net = |id: &str| PrivateNetwork {
            name: format!("{id}-x"),
            sandbox: id.to_string(),
            service: "svc".to_string(),
            owner: "checked".to_string(),
        };
        let nets = vec![net(A), net(C), net(D)];
        let marked: BTreeSet<String> = creating.iter().map(|c| c.id.clone()).collect();
        plan(&Inputs {
            containers,
            creating,
            marked: &marked,
            expiring,
            socket_entries: &entries,
            private_networks: &nets,
            expiry: &moved,
            alive: &|p: &ProcId| p.pid == 1,
            calling: &|id: &str| id == C && calling_c,
            now: now(),
        })
    }

    #[test]
    fn reaps_expired_but_not_extended_or_unexpiring() {
        let cs = [
            c(A, Some("2026-11-29T09:59:59Z")),
            c(B, Some("2026-11-29T09:00:00Z")),
            c(C, None),
            c(D, Some("2026-11-29T10:00:01Z")),
        ];
        let p = run(&cs, &[], &[], &[A, B, C, D]);
        assert_eq!(p.containers, vec![Reap { id: A.into(), reason: "expired at 2026-11-29T09:59:59Z".into() }]);
        assert!(p.orphan_dirs.is_empty());
        assert_eq!(p.forget, vec![A]);
        // A's private network goes with it; C's and D's sandboxes stay.
        let nets: Vec<&str> = p.networks.iter().map(|n| n.network.as_str()).collect();
        assert_eq!(nets, [format!("{A}-x")]);
    }

    #[test]
    fn unfinished_creates_are_reaped_only_when_their_process_is_gone() {
        let alive = Some(ProcId { pid: 1, start: 5 });
        let dead = Some(ProcId { pid: 4242, start: 5 });
        let cs = [c(A, None), c(B, None)];
        let creating = vec![in_flight(A, alive), in_flight(B, dead), in_flight(C, dead), in_flight(D, alive)];
        let p = run(&cs, &creating, &[], &[A, B, C, D]);
        assert_eq!(p.containers.len(), 1);
        assert_eq!(p.containers[0].id, B);
        assert!(p.containers[0].reason.contains("pid 4242"));
        // C died before its container existed: its directory is an orphan.
        // D is still being created: its directory stays.
        assert_eq!(p.orphan_dirs, vec![C]);
        assert_eq!(p.forget, vec![B, C]);
        // C died before its container existed: its network goes; D's create still runs.
        let nets: Vec<&str> = p.networks.iter().map(|n| n.network.as_str()).collect();
        assert_eq!(nets, [format!("{C}-x")]);
    }

    #[test]
    fn an_expired_sandbox_whose_create_still_runs_is_left_alone() {
        let creating = vec![in_flight(A, Some(ProcId { pid: 1, start: 1 }))];
        let p = run(&[c(A, Some("2026-11-29T09:00:00Z"))], &creating, &[], &[A]);
        assert!(p.containers.is_empty() && p.orphan_dirs.is_empty() && p.forget.is_empty(), "{p:?}");
        // A's private network stays; C and D have neither a sandbox nor a create.
        let nets: Vec<&str> = p.networks.iter().map(|n| n.network.as_str()).collect();
        assert_eq!(nets, [format!("{C}-x"), format!("{D}-x")]);
    }

    #[test]
    fn orphan_dirs_and_stale_state() {
        let p = run(&[c(A, None)], &[], &[A.to_string(), D.to_string()], &[A, C, "not-an-id", ".hidden"]);
        assert!(p.containers.is_empty());
        assert_eq!(p.orphan_dirs, vec![C]);
        assert_eq!(p.forget, vec![D]);
    }

    /// A SIGKILLed create's `docker create` ended after a gc had forgotten
    /// its dead mark: the container was left, never started, until its TTL.
    #[test]
    fn a_sandbox_never_started_that_no_create_is_making_is_reaped() {
        let alive = Some(ProcId { pid: 1, start: 5 });
        let dead = Some(ProcId { pid: 4242, start: 5 });
        let cs = [unstarted(A), unstarted(B), unstarted(C), c(D, None)];
        // B is still being made; C's create died (the dead-mark rule takes it).
        let p = run(&cs, &[in_flight(B, alive), in_flight(C, dead)], &[], &[]);
        let reaped: Vec<&str> = p.containers.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(reaped, [A, C]);
        assert!(p.containers[0].reason.contains("never started"), "{:?}", p.containers[0]);
        assert_eq!(p.unstarted, [A], "only A waits for the last look");
        assert_eq!(p.forget, [A, C]);
    }

    /// A gc run while a killed create's `docker run` was still in its CLI
    /// forgot the dead mark; the container that came after was nobody's.
    #[test]
    fn a_dead_create_whose_docker_call_still_runs_keeps_its_mark() {
        let dead = Some(ProcId { pid: 4242, start: 5 });
        let creating = vec![in_flight(C, dead)];
        let p = run_calling(&[], &creating, &[], &[C], true);
        assert!(p.forget.is_empty() && p.orphan_dirs.is_empty(), "{p:?}");
        assert!(p.networks.iter().all(|n| n.network != format!("{C}-x")), "{:?}", p.networks);
        // Once that call is gone (and no container came), the mark goes.
        let p = run_calling(&[], &creating, &[], &[C], false);
        assert_eq!(p.forget, [C]);
        assert_eq!(p.orphan_dirs, [C]);
        // Once its container is there, the dead create is reaped as ever.
        let p = run_calling(&[c(C, None)], &creating, &[], &[C], true);
        assert_eq!(p.containers.len(), 1, "{p:?}");
    }

    /// `ls` showed a SIGKILLed create as `running`.
    #[test]
    fn a_create_whose_process_is_gone_is_abandoned_not_running() {
        let mut recs: Vec<_> = [A, B, C].iter().map(|id| c(id, None).record(None, now())).collect();
        for r in &mut recs {
            r.state = "running".into();
        }
        let creating =
            vec![in_flight(A, Some(ProcId { pid: 1, start: 1 })), in_flight(B, Some(ProcId { pid: 2, start: 1 }))];
        mark_creates(&mut recs, &creating, &|p: &ProcId| p.pid == 1);
        let states: Vec<&str> = recs.iter().map(|r| r.state.as_str()).collect();
        assert_eq!(states, ["creating", "abandoned", "running"]);
    }
}

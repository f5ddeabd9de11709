//! Warm pools: what `pool rm` and gc may destroy while claims race them.

use std::sync::atomic::AtomicBool;

use super::*;
use crate::host::pool::{CreatedJson, Member, Pool, PoolSpec};
use crate::host::state::{ProcId, SandboxRecord};

const A: &str = "sbx-00000000000a";
const B: &str = "sbx-00000000000b";

/// Pool `p` on the rig, and a ready member `id` whose main process is this
/// test process (so it is alive), relayed (no host socket), recorded so
/// that destroying it is one `docker rm` of its container id.
fn pool_with(rig: &Rig, ids: &[&str], max_idle_secs: Option<u64>) -> Pool {
    let st = rig.state();
    let pool = Pool::at(&rig.state, "p");
    let spec = PoolSpec { size: 1, max_idle_secs, request: CreateRequest::default(), engine: None, context: None };
    assert!(pool.create(&spec).unwrap());
    let me = ProcId::current().unwrap();
    for id in ids {
        let created: CreatedJson = serde_json::from_value(serde_json::json!({
            "id": id, "session": id, "image": IMG, "tier": 2, "runtime": "runc", "socket": "/run/sandbox/sandbox.sock",
            "channel": "exec", "routes": {}, "created_at": "2026-01-01T00:00:00Z", "user": "65534:65534",
            "expires_at": null, "gaps": [], "warnings": []
        }))
        .unwrap();
        let m = Member {
            id: id.to_string(),
            socket: None,
            uid: 65534,
            pid: me.pid,
            start: me.start,
            ready_at: 0,
            created,
            remote: None,
        };
        pool.add_ready(&m).unwrap();
        let record = SandboxRecord {
            container: container(id),
            socket_dir: rig.root.join(id),
            private: Vec::new(),
            volume: None,
            session: None,
            gate: None,
        };
        st.set_record(id, &record).unwrap();
    }
    pool
}

fn container(id: &str) -> String {
    format!("{:0>64}", &id[4..])
}

/// `docker ps` listing `ids` as members of pool `p`.
fn ps(rig: &Rig, ids: &[&str]) -> String {
    ids.iter()
        .map(|id| {
            let labels = rig.seal(serde_json::json!({
                "sbx.managed": "1", "sbx.id": id, "sbx.pool": "p",
                "sbx.socket": rig.root.join(id).join("sandbox.sock").display().to_string()}));
            format!("{}\n", serde_json::json!({"name": id, "state": "running", "networks": "", "labels": labels}))
        })
        .collect()
}

fn removed(rig: &Rig) -> Vec<String> {
    rig.fake.calls().into_iter().filter(|c| c[0] == "rm").flat_map(|c| c.into_iter().skip(4)).collect()
}

#[test]
fn pool_rm_never_destroys_a_member_a_live_claim_has_taken() {
    let rig = Rig::new();
    let pool = pool_with(&rig, &[A, B], None);
    let me = ProcId::current().unwrap();
    // B: taken by a live claimer that has not written its claim record yet.
    assert!(pool.take(B, me).unwrap());
    // A: a claimer that opened the pool before `pool rm` took its spec away
    // renames A right after rm's `docker ps`.
    let won = Arc::new(AtomicBool::new(false));
    let (p, w) = (pool.clone(), won.clone());
    rig.fake.push_with(Output::ok(&ps(&rig, &[A, B])), move |_| {
        w.store(p.take(A, me).unwrap(), Ordering::SeqCst);
    });
    rig.fake.push(Output::ok(""));
    let gone = rig.driver().pool_rm(&pool).unwrap();
    assert_eq!(rig.fake.verbs(), ["ps", "rm"]);
    let rm = removed(&rig);
    assert!(!rm.contains(&container(B)) && !gone.contains(&B.to_string()), "destroyed a member being claimed: {rm:?}");
    // rm took A before the claimer could: the claimer lost, A is gone.
    assert!(!won.load(Ordering::SeqCst), "a claimer won A after `pool rm` listed it");
    assert_eq!(rm, [container(A)]);
    assert!(!pool.exists());
}

#[test]
fn gc_never_reaps_an_idle_member_a_claim_takes_while_gc_runs() {
    let rig = Rig::new();
    std::fs::create_dir_all(&rig.root).unwrap();
    // Idle for 56 years against a max-idle of 1 s.
    let pool = pool_with(&rig, &[A], Some(1));
    let me = ProcId::current().unwrap();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&ps(&rig, &[A])));
    // Dry run: reported, nothing moves.
    let r = rig.driver().gc(true).unwrap();
    assert_eq!(r.containers.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), [A]);
    assert_eq!(pool.ready(), [A]);
    // A claim renames A once gc decided and before it removes: it must lose.
    let taken = Arc::new(AtomicBool::new(false));
    let (p, t) = (pool.clone(), taken.clone());
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&ps(&rig, &[A])));
    rig.fake.push_with(Output::ok(""), move |_| t.store(p.take(A, me).unwrap(), Ordering::SeqCst));
    let r = rig.driver().gc(false).unwrap();
    assert_eq!(rig.fake.verbs(), ["network ls", "ps", "network ls", "ps", "rm"]);
    assert_eq!(removed(&rig), [A], "{:?}", rig.fake.calls());
    assert_eq!(r.containers.len(), 1);
    assert!(!taken.load(Ordering::SeqCst), "a claim won the member gc was removing");
    assert!(pool.ready().is_empty() && pool.dead().is_empty() && pool.claimed().is_empty());
}

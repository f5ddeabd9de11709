//! A remote pool's recycling and gc's pool reaping judge members by the
//! engine's inspect, never this machine's /proc.

use super::remote::remote;
use super::*;
use crate::host::pool::{CreatedJson, Member, Pool, PoolSpec, RemoteProc};

const A: &str = "sbx-00000000000a";
const B: &str = "sbx-00000000000b";
/// Over pid_max: no process of this machine.
const PID: i32 = 999_999_999;
const STARTED: &str = "2026-11-30T10:00:00Z";

fn cid(id: &str) -> String {
    format!("{:0>64}", &id[4..])
}

/// Pool `p` on the remote engine with ready members `ids`, idle since 1970.
fn remote_pool(rig: &Rig, ids: &[&str], max_idle_secs: Option<u64>) -> Pool {
    let pool = Pool::at(&rig.state, "p");
    let spec = PoolSpec {
        size: 2,
        max_idle_secs,
        request: CreateRequest::default(),
        engine: Some("ssh://me@far".into()),
        context: None,
    };
    assert!(pool.create(&spec).unwrap());
    for id in ids {
        let created: CreatedJson = serde_json::from_value(serde_json::json!({
            "id": id, "session": id, "image": IMG, "tier": 2, "runtime": "runc", "socket": "/run/sandbox/sandbox.sock",
            "channel": "exec", "routes": {}, "created_at": "2026-01-01T00:00:00Z", "user": "65534:65534",
            "expires_at": null, "gaps": [], "warnings": []
        }))
        .unwrap();
        let remote = Some(RemoteProc { container: cid(id), started_at: STARTED.into() });
        let m =
            Member { id: id.to_string(), socket: None, uid: 65534, pid: PID, start: 0, ready_at: 0, created, remote };
        pool.add_ready(&m).unwrap();
    }
    pool
}

/// The engine's inspect of `id`: running, or paused.
fn inspected(rig: &Rig, id: &str, paused: bool) -> String {
    let labels = serde_json::json!({"sbx.managed": "1", "sbx.id": id, "sbx.pool": "p"});
    let mut v: serde_json::Value = serde_json::from_str(&rig.container_line(id, labels, &[])).unwrap();
    v["Id"] = cid(id).into();
    let status = if paused { "paused" } else { "running" };
    v["State"] =
        serde_json::json!({"Status": status, "Running": true, "Paused": paused, "Pid": PID, "StartedAt": STARTED});
    format!("{v}\n")
}

fn inspect_of(ids: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ["container", "inspect", "--format", "{{json .}}", "--"].map(String::from).to_vec();
    v.extend(ids.iter().map(|id| cid(id)));
    v
}

#[test]
fn a_remote_pool_recycles_what_the_engine_reports_dead_in_one_inspect() {
    let rig = Rig::new();
    let pool = remote_pool(&rig, &[A, B], None);
    rig.fake.push(Output::ok(&(inspected(&rig, A, false) + &inspected(&rig, B, true))));
    assert_eq!(remote(&rig).pool_stale(&pool, None), [B]);
    assert_eq!(rig.fake.calls(), [inspect_of(&[A, B])]);
    assert_eq!(pool.ready(), [A], "a member the engine vouches for stays, though its pid is none of this machine's");

    // The engine does not answer: unknown is not dead.
    let rig = Rig::new();
    let pool = remote_pool(&rig, &[A], None);
    rig.fake.push(Output::fail(255, "ssh: connect to host far port 22: Connection refused\n"));
    assert!(remote(&rig).pool_stale(&pool, None).is_empty());
    assert_eq!(pool.ready(), [A]);
}

#[test]
fn gc_reaps_a_paused_remote_member_and_keeps_a_live_one() {
    let rig = Rig::new();
    let pool = remote_pool(&rig, &[A, B], None);
    let ps: String = [A, B]
        .iter()
        .map(|id| {
            let labels = rig.seal(serde_json::json!({"sbx.managed": "1", "sbx.id": id, "sbx.pool": "p"}));
            format!("{}\n", serde_json::json!({"name": id, "state": "running", "networks": "", "labels": labels}))
        })
        .collect();
    let owned = crate::docker::parse::parse_ps(&ps, "docker ps").unwrap();
    rig.fake.push(Output::ok(&(inspected(&rig, A, false) + &inspected(&rig, B, true))));
    let reaps = remote(&rig).pool_reaps(&rig.state(), &owned, &[], true);
    assert_eq!(reaps.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [B]);
    assert!(reaps[0].reason.contains("no longer alive"), "{}", reaps[0].reason);
    assert_eq!(rig.fake.calls(), [inspect_of(&[A, B])], "one inspect for the pool");
    assert_eq!(pool.ready(), [A, B], "a dry run moves nothing");
}

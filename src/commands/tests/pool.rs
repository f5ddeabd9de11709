//! `sbx pool` and `create --pool`: what is refused before anything is made,
//! and a claim that makes no docker call.

use super::*;
use crate::host::pool::{CreatedJson, Member, Pool, PoolSpec};

/// Pool `p` of size 1 recorded in `rig`'s data dir, with a refiller "running"
/// (the returned lock: a real one would be this test binary).
fn pool_p(rig: &Rig) -> (Pool, std::fs::File) {
    let pool = Pool::at(&rig.state, "p");
    let spec = PoolSpec {
        size: 1,
        max_idle_secs: None,
        request: crate::spec::CreateRequest::default(),
        engine: None,
        context: None,
    };
    assert!(pool.create(&spec).unwrap());
    let lock = pool.try_lock().unwrap().unwrap();
    (pool, lock)
}

/// A ready member ID running as `user`, warning "the image runs as root".
/// This test process stands in for its main process; relayed, so no host socket.
fn add_member(pool: &Pool, user: &str, uid: u32) {
    let me = crate::host::state::ProcId::current().unwrap();
    let created: CreatedJson = serde_json::from_value(serde_json::json!({
        "id": ID, "session": ID, "image": IMG, "tier": 2, "runtime": "runc", "socket": "/run/sandbox/sandbox.sock",
        "channel": "exec", "routes": {}, "created_at": "2026-01-01T00:00:00Z", "user": user,
        "expires_at": null, "gaps": [], "warnings": ["the image runs as root"]
    }))
    .unwrap();
    let m =
        Member { id: ID.into(), socket: None, uid, pid: me.pid, start: me.start, ready_at: 0, created, remote: None };
    pool.add_ready(&m).unwrap();
}

#[test]
fn pool_flags_are_refused_before_any_docker_call() {
    // Clap's own refusals (--size 0, --no-fallback without --pool) are in the live suite.
    let rig = Rig::new();
    let e = rig.refused(&["pool", "create", "p", "--size", "2", "--image", IMG, "--session", "s", "--ttl", "1m"]);
    assert!(e.contains("--session --ttl") && e.contains("sbx create --pool p --session KEY"), "{e}");
    for bad in [
        vec!["pool", "create", "p", "--size", "1", "--image", IMG, "--persist"],
        vec!["pool", "create", "p", "--size", "1", "--image", IMG, "--setup", "true"],
        vec!["pool", "create", "p", "--size", "1", "--image", IMG, "--max-idle", "0"],
        vec!["pool", "create", "p", "--size", "1", "--image", "latest"],
        vec!["create", "--pool", "p", "--image", IMG],
        vec!["create", "--pool", "p", "--memory", "64"],
        vec!["create", "--pool", "p/x"],
        vec!["pool", "create", "a/b", "--size", "1", "--image", IMG],
    ] {
        rig.refused(&bad);
    }
    let e = rig.refused(&["create", "--pool", "p", "--route", "a:proxy:1", "--cpus", "2"]);
    assert!(e.contains("--cpus --route") || e.contains("--route --cpus"), "{e}");
}

#[test]
fn a_claim_of_a_live_member_prints_its_id_with_no_docker_call() {
    let rig = Rig::new();
    let (pool, _lock) = pool_p(&rig);
    add_member(&pool, "65534:65534", 65534);
    let r = rig.sbx(&["--json", "create", "--pool", "p", "--session", "t-1"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let v = json(&r.stdout);
    assert_eq!((v["id"].as_str(), v["session"].as_str()), (Some(ID), Some("t-1")));
    assert!(rig.fake.calls().is_empty(), "a claim called docker: {:?}", rig.fake.calls());
    assert!(pool.ready().is_empty() && pool.claimed().is_empty());

    let r = rig.sbx(&["create", "--pool", "p", "--no-fallback"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert!(r.stderr.contains("pool p has no ready sandbox (--no-fallback)"), "{}", r.stderr);
}

#[test]
fn a_claim_without_json_warns_on_stderr_as_create_does() {
    let rig = Rig::new();
    let (pool, _lock) = pool_p(&rig);
    add_member(&pool, "0:0", 0);
    let r = rig.sbx(&["create", "--pool", "p"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, format!("{ID}\n").as_str()));
    assert!(r.stderr.contains("the image runs as root"), "{}", r.stderr);
    assert!(rig.fake.calls().is_empty(), "a claim called docker: {:?}", rig.fake.calls());
}

#[test]
fn sbx_runtime_must_match_the_pools_runtime_to_claim() {
    let rig = Rig::new();
    let (_pool, _lock) = pool_p(&rig);
    let env = || Env { runtime: Some("runsc".into()), ..Env::default() };
    let r = rig.sbx_with(&["create", "--pool", "p", "--no-fallback"], env());
    assert_eq!((r.code, r.stdout.as_str()), (2, ""), "{}", r.stderr);
    assert!(r.stderr.contains("pool p runs its sandboxes under runc"), "{}", r.stderr);
    assert!(rig.fake.calls().is_empty());
    // The pool's own runtime: claimed as usual (empty here, so --no-fallback fails with 1).
    let r = rig
        .sbx_with(&["create", "--pool", "p", "--no-fallback"], Env { runtime: Some("runc".into()), ..Env::default() });
    assert_eq!(r.code, 1, "{}", r.stderr);
}

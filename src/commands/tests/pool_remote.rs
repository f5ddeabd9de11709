//! Warm pools on a remote engine: a claim checks its member with
//! one `docker container inspect` (never this machine's /proc), refuses
//! what the engine does not vouch for, and a pool is acted on only while
//! sbx drives the engine it was made on.

use super::*;
use crate::host::engine::EngineChoice;
use crate::host::pool::{CreatedJson, Member, Pool, PoolSpec, RemoteProc};

const FAR: &str = "ssh://me@far";
/// The engine machine's pid of the member: none on this machine (over pid_max).
const PID: i32 = 999_999_999;
const STARTED: &str = "2026-11-30T10:00:00.123456789Z";

fn on_far(rig: &Rig) -> Driver {
    rig.driver().with_engine(EngineChoice { docker_host: Some("ssh://me:pw@far".into()), ..Default::default() })
}

fn far_env() -> Env {
    Env { docker_host: Some("ssh://me:pw@far".into()), ..Env::default() }
}

/// Pool `p` recorded on `engine` (None: the default local one), a refiller
/// "running" (the returned lock), and one ready remote member ID.
fn remote_pool(rig: &Rig, engine: Option<&str>) -> (Pool, std::fs::File) {
    let pool = Pool::at(&rig.state, "p");
    let spec = PoolSpec {
        size: 1,
        max_idle_secs: None,
        request: crate::spec::CreateRequest::default(),
        engine: engine.map(str::to_string),
        context: None,
    };
    assert!(pool.create(&spec).unwrap());
    let lock = pool.try_lock().unwrap().unwrap();
    let created: CreatedJson = serde_json::from_value(serde_json::json!({
        "id": ID, "session": ID, "image": IMG, "tier": 2, "runtime": "runc", "socket": "/run/sandbox/sandbox.sock",
        "channel": "exec", "routes": {}, "created_at": "2026-01-01T00:00:00Z", "user": "65534:65534",
        "expires_at": null, "gaps": [], "warnings": []
    }))
    .unwrap();
    let remote = Some(RemoteProc { container: CID.into(), started_at: STARTED.into() });
    let m = Member { id: ID.into(), socket: None, uid: 65534, pid: PID, start: 0, ready_at: 0, created, remote };
    pool.add_ready(&m).unwrap();
    (pool, lock)
}

/// The engine's inspect of the member, as `change` leaves it.
fn inspected(rig: &Rig, change: impl FnOnce(&mut serde_json::Value)) -> Output {
    let labels = serde_json::json!({"sbx.managed": "1", "sbx.id": ID, "sbx.pool": "p", "sbx.user": "65534:65534"});
    let mut v: serde_json::Value = serde_json::from_str(&rig.container_line(ID, labels, &[])).unwrap();
    v["Id"] = CID.into();
    v["State"] = serde_json::json!({"Status": "running", "Running": true, "Paused": false, "Restarting": false,
        "Pid": PID, "StartedAt": STARTED});
    change(&mut v);
    Output::ok(&format!("{v}\n"))
}

fn inspect_argv() -> Vec<String> {
    ["container", "inspect", "--format", "{{json .}}", "--", CID].map(String::from).to_vec()
}

#[test]
fn a_remote_claim_is_one_inspect_of_the_member_and_hands_it_out() {
    let rig = Rig::new();
    let (pool, _lock) = remote_pool(&rig, Some(FAR));
    rig.fake.push(inspected(&rig, |_| {}));
    let r = rig.sbx_on(&["--json", "create", "--pool", "p", "--session", "t-1"], far_env(), on_far(&rig));
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(json(&r.stdout)["id"], ID);
    assert_eq!(rig.fake.calls(), [inspect_argv()], "a remote claim is exactly one inspect of the member");
    assert!(pool.ready().is_empty() && pool.dead().is_empty() && pool.claimed().is_empty());
}

#[test]
fn a_remote_claim_refuses_a_member_the_engine_does_not_vouch_for() {
    type Change = Box<dyn FnOnce(&mut serde_json::Value)>;
    let cases: Vec<(&str, Change)> = vec![
        (
            "paused",
            Box::new(
                |v| v["State"] = serde_json::json!({"Status": "paused", "Running": true, "Paused": true, "Pid": PID, "StartedAt": STARTED}),
            ),
        ),
        (
            "exited",
            Box::new(
                |v| v["State"] = serde_json::json!({"Status": "exited", "Running": false, "Paused": false, "Pid": 0, "StartedAt": STARTED}),
            ),
        ),
        ("another main process", Box::new(|v| v["State"]["Pid"] = (PID - 1).into())),
        ("restarted", Box::new(|v| v["State"]["StartedAt"] = "2026-11-30T10:05:00Z".into())),
        ("another container", Box::new(|v| v["Id"] = "cd".repeat(32).into())),
        ("not sbx's token", Box::new(|v| v["Config"]["Labels"]["sbx.owner"] = "0".repeat(64).into())),
        ("another pool's", Box::new(|v| v["Config"]["Labels"]["sbx.pool"] = "q".into())),
    ];
    for (what, change) in cases {
        let rig = Rig::new();
        let (pool, _lock) = remote_pool(&rig, Some(FAR));
        rig.fake.push(inspected(&rig, change));
        let r = rig.sbx_on(&["create", "--pool", "p", "--no-fallback"], far_env(), on_far(&rig));
        assert_eq!((r.code, r.stdout.as_str()), (1, ""), "{what}: {}", r.stderr);
        assert!(r.stderr.contains("pool p has no ready sandbox"), "{what}: {}", r.stderr);
        assert_eq!(rig.fake.calls(), [inspect_argv()], "{what}");
        assert_eq!((pool.ready(), pool.dead()), (vec![], vec![ID.to_string()]), "{what}: found dead, for the refiller");
    }
    // Gone from the engine: dead too.
    let rig = Rig::new();
    let (pool, _lock) = remote_pool(&rig, Some(FAR));
    rig.fake.push(Output::fail(1, &format!("Error response from daemon: No such container: {CID}\n")));
    let r = rig.sbx_on(&["create", "--pool", "p", "--no-fallback"], far_env(), on_far(&rig));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(pool.dead(), [ID]);
}

#[test]
fn a_remote_claim_the_engine_cannot_answer_leaves_the_member_ready() {
    let rig = Rig::new();
    let (pool, _lock) = remote_pool(&rig, Some(FAR));
    rig.fake.push(Output::fail(255, "error during connect: ssh: connect to host far port 22: Connection refused\n"));
    let r = rig.sbx_on(&["create", "--pool", "p"], far_env(), on_far(&rig));
    assert_eq!((r.code, r.stdout.as_str()), (1, ""), "{}", r.stderr);
    assert!(r.stderr.contains("Connection refused"), "{}", r.stderr);
    assert_eq!((pool.ready(), pool.dead(), pool.claimed()), (vec![ID.to_string()], vec![], vec![]));
    assert_eq!(rig.fake.calls(), [inspect_argv()], "the one inspect of the member, then nothing");
}

#[test]
fn a_pool_is_acted_on_only_while_sbx_drives_its_engine() {
    let rig = Rig::new();
    // Made on the remote engine, driven locally: refused, nothing done.
    let (pool, lock) = remote_pool(&rig, Some(FAR));
    for args in [&["create", "--pool", "p"][..], &["pool", "fill", "p"], &["pool", "rm", "p"]] {
        let r = rig.sbx(args);
        assert_eq!((r.code, r.stdout.as_str()), (2, ""), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(FAR) && r.stderr.contains(crate::model::engine::DEFAULT_ENDPOINT), "{}", r.stderr);
        assert!(r.stderr.contains(&format!("DOCKER_HOST={FAR}")), "the hint says how to reach it: {}", r.stderr);
        assert!(!r.stderr.contains("pw"), "no credentials: {}", r.stderr);
    }
    assert!(rig.fake.calls().is_empty(), "{:?}", rig.fake.calls());
    assert!(pool.exists() && pool.ready() == [ID] && pool.dead().is_empty() && pool.claimed().is_empty());
    // `pool ls` lists this engine's pools only, and says where the other is.
    let r = rig.sbx(&["pool", "ls"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stdout.contains("\np\t"), "{}", r.stdout);
    assert!(r.stderr.contains("pool p is on the engine at ssh://me@far"), "{}", r.stderr);
    drop(lock);
    pool.forget();

    // Made on the default local engine, driven remotely: refused too.
    let rig = Rig::new();
    let (pool, _lock) = remote_pool(&rig, None);
    let r = rig.sbx_on(&["--json", "create", "--pool", "p"], far_env(), on_far(&rig));
    assert_eq!((r.code, r.stdout.as_str()), (2, ""), "{}", r.stderr);
    assert!(r.stderr.contains("invalid_input") && r.stderr.contains("unset DOCKER_HOST"), "{}", r.stderr);
    assert!(rig.fake.calls().is_empty() && pool.ready() == [ID]);
}

#[test]
fn a_remote_pool_create_refuses_paths_of_this_machine() {
    let rig = Rig::new();
    let r =
        rig.sbx_on(&["pool", "create", "p", "--size", "1", "--image", IMG, "--ro", "/etc"], far_env(), on_far(&rig));
    assert_eq!((r.code, r.stdout.as_str()), (2, ""), "{}", r.stderr);
    assert!(r.stderr.contains("invalid --ro") && r.stderr.contains(FAR), "{}", r.stderr);
    assert!(rig.fake.calls().is_empty() && !Pool::at(&rig.state, "p").exists());
}

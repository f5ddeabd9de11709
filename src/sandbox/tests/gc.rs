//! gc: batched reaping, paced failures, and orphaned session state.

use super::*;

#[test]
fn gc_reaps_in_one_batched_removal_and_dry_run_removes_nothing() {
    let rig = Rig::new();
    let st = rig.state();
    std::fs::create_dir_all(&rig.root).unwrap();
    let line = |name: &str, expires: &str| {
        serde_json::json!({"name": name, "state": "running", "networks": "", "labels": rig.seal(serde_json::json!({
            "sbx.managed": "1", "sbx.id": name, "sbx.expires": expires,
            "sbx.socket": rig.root.join(name).join("sandbox.sock").display().to_string()}))})
        .to_string()
    };
    let (a, b, c) = ("sbx-00000000000a", "sbx-00000000000b", "sbx-00000000000c");
    for id in [a, b, c] {
        std::fs::create_dir_all(rig.root.join(id)).unwrap();
    }
    // c: a create whose process died before its container existed.
    st.begin_create(c, state::ProcId { pid: i32::MAX, start: 1 }).unwrap();
    let ps = format!("{}\n{}\n", line(a, "2000-01-01T00:00:00Z"), line(b, "2999-01-01T00:00:00Z"));
    let orphan_check = format!("Error: No such container: {c}");

    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&ps));
    rig.fake.push(Output::fail(1, &orphan_check));
    let r = rig.driver().gc(true).unwrap();
    assert!(r.dry_run);
    assert_eq!(r.containers.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), [a]);
    assert_eq!(r.socket_dirs.len(), 2);
    assert!(rig.root.join(a).exists() && rig.root.join(c).exists(), "dry run removed something");

    // a's private route network (made by sbx: its owner token is right) and a forged one.
    let nets = format!(
        "{}\n{}\n",
        serde_json::json!([format!("{a}-x"), a, "svc", rig.token(a)]),
        serde_json::json!(["forged", a, "svc", "0000"])
    );
    rig.fake.push(Output::ok(&nets));
    rig.fake.push(Output::ok(&ps));
    rig.fake.push(Output::fail(1, &orphan_check));
    rig.fake.push(Output::ok(a));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    let r = rig.driver().gc(false).unwrap();
    assert_eq!(r.containers.len(), 1);
    let calls = rig.fake.calls();
    assert_eq!(calls[3][..2], ["network", "ls"]);
    assert_eq!(calls[4][..2], ["ps", "-a"]);
    assert_eq!(calls[5], ["container", "inspect", "--format", "{{json .}}", "--", c]);
    assert_eq!(calls[6], ["rm", "-f", "-v", "--", a]);
    assert_eq!(calls[7], ["network", "disconnect", "--force", "--", &format!("{a}-x"), "svc"]);
    assert_eq!(calls[8], ["network", "rm", "--", &format!("{a}-x")]);
    assert_eq!(r.networks, [format!("{a}-x")]);
    assert!(!rig.root.join(a).exists() && !rig.root.join(c).exists() && rig.root.join(b).exists());
    assert!(st.creating().is_empty());
}

#[test]
fn gc_reaps_many_in_paced_batches_and_reports_each_failed_batch() {
    let rig = Rig::new();
    std::fs::create_dir_all(&rig.root).unwrap();
    let ids = many(&rig, 12);
    let ps: String = ids
        .iter()
        .map(|id| {
            let labels = rig.seal(serde_json::json!({
                "sbx.managed": "1", "sbx.id": id, "sbx.expires": "2000-01-01T00:00:00Z",
                "sbx.socket": rig.root.join(id).join("sandbox.sock").display().to_string()}));
            format!("{}\n", serde_json::json!({"name": id, "state": "running", "networks": "", "labels": labels}))
        })
        .collect();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&ps));
    rig.fake.push(Output::fail(1, "Error response from daemon: could not kill"));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    let r = rig.driver().with_pace(Pace::sequential(5)).gc(false).unwrap();
    assert_eq!(rig.fake.verbs(), ["network ls", "ps", "rm", "rm", "rm"]);
    assert_eq!(r.failed.len(), 1, "{:?}", r.failed);
    assert_eq!(r.failed[0].item, format!("containers {}", ids[..5].join(" ")));
    assert!(r.failed[0].error.contains("could not kill"), "{:?}", r.failed);
    assert_eq!(r.containers.iter().map(|c| c.id.clone()).collect::<Vec<_>>(), ids[5..]);
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(rig.root.join(id).exists(), i < 5, "{id}: a sandbox still there keeps its directory");
    }

    // A hung engine: the batch in flight times out, none starts after it.
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&ps));
    rig.fake.push_timeout(Duration::from_secs(120));
    let r = rig.driver().with_pace(Pace::sequential(2)).gc(false).unwrap();
    assert_eq!(rig.fake.verbs()[5..], ["network ls", "ps", "rm"]);
    assert_eq!(r.failed.len(), 2, "the batch that hung, and the rest never tried: {:?}", r.failed);
    assert_eq!(r.failed[1].item, format!("containers {}", ids[2..].join(" ")));
    assert!(r.failed[0].error.contains("did not answer `docker rm`"), "{:?}", r.failed);
    assert!(r.failed[1].error.starts_with("not tried"), "{:?}", r.failed);
    assert!(r.containers.is_empty());
}

#[test]
fn gc_removes_session_state_whose_volume_is_gone_but_never_a_live_sessions() {
    // A create killed between making the session directory and
    // `docker volume create` leaves an empty one. A volume removed behind
    // sbx's back (`docker volume rm`, `docker volume prune`) leaves the
    // session's work: gc makes the volume again and never deletes it.
    let rig = Rig::new();
    std::fs::create_dir_all(&rig.root).unwrap();
    std::fs::create_dir_all(&rig.state).unwrap();
    let key = rig.state().key().unwrap();
    let vols = rig.state.join("volumes");
    for p in ["broken", "empty"] {
        std::fs::create_dir_all(vols.join(p)).unwrap();
        std::fs::write(vols.join(format!("{p}.lock")), "").unwrap();
    }
    for p in ["gone", "alive", "racing"] {
        std::fs::create_dir_all(vols.join(p).join("workspace")).unwrap();
        std::fs::write(vols.join(format!("{p}.lock")), "").unwrap();
    }
    std::fs::write(vols.join("gone/workspace/work"), "hours of it").unwrap();
    std::fs::write(vols.join("lockonly.lock"), "").unwrap();
    // A remote engine's session lock: its volumes are not on this engine, and it is no session state.
    drop(crate::host::persist::remote_lock(&rig.state, "far").unwrap());
    let listed = |n: &str| format!("[\"{n}\",\"{}\",\"{}\"]\n", n, state::owner_token(&key, n));
    let gc_calls = |rig: &Rig, vol_ls: &str| {
        rig.fake.push(Output::ok("")); // private networks
        rig.fake.push(Output::ok("")); // docker ps
        rig.fake.push(Output::ok(vol_ls));
    };
    // Dry run: says what would go and what would be made again, touches nothing.
    gc_calls(&rig, &listed("sbx-state-alive"));
    let r = rig.driver().gc(true).unwrap();
    let dry: Vec<String> = r.volume_state.iter().map(|p| p.rsplit('/').next().unwrap().to_string()).collect();
    assert_eq!(dry, ["broken", "broken.lock", "empty", "empty.lock", "lockonly.lock"]);
    assert_eq!(r.restored_volumes, ["sbx-state-gone", "sbx-state-racing"]);
    assert!(vols.join("empty").exists() && vols.join("gone/workspace/work").exists());
    // "racing": its volume was created after the list (a create finished
    // meanwhile): looked up again under the lock, it stays. "broken": docker
    // did not say the volume is gone, so nothing is judged.
    gc_calls(&rig, &listed("sbx-state-alive"));
    rig.fake.push(Output::fail(1, "Cannot connect to the Docker daemon at unix:///var/run/docker.sock."));
    rig.fake.push(Output::fail(1, "Error: No such volume: sbx-state-empty"));
    rig.fake.push(Output::fail(1, "Error: No such volume: sbx-state-gone"));
    rig.fake.push(Output::ok("sbx-state-gone\n"));
    rig.fake.push(Output::fail(1, "Error: No such volume: sbx-state-lockonly"));
    rig.fake.push(Output::ok("sbx-state-racing\n"));
    let r = rig.driver().gc(false).unwrap();
    assert_eq!(r.failed.len(), 1, "{:?}", r.failed);
    assert_eq!(r.failed[0].item, "session state broken");
    assert!(vols.join("broken").exists() && vols.join("broken.lock").exists());
    assert!(!vols.join("empty").exists() && !vols.join("empty.lock").exists() && !vols.join("lockonly.lock").exists());
    assert_eq!(std::fs::read_to_string(vols.join("gone/workspace/work")).unwrap(), "hours of it");
    assert!(vols.join("gone.lock").exists());
    let gone = vols.join("gone");
    let made = rig.fake.calls().into_iter().find(|c| c.get(..2) == Some(&["volume".to_string(), "create".to_string()]));
    assert_eq!(
        made.unwrap(),
        crate::docker::argv::volume_create(
            "sbx-state-gone",
            &gone,
            "gone",
            &state::owner_token(&key, "sbx-state-gone")
        )
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect::<Vec<_>>()
    );
    assert_eq!(r.restored_volumes, ["sbx-state-gone"]);
    assert!(vols.join("alive/workspace").exists() && vols.join("racing/workspace").exists());
    assert_eq!(r.volume_state.len(), 3, "{:?}", r.volume_state);
    assert!(vols.join(".remote/far.lock").exists(), "gc removed a remote session's lock");
    // A create holding a session's lock is never judged.
    std::fs::remove_dir(vols.join("broken")).unwrap();
    let held = crate::host::persist::lock(&rig.state, "racing").unwrap();
    gc_calls(&rig, &(listed("sbx-state-alive") + &listed("sbx-state-gone")));
    rig.fake.push(Output::fail(1, "Error: No such volume: sbx-state-broken"));
    let r = rig.driver().gc(false).unwrap();
    assert_eq!(r.volume_state.len(), 1, "{:?}", r.volume_state);
    assert!(r.restored_volumes.is_empty(), "{:?}", r.restored_volumes);
    assert!(vols.join("racing/workspace").exists());
    drop(held);
}

/// Audit's status probes an sbx left behind (killed between
/// docker's create and start) go once expired, if this host made them;
/// a host that never ran one makes no extra call.
#[test]
fn gc_reaps_expired_audit_probes_of_this_host_only() {
    let rig = Rig::new();
    std::fs::create_dir_all(&rig.root).unwrap();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    let r = rig.driver().gc(false).unwrap();
    assert!(r.probes.is_empty());
    assert_eq!(rig.fake.calls().len(), 2, "{:?}", rig.fake.calls());

    std::fs::write(rig.state.join(crate::model::record::AUDIT_PROBES_MARK), b"").unwrap();
    let row =
        |name: &str, owner: &str, expires: &str, cid: &str| serde_json::json!([name, owner, expires, cid]).to_string();
    let (old, new, forged) = ("sbx-audit-00000000000a-1", "sbx-audit-00000000000a-2", "sbx-audit-00000000000a-3");
    let probes = [
        row(old, &rig.token(old), "2000-01-01T00:00:00Z", "c1"),
        row(new, &rig.token(new), "2999-01-01T00:00:00Z", "c2"),
        row(forged, "0000", "2000-01-01T00:00:00Z", "c3"),
    ]
    .join("\n");
    for dry_run in [true, false] {
        rig.fake.push(Output::ok(""));
        rig.fake.push(Output::ok(""));
        rig.fake.push(Output::ok(&probes));
        if !dry_run {
            rig.fake.push(Output::ok(""));
        }
        let r = rig.driver().gc(dry_run).unwrap();
        assert_eq!(r.probes, [old]);
    }
    let calls = rig.fake.calls();
    assert!(calls[calls.len() - 2].contains(&"label=sbx.audit-of".to_string()), "{calls:?}");
    assert_eq!(calls.last().unwrap(), &["rm", "-f", "-v", "--", "c1"]);
}

/// A sandbox removed with docker itself (or a destroy killed after its
/// container went) leaves its checkpoints, gigabytes that count against
/// gc removes the hibernation of every sandbox that is gone (its named
/// checkpoints stay, for `fork --from`), and keeps those of one that is there.
#[test]
fn gc_removes_the_hibernation_of_a_gone_sandbox() {
    let rig = Rig::new();
    let st = rig.state();
    let (gone, here) = ("sbx-0000000000ee", "sbx-00000000000b");
    let from = rig.root.with_extension("engine-image");
    std::fs::create_dir_all(&from).unwrap();
    std::fs::write(from.join("checkpoint.img"), b"memory").unwrap();
    std::fs::create_dir_all(&st.dir).unwrap();
    let store = crate::host::checkpoints::Store::at(&st.dir);
    for id in [gone, here] {
        for name in ["c1", crate::host::checkpoints::HIBERNATED] {
            store.save(id, name, &from, &std::collections::BTreeMap::new(), Default::default()).unwrap();
        }
    }
    let ps = serde_json::json!({"name": here, "state": "running", "networks": "", "labels": rig.seal(serde_json::json!({
        "sbx.managed": "1", "sbx.id": here,
        "sbx.socket": rig.root.join(here).join("sandbox.sock").display().to_string()}))});
    rig.fake.push(Output::ok("")).push(Output::ok(&format!("{ps}\n")));
    rig.driver().gc(false).unwrap();
    let names = |id| store.list(Some(id)).into_iter().map(|m| m.name).collect::<Vec<_>>();
    assert_eq!(names(gone), ["c1"], "a gone sandbox's hibernation stays, or its named one went");
    assert_eq!(names(here).len(), 2, "a sandbox still there keeps its own");
    let _ = std::fs::remove_dir_all(from);
}

/// A sandbox `docker ps` showed never started with no create marked for
/// it is looked at again: one a create started (and ended its mark) in
/// between stays, with its directory; one still `created` goes.
#[test]
fn gc_reaps_an_unstarted_sandbox_only_if_a_last_look_says_it_still_is() {
    let rig = Rig::new();
    std::fs::create_dir_all(&rig.root).unwrap();
    let (a, b) = ("sbx-00000000000a", "sbx-00000000000b");
    let line = |name: &str| {
        serde_json::json!({"name": name, "state": "created", "networks": "", "labels": rig.seal(serde_json::json!({
            "sbx.managed": "1", "sbx.id": name,
            "sbx.socket": rig.root.join(name).join("sandbox.sock").display().to_string()}))})
        .to_string()
    };
    for id in [a, b] {
        std::fs::create_dir_all(rig.root.join(id)).unwrap();
    }
    let look = |name: &str, status: &str| serde_json::json!({"Name": format!("/{name}"), "State": {"Status": status}});
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&format!("{}\n{}\n", line(a), line(b))));
    rig.fake.push(Output::ok(&format!("{}\n{}\n", look(a, "created"), look(b, "running"))));
    rig.fake.push(Output::ok(a));
    let r = rig.driver().gc(false).unwrap();
    assert_eq!(rig.fake.verbs(), ["network ls", "ps", "container inspect", "rm"]);
    assert_eq!(r.containers.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), [a]);
    assert!(r.containers[0].reason.contains("never started"), "{:?}", r.containers[0]);
    assert!(!rig.root.join(a).exists() && rig.root.join(b).exists());
}

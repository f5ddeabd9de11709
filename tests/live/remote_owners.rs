//! Several machines driving one remote engine, each a data dir
//! of its own here: ownership is per data dir's key. Separate by default
//! (another data dir neither lists, destroys nor reaps the sandbox), shared
//! once the key file is the same bytes (README "Several machines, one engine").

use crate::remote::sbx;
use crate::support::*;

#[test]
fn ownership_is_per_data_dir_and_shared_only_by_sharing_its_key() {
    let remote = Remote::start();
    let env = remote.env();
    let a = World::new();
    let b = World::new();
    let label = a.case_label();
    let create = |more: &[&str]| {
        let mut args = vec!["create", "--image", &a.image, "--label", &label];
        args.extend_from_slice(more);
        let out = sbx(&a, &args, &env);
        assert_success(&out, "create over ssh from machine A");
        a.adopt(stdout(&out).trim())
    };
    let kept = create(&[]);
    // Machine B's first command makes its own key.
    let ls = json(&sbx(&b, &["ls", "--json"], &env));
    assert_eq!(ls.as_array().map(Vec::len), Some(0), "B lists A's sandbox: {ls}");
    let out = sbx(&b, &["--json", "destroy", &kept.id], &env);
    assert_eq!(out.status.code(), Some(1), "B destroyed A's sandbox: {}", stderr(&out));
    assert!(stderr(&out).contains("\"foreign_container\""), "{}", stderr(&out));
    // Expired by its label and its watchdog stopped: still not B's to reap.
    let sb = create(&["--ttl", "2s"]);
    kill_watchdog_until_expired(&a, &sb.id);
    assert_success(&sbx(&b, &["gc"], &env), "gc from B");
    assert_eq!(a.containers().len(), 2, "B's gc reaped A's sandbox");

    // The same key: B acts on it as its own.
    std::fs::copy(a.state_dir.join("key"), b.state_dir.join("key")).unwrap();
    let ls = json(&sbx(&b, &["ls", "--json"], &env));
    assert_eq!(ls.as_array().map(Vec::len), Some(2), "B with A's key does not list them: {ls}");
    assert_success(&sbx(&b, &["gc"], &env), "gc from B with A's key");
    assert_eq!(a.containers().len(), 1, "B's gc with A's key left the expired sandbox (or took the other)");
    assert_success(&sbx(&b, &["destroy", &kept.id], &env), "destroy from B with A's key");
    assert_eq!(a.containers(), Vec::<String>::new());
    // A's marker of it is A's to remove: its gc against that engine does.
    assert_success(&sbx(&a, &["gc"], &env), "gc from A");
    assert_eq!(a.socket_dirs(), Vec::<String>::new(), "A's markers outlived the sandboxes B removed");
}

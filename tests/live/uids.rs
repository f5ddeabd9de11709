//! Each sandbox, and each sandbox's egress gate, runs as a uid of its own
//! from sbx's range (1879048192 + 2^24): the kernel's per-uid limits
//! (inotify instances here) are no longer one pool that one sandbox can
//! drain for its neighbours. A persisted session keeps its uid; an image
//! USER inside the range is refused, one outside it is not used.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::channel;
use std::time::Duration;

use crate::support::*;

const BASE: u32 = 0x7000_0000;

fn in_range(uid: u32) -> bool {
    (BASE..BASE + (1 << 24)).contains(&uid)
}

/// The uid of `sbx.user` as `inspect` reports it, checked to be its gid too.
fn uid_of(w: &World, id: &str) -> u32 {
    let user = json(&w.sbx(&["--json", "inspect", id]))["user"].as_str().expect("a user").to_string();
    let (u, g) = user.split_once(':').expect("UID:GID");
    assert_eq!(u, g, "the gid is the uid");
    u.parse().unwrap()
}

/// The uid the kernel says the sandbox's processes run as.
fn kernel_uid(sb: &Sandbox) -> u32 {
    let out = sb.exec(&["read", "/proc/self/status"]);
    assert_success(&out, "read /proc/self/status");
    let text = stdout(&out);
    let line = text.lines().find(|l| l.starts_with("Uid:")).expect("a Uid line").to_string();
    let ids: Vec<u32> = line[4..].split_whitespace().map(|n| n.parse().unwrap()).collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "{line}");
    ids[0]
}

fn distinct_in_range(uids: &[u32]) {
    let mut sorted = uids.to_vec();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), uids.len(), "two share a uid: {uids:?}");
    assert!(uids.iter().all(|u| in_range(*u)), "outside sbx's range: {uids:?}");
}

/// A sandbox holding every inotify instance its uid may have
/// (`fs.inotify.max_user_instances`, whatever CI set) left a neighbour's
/// `sbx watch` failing with "Too many open files" while both ran as 65534.
#[test]
fn an_inotify_hog_leaves_a_neighbours_watch_working() {
    let max: usize =
        std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances").unwrap().trim().parse().unwrap();
    // The sandbox's nofile limit is 1024: a hog cannot hold more than that.
    assert!(max < 1000, "max_user_instances is {max}: a sandbox (nofile 1024) cannot exhaust it; lower it to test");
    let w = World::new();
    let hog = w.create(&["--", "inotify-hog", &max.to_string()]);
    let held = until(Duration::from_secs(20), || hog.exec(&["exists", "/tmp/hogged"]).status.success());
    assert!(held.is_some(), "the hog never said how many it holds");
    let b = w.create(&[]);
    assert_success(&w.sbx(&["mkdir", &b.id, "/tmp/w"]), "mkdir");
    let mut child = Command::new(SBX)
        .args(w.dir_args())
        .args(["watch", &b.id, "/tmp/w"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    // The watch is up once a change made after it shows; retried, since
    // it starts asynchronously.
    let mut seen = Vec::new();
    for n in 0..20 {
        let _ = w.sbx(&["mkdir", &b.id, &format!("/tmp/w/d{n}")]);
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
            seen.push(l);
            break;
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
    }
    let _ = child.kill();
    let done = child.wait_with_output().unwrap();
    assert!(
        seen.iter().any(|l| l.contains("/tmp/w/d")),
        "the neighbour's watch saw nothing: {seen:?}; stderr: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    let count = stdout(&hog.exec(&["read", "/tmp/hogged"]));
    assert_eq!(count.trim(), max.to_string(), "the hog held all its uid may have");
    distinct_in_range(&[uid_of(&w, &hog.id), uid_of(&w, &b.id)]);
}

/// Two sandboxes, two sessions, a second world (another data dir), a
/// gate, a pool's member: no two share a uid, each in the range and the
/// one the kernel reports. A persisted session gets its uid back after
/// destroy. An image USER in the range is refused (exit 2, nothing made);
/// one outside is not used, and said so.
#[test]
fn no_two_sandboxes_share_a_uid_and_a_persisted_session_keeps_its_own() {
    let w = World::new();
    let a = w.create(&[]);
    let b = w.create(&[]);
    let s1 = w.create(&["--session", "s1"]);
    let s2 = w.create(&["--session", "s2"]);
    let other = World::new();
    let o = other.create(&[]);
    let mut uids =
        vec![uid_of(&w, &a.id), uid_of(&w, &b.id), uid_of(&w, &s1.id), uid_of(&w, &s2.id), uid_of(&other, &o.id)];
    assert_eq!(kernel_uid(&a), uids[0], "the label is what the kernel says");
    // The gate: its own uid, in the range. On a network of the test's own,
    // never sbx's host-wide default, which would outlive the test.
    let net = Network::with_prefix(false, "uid-");
    let gated = w.create(&["--allow", "example.com", "--egress-network", &net.name]);
    let gate = docker_ok(&["inspect", "--format", "{{.Config.User}}", &format!("{}-gate", gated.id)]);
    let gate_uid: u32 = gate.split(':').next().unwrap().parse().unwrap();
    uids.extend([uid_of(&w, &gated.id), gate_uid]);
    // A persisted session: the same uid after destroy and a new create.
    // (Session volumes are the engine's: the name is this test's own.)
    let session = format!("{}-kept", w.case);
    let p = w.create(&["--persist", "--session", &session]);
    let kept = uid_of(&w, &p.id);
    assert_success(&p.exec(&["write", "/state/mine"]), "the session's user writes /state");
    drop(p);
    let p = w.create(&["--persist", "--session", &session]);
    assert_eq!(uid_of(&w, &p.id), kept, "a persisted session keeps its uid");
    assert_success(&p.exec(&["write", "/state/mine"]), "and can still write its files");
    uids.push(kept);
    assert_success(&w.sbx(&["destroy", "--purge", &p.id]), "destroy --purge");
    // A pool member gets its own when made, and a claim keeps it.
    let label = w.case_label();
    assert_success(
        &w.sbx(&["pool", "create", "p", "--size", "1", "--image", &w.image, "--label", &label]),
        "pool create",
    );
    let claimed = json(&w.sbx(&["--json", "create", "--pool", "p"]));
    let member = w.adopt(claimed["id"].as_str().unwrap());
    let member_uid = uid_of(&w, &member.id);
    assert_eq!(kernel_uid(&member), member_uid);
    uids.push(member_uid);
    distinct_in_range(&uids);
    // An image USER: inside the range refused, outside replaced.
    let inside = ImageTree::new(&[]).changes(&[&format!("USER {}", BASE + 7)]).import();
    let label = w.case_label();
    let before = w.containers();
    let out = w.sbx(&["create", "--image", &inside.0, "--label", &label]);
    assert_exit(&out, 2, "an image USER in sbx's range");
    assert!(stderr(&out).contains("in sbx's own range"), "{}", stderr(&out));
    assert_eq!(w.containers(), before, "nothing made");
    let outside = ImageTree::new(&[]).changes(&["USER 1000:1000"]).import();
    let out = w.sbx(&["--json", "create", "--image", &outside.0, "--label", &label]);
    assert_success(&out, "an image USER outside the range");
    let made = w.adopt(json(&out)["id"].as_str().unwrap());
    let u = uid_of(&w, &made.id);
    assert!(in_range(u) && !uids.contains(&u), "{u} {uids:?}");
    assert!(json(&out)["warnings"].to_string().contains("\\\"1000:1000\\\" is not used"), "{}", stdout(&out));
    let out = w.try_create(&["--user", &(BASE + 7).to_string()]);
    assert_exit(&out, 2, "--user in sbx's range");
    assert_success(&w.sbx(&["pool", "rm", "p"]), "pool rm");
}

/// A non-root operator's sandboxes too: their own table, in their data dir.
#[test]
fn a_non_root_operators_sandboxes_get_uids_of_their_own() {
    let w = crate::nonroot::UserWorld::new();
    let mut uids = Vec::new();
    let (image, label) = (fixture_image(), w.label());
    for _ in 0..2 {
        let out = w.sbx(&["--json", "create", "--image", &image, "--label", &label]);
        assert_success(&out, "create as the docker user");
        let user = json(&out)["user"].as_str().unwrap().to_string();
        uids.push(user.split(':').next().unwrap().parse().unwrap());
    }
    distinct_in_range(&uids);
}

//! A restore while containerd still holds the checkpoint's upload: engine
//! 20.10 uploads a checkpoint into containerd's content store on `docker
//! checkpoint` and again on `docker start --checkpoint`, as tars of the
//! same files, so the same digest; until containerd's collector removes
//! the first (late on a busy engine, as in CI) the start failed "commit
//! failed: content sha256:... already exists". This test holds every
//! checkpoint upload with a `containerd.io/gc.root` label, as a collector
//! that never comes would. Its own test binary: the hold would reach
//! other tests' checkpoints. Never skipped: it fails without root, an
//! engine or `ctr`, as the live suite does.

#[path = "live/support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use support::*;

const ROOT_LABEL: &str = "containerd.io/gc.root";

/// Each index held, and the blobs it names.
type Held = BTreeSet<(String, Vec<String>)>;

/// The socket of the containerd that holds the engine's namespace.
fn containerd_socket() -> String {
    for sock in ["/run/docker/containerd/containerd.sock", "/run/containerd/containerd.sock"] {
        let out = Command::new("ctr").args(["-a", sock, "namespaces", "ls", "-q"]).output();
        if out.is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).lines().any(|l| l == "moby")) {
            return sock.into();
        }
    }
    panic!("no containerd with the engine's namespace (moby) answers `ctr`");
}

fn ctr(sock: &str, args: &[&str]) -> std::process::Output {
    Command::new("ctr").args(["-a", sock, "-n", "moby", "content"]).args(args).output().expect("spawn ctr")
}

/// The checkpoint indexes in the store (the blobs whose labels name
/// others), each with its line of `ctr content ls`.
fn indexes(sock: &str) -> Vec<(String, String)> {
    let out = ctr(sock, &["ls"]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("containerd.io/gc.ref.content"))
        .filter_map(|l| Some((l.split_whitespace().next().filter(|d| d.starts_with("sha256:"))?.to_string(), l.into())))
        .collect()
}

/// Every checkpoint index that appears, labelled a root (so it and the
/// tar it names are never collected) until dropped, then removed.
struct Hold {
    sock: String,
    stop: Arc<AtomicBool>,
    held: Arc<Mutex<Held>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Hold {
    fn start() -> Hold {
        let sock = containerd_socket();
        let stop = Arc::new(AtomicBool::new(false));
        let held = Arc::new(Mutex::new(BTreeSet::new()));
        // Indexes there before this test are not its catch.
        let before: BTreeSet<String> = indexes(&sock).into_iter().map(|(d, _)| d).collect();
        let (s, st, h) = (sock.clone(), stop.clone(), held.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                for (digest, line) in indexes(&s) {
                    if before.contains(&digest) || h.lock().unwrap().iter().any(|(d, _)| *d == digest) {
                        continue;
                    }
                    if ctr(&s, &["label", &digest, &format!("{ROOT_LABEL}=sbx-test")]).status.success() {
                        // The blobs it names, removed with it at the end.
                        let named: Vec<String> = line
                            .split(',')
                            .filter_map(|l| l.split_once("containerd.io/gc.ref.content.").map(|(_, r)| r))
                            .filter_map(|r| r.split_once('=').map(|(_, d)| d.trim().to_string()))
                            .collect();
                        h.lock().unwrap().insert((digest, named));
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        });
        Hold { sock, stop, held, thread: Some(thread) }
    }

    fn count(&self) -> usize {
        self.held.lock().unwrap().len()
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Removed outright, the blobs it names too: the next checkpoint of
        // the sandbox need not wait for the collector.
        for (digest, named) in self.held.lock().unwrap().iter() {
            let _ = ctr(&self.sock, &["label", digest, &format!("{ROOT_LABEL}=")]);
            let _ = ctr(&self.sock, &["rm", digest]);
            for d in named {
                let _ = ctr(&self.sock, &["rm", d]);
            }
        }
    }
}

/// The counter's next number, over `sbx connect` (the relayed channel).
fn next(w: &World, id: &str) -> u64 {
    let out = w.sbx_stdin(&["connect", id], b"");
    assert_success(&out, "sbx connect");
    let text = stdout(&out);
    text.trim().parse().unwrap_or_else(|_| panic!("not a number from the counter: {text:?}"))
}

/// `sbx ARGS` until the hold caught the checkpoint it made (the hold
/// polls, so a fast collector can win now and then): every run must
/// succeed, and one of at most five must have been held.
fn held_run(w: &World, hold: &Hold, what: &str, args: impl Fn(usize) -> Vec<String>) -> Vec<std::process::Output> {
    let mut outs = Vec::new();
    for attempt in 0..5 {
        let before = hold.count();
        let argv = args(attempt);
        let out = w.sbx(&argv.iter().map(String::as_str).collect::<Vec<_>>());
        assert_success(&out, what);
        outs.push(out);
        if hold.count() > before {
            return outs;
        }
    }
    panic!("{what}: containerd collected every checkpoint before the hold caught one; nothing was proven");
}

#[test]
fn a_checkpoint_is_restored_or_refused_while_containerd_still_holds_the_last() {
    let w = World::new();
    let sb = w.create(&["--snapshots", "--", "count"]);
    assert_eq!(next(&w, &sb.id), 1);
    let hold = Hold::start();

    // checkpoint: saved, then restored in place from the engine's copy,
    // whose upload containerd still holds.
    let outs = held_run(&w, &hold, "sbx checkpoint", |i| {
        vec!["checkpoint".into(), sb.id.clone(), "--name".into(), format!("held{i}")]
    });
    assert_eq!(next(&w, &sb.id), 2, "restored from memory, not started afresh");

    // A second checkpoint would write the spec containerd still holds and
    // lose the sandbox's memory: refused, with the sandbox as it was.
    let again = w.sbx(&["checkpoint", &sb.id, "--name", "again"]);
    assert_exit(&again, 1, "a checkpoint while containerd holds the last");
    assert!(stderr(&again).contains("containerd still keeps its last checkpoint"), "{}", stderr(&again));
    assert_eq!(sb.inspect("{{.State.Status}}"), "running");
    assert_eq!(next(&w, &sb.id), 3, "its memory is intact");
    drop(hold);

    // Once collected: a fork (a checkpoint and a child restored from a
    // copy of it), then hibernate and resume at once.
    let fork = w.sbx(&["fork", &sb.id]);
    assert_success(&fork, "sbx fork once containerd collected");
    let child = stdout(&fork).trim().to_string();
    assert_eq!(next(&w, &child), 4, "the child carries on from the parent");
    assert_eq!(next(&w, &sb.id), 4, "the parent carries on on its own");
    assert_success(&w.sbx(&["hibernate", &sb.id]), "hibernate");
    assert_success(&w.sbx(&["resume", &sb.id]), "resume right after hibernate");
    assert_eq!(next(&w, &sb.id), 5);

    let names: Vec<String> = (0..outs.len()).map(|i| format!("held{i}")).collect();
    let mut rm = vec!["checkpoints", "rm", sb.id.as_str()];
    rm.extend(names.iter().map(String::as_str));
    assert_success(&w.sbx(&rm), "checkpoints rm");
    assert_success(&w.sbx(&["destroy", &sb.id, &child]), "destroy");
    w.assert_nothing_left();
}

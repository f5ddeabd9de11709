//! `sbx files`, `sbx mkdir` and `sbx watch` on the fixture image
//! (no shell, no tools): every file type, symlinks never followed, names
//! built to forge output lines, the depth and entry limits, mkdir's errors,
//! and watch's changes in order, in a directory made after it started, an
//! overflow reported as such, Ctrl-C and the end of the sandbox ending it.
//! The sandbox side is a static C program copied in with `sbx cp`
//! (files_watch/fsattack.c).
//!
//! layout: ~480 lines, over the tree's ~400, on purpose: one area, one
//! attacker program and one `Watching` harness the tests share.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use crate::support::*;

/// A sandbox with the attacker program at /tmp/fsattack.
fn armed(w: &World, args: &[&str]) -> Sandbox {
    armed_with(w, args, "files_watch/fsattack.c", "/tmp/fsattack")
}

fn attack(w: &World, sb: &Sandbox, args: &[&str]) {
    let mut full = vec!["exec", sb.id.as_str(), "--", "/tmp/fsattack"];
    full.extend_from_slice(args);
    assert_success(&w.sbx(&full), &format!("fsattack {args:?}"));
}

fn listing(w: &World, args: &[&str]) -> Vec<serde_json::Value> {
    let mut full = vec!["--json", "files"];
    full.extend_from_slice(args);
    let out = w.sbx(&full);
    assert_success(&out, &format!("sbx files {args:?}"));
    json(&out).as_array().expect("one JSON array").clone()
}

fn by_name<'a>(list: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    list.iter().find(|e| e["name"] == name).unwrap_or_else(|| panic!("no {name:?} in {list:?}"))
}

#[test]
fn files_lists_every_type_and_never_follows_a_symlink() {
    let w = World::new();
    let sb = armed(&w, &[]);
    assert_success(&w.sbx(&["mkdir", &sb.id, "/tmp/t"]), "mkdir");
    attack(&w, &sb, &["tree", "/tmp/t"]);
    let list = listing(&w, &[&sb.id, "/tmp/t"]);
    let kinds: Vec<(&str, &str)> =
        list.iter().map(|e| (e["name"].as_str().unwrap(), e["type"].as_str().unwrap())).collect();
    assert_eq!(
        kinds,
        [
            ("d1", "dir"),
            ("fifo", "fifo"),
            ("file", "file"),
            ("sock", "socket"),
            ("to-etc", "symlink"),
            ("to-host", "symlink"),
            ("to-root", "symlink")
        ]
    );
    let file = by_name(&list, "file");
    assert_eq!((file["size"].as_u64(), file["mode"].as_str()), (Some(5), Some("4750")));
    assert_eq!(file["permissions"], "-rwsr-x---");
    assert_eq!(file["path"], "/tmp/t/file");
    assert_eq!(by_name(&list, "to-host")["target"], "/home/operator/.ssh/id_rsa");
    assert_eq!(by_name(&list, "to-etc")["target"], "/etc");
    // Char devices; a PATH that is a symlink is the link itself (ls -ld), a trailing '/' too.
    let dev = listing(&w, &[&sb.id, "/dev"]);
    assert_eq!(by_name(&dev, "null")["type"], "char");
    for p in ["/tmp/t/to-etc", "/tmp/t/to-etc/", "/tmp/t//to-etc"] {
        let one = listing(&w, &[&sb.id, p]);
        assert_eq!(one.len(), 1, "{p}: {one:?}");
        assert_eq!((one[0]["type"].as_str(), one[0]["target"].as_str()), (Some("symlink"), Some("/etc")), "{p}");
    }
    let one = listing(&w, &[&sb.id, "/tmp/t/file"]);
    assert_eq!((one.len(), one[0]["path"].as_str(), one[0]["depth"].as_u64()), (1, Some("/tmp/t/file"), Some(0)));
    // Text: like ls -l, the link and its target, the path itself for a single entry.
    let plain = w.sbx(&["files", &sb.id, "/tmp/t"]);
    // A plain listing never descends: no note about the directories it holds.
    assert!(!stderr(&plain).contains("descended"), "{}", stderr(&plain));
    let text = stdout(&plain);
    assert!(
        text.lines().any(|l| l.starts_with("lrwxrwxrwx 0777") && l.ends_with(" to-host -> /home/operator/.ssh/id_rsa")),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("prw-------") && l.ends_with(" fifo")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("srwx") && l.ends_with(" sock")), "{text}");
    assert!(stdout(&w.sbx(&["files", &sb.id, "/tmp/t/to-root"])).trim_end().ends_with("/tmp/t/to-root -> /"));

    // Recursive: never through a symlink (d1/etc-link, to-root), to the depth asked, and says where it stopped.
    let all = listing(&w, &[&sb.id, "/tmp/t", "-r"]);
    let paths: Vec<&str> = all.iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"/tmp/t/d1/d2/d3/d4/leaf"), "{paths:?}");
    assert!(paths.contains(&"/tmp/t/d1/etc-link"), "{paths:?}");
    let through =
        |p: &&&str| ["/tmp/t/d1/etc-link/", "/tmp/t/to-etc/", "/tmp/t/to-root/"].iter().any(|l| p.starts_with(l));
    assert!(!paths.iter().any(|p| through(&p)), "recursed through a symlink: {paths:?}");
    assert!(!paths.iter().any(|p| p.contains("passwd")), "a symlink was followed: {paths:?}");
    let out = w.sbx(&["files", "-r", "--max-depth", "2", &sb.id, "/tmp/t"]);
    assert_success(&out, "depth 2");
    assert!(stdout(&out).contains(" d1/d2\n") && !stdout(&out).contains("d1/d2/d3"), "{}", stdout(&out));
    assert!(stderr(&out).contains("1 directory at depth 2 was not descended into"), "{}", stderr(&out));
    // The entry cap: the first names, and a warning (JSON too), never silent.
    let out = w.sbx(&["--json", "files", "--limit", "3", &sb.id, "/tmp/t"]);
    assert_success(&out, "limit 3");
    let names: Vec<String> =
        json(&out).as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["d1", "fifo", "file"]);
    let warn: serde_json::Value = serde_json::from_str(stderr(&out).lines().next().unwrap()).unwrap();
    assert_eq!(warn["warning"]["kind"], "truncated", "{}", stderr(&out));

    // Bad input and failures: exit 2 before anything runs, exit 1 in sbx's words.
    for bad in ["tmp", "/tmp/../etc", ""] {
        assert_exit(&w.sbx(&["files", &sb.id, bad]), 2, &format!("path {bad:?}"));
    }
    assert_exit(&w.sbx(&["files", "--max-depth", "0", &sb.id, "/tmp"]), 2, "depth 0");
    let out = w.sbx(&["--json", "files", &sb.id, "/tmp/nope"]);
    assert_exit(&out, 1, "missing path");
    assert!(stderr(&out).contains("\"no_such_path\""), "{}", stderr(&out));
    let out = w.sbx(&["files", "sbx-0123456789ab", "/tmp"]);
    assert_exit(&out, 1, "missing sandbox");
    docker_ok(&["kill", &sb.id]);
    let out = w.sbx(&["--json", "files", &sb.id, "/tmp"]);
    assert_exit(&out, 1, "stopped sandbox");
    assert!(stderr(&out).contains("not_running"), "{}", stderr(&out));
}

/// Names made to forge lines, terminal escapes, bytes that are not UTF-8,
/// the longest name and link target: one escaped line each in text, exact
/// in JSON.
#[test]
fn hostile_names_are_escaped_in_text_and_exact_in_json() {
    let w = World::new();
    let sb = armed(&w, &[]);
    assert_success(&w.sbx(&["mkdir", &sb.id, "/tmp/h"]), "mkdir");
    attack(&w, &sb, &["hostile", "/tmp/h"]);
    let out = w.sbx(&["files", &sb.id, "/tmp/h"]);
    assert_success(&out, "files");
    let text = String::from_utf8(out.stdout.clone()).expect("text output is UTF-8");
    assert_eq!(text.lines().count(), 5, "one line per entry: {text}");
    assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "control characters reached the terminal: {text:?}");
    assert!(!text.lines().any(|l| l.starts_with("-rw-r--r-- 0644            1 1970")), "a forged line: {text}");
    assert!(text.contains(r"innocent\n-rw-r--r-- 0644"), "{text}");
    assert!(text.contains(r"\u{1b}[31mred\u{1b}]0;pwned\u{7}"), "{text}");
    assert!(text.contains(r"bad\xff\xfe"), "{text}");
    assert!(text.contains(&"N".repeat(255)), "{text}");
    let giant = text.lines().find(|l| l.contains("giant-link -> ")).expect("the giant link");
    assert!(giant.ends_with(&format!(r"giant-link -> /etc/\n\u{{1b}}[2J{}", "T".repeat(4085))), "{giant}");

    let list = listing(&w, &[&sb.id, "/tmp/h"]);
    assert_eq!(list.len(), 5);
    let forged = by_name(&list, "innocent\n-rw-r--r-- 0644            1 1970-01-01T00:00:00Z shadow");
    assert!(forged.get("name_hex").is_none(), "UTF-8 names need no hex");
    let esc = by_name(&list, "\u{1b}[31mred\u{1b}]0;pwned\u{7}");
    assert_eq!(esc["type"], "file");
    let bad = list.iter().find(|e| e.get("name_hex").is_some()).expect("the name that is not UTF-8");
    assert_eq!(bad["name_hex"], "626164fffe");
    assert_eq!(bad["path_hex"], hex(b"/tmp/h/bad\xff\xfe"));
    let link = by_name(&list, "giant-link");
    let target = link["target"].as_str().unwrap();
    assert_eq!((target.len(), &target[..10]), (4095, "/etc/\n\u{1b}[2J"));
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn mkdir_creates_and_says_what_went_wrong() {
    let w = World::new();
    let sb = w.create(&[]);
    let mk = |args: &[&str]| {
        let mut full = vec!["--json", "mkdir"];
        full.extend_from_slice(args);
        w.sbx(&full)
    };
    let out = mk(&[&sb.id, "/tmp/m"]);
    assert_success(&out, "mkdir");
    assert_eq!(json(&out)["created"], true);
    let kind = |out: &std::process::Output| -> String {
        let v: serde_json::Value = serde_json::from_str(stderr(out).lines().last().unwrap_or("{}")).unwrap();
        v["error"]["kind"].as_str().unwrap_or("").to_string()
    };
    for (args, code, want) in [
        (vec!["/tmp/m"], 1, "exists"),
        (vec!["/tmp/x/y"], 1, "no_parent"),
        (vec!["/etc/new"], 1, "read_only"),
        (vec!["/dev/new"], 1, "permission_denied"),
        (vec!["/tmp/m/f/g"], 1, "not_a_directory"),
        (vec!["-p", "/tmp/m/f"], 1, "not_a_directory"),
        (vec!["tmp/rel"], 2, "invalid_input"),
        (vec!["/tmp/../x"], 2, "invalid_input"),
    ] {
        if args.last() == Some(&"/tmp/m/f/g") {
            assert_success(&sb.exec(&["write", "/tmp/m/f"]), "a file in the way");
        }
        let mut full = vec![sb.id.as_str()];
        full.extend(args.iter().copied());
        let out = mk(&full);
        assert_exit(&out, code, &format!("mkdir {args:?}"));
        assert_eq!(kind(&out), want, "mkdir {args:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty());
    }
    let out = mk(&["-p", &sb.id, "/tmp/x/y/z"]);
    assert_success(&out, "mkdir -p");
    assert_eq!(json(&out)["created"], true);
    let out = mk(&["-p", &sb.id, "/tmp/x/y/z"]);
    assert_success(&out, "mkdir -p of one already there");
    assert_eq!(json(&out)["created"], false);
    assert_eq!(listing(&w, &[&sb.id, "/tmp/x/y"])[0]["name"], "z");
    let out = w.sbx(&["mkdir", &sb.id, "/tmp/m"]);
    assert!(
        stderr(&out).contains("/tmp/m already exists in sandbox") && stderr(&out).contains("-p"),
        "{}",
        stderr(&out)
    );
}

/// `sbx watch` running, its stdout and stderr lines on channels.
struct Watching {
    child: Child,
    out: Receiver<String>,
    err: Receiver<String>,
    /// Holds the stdout reader back while set (a stalled reader); `release` lets it go.
    gate: Option<std::sync::mpsc::Sender<()>>,
}

impl Watching {
    fn start(w: &World, args: &[&str], read_stdout: bool) -> Watching {
        let mut child = Command::new(SBX)
            .args(w.dir_args())
            .arg("--json")
            .arg("watch")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (etx, err) = channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = etx.send(l);
            }
        });
        let (otx, out) = channel();
        let stdout = child.stdout.take().unwrap();
        let (gate_tx, gate) = channel::<()>();
        std::thread::spawn(move || {
            if !read_stdout {
                let _ = gate.recv(); // a stalled reader until the test says
            }
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = otx.send(l);
            }
        });
        let gate = (!read_stdout).then_some(gate_tx);
        let mut wt = Watching { child, out, err, gate };
        wt.wait_err("\"watching\"", Duration::from_secs(30));
        wt
    }

    /// Wait for a stderr line containing `want`.
    fn wait_err(&mut self, want: &str, limit: Duration) -> String {
        let end = Instant::now() + limit;
        loop {
            match self.err.recv_timeout(end.saturating_duration_since(Instant::now())) {
                Ok(l) if l.contains(want) => return l,
                Ok(_) => {}
                Err(_) => panic!("no {want:?} from sbx watch on stderr within {limit:?}"),
            }
        }
    }

    /// Events until `done` says enough (or the limit passes: then panic).
    fn events_until(&self, limit: Duration, done: impl Fn(&[serde_json::Value]) -> bool) -> Vec<serde_json::Value> {
        let end = Instant::now() + limit;
        let mut got = Vec::new();
        while !done(&got) {
            match self.out.recv_timeout(end.saturating_duration_since(Instant::now())) {
                Ok(l) => got.push(serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}"))),
                Err(_) => panic!("watch events within {limit:?}: got {got:?}"),
            }
        }
        got
    }

    fn release(&mut self) {
        self.gate = None;
    }

    fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if let Some(st) = self.child.try_wait().unwrap() {
                return Some(st.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn event(e: &serde_json::Value) -> String {
    match e["event"].as_str().unwrap_or("") {
        "moved" => format!("moved {} -> {}", e["from"].as_str().unwrap(), e["to"].as_str().unwrap()),
        ev => format!("{ev} {}", e["path"].as_str().unwrap_or("")),
    }
}

/// In order: each of `want` appears after the one before.
fn in_order(got: &[String], want: &[&str]) -> bool {
    let mut it = got.iter();
    want.iter().all(|w| it.any(|g| g == w))
}

/// The helper processes of `watch` in the sandbox, as its own /proc shows
/// them (under runc `docker top` agrees; under gVisor it shows the host's view).
fn watch_helpers(w: &World, sb: &Sandbox) -> usize {
    let out = w.sbx(&["exec", &sb.id, "--", "/tmp/fsattack", "count-procs", "/", "/run/sbx/helper watch"]);
    assert_success(&out, "count-procs");
    stdout(&out).trim().parse().expect("a count")
}

/// `docker top`'s view of the same (runc only).
fn watch_helpers_top(id: &str) -> usize {
    let top = docker(&["top", id, "-eo", "pid,args"]);
    assert_success(&top, "docker top");
    String::from_utf8_lossy(&top.stdout).lines().filter(|l| l.contains("/run/sbx/helper watch")).count()
}

#[test]
fn watch_reports_changes_in_order_until_ctrl_c() {
    let w = World::new();
    let sb = armed(&w, &[]);
    assert_success(&w.sbx(&["mkdir", &sb.id, "/tmp/w"]), "mkdir");
    let mut wt = Watching::start(&w, &["-r", &sb.id, "/tmp/w"], true);
    assert_eq!((watch_helpers(&w, &sb), watch_helpers_top(&sb.id)), (1, 1), "the helper watches");
    attack(&w, &sb, &["seq", "/tmp/w"]);
    let want = [
        "created /tmp/w/a",
        "modified /tmp/w/a",
        "moved /tmp/w/a -> /tmp/w/b",
        "deleted /tmp/w/b",
        "created /tmp/w/sub",
        "created /tmp/w/sub/early",
        "created /tmp/w/sub/c",
        "moved /tmp/w/sub/c -> /tmp/w/sub/d",
        "created /tmp/w/\nforged",
    ];
    let got = wt.events_until(Duration::from_secs(30), |g| in_order(&g.iter().map(event).collect::<Vec<_>>(), &want));
    let seen: Vec<String> = got.iter().map(event).collect();
    assert!(in_order(&seen, &want), "{seen:#?}");
    assert_eq!(got.iter().find(|e| e["path"] == "/tmp/w/sub").unwrap()["type"], "dir");
    // Ctrl-C: sbx exits 130 and no helper is left in the sandbox.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(wt.child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    assert_eq!(wt.wait_exit(Duration::from_secs(15)), Some(130), "Ctrl-C ends the watch");
    let gone = until(Duration::from_secs(5), || watch_helpers(&w, &sb) == 0 && watch_helpers_top(&sb.id) == 0);
    assert!(gone.is_some(), "a watch helper was left running");
    // Text: one escaped line per change.
    let mut text = Command::new(SBX)
        .args(w.dir_args())
        .args(["watch", &sb.id, "/tmp/w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(text.stderr.take().unwrap());
    let mut ready = String::new();
    err.read_line(&mut ready).unwrap();
    assert!(ready.contains("watching") && ready.contains("/tmp/w"), "{ready}");
    assert_success(&sb.exec(&["write", "/tmp/w/x\n\x1b[2Jfake"]), "a hostile name");
    let mut line = String::new();
    BufReader::new(text.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "created   /tmp/w/x\\n\\u{1b}[2Jfake\n");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(text.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    assert_eq!(text.wait().unwrap().code(), Some(130));
    // `sbx watch ... | head -1`: the reader goes, and so does the watch, at the next change.
    let mut piped = Command::new(SBX)
        .args(w.dir_args())
        .args(["watch", &sb.id, "/tmp/w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(piped.stderr.take().unwrap()).read_line(&mut ready).unwrap();
    drop(piped.stdout.take());
    assert_success(&sb.exec(&["write", "/tmp/w/after-head"]), "a change");
    let end = Instant::now() + Duration::from_secs(15);
    while piped.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(piped.try_wait().unwrap().and_then(|s| s.code()), Some(0), "the watch ends with its reader");
    let gone = until(Duration::from_secs(5), || watch_helpers(&w, &sb) == 0);
    assert!(gone.is_some(), "a watch helper was left running after its reader went");
    // The whole sandbox, recursively: ready promptly, and it sees /tmp.
    let began = Instant::now();
    let mut root = Watching::start(&w, &["-r", &sb.id, "/"], true);
    assert!(began.elapsed() < Duration::from_secs(10), "watching / took {:?}", began.elapsed());
    assert_success(&sb.exec(&["write", "/tmp/w/seen-from-root"]), "a change");
    root.events_until(Duration::from_secs(15), |g| g.iter().any(|e| e["path"] == "/tmp/w/seen-from-root"));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(root.child.id() as i32), nix::sys::signal::Signal::SIGINT)
        .unwrap();
    assert_eq!(root.wait_exit(Duration::from_secs(15)), Some(130));
    // Bad input and wrong targets.
    assert_exit(&w.sbx(&["watch", &sb.id, "rel"]), 2, "relative path");
    let out = w.sbx(&["--json", "watch", &sb.id, "/tmp/w/sub/d"]);
    assert_exit(&out, 1, "a file");
    assert!(stderr(&out).contains("not_a_directory"), "{}", stderr(&out));
    let out = w.sbx(&["--json", "watch", &sb.id, "/tmp/none"]);
    assert_exit(&out, 1, "missing");
    assert!(stderr(&out).contains("no_such_path"), "{}", stderr(&out));
}

/// Thousands of files while the reader is stalled: the kernel's queue
/// overflows, and that is said, never lost silently.
#[test]
fn watch_reports_an_overflow_and_ends_with_the_sandbox() {
    let w = World::new();
    let sb = armed(&w, &[]);
    assert_success(&w.sbx(&["mkdir", &sb.id, "/tmp/f"]), "mkdir");
    let mut wt = Watching::start(&w, &[&sb.id, "/tmp/f"], false);
    attack(&w, &sb, &["flood", "/tmp/f", "50000"]);
    wt.release();
    let got = wt.events_until(Duration::from_secs(120), |g| g.iter().any(|e| e["event"] == "overflow"));
    assert!(got.len() < 50000, "an overflow after {} events", got.len());
    // The sandbox is destroyed: the watch ends, saying so.
    assert_success(&w.sbx(&["destroy", &sb.id]), "destroy");
    let code = wt.wait_exit(Duration::from_secs(30));
    if code != Some(0) {
        let said: Vec<String> = wt.err.try_iter().collect();
        panic!("the watch did not end with the sandbox (exit {code:?}); it said: {said:#?}");
    }
    wt.wait_err("ended", Duration::from_secs(5));
}

/// Under gVisor (its own kernel: its own inotify and /proc): the listing
/// and its escaping, and a watch that sees changes and ends on Ctrl-C.
#[test]
fn files_and_watch_under_runsc() {
    let w = World::new();
    let sb = armed(&w, &["--runtime", "runsc"]);
    assert_success(&w.sbx(&["mkdir", "-p", &sb.id, "/tmp/g/h"]), "mkdir -p");
    attack(&w, &sb, &["tree", "/tmp/g"]);
    attack(&w, &sb, &["hostile", "/tmp/g/h"]);
    let list = listing(&w, &[&sb.id, "/tmp/g"]);
    assert_eq!(by_name(&list, "to-host")["target"], "/home/operator/.ssh/id_rsa");
    assert_eq!(by_name(&list, "sock")["type"], "socket");
    let all = listing(&w, &[&sb.id, "-r", "/tmp/g"]);
    assert!(all.iter().any(|e| e["path"] == "/tmp/g/d1/d2/d3/d4/leaf"), "{all:?}");
    assert!(!all.iter().any(|e| e["path"].as_str().unwrap().starts_with("/tmp/g/to-etc/")), "followed a link");
    let text = stdout(&w.sbx(&["files", &sb.id, "/tmp/g/h"]));
    assert_eq!(text.lines().count(), 5, "{text}");
    assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
    let mut wt = Watching::start(&w, &["-r", &sb.id, "/tmp/g"], true);
    assert_eq!(watch_helpers(&w, &sb), 1, "the helper watches");
    attack(&w, &sb, &["seq", "/tmp/g"]);
    let want = ["created /tmp/g/a", "moved /tmp/g/a -> /tmp/g/b", "deleted /tmp/g/b", "created /tmp/g/sub/c"];
    wt.events_until(Duration::from_secs(30), |g| in_order(&g.iter().map(event).collect::<Vec<_>>(), &want));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(wt.child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    assert_eq!(wt.wait_exit(Duration::from_secs(15)), Some(130), "Ctrl-C ends the watch");
    assert!(until(Duration::from_secs(5), || watch_helpers(&w, &sb) == 0).is_some(), "a watch helper was left running");
}

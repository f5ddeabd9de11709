//! `sbx events`: a sandbox's lifecycle as one stream (the engine's events
//! kept by the ownership token, sbx's journal of revoked and expired), a
//! container with copied sbx labels but no valid token left out, `--since`
//! replays, the ID filter, `--until-event` and a closed pipe end it, Ctrl-C
//! leaves no `docker events` behind, and an engine that goes away is exit 1.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::support::*;

/// `sbx --json events ARGS` in the background, its lines collected.
struct Events {
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Events {
    fn start(w: &World, args: &[&str]) -> Self {
        let mut child = Command::new(SBX)
            .args(w.dir_args())
            .args(["--json", "events"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn sbx events");
        let out = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let seen = lines.clone();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let v: Value = serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"));
                seen.lock().unwrap().push(v);
            }
        });
        Events { child, lines }
    }

    fn of(&self, id: &str) -> Vec<Value> {
        self.lines.lock().unwrap().iter().filter(|v| v["id"] == id).cloned().collect()
    }

    /// Wait (bounded) until sandbox `id` has had event `kind`.
    fn wait_for(&self, id: &str, kind: &str) {
        until(Duration::from_secs(30), || self.of(id).iter().any(|v| v["event"] == kind))
            .unwrap_or_else(|| panic!("no {kind} event for {id}; saw {:?}", self.of(id)));
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kinds(events: &[Value]) -> Vec<String> {
    events.iter().map(|v| v["event"].as_str().unwrap().to_string()).collect()
}

/// The `docker events` children of process `pid`.
fn docker_children(pid: u32) -> Vec<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        let ppid = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<u32>().ok());
        let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        if ppid == Some(pid) && String::from_utf8_lossy(&cmd).contains("events") {
            found.push(p);
        }
    }
    found
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

#[test]
fn events_show_a_sandbox_lifecycle_and_only_this_hosts_sandboxes() {
    let _load = loading_the_engine();
    let w = World::new();
    let net = Network::new(true);
    let svc = Service::start(&net, &w.image);
    // From a moment ago: nothing is lost while `docker events` starts.
    let t0 = SystemTime::now() - Duration::from_secs(1);
    let all = Events::start(&w, &["--since", &rfc3339(t0)]);

    // Created with a route, revoked, paused and resumed by docker itself, destroyed.
    let a = w.create(&["--route", &format!("inference:{}:8080", svc.name)]);
    assert_success(&w.sbx(&["revoke", &a.id, "inference"]), "sbx revoke");
    docker_ok(&["pause", &a.id]);
    docker_ok(&["unpause", &a.id]);
    // A container carrying a's sbx labels (its token too) under another
    // name: labels anyone can copy, but the token is over the name.
    let labels: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&docker_ok(&["inspect", "--format", "{{json .Config.Labels}}", &a.id])).unwrap();
    let forged = format!("sbx-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
    let mut run = vec!["run".to_string(), "-d".into(), "--name".into(), forged.clone()];
    for (k, v) in &labels {
        let v = if k == "sbx.id" { forged.clone() } else { v.clone() };
        run.extend(["--label".to_string(), format!("{k}={v}")]);
    }
    run.extend(["--label".to_string(), w.case_label(), w.image.clone(), "sleep".into()]);
    docker_ok(&run.iter().map(String::as_str).collect::<Vec<_>>());
    docker_ok(&["rm", "-f", &forged]);
    assert_success(&w.sbx(&["destroy", &a.id]), "sbx destroy");
    all.wait_for(&a.id, "destroyed");
    let seen = all.of(&a.id);
    assert_eq!(kinds(&seen), ["created", "started", "revoked", "paused", "resumed", "died", "destroyed"], "{seen:?}");
    assert_eq!(seen[2]["route"], "inference");
    assert_eq!(seen[0]["session"], a.id.as_str(), "the session (sbx's default: the id)");
    assert_eq!(seen[5]["exit_code"], 137, "destroy is `rm -f`: SIGKILL");
    assert_eq!(seen[5]["oom_killed"], false);
    let times: Vec<&str> = seen.iter().map(|v| v["time"].as_str().unwrap()).collect();
    assert!(times.windows(2).all(|p| p[0] <= p[1]), "{times:?}");
    assert!(times.iter().all(|t| t.len() == 24 && t.ends_with('Z')), "RFC 3339 UTC with ms: {times:?}");

    // One that meets the OOM killer at its memory limit. `--until-event`
    // waits for it the way a script would, started before it was made (a
    // replay alone reaches back only 256 engine events, which a loaded
    // engine turns over in seconds).
    let tb = SystemTime::now();
    let (b, waited) = std::thread::scope(|s| {
        let waited = s.spawn(|| {
            let args = ["--json", "events", "--since", &rfc3339(tb), "--until-event", "died"];
            sbx_within_fed(&w, &args, &[], b"", Duration::from_secs(60))
        });
        let b = w.create(&["--memory", "64", "--", "hog"]);
        (b, waited.join().unwrap().expect("events --until-event died never saw the hog die"))
    });
    assert_success(&waited, "events --until-event died");
    let last: Value = serde_json::from_str(stdout(&waited).lines().last().unwrap()).unwrap();
    assert_eq!(last["id"], b.id.as_str(), "{}", stdout(&waited));
    assert_eq!((&last["event"], &last["exit_code"], &last["oom_killed"]), (&"died".into(), &137.into(), &true.into()));
    let b_id = b.id.clone();
    drop(b);
    all.wait_for(&b_id, "destroyed");
    let seen_b = all.of(&b_id);
    assert_eq!(kinds(&seen_b), ["created", "started", "died", "destroyed"], "{seen_b:?}");
    assert_eq!((&seen_b[2]["exit_code"], &seen_b[2]["oom_killed"]), (&137.into(), &true.into()));

    // One whose TTL runs out: the watchdog's `expired`, then docker's removal.
    let c = w.create(&["--ttl", "2s"]);
    all.wait_for(&c.id, "destroyed");
    assert_eq!(kinds(&all.of(&c.id)), ["created", "started", "expired", "died", "destroyed"]);
    drop(c);

    assert_eq!(all.of(&forged), Vec::<Value>::new(), "a container without a valid token is no sandbox");
    assert!(all.lines.lock().unwrap().iter().all(|v| v["id"].as_str().unwrap().starts_with("sbx-")));

    // Ctrl-C: exit 0, and its `docker events` goes with it.
    let mut all = all;
    let children = docker_children(all.child.id());
    assert_eq!(children.len(), 1, "one docker events child: {children:?}");
    let pid = nix::unistd::Pid::from_raw(all.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let started = Instant::now();
    let status = all.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "Ctrl-C ends it with 0");
    assert!(started.elapsed() < Duration::from_secs(3));
    let left = until(Duration::from_secs(3), || {
        std::fs::read_to_string(format!("/proc/{}/cmdline", children[0])).map_or(true, |c| !c.contains("events"))
    });
    assert!(left.is_some(), "docker events outlived sbx events");

    // A replay of a's window, of a alone: the same events, the journal's revoke in place.
    let replay = w.sbx(&["--json", "events", "--since", &rfc3339(t0), "--until", &rfc3339(SystemTime::now()), &a.id]);
    assert_success(&replay, "events --since --until ID");
    let replayed: Vec<Value> = stdout(&replay).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(replayed, seen, "the replay differs from what was seen live");

    // Text, through a pipe that closes after the first match: it ends at
    // once though the stream stays open (the host has no more events).
    let script = format!(
        "'{SBX}' --data-dir '{}' --socket-dir '{}' events --since '{}' {} | grep -m1 revoked",
        w.state_dir.display(),
        w.socket_root.display(),
        rfc3339(t0),
        a.id
    );
    let started = Instant::now();
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert_success(&out, "sbx events | grep -m1");
    assert!(started.elapsed() < Duration::from_secs(5), "sbx events outlived its reader");
    let line = stdout(&out);
    assert!(line.contains(&format!("  {}  revoked    route=inference session={}", a.id, a.id)), "{line}");
}

#[test]
fn bad_times_are_refused_and_an_engine_that_goes_away_ends_the_stream_with_exit_1() {
    let w = World::new();
    let out = w.sbx(&["events", "--since", "yesterday-ish"]);
    assert_exit(&out, 2, "events --since garbage");
    assert!(stderr(&out).contains("--since") && stderr(&out).contains("RFC 3339"), "{}", stderr(&out));

    // A docker CLI whose engine goes away after a second: its events stream ends in an error.
    let dir = std::path::Path::new("/tmp").join(format!("sbxt-{}-gone", w.case));
    std::fs::create_dir_all(&dir).unwrap();
    let shim = dir.join("docker");
    std::fs::write(
        &shim,
        "#!/bin/sh\nif [ \"$1\" = events ]; then\n  docker \"$@\" & pid=$!\n  sleep 1; kill $pid\n  \
         echo 'error during connect: unexpected EOF' >&2; exit 1\nfi\nexec docker \"$@\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let started = Instant::now();
    let out = w.sbx_env(&["events"], &[("SBX_DOCKER", shim.to_str().unwrap())]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_exit(&out, 1, "events on an engine that went away");
    assert!(started.elapsed() < Duration::from_secs(10));
    let err = stderr(&out);
    assert!(err.contains("following the engine's events") && err.contains("unexpected EOF"), "{err}");
}

#[test]
fn an_image_label_cannot_fake_a_die_and_gc_reaping_an_expired_sandbox_is_an_event() {
    let w = World::new();
    // docker writes a container's labels over its die's `exitCode` attribute.
    let image = ImageTree::new(&[]).for_case(&w).changes(&["LABEL exitCode=0 signal=0"]).import();
    let t0 = SystemTime::now() - Duration::from_secs(1);
    let all = Events::start(&w, &["--since", &rfc3339(t0)]);
    let out = w.sbx(&["create", "--image", &image.0, "--label", &w.case_label()]);
    assert_success(&out, "create from an image labelled exitCode=0");
    let a = w.adopt(stdout(&out).trim());
    docker_ok(&["kill", &a.id]);
    all.wait_for(&a.id, "died");
    let died = all.of(&a.id).into_iter().find(|v| v["event"] == "died").unwrap();
    assert_eq!(died["exit_code"], 137, "the engine's record, not the image's label: {died}");

    // Expired with its watchdog gone: `sbx gc` says so before it removes it.
    let b = w.create(&["--ttl", "2s"]);
    kill_watchdog_until_expired(&w, &b.id);
    assert_success(&w.sbx(&["gc"]), "sbx gc");
    all.wait_for(&b.id, "destroyed");
    assert_eq!(kinds(&all.of(&b.id)), ["created", "started", "expired", "died", "destroyed"], "{:?}", all.of(&b.id));
    let journal = std::fs::read_to_string(w.state_dir.join("events.jsonl")).unwrap();
    assert!(journal.contains(&format!("\"id\":\"{}\",\"event\":\"expired\"", b.id)), "{journal}");
}

#[test]
fn doctors_probe_sandbox_is_not_an_event() {
    let w = World::new();
    let t0 = SystemTime::now() - Duration::from_secs(1);
    let all = Events::start(&w, &["--since", &rfc3339(t0)]);
    assert_success(&w.sbx(&["doctor"]), "sbx doctor");
    // A sandbox after it: once its events are in, the probe's would be too.
    let sb = w.create(&[]);
    all.wait_for(&sb.id, "started");
    let ids: Vec<Value> = all.lines.lock().unwrap().iter().map(|v| v["id"].clone()).collect();
    assert!(ids.iter().all(|i| *i == sb.id.as_str()), "doctor's probe showed up: {ids:?}");
}

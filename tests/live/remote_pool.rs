//! Warm pools on a remote engine, through sshd on loopback: a
//! claim checks its member with one docker call (not this machine's /proc:
//! on loopback a paused member's process is alive here, and must still not
//! be handed out), the refiller tops the pool up over ssh, and the pool is
//! refused (exit 2, nothing done) by sbx driving another engine.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::remote::{local_paths, sbx, with};
use crate::support::*;

fn pool_dir(w: &World) -> PathBuf {
    w.state_dir.join("pools").join("p")
}

fn members(w: &World, place: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(pool_dir(w).join(place))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.retain(|n| n.starts_with("sbx-"));
    v.sort();
    v
}

/// Wait for the refiller to top the pool up to 2 and let go of its lock.
fn refilled(w: &World, what: &str) {
    let pool = sbx::host::pool::Pool::at(&w.state_dir, "p");
    let done = until(Duration::from_secs(90), || members(w, "ready").len() == 2 && !pool.filling());
    assert!(done.is_some(), "{what}: the refiller did not top the pool up to 2 over ssh: {:?}", members(w, "ready"));
}

/// A `docker` that logs `PPID<US>ARG<US>ARG...` per call (one write) and runs the real one.
struct PidShim {
    dir: PathBuf,
}

impl PidShim {
    fn new(w: &World) -> Self {
        let dir = Path::new("/tmp").join(format!("sbxt-{}-pidshim", w.case));
        std::fs::create_dir_all(&dir).unwrap();
        let script = format!(
            "#!/bin/sh\nline=$(printf '%s\\037' \"$PPID\" \"$@\")\nprintf '%s\\n' \"$line\" >> '{d}/calls'\nexec docker \"$@\"\n",
            d = dir.display()
        );
        std::fs::write(dir.join("docker"), script).unwrap();
        std::fs::set_permissions(dir.join("docker"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        PidShim { dir }
    }

    fn path(&self) -> String {
        self.dir.join("docker").display().to_string()
    }

    /// (caller's pid, argv) of every call.
    fn calls(&self) -> Vec<(u32, Vec<String>)> {
        let log = std::fs::read_to_string(self.dir.join("calls")).unwrap_or_default();
        log.lines()
            .map(|l| {
                let mut parts = l.split('\u{1f}').filter(|a| !a.is_empty()).map(str::to_string);
                (parts.next().and_then(|p| p.parse().ok()).unwrap_or(0), parts.collect())
            })
            .collect()
    }

    fn of(&self, pid: u32) -> Vec<Vec<String>> {
        self.calls().into_iter().filter(|(p, _)| *p == pid).map(|(_, a)| a).collect()
    }
}

impl Drop for PidShim {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// sbx with `env` only and `input` on stdin; returns its pid too.
fn run(w: &World, args: &[&str], env: &[(String, String)], input: &[u8]) -> (u32, Output) {
    let mut cmd = Command::new(SBX);
    cmd.args(w.dir_args()).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for k in ["DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "SBX_CONTEXT", "SBX_SOCKET_DIR", "SBX_STRICT_EGRESS"] {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let mut child = cmd.spawn().expect("spawn sbx");
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    (pid, out)
}

fn is_inspect(a: &[String]) -> bool {
    a.len() == 6 && a[..5] == ["container", "inspect", "--format", "{{json .}}", "--"] && a[5].len() == 64
}

#[test]
fn a_remote_pool_claims_through_one_docker_call_refills_and_stays_on_its_engine() {
    let remote = Remote::start();
    let w = World::new();
    let shim = PidShim::new(&w);
    let env = with(remote.env(), &[("SBX_DOCKER", &shim.path())]);
    let label = w.case_label();

    let out = sbx(&w, &["pool", "create", "p", "--size", "2", "--image", &w.image, "--label", &label], &env);
    assert_success(&out, "pool create over ssh");
    assert_eq!(stdout(&out).trim(), "p");
    assert_eq!(members(&w, "ready").len(), 2, "pool create fills to --size over ssh");
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(pool_dir(&w).join("spec.json")).unwrap()).unwrap();
    assert_eq!(spec["engine"], remote.url(), "the pool records its engine");

    // A claim: one docker call (the member's inspect), and the member answers over the relay.
    let first = members(&w, "ready");
    let at = std::time::Instant::now();
    let (pid, out) = run(&w, &["--json", "create", "--pool", "p", "--session", "task-1", "--ttl", "10m"], &env, b"");
    eprintln!("remote claim: {:?}", at.elapsed());
    assert_success(&out, "claim over ssh");
    let claimed = json(&out)["id"].as_str().unwrap().to_string();
    assert!(first.contains(&claimed), "{claimed} is not one of the ready members {first:?}");
    let own = shim.of(pid);
    assert!(own.len() == 1 && is_inspect(&own[0]), "a remote claim is one inspect of the member: {own:?}");
    let (_, answer) = run(&w, &["connect", &claimed], &env, b"hello\n");
    assert_success(&answer, "connect to the claimed member over ssh");
    assert_eq!(stdout(&answer), "hello\n", "the fixture echoes through the relayed channel");
    refilled(&w, "after a claim");

    // Paused members: alive in this machine's /proc (loopback), yet the engine
    // says they are not running: not handed out, recycled, replaced.
    let paused = members(&w, "ready");
    for id in &paused {
        docker_ok(&["pause", id]);
    }
    let (pid, out) = run(&w, &["--json", "create", "--pool", "p", "--no-fallback"], &env, b"");
    assert_exit(&out, 1, "claim of a pool whose members are paused");
    assert!(stderr(&out).contains("pool_empty"), "{}", stderr(&out));
    assert_eq!(shim.of(pid).len(), 2, "one inspect per member tried: {:?}", shim.of(pid));
    refilled(&w, "after paused members");
    let fresh = members(&w, "ready");
    assert!(fresh.iter().all(|id| !paused.contains(id)), "paused members kept: {fresh:?} {paused:?}");
    for id in &paused {
        assert!(docker(&["inspect", id]).status.code() != Some(0), "the refiller left paused member {id}");
    }

    // A member killed behind sbx's back is not handed out.
    let killed = fresh[0].clone();
    docker_ok(&["kill", &killed]);
    let (_, out) = run(&w, &["create", "--pool", "p"], &env, b"");
    assert_success(&out, "claim with a killed member");
    let second = stdout(&out).trim().to_string();
    assert_ne!(second, killed, "a killed member was handed out");
    assert_eq!(docker_ok(&["inspect", "--format", "{{.State.Status}}", &second]), "running");
    refilled(&w, "after a killed member");

    // Driving the local engine: the remote pool is refused, nothing done.
    let local = vec![("PATH".to_string(), std::env::var("PATH").unwrap_or_default())];
    let before = (w.containers(), members(&w, "ready"));
    for args in [&["create", "--pool", "p"][..], &["pool", "fill", "p"], &["pool", "rm", "p"]] {
        let out = sbx(&w, args, &local);
        assert_exit(&out, 2, &format!("{args:?} against the local engine"));
        let err = stderr(&out);
        assert!(err.contains(&remote.url()) && err.contains("unix:///var/run/docker.sock"), "{err}");
        assert!(err.contains(&format!("DOCKER_HOST={}", remote.url())), "{err}");
    }
    assert_eq!((w.containers(), members(&w, "ready")), before, "a refused command changed something");

    let ls = json(&sbx(&w, &["--json", "pool", "ls"], &env));
    assert_eq!((ls[0]["name"].as_str(), ls[0]["ready"].as_u64()), (Some("p"), Some(2)), "{ls}");

    // pool rm over ssh: the unclaimed go; the claimed are ordinary sandboxes.
    assert_success(&sbx(&w, &["pool", "rm", "p"], &env), "pool rm over ssh");
    assert_eq!(w.containers().len(), 2, "only the two claimed stay");
    assert_success(&sbx(&w, &["destroy", &claimed, &second], &env), "destroy over ssh");
    assert_success(&sbx(&w, &["gc"], &env), "gc over ssh");
    w.assert_nothing_left();
    assert!(!pool_dir(&w).exists(), "pool directory left behind");

    let argvs: Vec<Vec<String>> = shim.calls().into_iter().map(|(_, a)| a).collect();
    assert_eq!(local_paths(&argvs), Vec::<String>::new(), "paths of this machine sent to a remote engine: {argvs:?}");
}

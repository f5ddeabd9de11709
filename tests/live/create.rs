//! sbx create, connect and destroy on the real engine: what a create makes
//! and what ls and inspect report of it, how each way a create fails is
//! reported (a crash at boot, a socket that never comes, a hostile socket, a
//! signal), and that a failed or interrupted create leaves nothing.

use std::process::{Command, Stdio};

use crate::support::*;

fn connect(w: &World, id: &str, input: &[u8]) -> std::process::Output {
    w.sbx_stdin(&["connect", id], input)
}

#[test]
fn create_connect_destroy_round_trip() {
    let w = World::new();
    let sb = w.create(&[]);
    assert!(sb.id.starts_with("sbx-") && sb.id.len() == 16, "stdout is the id alone: {:?}", sb.id);

    let out = connect(&w, &sb.id, b"hello");
    assert_success(&out, "connect");
    assert_eq!(out.stdout, b"hello");

    // Binary-safe, larger than any pipe buffer, with half-close.
    let data: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let out = connect(&w, &sb.id, &data);
    assert_success(&out, "connect (3 MiB)");
    assert!(out.stdout == data, "3 MiB did not come back byte for byte ({} bytes)", out.stdout.len());

    let out = w.sbx(&["destroy", &sb.id]);
    assert_success(&out, "destroy");
    assert!(out.stdout.is_empty());
    w.assert_nothing_left();
    // Idempotent: scripts call it from `trap ... EXIT`.
    assert_success(&w.sbx(&["destroy", &sb.id]), "second destroy");
    let out = w.sbx(&["connect", &sb.id]);
    assert_exit(&out, 1, "connect to a destroyed sandbox");
    assert!(stderr(&out).contains("no sandbox"), "{}", stderr(&out));
}

#[test]
fn boot_crash_is_reported_with_its_logs_and_leaves_nothing() {
    let w = World::new();
    let out = w.try_create(&["--", "crash"]);
    assert_exit(&out, 1, "boot crash");
    let err = stderr(&out);
    assert!(err.contains("exited (code 3)") && err.contains("crashing on purpose"), "{err}");
    assert!(out.stdout.is_empty());
    w.assert_nothing_left();
}

#[test]
fn socket_timeout_fails_and_leaves_nothing() {
    let w = World::new();
    let out = w.try_create(&["--socket-wait", "1s", "--", "sleep"]);
    assert_exit(&out, 1, "socket timeout");
    assert!(stderr(&out).contains("did not bind"), "{}", stderr(&out));
    w.assert_nothing_left();
}

#[test]
fn hostile_sockets_are_refused_at_create() {
    let w = World::new();
    for (args, why) in
        [(vec!["--", "symlink", "/var/run/docker.sock"], "symlink"), (vec!["--", "regular"], "regular file")]
    {
        let out = w.try_create(&args);
        assert_exit(&out, 1, "hostile socket");
        assert!(stderr(&out).contains("hostile") && stderr(&out).contains(why), "{}", stderr(&out));
        w.assert_nothing_left();
    }
}

#[test]
fn socket_wait_zero_returns_once_running() {
    let w = World::new();
    let sb = w.create(&["--socket-wait", "0", "--", "sleep"]);
    assert_eq!(sb.inspect("{{.State.Running}}"), "true");
}

#[test]
fn sigterm_during_create_tears_down_and_exits_143() {
    let w = World::new();
    let label = w.case_label();
    let child = Command::new(SBX)
        .args(w.dir_args())
        .args(["create", "--image", &w.image, "--label", &label, "--", "sleep"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (bounded) until the container exists, i.e. create is waiting for the socket.
    let mut seen = false;
    for _ in 0..300 {
        if !w.containers().is_empty() {
            seen = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(seen, "create never started the container");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, 143, "SIGTERM during create");
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    w.assert_nothing_left();
}

#[test]
fn mounts_state_dir_and_user() {
    let w = World::new();
    let host = w.socket_root.join("data");
    let state = w.socket_root.join("state");
    std::fs::create_dir_all(&host).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    // Not root: a sandbox is never the caller's uid, so another uid gets
    // the directories' write permission instead of their ownership.
    let root = nix::unistd::geteuid().is_root();
    let me = nix::unistd::geteuid().as_raw();
    let uid = if me == 1000 { 1001 } else { 1000 };
    for d in [&host, &state] {
        if root {
            nix::unistd::chown(d, Some(nix::unistd::Uid::from_raw(uid)), Some(nix::unistd::Gid::from_raw(uid)))
                .unwrap();
        } else {
            std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        }
    }
    let ro = format!("{}:/data", host.display());
    let rw = format!("{}:/work", host.display());
    let user = uid.to_string();
    let sb = w.create(&["--user", &user, "--ro", &ro, "--rw", &rw, "--state-dir", state.to_str().unwrap()]);
    assert!(stdout(&sb.exec(&["status"])).contains(&format!("Uid:\t{uid}")));
    assert_exit(&sb.exec(&["write", "/data/x"]), 1, "write to a --ro mount");
    assert_success(&sb.exec(&["write", "/work/x"]), "write to a --rw mount");
    assert_success(&sb.exec(&["write", "/state/y"]), "write to --state-dir");
    assert_success(&sb.exec(&["write", "/tmp/y"]), "write /tmp as uid 1000");
    assert!(host.join("x").exists() && state.join("y").exists());
    // Root gives the socket directory away; otherwise it is the caller's marker directory.
    let md = std::fs::metadata(w.socket_root.join(&sb.id)).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&md), if root { uid } else { me });
    drop(sb);
    std::fs::remove_dir_all(&host).unwrap();
    std::fs::remove_dir_all(&state).unwrap();
    w.assert_nothing_left();
}

#[test]
fn ls_and_inspect_report_the_record() {
    let w = World::new();
    let sb = w.create(&["--session", "agent-7"]);
    let out = w.sbx(&["ls"]);
    assert_success(&out, "ls");
    let line = stdout(&out).lines().find(|l| l.starts_with(&sb.id)).map(str::to_string).expect("ls lists the sandbox");
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cols[..5], [sb.id.as_str(), "agent-7", "2", "runc", "-"]);
    let rec: serde_json::Value = serde_json::from_slice(&w.sbx(&["inspect", &sb.id]).stdout).unwrap();
    assert_eq!(rec["session"], "agent-7");
    assert_eq!(rec["image"], w.image.as_str());
    let socket = if nix::unistd::geteuid().is_root() {
        w.socket_root.join(&sb.id).join("sandbox.sock").display().to_string()
    } else {
        "/run/sandbox/sandbox.sock".to_string()
    };
    assert_eq!(rec["socket"], socket);
    assert_eq!(rec["user"], format!("{0}:{0}", sb.uid()), "the uid sbx chose, as docker has it");
}

/// The pid create reads the mounts of (`host::init_pid`) is the one docker
/// reports, found through the container's own cgroup listing on this
/// engine; a `docker exec`'s process (its parent the shim, outside) makes
/// two candidates, and then docker is asked.
#[test]
fn the_init_pid_read_from_the_kernel_is_docker_s() {
    let w = World::new();
    let sb = w.create(&[]);
    let line = sb.inspect("{{.Id}} {{.State.Pid}}");
    let (cid, pid) = line.split_once(' ').unwrap();
    let cgroups = std::path::Path::new("/sys/fs/cgroup");
    let listed = ["pids/docker", "docker"].iter().any(|d| cgroups.join(d).join(cid).join("cgroup.procs").exists())
        || ["pids/system.slice", "system.slice"]
            .iter()
            .any(|d| cgroups.join(d).join(format!("docker-{cid}.scope")).join("cgroup.procs").exists());
    assert!(listed, "no cgroup listing of {cid} in docker's layouts: the scan of /proc would be all that is tested");
    let found = sbx::host::init_pid::container_init(std::path::Path::new("/proc"), cgroups, cid);
    assert_eq!(found, Some(pid.parse().unwrap()), "docker says {pid}");
    assert!(docker(&["exec", "-d", &sb.id, "/bin/fixture", "sleep"]).status.success());
    let two = until(std::time::Duration::from_secs(10), || {
        sbx::host::init_pid::container_init(std::path::Path::new("/proc"), cgroups, cid).is_none()
    });
    assert!(two.is_some(), "a docker exec's process is a second candidate");
}

//! Live tests of the workbench commands on hardened sandboxes made from the
//! fixture image (no shell, no coreutils, no tar): read-only root, no
//! network, no capabilities, a non-root user.

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};

use crate::support::*;

fn sbx_in(w: &World, args: &[&str], input: &[u8]) -> Output {
    w.sbx_stdin(args, input)
}

fn blob(n: usize) -> Vec<u8> {
    (0..n as u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect()
}

#[test]
fn exec_passes_exit_codes_and_keeps_streams_apart() {
    let w = World::new();
    let sb = w.create(&[]);
    let out = w.sbx(&["exec", &sb.id, "--", "/bin/fixture", "both"]);
    assert_exit(&out, 5, "the command's own exit code");
    assert_eq!(stdout(&out), "to stdout\n");
    assert_eq!(stderr(&out), "to stderr\n");
    assert_exit(&w.sbx(&["exec", &sb.id, "--", "/bin/fixture", "write", "/tmp/x"]), 0, "success");
    assert_exit(&w.sbx(&["exec", &sb.id, "--", "/no/such/program"]), 127, "not found");
    assert_exit(&w.sbx(&["exec", &sb.id, "--", "/tmp"]), 126, "not executable");
    // argv passes through unchanged: no shell anywhere.
    let out = w.sbx(&["exec", "-e", "A=1", "-w", "/tmp", &sb.id, "--", "/bin/fixture", "write", "$(reboot); x"]);
    assert_success(&out, "odd argv");
    assert_success(&sb.exec(&["exists", "/tmp/$(reboot); x"]), "the file with the literal name");
    assert!(stdout(&w.sbx(&["exec", "-u", "1000", &sb.id, "--", "/bin/fixture", "status"])).contains("Uid:\t1000"));
    // Binary stdin and stdout, byte for byte.
    let data = blob(3 << 20);
    let out = sbx_in(&w, &["exec", "-i", &sb.id, "--", "/bin/fixture", "cat"], &data);
    assert_success(&out, "exec -i cat");
    assert!(out.stdout == data, "exec -i changed the bytes ({} of {})", out.stdout.len(), data.len());
    assert_exit(&w.sbx(&["exec", "sbx-000000000000", "--", "/bin/fixture", "status"]), 1, "no such sandbox");
}

#[test]
fn background_processes_are_listed_logged_and_killed_with_their_children() {
    let w = World::new();
    let sb = w.create(&[]);
    let out = w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", "spawn-children"]);
    assert_success(&out, "exec -d");
    let handle = stdout(&out).trim().to_string();
    assert!(handle.starts_with('p') && handle.len() == 9, "{handle}");
    let top = || docker_ok(&["top", &sb.id]).lines().filter(|l| l.contains("fixture sleep")).count();
    let mut started = false;
    for _ in 0..100 {
        if stdout(&w.sbx(&["logs", &sb.id, &handle])).contains("started") {
            started = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(started, "the background process's output never showed");
    assert_eq!(top(), 2, "two children running");
    let ps: serde_json::Value = serde_json::from_slice(&w.sbx(&["ps", "--json", &sb.id]).stdout).unwrap();
    let me = ps.as_array().unwrap().iter().find(|p| p["handle"] == handle.as_str()).expect("ps lists it");
    assert_eq!(me["running"], true);
    assert_eq!(me["command"], serde_json::json!(["/bin/fixture", "spawn-children"]));
    assert_exit(&w.sbx(&["kill", &sb.id, &handle, "--signal", "BOGUS"]), 2, "bad signal name");
    assert_success(&w.sbx(&["kill", &sb.id, &handle]), "kill");
    let mut exited = serde_json::Value::Null;
    for _ in 0..100 {
        let ps: serde_json::Value = serde_json::from_slice(&w.sbx(&["ps", "--json", &sb.id]).stdout).unwrap();
        exited = ps.as_array().unwrap().iter().find(|p| p["handle"] == handle.as_str()).unwrap().clone();
        if exited["running"] == false {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Issue 10 item 9: ended by TERM, not "exit 143".
    assert_eq!(
        (&exited["exit_code"], &exited["signal"]),
        (&serde_json::Value::Null, &serde_json::json!(15)),
        "{exited}"
    );
    let table = stdout(&w.sbx(&["ps", &sb.id]));
    assert!(table.lines().any(|l| l.contains(&handle) && l.contains("killed by TERM")), "{table}");
    // ... and its state is not in the sandbox's /tmp (issue 10 item 9).
    assert_exit(&sb.exec(&["exists", "/tmp/.sbx-bg"]), 1, "no .sbx-bg in /tmp");
    assert_success(&sb.exec(&["exists", &format!("/run/sbx-bg/{handle}/log")]), "the state in /run/sbx-bg");
    assert_eq!(top(), 0, "the children died with it");
    // A command that cannot start says so at once.
    let out = w.sbx(&["exec", "-d", &sb.id, "--", "/no/such/program"]);
    assert_exit(&out, 1, "exec -d of a missing program");
    assert!(stderr(&out).contains("cannot run"), "{}", stderr(&out));
    // The sandbox's own output.
    assert!(stderr(&w.sbx(&["logs", &sb.id])).contains("listening on /run/sandbox/sandbox.sock"));
}

#[test]
fn cp_both_ways_on_a_read_only_sandbox_keeps_bytes_and_modes() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let sb = w.create(&[]);
    let src = w.socket_root.join("src");
    std::fs::create_dir_all(src.join("tree/sub")).unwrap();
    let data = blob(2 << 20);
    std::fs::write(src.join("tree/sub/data.bin"), &data).unwrap();
    std::fs::set_permissions(src.join("tree/sub/data.bin"), std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::write(src.join("tree/run.sh"), b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(src.join("tree/run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();

    for dest in ["/tmp", "/state"] {
        assert_success(&w.sbx(&["cp", src.join("tree").to_str().unwrap(), &format!("{}:{dest}", sb.id)]), "cp in");
        assert!(sb.exec(&["read", &format!("{dest}/tree/sub/data.bin")]).stdout == data, "bytes in {dest}");
        let back = w.socket_root.join(format!("back{}", dest.replace('/', "-")));
        assert_success(&w.sbx(&["cp", &format!("{}:{dest}/tree", sb.id), back.to_str().unwrap()]), "cp out");
        assert!(std::fs::read(back.join("sub/data.bin")).unwrap() == data);
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&back.join("sub/data.bin")), 0o640);
        assert_eq!(mode(&back.join("run.sh")), 0o755);
        std::fs::remove_dir_all(&back).unwrap();
    }
    // A single file to a new name.
    assert_success(
        &w.sbx(&["cp", src.join("tree/run.sh").to_str().unwrap(), &format!("{}:/tmp/renamed.sh", sb.id)]),
        "cp file",
    );
    assert_eq!(sb.exec(&["read", "/tmp/renamed.sh"]).stdout, b"#!/bin/sh\n");
    assert_exit(&w.sbx(&["cp", "/nonexistent-sbx", &format!("{}:/tmp", sb.id)]), 1, "missing source");
    assert_exit(&w.sbx(&["cp", "a", "b"]), 2, "no sandbox side");
    assert_exit(&w.sbx(&["cp", "a", &format!("{}:relative", sb.id)]), 2, "relative sandbox path");
    std::fs::remove_dir_all(&src).unwrap();
}

#[test]
fn a_symlink_planted_in_the_sandbox_is_never_followed() {
    let w = World::new();
    let sb = w.create(&[]);
    let host_secret = w.socket_root.join("secret");
    std::fs::write(&host_secret, b"host only").unwrap();
    // Out: links come back as links, never as the host files they name.
    sb.exec(&["mkdir", "/tmp/box"]);
    assert_success(&sb.exec(&["ln", host_secret.to_str().unwrap(), "/tmp/box/secret"]), "plant a link to a host path");
    assert_success(&sb.exec(&["ln", "/", "/tmp/box/root"]), "plant a link to /");
    let out_dir = w.socket_root.join("out");
    assert_success(&w.sbx(&["cp", &format!("{}:/tmp/box", sb.id), out_dir.to_str().unwrap()]), "cp out");
    assert_eq!(std::fs::read_link(out_dir.join("secret")).unwrap(), host_secret, "a link, not the host file's content");
    assert!(std::fs::symlink_metadata(out_dir.join("root")).unwrap().file_type().is_symlink());
    // In: a destination reached through a planted link is refused.
    assert_success(&sb.exec(&["ln", "/state", "/tmp/to-state"]), "plant a link inside the sandbox");
    let f = w.socket_root.join("f");
    std::fs::write(&f, b"x").unwrap();
    let out = w.sbx(&["cp", f.to_str().unwrap(), &format!("{}:/tmp/to-state/f", sb.id)]);
    assert_exit(&out, 1, "cp through a planted link");
    assert!(stderr(&out).contains("symlink"), "{}", stderr(&out));
    assert_exit(&sb.exec(&["exists", "/state/f"]), 1, "nothing written through the link");
    assert_eq!(std::fs::read(&host_secret).unwrap(), b"host only");
}

#[test]
fn ports_on_a_sandbox_without_network() {
    let w = World::new();
    let sb = w.create(&[]);
    assert_eq!(sb.inspect("{{.HostConfig.NetworkMode}}"), "none");
    let out = w.sbx(&["wait-port", &sb.id, "7000", "--timeout", "300ms"]);
    assert_exit(&out, 1, "nothing listens yet");
    assert_success(&w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", "tcp-echo", "7000"]), "start a listener");
    assert_success(&w.sbx(&["wait-port", &sb.id, "7000", "--timeout", "10s"]), "wait-port sees it");

    let mut pf = Forward::start(&w, &sb.id, "7000");
    let local = pf.local.clone();
    assert!(local.starts_with("127.0.0.1:"), "listens on loopback only: {local}");
    let data = blob(3 << 20);
    for _ in 0..2 {
        let mut s = std::net::TcpStream::connect(&local).unwrap();
        let mut w2 = s.try_clone().unwrap();
        let d = data.clone();
        let t = std::thread::spawn(move || {
            w2.write_all(&d).unwrap();
            w2.shutdown(std::net::Shutdown::Write).unwrap();
        });
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        t.join().unwrap();
        assert!(got == data, "port-forward changed the bytes ({} of {})", got.len(), data.len());
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pf.child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let status = pf.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "port-forward ends cleanly on Ctrl-C");
    assert_exit(&w.sbx(&["port-forward", &sb.id, "0:0"]), 2, "bad port");
}

#[test]
fn stats_move_when_the_sandbox_allocates() {
    let w = World::new();
    let sb = w.create(&["--memory", "256"]);
    let read = || -> serde_json::Value { serde_json::from_slice(&w.sbx(&["stats", "--json", &sb.id]).stdout).unwrap() };
    let before = read()[0].clone();
    assert_eq!(before["memory_limit_bytes"], 256u64 << 20);
    assert!(before["pids"].as_u64().unwrap() >= 1);
    assert_success(&w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", "alloc", "100"]), "allocate");
    let mut after = before.clone();
    for _ in 0..50 {
        after = read()[0].clone();
        if after["memory_bytes"].as_u64().unwrap() > before["memory_bytes"].as_u64().unwrap() + (80 << 20) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        after["memory_bytes"].as_u64().unwrap() > before["memory_bytes"].as_u64().unwrap() + (80 << 20),
        "{before} -> {after}"
    );
    assert!(after["pids"].as_u64().unwrap() > before["pids"].as_u64().unwrap());
    assert!(stdout(&w.sbx(&["stats", &sb.id])).contains(&sb.id));
}

#[test]
fn backup_then_restore_into_a_fresh_sandbox_gives_the_same_tree() {
    let w = World::new();
    let a = w.create(&[]);
    let src = w.socket_root.join("ws");
    std::fs::create_dir_all(src.join("workspace/deep/er")).unwrap();
    std::fs::write(src.join("workspace/deep/er/file.bin"), blob(100_000)).unwrap();
    std::fs::write(src.join("workspace/top.txt"), b"top").unwrap();
    std::os::unix::fs::symlink("top.txt", src.join("workspace/link")).unwrap();
    assert_success(
        &w.sbx(&["cp", src.join("workspace").to_str().unwrap(), &format!("{}:/state", a.id)]),
        "seed the workspace",
    );
    let tar = w.sbx(&["backup", &a.id]);
    assert_success(&tar, "backup");
    assert!(tar.stdout.len() > 100_000);

    let b = w.create(&[]);
    // restore replaces: something already there disappears.
    sbx_in(&w, &["exec", &b.id, "--", "/bin/fixture", "mkdir", "/state/workspace/old"], b"");
    assert_success(&sbx_in(&w, &["restore", &b.id], &tar.stdout), "restore");
    assert_exit(&b.exec(&["exists", "/state/workspace/old"]), 1, "restore replaced, not merged");
    let again = w.sbx(&["backup", &b.id]);
    assert!(again.stdout == tar.stdout, "the restored tree differs");
    let back = w.socket_root.join("back");
    assert_success(&w.sbx(&["cp", &format!("{}:/state/workspace", b.id), back.to_str().unwrap()]), "cp out");
    assert_eq!(std::fs::read(back.join("deep/er/file.bin")).unwrap(), blob(100_000));
    assert_eq!(std::fs::read_link(back.join("link")).unwrap(), std::path::PathBuf::from("top.txt"));

    // An archive with an entry that escapes is refused before anything changes.
    let mut evil = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(1);
    h.set_mode(0o644);
    h.as_old_mut().name[..9].copy_from_slice(b"../escape");
    h.set_cksum();
    evil.append(&h, &b"x"[..]).unwrap();
    let out = sbx_in(&w, &["restore", &b.id], &evil.into_inner().unwrap());
    assert_exit(&out, 2, "an escaping archive");
    assert!(stderr(&out).contains("escape"), "{}", stderr(&out));
    assert_success(&b.exec(&["exists", "/state/workspace/top.txt"]), "the workspace is untouched");
}

#[test]
fn shell_says_plainly_when_the_image_has_none() {
    let w = World::new();
    let sb = w.create(&[]);
    let out = w.sbx(&["shell", &sb.id]);
    assert_exit(&out, 1, "shell on an image without one");
    assert!(stderr(&out).contains("has no shell") && stderr(&out).contains("sbx exec"), "{}", stderr(&out));
}

#[test]
fn a_persistent_session_survives_destroy_and_recreate() {
    let w = World::new();
    let session = format!("{}-s", w.case);
    let volume = format!("sbx-state-{session}");
    let a = w.create(&["--session", &session, "--persist"]);
    assert_success(&a.exec(&["write", "/state/kept"]), "write to the persistent /state");
    // One writer at a time.
    let out = w.try_create(&["--session", &session, "--persist"]);
    assert_exit(&out, 1, "a second sandbox on a volume in use");
    assert!(stderr(&out).contains("in use by running sandbox"), "{}", stderr(&out));
    let vols: serde_json::Value = serde_json::from_slice(&w.sbx(&["volumes", "--json"]).stdout).unwrap();
    let v = vols.as_array().unwrap().iter().find(|v| v["name"] == volume.as_str()).expect("volumes lists it");
    assert_eq!(v["in_use_by"], serde_json::json!([a.id]));
    assert_success(&w.sbx(&["destroy", &a.id]), "destroy keeps the volume");
    assert_success(&docker(&["volume", "inspect", &volume]), "the volume outlives its sandbox");

    let b = w.create(&["--session", &session, "--persist"]);
    assert_success(&b.exec(&["exists", "/state/kept"]), "the next sandbox continues where the last left off");
    assert_success(&w.sbx(&["destroy", "--purge", &b.id]), "destroy --purge");
    assert!(!docker(&["volume", "inspect", &volume]).status.success(), "--purge removes the volume");
    assert!(!w.state_dir.join("volumes").join(&session).exists(), "and its directory");
    assert_exit(&w.sbx(&["create", "--image", &w.image, "--persist"]), 2, "--persist without --session");
}

#[test]
fn clone_and_setup_prepare_the_workspace_and_a_failing_setup_leaves_nothing() {
    let w = World::new();
    let repo = std::path::PathBuf::from("/tmp").join(format!("sbxt-{}-repo", w.case));
    git(&["init", "-q", repo.to_str().unwrap()]);
    std::fs::write(repo.join("README"), b"from the repo\n").unwrap();
    git(&["-C", repo.to_str().unwrap(), "add", "."]);
    git(&["-C", repo.to_str().unwrap(), "commit", "-qm", "one"]);
    git(&["-C", repo.to_str().unwrap(), "tag", "v1"]);
    let session = format!("{}-s", w.case);
    let url = format!("file://{}#v1", repo.display());
    let out = w.try_create(&[
        "--session",
        &session,
        "--persist",
        "--clone",
        &url,
        "--setup",
        "/bin/fixture write /state/workspace/setup-ran",
        "--setup",
        "/bin/fixture both",
    ]);
    assert_exit(&out, 1, "the second setup command exits 5");
    assert!(stderr(&out).contains("setup command `/bin/fixture both` failed (exit 5)"), "{}", stderr(&out));
    assert!(stderr(&out).contains("to stderr"), "setup output is shown: {}", stderr(&out));
    w.assert_nothing_left();

    let sb = w.create(&[
        "--session",
        &session,
        "--persist",
        "--clone",
        &url,
        "--setup",
        "/bin/fixture write /state/workspace/setup-ran",
    ]);
    assert_eq!(sb.exec(&["read", "/state/workspace/README"]).stdout, b"from the repo\n");
    assert_success(&sb.exec(&["exists", "/state/workspace/setup-ran"]), "setup ran in the ready sandbox");
    assert_exit(&w.sbx(&["create", "--image", &w.image, "--clone", "ext::sh -c id"]), 2, "git's ext:: transport");
    assert_exit(&w.sbx(&["create", "--image", &w.image, "--clone", &url]), 2, "--clone without a host-backed /state");
    assert_exit(&w.sbx(&["create", "--image", &w.image, "--setup", "unbalanced 'quote"]), 2, "bad --setup");
    assert_success(&w.sbx(&["destroy", "--purge", &sb.id]), "purge");
    std::fs::remove_dir_all(&repo).unwrap();
}

#[test]
fn logs_follow_ends_when_the_process_does() {
    let w = World::new();
    let sb = w.create(&[]);
    let out = w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", "both"]);
    let handle = stdout(&out).trim().to_string();
    let out = w.sbx(&["logs", "-f", &sb.id, &handle]);
    assert_success(&out, "logs -f");
    let text = stdout(&out);
    assert!(text.contains("to stdout") && text.contains("to stderr"), "combined output: {text}");
    let out = w.sbx(&["logs", "--tail", "1", &sb.id, &handle]);
    assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
}

#[test]
fn shell_uses_the_image_shell_and_exec_t_gets_a_terminal() {
    let w = World::new();
    // An image whose /bin/sh is the fixture acting as a shell.
    let ctx = std::path::PathBuf::from("/tmp").join(format!("sbxt-{}-ctx", w.case));
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::copy(fixture_binary(), ctx.join("sh")).unwrap();
    std::fs::write(ctx.join("Dockerfile"), format!("FROM {}\nCOPY sh /bin/sh\nLABEL {}\n", w.image, w.case_label()))
        .unwrap();
    let out = Command::new("docker").args(["build", "-q", ctx.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let image = String::from_utf8_lossy(&out.stdout).trim().to_string();
    std::fs::remove_dir_all(&ctx).unwrap();
    let label = w.case_label();
    let out = w.sbx(&["create", "--image", &image, "--label", &label]);
    assert_success(&out, "create from the image with a shell");
    let sb = w.adopt(stdout(&out).trim());

    let out = sbx_in(&w, &["shell", &sb.id], b"echo hi\n");
    assert_success(&out, "sbx shell");
    assert_eq!(stdout(&out), "fixture-shell tty=false\necho hi\n");

    // exec -t under a real terminal (script(1) provides one).
    let cmd = format!(
        "{SBX} --socket-dir {} --data-dir {} exec -t {} -- /bin/fixture tty",
        w.socket_root.display(),
        w.state_dir.display(),
        sb.id
    );
    let out = Command::new("timeout")
        .args(["30", "script", "-qec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("tty=true"), "{}", String::from_utf8_lossy(&out.stdout));
    let out = w.sbx(&["exec", &sb.id, "--", "/bin/fixture", "tty"]);
    assert_eq!(stdout(&out), "tty=false\n", "no terminal without -t");
    drop(sb);
    // --no-prune: the untagged fixture image it was built from stays.
    let _ = docker(&["rmi", "--no-prune", &image]);
}

#[test]
fn stats_watch_refreshes_until_ctrl_c() {
    let w = World::new();
    let sb = w.create(&[]);
    let mut child = Command::new(SBX)
        .args(w.dir_args())
        .args(["stats", "--watch", "--json", &sb.id])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    for _ in 0..2 {
        let line = lines.next().unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v[0]["id"], sb.id.as_str());
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0), "ends cleanly on Ctrl-C");
}

/// `sbx port-forward ID 0:PORT` in the background; its local address and the child (killed on drop).
struct Forward {
    child: std::process::Child,
    local: String,
}

impl Forward {
    fn start(w: &World, id: &str, port: &str) -> Forward {
        let mut child = Command::new(SBX)
            .args(w.dir_args())
            .args(["port-forward", id, &format!("0:{port}")])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut line).unwrap();
        let local = line.split_whitespace().next().unwrap().to_string();
        Forward { child, local }
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run a Python client with a hard limit, so a relay that holds data back
/// fails the test instead of hanging it.
fn python(script: &str, args: &[&str]) -> Output {
    Command::new("timeout")
        .args(["-k", "5", "40", "python3", "-c", script])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("spawn python3")
}

const KEEP_ALIVE: &str = r#"
import http.client, sys
host, port = sys.argv[1].rsplit(":", 1)
c = http.client.HTTPConnection(host, int(port), timeout=10)
for path in ["/first", "/second"]:
    c.request("GET", path)
    r = c.getresponse()
    print(r.status, r.read().decode())
"#;

const BANNER_THEN_LINES: &str = r#"
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
f = s.makefile("rwb", buffering=0)
print(f.readline().decode().strip())
for word in ["one", "two", "three"]:
    s.sendall(word.encode() + b"\n")
    print(f.readline().decode().strip())
"#;

const LINE_BY_LINE: &str = r#"
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
for word in ["alpha", "beta", "gamma"]:
    s.sendall(word.encode() + b"\n")
    got = b""
    while not got.endswith(b"\n"):
        chunk = s.recv(100)
        if not chunk:
            break
        got += chunk
    print(got.decode().strip())
"#;

#[test]
fn port_forward_is_interactive_keep_alive_banner_and_line_by_line() {
    // Issue 10.1: nothing came back until the client half-closed. Clients
    // here never half-close: each waits for the answer before going on.
    let w = World::new();
    let sb = w.create(&[]);
    for (mode, port) in [("http", "7101"), ("banner", "7102"), ("tcp-echo", "7103")] {
        assert_success(&w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", mode, port]), mode);
        assert_success(&w.sbx(&["wait-port", &sb.id, port, "--timeout", "10s"]), "wait-port");
    }
    let http = Forward::start(&w, &sb.id, "7101");
    let out = python(KEEP_ALIVE, &[&http.local]);
    assert_success(&out, "two requests over one keep-alive connection");
    assert_eq!(stdout(&out), "200 /first\n200 /second\n");

    let banner = Forward::start(&w, &sb.id, "7102");
    let out = python(BANNER_THEN_LINES, &[&banner.local]);
    assert_success(&out, "a server that speaks first");
    assert_eq!(stdout(&out), "220 fixture\n250 one\n250 two\n250 three\n");

    let echo = Forward::start(&w, &sb.id, "7103");
    let out = python(LINE_BY_LINE, &[&echo.local]);
    assert_success(&out, "a line protocol answered line by line");
    assert_eq!(stdout(&out), "alpha\nbeta\ngamma\n");
    // curl, an ordinary client, gets its answer without half-closing.
    let out = Command::new("curl")
        .args(["-sS", "-m", "15", &format!("http://{}/curl", http.local), &format!("http://{}/again", http.local)])
        .output()
        .expect("spawn curl");
    assert_success(&out, "curl, two URLs on one connection");
    assert_eq!(stdout(&out), "/curl/again");
}

const CONNECT_LINES: &str = r#"
import subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
for word in ["alpha", "beta", "gamma"]:
    p.stdin.write(word.encode() + b"\n")
    p.stdin.flush()
    print(p.stdout.readline().decode().strip())
p.stdin.close()
print("exit", p.wait(timeout=10))
"#;

#[test]
fn connect_is_interactive_line_by_line() {
    let w = World::new();
    let sb = w.create(&[]);
    let mut args: Vec<String> = vec![SBX.to_string()];
    args.extend(w.dir_args().into_iter().map(|a| a.into_string().unwrap()));
    args.extend(["connect".to_string(), sb.id.clone()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = python(CONNECT_LINES, &argv);
    assert_success(&out, "sbx connect driven line by line");
    assert_eq!(stdout(&out), "alpha\nbeta\ngamma\nexit 0\n");
}

#[test]
fn connect_gives_up_on_a_socket_whose_backlog_the_sandbox_keeps_full() {
    // Issue 9 finding 11: connect(2) blocks while the accept queue is full,
    // and the sandbox decides whether it ever empties.
    let w = World::new();
    let sb = w.create(&["--", "full-backlog"]);
    let mut full = false;
    for _ in 0..100 {
        if stdout(&docker(&["logs", &sb.id])).contains("full") {
            full = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(full, "the sandbox never filled its backlog");
    // A hard limit on the test side: a hang fails the test, it does not hang the suite.
    let connect = |extra: &[&str]| {
        let started = std::time::Instant::now();
        let out = Command::new("timeout")
            .args(["-k", "2", "25"])
            .arg(SBX)
            .args(w.dir_args())
            .arg("connect")
            .args(extra)
            .arg(&sb.id)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out, started.elapsed())
    };
    let (out, took) = connect(&["--timeout", "2s"]);
    assert_exit(&out, 1, "connect to a full backlog");
    assert!(stderr(&out).contains("did not accept the connection within 2s"), "{}", stderr(&out));
    assert!(took < std::time::Duration::from_secs(8), "took {took:?}");
    let (out, took) = connect(&[]);
    assert_exit(&out, 1, "connect with the default deadline");
    assert!(stderr(&out).contains("within 10s"), "{}", stderr(&out));
    assert!(took < std::time::Duration::from_secs(18), "took {took:?}");
    assert_exit(&w.sbx(&["connect", "--timeout", "soon", &sb.id]), 2, "a bad duration");
}

#[test]
fn stopping_exec_ends_the_command_in_the_sandbox() {
    // Issue 10.4: SIGINT/SIGTERM/SIGHUP ended sbx at once and left the
    // command running. Now sbx passes the signal on, waits briefly, then
    // SIGKILLs it ("stubborn" ignores all three), and exits 128+n.
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};
    let w = World::new();
    let sb = w.create(&[]);
    let running = |what: &str| docker_ok(&["top", &sb.id]).lines().filter(|l| l.contains(what)).count();
    let cases = [
        (Signal::SIGTERM, 143, "sleep", false),
        // As a terminal's Ctrl-C: the whole foreground group, docker CLI included.
        (Signal::SIGINT, 130, "stubborn", true),
        (Signal::SIGHUP, 129, "stubborn", false),
        (Signal::SIGINT, 130, "sleep", false),
    ];
    for (sig, code, mode, group) in cases {
        let what = format!("fixture {mode}");
        let mut child = Command::new(SBX)
            .args(w.dir_args())
            .args(["exec", &sb.id, "--", "/bin/fixture", mode])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let started = Instant::now();
        while running(&what) == 0 {
            assert!(started.elapsed() < Duration::from_secs(15), "{what} never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        let pid = child.id() as i32;
        kill(Pid::from_raw(if group { -pid } else { pid }), sig).unwrap();
        let sent = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if sent.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                panic!("sbx exec did not end within 20s of {sig}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(code), "sbx exec after {sig} ({what}): {status:?}");
        let mut left = running(&what);
        while left > 0 && sent.elapsed() < Duration::from_secs(8) {
            std::thread::sleep(Duration::from_millis(100));
            left = running(&what);
        }
        assert_eq!(left, 0, "{what} still runs in the sandbox after {sig}");
    }
}

/// Issue 10 item 9: `sbx stats MISSING LIVE` named the live sandbox as
/// missing too (and showed nothing). The live one is shown; only the
/// missing ones are reported (exit 1), whether never made or removed
/// behind sbx's back.
#[test]
fn stats_of_missing_and_live_sandboxes_reports_only_the_missing() {
    let w = World::new();
    let live = w.create(&[]);
    let gone = w.create(&[]);
    docker_ok(&["rm", "-f", "-v", &gone.id]);
    let never = "sbx-0000deadbeef";
    for missing in [never, gone.id.as_str()] {
        let out = w.sbx(&["stats", "--json", missing, &live.id]);
        assert_exit(&out, 1, "stats with a missing sandbox");
        let shown: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the live one as JSON");
        assert_eq!(shown.as_array().map(Vec::len), Some(1), "{shown}");
        assert_eq!(shown[0]["id"], live.id.as_str(), "{shown}");
        let err = stderr(&out);
        assert!(err.contains(missing), "{err}");
        assert!(!err.contains(&live.id), "the live sandbox is not missing: {err}");
    }
}

/// Issue 10 item 9: backup tars had mtime 0 and uid 0 on every entry. The
/// files' times and modes go through cp in, backup, restore and cp out;
/// owners are 0 on purpose (see the README).
#[test]
fn backup_keeps_times_and_modes() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let w = World::new();
    let a = w.create(&[]);
    let src = w.socket_root.join("times/workspace");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    for (f, mode) in [("a.txt", 0o640), ("sub/run.sh", 0o750)] {
        std::fs::write(src.join(f), b"data").unwrap();
        std::fs::set_permissions(src.join(f), std::fs::Permissions::from_mode(mode)).unwrap();
        std::fs::File::options().write(true).open(src.join(f)).unwrap().set_modified(old).unwrap();
    }
    assert_success(&w.sbx(&["cp", src.to_str().unwrap(), &format!("{}:/state", a.id)]), "seed");
    let tar = w.sbx(&["backup", &a.id]);
    assert_success(&tar, "backup");
    let entries = |data: &[u8]| -> Vec<(String, u32, u64, u64)> {
        tar::Archive::new(data)
            .entries()
            .unwrap()
            .map(|e| {
                let h = e.unwrap().header().clone();
                (
                    h.path().unwrap().display().to_string(),
                    h.mode().unwrap() & 0o7777,
                    h.mtime().unwrap(),
                    h.uid().unwrap(),
                )
            })
            .collect()
    };
    let got = entries(&tar.stdout);
    let file = |n: &str| got.iter().find(|e| e.0 == n).cloned().unwrap_or_else(|| panic!("{n} in {got:?}"));
    assert_eq!(file("a.txt"), ("a.txt".into(), 0o640, 1_600_000_000, 0));
    assert_eq!(file("sub/run.sh"), ("sub/run.sh".into(), 0o750, 1_600_000_000, 0));
    assert!(got.iter().all(|e| e.2 > 0), "no entry has mtime 0: {got:?}");
    // Restored and copied out, the times are still there.
    let b = w.create(&[]);
    assert_success(&sbx_in(&w, &["restore", &b.id], &tar.stdout), "restore");
    assert_eq!(entries(&w.sbx(&["backup", &b.id]).stdout), got, "restore kept times and modes");
    let back = w.socket_root.join("times-back");
    assert_success(&w.sbx(&["cp", &format!("{}:/state/workspace", b.id), back.to_str().unwrap()]), "cp out");
    let md = std::fs::metadata(back.join("sub/run.sh")).unwrap();
    assert_eq!((md.mtime(), md.mode() & 0o7777), (1_600_000_000, 0o750));
}

/// Issue 10 item 9: `sbx cp ID:/path -` failed with "writing -: is outside
/// .". `-` is a tar stream, as with `docker cp`: out on stdout (entries
/// named from the source's own name), in from stdin (checked whole before
/// anything changes, extracted into the existing directory).
#[test]
fn cp_dash_streams_tar_both_ways() {
    let w = World::new();
    let sb = w.create(&[]);
    let src = w.socket_root.join("tarsrc/dir");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("sub/f.bin"), blob(70_000)).unwrap();
    std::os::unix::fs::symlink("sub/f.bin", src.join("link")).unwrap();
    assert_success(&w.sbx(&["cp", src.to_str().unwrap(), &format!("{}:/tmp", sb.id)]), "seed");
    let out = w.sbx(&["cp", &format!("{}:/tmp/dir", sb.id), "-"]);
    assert_success(&out, "cp ID:/tmp/dir -");
    let mut names = Vec::new();
    let mut data = Vec::new();
    for e in tar::Archive::new(out.stdout.as_slice()).entries().unwrap() {
        let mut e = e.unwrap();
        let n = e.path().unwrap().display().to_string();
        if n == "dir/sub/f.bin" {
            std::io::Read::read_to_end(&mut e, &mut data).unwrap();
        }
        names.push(n);
    }
    assert_eq!(names, ["dir", "dir/link", "dir/sub", "dir/sub/f.bin"]);
    assert!(data == blob(70_000), "the file's bytes");

    // ... and back in, into another existing directory.
    sbx_in(&w, &["exec", &sb.id, "--", "/bin/fixture", "mkdir", "/tmp/in"], b"");
    assert_success(&sbx_in(&w, &["cp", "-", &format!("{}:/tmp/in", sb.id)], &out.stdout), "cp - ID:/tmp/in");
    assert_success(&sb.exec(&["exists", "/tmp/in/dir/sub/f.bin"]), "extracted under /tmp/in");
    let again = w.sbx(&["cp", &format!("{}:/tmp/in/dir/sub/f.bin", sb.id), "-"]);
    let mut e = tar::Archive::new(again.stdout.as_slice());
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut e.entries().unwrap().next().unwrap().unwrap(), &mut got).unwrap();
    assert!(got == blob(70_000), "round trip");

    // Refused before anything changes: escaping names, hard links, not a tar, not a directory.
    let mut evil = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(1);
    h.set_mode(0o644);
    h.as_old_mut().name[..9].copy_from_slice(b"../escape");
    h.set_cksum();
    evil.append(&h, &b"x"[..]).unwrap();
    let out = sbx_in(&w, &["cp", "-", &format!("{}:/tmp/in", sb.id)], &evil.into_inner().unwrap());
    assert_exit(&out, 2, "an escaping archive");
    assert!(stderr(&out).contains("escape"), "{}", stderr(&out));
    let mut hard = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Link);
    h.set_size(0);
    h.set_mode(0o644);
    hard.append_link(&mut h, "h", "/etc/passwd").unwrap();
    let out = sbx_in(&w, &["cp", "-", &format!("{}:/tmp/in", sb.id)], &hard.into_inner().unwrap());
    assert_exit(&out, 2, "a hard link");
    assert_exit(&sb.exec(&["exists", "/tmp/in/h"]), 1, "nothing written");
    assert_exit(&sbx_in(&w, &["cp", "-", &format!("{}:/tmp/in", sb.id)], b"not a tar"), 1, "not a tar");
    let out = sbx_in(&w, &["cp", "-", &format!("{}:/tmp/nowhere", sb.id)], &again.stdout);
    assert_exit(&out, 1, "into a missing directory");
    assert!(stderr(&out).contains("not a directory"), "{}", stderr(&out));
}

//! Sbx as a non-root user in the docker group (the usual
//! way people run docker), and the relayed channel it uses. The sandbox user
//! (65534, umask 022) binds a socket such a user may not write, so sbx
//! relays through `docker exec ... /run/sbx/helper connect`; `--channel exec`
//! forces that path as root too.
//!
//! As root, the tests run sbx as `sbxtest-user` (created if missing, in the
//! group that owns the docker socket) through `setpriv`; as a non-root user
//! they run sbx as themselves. They never skip.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::support::*;

const USER: &str = "sbxtest-user";

/// (uid, gid) of the non-root docker user the tests run sbx as.
pub(crate) fn user() -> (u32, u32) {
    static USER_IDS: OnceLock<(u32, u32)> = OnceLock::new();
    *USER_IDS.get_or_init(|| {
        let me = nix::unistd::geteuid();
        if !me.is_root() {
            return (me.as_raw(), nix::unistd::getegid().as_raw());
        }
        if Command::new("id").arg("-u").arg(USER).output().map(|o| !o.status.success()).unwrap_or(true) {
            // The group that may use the engine: the docker socket's.
            let gid = std::fs::metadata("/var/run/docker.sock").expect("the docker socket").gid();
            let out = Command::new("useradd")
                .args(["--create-home", "--shell", "/bin/sh", "--groups", &gid.to_string(), USER])
                .output()
                .expect("spawn useradd");
            // 9: a parallel test created it first.
            assert!(
                out.status.success() || out.status.code() == Some(9),
                "useradd {USER}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").arg(flag).arg(USER).output().expect("spawn id");
            String::from_utf8_lossy(&out.stdout).trim().parse().expect("numeric id")
        };
        (id("-u"), id("-g"))
    })
}

/// A world of the non-root user's own: its socket root and data dir.
pub(crate) struct UserWorld {
    case: String,
    pub(crate) socket_root: PathBuf,
    data_dir: PathBuf,
    image: String,
}

impl UserWorld {
    pub(crate) fn new() -> Self {
        let image = fixture_image();
        let (uid, gid) = user();
        let case = unique("u");
        let socket_root = PathBuf::from("/tmp").join(format!("sbxu-{case}"));
        let data_dir = PathBuf::from("/tmp").join(format!("sbxu-{case}-state"));
        for d in [&socket_root, &data_dir] {
            std::fs::create_dir(d).unwrap();
            std::os::unix::fs::chown(d, Some(uid), Some(gid)).unwrap();
            std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        }
        UserWorld { case, socket_root, data_dir, image }
    }

    pub(crate) fn label(&self) -> String {
        format!("{TEST_LABEL}.case={}", self.case)
    }

    /// sbx, run as the non-root docker user.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let (uid, gid) = user();
        let mut cmd = if nix::unistd::geteuid().is_root() {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}")).arg(format!("--regid={gid}")).arg("--init-groups").arg(SBX);
            c.env("HOME", format!("/home/{USER}")).env("USER", USER);
            c
        } else {
            Command::new(SBX)
        };
        cmd.arg("--socket-dir").arg(&self.socket_root).arg("--data-dir").arg(&self.data_dir).args(args);
        cmd.env_remove("SBX_SOCKET_DIR").env_remove("SBX_DATA_DIR").env_remove("XDG_RUNTIME_DIR");
        cmd.stdin(Stdio::null());
        cmd
    }

    pub(crate) fn sbx(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("spawn sbx as the docker user")
    }

    pub(crate) fn create(&self, args: &[&str]) -> Output {
        let label = self.label();
        let mut full = vec!["create", "--image", &self.image, "--label", &label];
        full.extend_from_slice(args);
        self.sbx(&full)
    }
}

impl Drop for UserWorld {
    fn drop(&mut self) {
        let ids = docker_ok(&["ps", "-aq", "--filter", &format!("label={}", self.label())]);
        for c in ids.lines() {
            let _ = docker(&["rm", "-f", "-v", c]);
        }
        // A session test that failed before `--purge` (as this user) left its volume.
        remove_case_volumes(&self.case);
        let _ = std::fs::remove_dir_all(&self.socket_root);
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

#[test]
fn doctor_passes_as_a_non_root_docker_user() {
    let w = UserWorld::new();
    let out = w.sbx(&["doctor"]);
    assert_success(&out, "sbx doctor as a non-root docker user");
    let text = stdout(&out);
    assert!(text.contains("relayed channel"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("ok    channel")), "{text}");
    // The probe sandbox is gone again.
    assert_eq!(docker_ok(&["ps", "-aq", "--filter", "label=sbx.session=sbx-doctor"]), "");
}

#[test]
fn a_non_root_user_creates_and_talks_to_a_sandbox_line_by_line() {
    let w = UserWorld::new();
    let out = w.create(&["--json"]);
    assert_success(&out, "sbx create as a non-root docker user");
    let created = json(&out);
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!(created["channel"], "exec", "{created}");
    assert_eq!(created["socket"], "/run/sandbox/sandbox.sock");
    let user = created["user"].as_str().unwrap();
    let uid: u32 = user.split(':').next().unwrap().parse().unwrap();
    assert!((0x7000_0000..0x7100_0000).contains(&uid) && user == format!("{uid}:{uid}"), "a uid of its own: {user}");

    line_by_line(w.command(&["connect", &id]), &["hello", "second line", "third"], |l| l.to_string());
    // Nothing of /run/sandbox is on the host: a tmpfs in the container, and
    // the host directory (sbx's marker for gc and the watchdog) stays empty.
    let tmpfs = docker_ok(&["inspect", "--format", "{{json .HostConfig.Tmpfs}}", &id]);
    assert!(tmpfs.contains("/run/sandbox"), "{tmpfs}");
    let marker = w.socket_root.join(&id);
    assert_eq!(std::fs::read_dir(&marker).unwrap().count(), 0);
    let inspect: serde_json::Value = serde_json::from_slice(&w.sbx(&["inspect", &id]).stdout).unwrap();
    assert_eq!(inspect["channel"], "exec");

    assert_success(&w.sbx(&["destroy", &id]), "sbx destroy as the docker user");
    assert!(!marker.exists(), "destroy removes the marker directory");
    assert_eq!(docker_ok(&["ps", "-aq", "--filter", &format!("label={}", w.label())]), "");
}

#[test]
fn channel_exec_as_root_relays_and_bounds_run_sandbox() {
    let w = World::new();
    let sb = w.create(&["--channel", "exec"]);
    line_by_line(
        {
            let mut c = Command::new(SBX);
            c.args(w.dir_args()).args(["connect", &sb.id]);
            c
        },
        &["one", "two"],
        |l| l.to_string(),
    );
    // A half-closed connection gets the whole answer, binary-safe.
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let out = w.sbx_stdin(&["connect", &sb.id], &data);
    assert_success(&out, "sbx connect with stdin closed");
    assert!(out.stdout == data, "the echo came back whole ({} of {} bytes)", out.stdout.len(), data.len());
    // The sandbox cannot fill the host through /run/sandbox.
    let out = sb.exec(&["fill", "/run/sandbox/big"]);
    let said = stdout(&out);
    assert!(said.contains("No space left on device"), "{said}");
    let n: u64 = said.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(u64::MAX);
    assert!(n <= 1 << 20, "{said}");
    // Nothing of it reached the host.
    let dir = w.socket_root.join(&sb.id);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o7777, 0o700);
    // The relayed sandbox passes every audit rule, like any other.
    assert_success(&w.sbx(&["audit", &sb.id]), "sbx audit");
    drop(sb);
    w.assert_nothing_left();
}

#[test]
fn the_relayed_channel_refuses_what_is_not_a_socket() {
    let w = World::new();
    for (mode, what) in [
        (vec!["symlink", "/run/sbx/helper"], "a symlink"),
        (vec!["regular"], "a regular file"),
        (vec!["fifo"], "a FIFO"),
    ] {
        let mut args = vec!["--channel", "exec", "--"];
        args.extend(mode.iter().copied());
        let out = w.try_create(&args);
        assert_exit(&out, 1, &format!("create with {what} at /run/sandbox/sandbox.sock"));
        let err = stderr(&out);
        assert!(err.contains(&format!("it is {what}, not a unix socket")) && err.contains("hostile"), "{err}");
        w.assert_nothing_left();
    }
    // Ready first, then swapped for decoys while connects come in: every
    // connect reaches the real socket or is refused, never anything else.
    let sb = w.create(&["--channel", "exec", "--", "swap", "30"]);
    assert_success(&sb.exec(&["write", "/run/sandbox/go"]), "start swapping");
    let mut refused = 0;
    for _ in 0..12 {
        let out = w.sbx_stdin(&["connect", &sb.id], b"");
        match out.status.code() {
            Some(0) => assert_eq!(stdout(&out), "REAL\n", "{}", stderr(&out)),
            Some(1) => {
                let err = stderr(&out);
                assert!(err.contains("not a unix socket") || err.contains("has not bound"), "{err}");
                refused += 1;
            }
            other => panic!("connect exited {other:?}: {}", stderr(&out)),
        }
    }
    eprintln!("{refused} of 12 connects met a decoy and were refused");
    drop(sb);
    w.assert_nothing_left();
}

#[test]
fn as_a_non_root_user_a_direct_channel_it_cannot_use_is_never_reported_ready() {
    let w = UserWorld::new();
    let out = w.create(&["--channel", "direct", "--socket-wait", "3s"]);
    assert_exit(&out, 1, "create --channel direct as a non-root docker user");
    let err = stderr(&out);
    assert!(err.contains("may not connect to it"), "{err}");
    assert_eq!(docker_ok(&["ps", "-aq", "--filter", &format!("label={}", w.label())]), "");
}

/// A representative part of the lifecycle as the non-root docker user:
/// exec, cp, ls, ttl (the watchdog ends the sandbox through its marker
/// directory) and gc, with the relayed channel chosen by default.
#[test]
fn the_lifecycle_works_for_a_non_root_user() {
    let w = UserWorld::new();
    let out = w.create(&["--ttl", "6s"]);
    assert_success(&out, "sbx create --ttl as the docker user");
    let id = stdout(&out).trim().to_string();
    let out = w.sbx(&["exec", &id, "--", "/bin/fixture", "status"]);
    assert_success(&out, "sbx exec");
    let user = json(&w.sbx(&["--json", "inspect", &id]))["user"].as_str().unwrap().to_string();
    let uid = user.split(':').next().unwrap();
    assert!(stdout(&out).contains(&format!("Uid:\t{uid}\t")), "{}", stdout(&out));
    let out = w.sbx(&["exec", &id, "--", "/bin/fixture", "write", "/tmp/note"]);
    assert_success(&out, "sbx exec write");
    let dest = w.socket_root.join("note-out");
    let out = w.sbx(&["cp", &format!("{id}:/tmp/note"), dest.to_str().unwrap()]);
    assert_success(&out, "sbx cp out of the sandbox");
    assert_eq!(std::fs::read(&dest).unwrap(), b"x");
    let ls = json(&w.sbx(&["--json", "ls"]));
    assert!(ls.to_string().contains(&id), "{ls}");
    // The watchdog destroys it at its expiry.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while docker(&["inspect", &id]).status.success() {
        assert!(std::time::Instant::now() < deadline, "the TTL watchdog did not destroy {id}");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(!w.socket_root.join(&id).exists(), "the marker directory went with it");
    let gc = json(&w.sbx(&["--json", "gc"]));
    assert_eq!(gc["containers"], serde_json::json!([]), "{gc}");
    assert_eq!(gc["socket_dirs"], serde_json::json!([]), "{gc}");
}

/// Through the relayed channel too: the helper stops waiting
/// for an accept at the deadline `connect --timeout` gives it.
#[test]
fn a_relayed_connect_gives_up_on_a_full_backlog() {
    let w = World::new();
    let sb = w.create(&["--channel", "exec", "--", "full-backlog"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !stdout(&docker(&["logs", &sb.id])).contains("full") {
        assert!(std::time::Instant::now() < deadline, "the sandbox never filled its backlog");
        std::thread::sleep(Duration::from_millis(50));
    }
    let started = std::time::Instant::now();
    let out = Command::new("timeout")
        .args(["-k", "2", "25"])
        .arg(SBX)
        .args(w.dir_args())
        .args(["connect", "--timeout", "2s", &sb.id])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_exit(&out, 1, "a relayed connect to a full backlog");
    assert!(stderr(&out).contains("did not accept the connection within 2s"), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(8), "took {:?}", started.elapsed());
}

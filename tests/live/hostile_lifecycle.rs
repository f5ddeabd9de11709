//! A hostile sandbox against the lifecycle commands: stop/start, pause/resume, events, pull.

use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// Run sbx with a deadline; None when it was still running (then killed).
fn sbx_within(w: &World, args: &[&str], limit: Duration) -> Option<Output> {
    let out = w.socket_root.with_extension("out");
    let err = w.socket_root.with_extension("err");
    let mut child = Command::new(SBX)
        .args(w.dir_args())
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .process_group(0)
        .spawn()
        .expect("spawn sbx");
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            let o = Output { status, stdout: std::fs::read(&out).unwrap(), stderr: std::fs::read(&err).unwrap() };
            return Some(o);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::SIGKILL);
    let _ = child.wait();
    None
}

/// sbx's data directory holds the ownership key, the records `destroy`
/// and `exec` act on, the stopped/paused marks and the events journal; the
/// socket root holds every sandbox's socket directory. A mount of either
/// (or of a directory holding them, or inside them) would let the sandbox
/// forge what the host trusts: `ls` saying `stopped`, `sbx events` lines,
/// another sandbox's socket. Refused before anything exists (exit 2).
#[test]
fn a_mount_of_sbx_own_directories_is_refused() {
    let w = World::new();
    assert_success(&w.sbx(&["ls"]), "ls makes the data dir");
    let orphan = w.socket_root.join("sbx-0123456789ab");
    std::fs::create_dir_all(&orphan).unwrap();
    let data = w.state_dir.display().to_string();
    let root = w.socket_root.display().to_string();
    let cases: Vec<Vec<String>> = vec![
        vec!["--rw".into(), format!("{data}:/d")],
        vec!["--ro".into(), format!("{data}:/d")],
        vec!["--rw".into(), format!("{}:/d", w.state_dir.join("stopped").display())],
        vec!["--rw".into(), "/tmp:/hosttmp".into()],
        vec!["--rw".into(), format!("{root}:/s")],
        vec!["--state-dir".into(), orphan.display().to_string()],
    ];
    std::fs::create_dir_all(w.state_dir.join("stopped")).unwrap();
    for c in cases {
        let mut args: Vec<&str> = vec!["create", "--image", &w.image, "--socket-wait", "0"];
        let label = w.case_label();
        args.extend(["--label", &label]);
        args.extend(c.iter().map(String::as_str));
        let out = w.sbx(&args);
        if out.status.success() {
            let _guard = w.adopt(stdout(&out).trim());
        }
        assert_exit(&out, 2, &format!("create {c:?}"));
        assert!(stderr(&out).contains("sbx's own"), "{c:?}: {}", stderr(&out));
        assert!(w.containers().is_empty(), "{c:?}: nothing is created");
    }
}

/// A frozen sandbox answers nothing: every command that needs its
/// processes says so at once (exit 1, `sbx resume`), the rest work, and
/// none of them waits for a thaw.
#[test]
fn every_command_on_a_paused_sandbox_answers_at_once() {
    let w = World::new();
    let sb = w.create(&[]);
    assert_success(&w.sbx(&["pause", &sb.id]), "pause");
    let host = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("p-{}", w.case));
    std::fs::write(&host, b"x").unwrap();
    let to = format!("{}:/tmp/x", sb.id);
    let from = format!("{}:/bin/fixture", sb.id);
    let back = host.with_extension("back");
    let id = sb.id.as_str();
    let refused: Vec<Vec<&str>> = vec![
        vec!["exec", id, "--", "/bin/fixture", "status"],
        vec!["exec", "-d", id, "--", "/bin/fixture", "sleep"],
        vec!["ps", id],
        vec!["cp", host.to_str().unwrap(), &to],
        vec!["cp", &from, back.to_str().unwrap()],
        vec!["wait-port", id, "80", "--timeout", "30s"],
        vec!["backup", id],
    ];
    let fine: Vec<Vec<&str>> = vec![
        vec!["logs", id],
        vec!["stats", id],
        vec!["audit", id],
        vec!["ttl", id, "1h"],
        vec!["inspect", id],
        vec!["gc"],
    ];
    for (c, code) in refused.iter().map(|c| (c, 1)).chain(fine.iter().map(|c| (c, 0))) {
        let out =
            sbx_within(&w, c, Duration::from_secs(15)).unwrap_or_else(|| panic!("sbx {c:?} hung on a paused sandbox"));
        assert_exit(&out, code, &format!("sbx {c:?} on a paused sandbox"));
        if code == 1 {
            assert!(stderr(&out).contains(&format!("sbx resume {id}")), "{c:?}: {}", stderr(&out));
        }
    }
    assert_eq!(w.containers().len(), 1, "gc left the paused sandbox alone");
    let out = w.sbx(&["--json", "ls"]);
    assert!(stdout(&out).contains("\"paused\""), "{}", stdout(&out));
    assert_success(&w.sbx(&["stop", "--grace", "1s", id]), "stop of a paused sandbox");
    let _ = std::fs::remove_file(&host);
    let _ = std::fs::remove_file(&back);
}

/// The socket directory's own small tmpfs (1 MiB, 64 inodes) is what keeps
/// a sandbox from filling the host through /run/sandbox. A reboot empties it but leaves the directory when the socket root is
/// on a disk (`--socket-dir /var/...`): `start` must not bind the bare
/// directory, or the restarted sandbox writes to the host's disk unbounded.
#[test]
fn start_after_the_socket_tmpfs_is_gone_bounds_the_directory_again() {
    let w = World::new();
    let sb = w.create(&[]);
    let dir = w.socket_root.join(&sb.id);
    assert!(tmpfs_bounded(&dir), "create bounds it");
    assert_success(&w.sbx(&["stop", "--grace", "0s", &sb.id]), "stop");
    // What a reboot leaves of a socket root on a disk: the directory, no tmpfs.
    nix::mount::umount2(&dir, nix::mount::MntFlags::MNT_DETACH).unwrap();
    assert!(!tmpfs_bounded(&dir) && dir.is_dir());
    assert_success(&w.sbx(&["start", &sb.id]), "start");
    assert!(tmpfs_bounded(&dir), "start bound the bare directory into the sandbox");
    let out = sb.exec(&["fill", "/run/sandbox/big"]);
    assert!(stdout(&out).contains("No space left") || stderr(&out).contains("No space left"), "{out:?}");
    let wrote: u64 = stdout(&out).split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(u64::MAX);
    assert!(wrote <= 1 << 20, "wrote {wrote} bytes");
}

/// `dir` is a mount point of its own tmpfs of sbx's bounds (64 inodes).
fn tmpfs_bounded(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(d), Ok(p)) = (std::fs::metadata(dir), std::fs::metadata(dir.parent().unwrap())) else { return false };
    let fs = nix::sys::statfs::statfs(dir).unwrap();
    d.dev() != p.dev() && fs.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC && fs.files() == 64
}

/// Containers inherit their image's labels, and docker puts every label in
/// each event's attributes: an image with over a megabyte of labels made
/// every event of its sandbox a line sbx skipped, so a script waiting with
/// `sbx events ID --until-event died` never saw it die (an OOM kill hidden
/// from monitoring). sbx asks docker for the attributes it reads alone.
#[test]
fn an_image_with_megabytes_of_labels_cannot_hide_its_sandbox_events() {
    let w = World::new();
    let img = big_labels_image(&w);
    let label = w.case_label();
    let since =
        format!("{}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() - 1);
    // Started before the create, as the README says to wait for a death: a
    // replay reaches only as far back as the engine's last 256 events, which
    // a loaded engine turns over in seconds.
    let waited = std::thread::scope(|s| {
        let events = s.spawn(|| {
            sbx_within(&w, &["--json", "events", "--since", &since, "--until-event", "died"], Duration::from_secs(60))
        });
        let out = w.sbx(&["create", "--image", &img.0, "--label", &label, "--", "serve-for", "1500", "7"]);
        assert_success(&out, "create");
        let _sb = w.adopt(stdout(&out).trim());
        events.join().unwrap().expect("sbx events --until-event died never saw the sandbox die")
    });
    assert_success(&waited, "events");
    let lines: Vec<serde_json::Value> = stdout(&waited).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = lines.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["created", "started", "died"], "{lines:?}");
    assert_eq!(lines[2]["exit_code"], 7, "the engine's code, not the image's label: {lines:?}");
    assert!(!stderr(&waited).contains("skipped"), "{}", stderr(&waited));
}

/// The fixture with 20 labels of 60 KB (over a megabyte; `docker import
/// --change` cannot carry that, a Dockerfile can) and `LABEL exitCode=0`.
fn big_labels_image(w: &World) -> Image {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("biglabels-{}", w.case));
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    std::fs::copy(fixture_binary(), dir.join("fixture")).unwrap();
    let big = "x".repeat(60_000);
    let mut file =
        String::from("FROM scratch\nCOPY fixture /bin/fixture\nCOPY tmp /tmp\nENTRYPOINT [\"/bin/fixture\"]\n");
    for i in 0..20 {
        file.push_str(&format!("LABEL pad{i}={big}\n"));
    }
    file.push_str(&format!("LABEL exitCode=0 {TEST_LABEL}=1 {}\n", w.case_label()));
    std::fs::write(dir.join("Dockerfile"), file).unwrap();
    let out = docker(&["build", "-q", dir.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    let id = stdout(&out).trim().to_string();
    assert!(id.starts_with("sha256:"), "docker build: {}", stderr(&out));
    Image(id)
}

/// Removes a container the test made with docker itself.
struct Foreign(String);

impl Drop for Foreign {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.0]);
    }
}

/// A container named like a sandbox and carrying a real sandbox's labels
/// (its token too, which is over the other name) is not this host's:
/// `stop`, `start`, `pause` and `resume` refuse it by name and leave it as
/// it was, and nothing is marked for it.
#[test]
fn lifecycle_commands_refuse_a_container_with_copied_labels() {
    let w = World::new();
    let a = w.create(&[]);
    let labels: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&docker_ok(&["inspect", "--format", "{{json .Config.Labels}}", &a.id])).unwrap();
    let forged = Foreign(format!("sbx-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff));
    let mut run = vec!["run".to_string(), "-d".into(), "--name".into(), forged.0.clone()];
    for (k, v) in &labels {
        let v = if k == "sbx.id" { forged.0.clone() } else { v.clone() };
        run.extend(["--label".to_string(), format!("{k}={v}")]);
    }
    run.extend(["--label".to_string(), w.case_label(), w.image.clone(), "sleep".into()]);
    docker_ok(&run.iter().map(String::as_str).collect::<Vec<_>>());
    let status = || docker_ok(&["inspect", "--format", "{{.State.Status}}", &forged.0]);
    for (args, before) in [
        (vec!["stop", "--grace", "0s"], "running"),
        (vec!["pause"], "running"),
        (vec!["resume"], "running"),
        (vec!["start"], "running"),
    ] {
        let mut full = vec!["--json"];
        full.extend(&args);
        full.push(&forged.0);
        let out = w.sbx(&full);
        assert_exit(&out, 1, &format!("sbx {args:?} of a forged container"));
        let err: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
        assert_eq!(err["error"]["kind"], "foreign_container", "{args:?}: {err}");
        assert_eq!(status(), before, "{args:?} touched it");
    }
    docker_ok(&["pause", &forged.0]);
    assert_exit(&w.sbx(&["resume", &forged.0]), 1, "resume of a forged paused container");
    assert_eq!(status(), "paused");
    docker_ok(&["unpause", &forged.0]);
    docker_ok(&["stop", "-t", "0", &forged.0]);
    assert_exit(&w.sbx(&["start", &forged.0]), 1, "start of a forged stopped container");
    assert_eq!(status(), "exited");
    for kind in ["stopped", "paused"] {
        assert!(!w.state_dir.join(kind).join(&forged.0).exists(), "a {kind} mark for the forged container");
    }
    assert_eq!(json(&w.sbx(&["--json", "ls"])).as_array().unwrap().len(), 1, "ls lists the real sandbox alone");
}

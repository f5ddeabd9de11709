//! `cp`, `backup` and `restore` against a sandbox that prepares what they
//! carry out (setuid modes, world-writable directories, names that are not
//! UTF-8, fifos and sockets) or stops the helper that takes what they carry
//! in. The sandbox side is `attack_files/helperatk.c`, copied in with `sbx cp`.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

fn armed(w: &World) -> Sandbox {
    armed_with(w, &[], "attack_files/helperatk.c", "/tmp/atk")
}

fn atk(w: &World, sb: &Sandbox, args: &[&str]) {
    let mut full = vec!["exec", sb.id.as_str(), "--", "/tmp/atk"];
    full.extend_from_slice(args);
    assert_success(&w.sbx(&full), &format!("atk {args:?}"));
}

/// `tar -xf -` of `data` into a new directory `dir`, as root, as an
/// operator would (GNU tar keeps modes and, as root, owners).
fn root_untar(data: &[u8], dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut tar = Command::new("tar").arg("-xf").arg("-").arg("-C").arg(dir).stdin(Stdio::piped()).spawn().unwrap();
    std::io::Write::write_all(&mut tar.stdin.take().unwrap(), data).unwrap();
    assert!(tar.wait().unwrap().success(), "tar -x into {}", dir.display());
}

/// Every entry below `dir` with setuid, setgid or group/other write.
fn dangerous_modes(dir: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    for e in walk(dir) {
        let md = std::fs::symlink_metadata(&e).unwrap();
        if !md.file_type().is_symlink() && md.mode() & 0o6022 != 0 {
            bad.push(format!("{} {:o} {}:{}", e.display(), md.mode() & 0o7777, md.uid(), md.gid()));
        }
    }
    bad
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if std::fs::symlink_metadata(&p).unwrap().is_dir() {
            all.extend(walk(&p));
        }
        all.push(p);
    }
    all
}

/// In the sandbox `chmod 4755 rootshell`, `2775 sgidtool`, `0777 drop/`:
/// a root `tar -xf` of `sbx backup` (and of `sbx cp ID:DIR -`) gave
/// `-rwsr-xr-x root root rootshell` and a `drwxrwxrwx root root drop`. Now
/// the tar carries the modes `cp` gives the host, and restore of such a
/// backup still gives the sandbox its workspace back.
#[test]
fn a_root_tar_x_of_a_backup_or_cp_dash_makes_no_setuid_or_world_writable_entry() {
    let w = World::new();
    let sb = armed(&w);
    let ws = "/state/workspace";
    assert_success(&sb.exec(&["mkdir", &format!("{ws}/drop/sub")]), "mkdir");
    for (f, mode) in [("rootshell", "4755"), ("sgidtool", "2775"), ("drop/sub/both", "6777")] {
        assert_success(&sb.exec(&["write", &format!("{ws}/{f}")]), "write");
        atk(&w, &sb, &["chmod", mode, &format!("{ws}/{f}")]);
    }
    atk(&w, &sb, &["chmod", "0777", &format!("{ws}/drop")]);
    atk(&w, &sb, &["chmod", "1777", &format!("{ws}/drop/sub")]);
    let backup = w.sbx(&["backup", &sb.id]);
    assert_success(&backup, "backup");
    let out = w.socket_root.join("untar-backup");
    root_untar(&backup.stdout, &out);
    assert_eq!(dangerous_modes(&out), Vec::<String>::new(), "a root tar -x of the backup");
    let md = std::fs::metadata(out.join("rootshell")).unwrap();
    assert_eq!((md.mode() & 0o7777, md.uid()), (0o755, 0), "kept what is safe");
    assert_eq!(std::fs::metadata(out.join("drop/sub")).unwrap().mode() & 0o7777, 0o1755, "sticky stays");

    let dash = w.sbx(&["cp", &format!("{}:{ws}/drop", sb.id), "-"]);
    assert_success(&dash, "cp ID:DIR -");
    let out = w.socket_root.join("untar-cp");
    root_untar(&dash.stdout, &out);
    assert_eq!(dangerous_modes(&out), Vec::<String>::new(), "a root tar -x of cp ID:DIR -");
    assert!(out.join("drop/sub/both").is_file());

    // A masked backup restores: the files and their safe modes come back.
    assert_success(&w.sbx_stdin(&["restore", &sb.id], &backup.stdout), "restore of the masked backup");
    let back = w.socket_root.join("back");
    assert_success(&w.sbx(&["cp", &format!("{}:{ws}", sb.id), back.to_str().unwrap()]), "cp out");
    let mode = |p: &str| std::fs::metadata(back.join(p)).unwrap().permissions().mode() & 0o7777;
    assert_eq!((mode("rootshell"), mode("sgidtool"), mode("drop"), mode("drop/sub")), (0o755, 0o755, 0o755, 0o1755));
}

/// A name that is not UTF-8 was left out of `backup` and `cp` without a
/// word, exit 0: a backup and restore lost the file, and a sandbox could
/// hide one from backup-based inspection. Fifos and sockets were left out
/// unsaid too. Now the name goes through as its bytes, and what is left
/// out is said in a warning with a count.
#[test]
fn a_name_that_is_not_utf8_survives_backup_and_restore_and_a_fifo_or_socket_is_said() {
    use std::os::unix::ffi::OsStrExt;
    let w = World::new();
    let sb = armed(&w);
    let ws = "/state/workspace";
    assert_success(&sb.exec(&["mkdir", ws]), "mkdir");
    atk(&w, &sb, &["badname", ws]);
    atk(&w, &sb, &["fifo", &format!("{ws}/pipe")]);
    atk(&w, &sb, &["sock", &format!("{ws}/sock")]);
    let bad = std::ffi::OsStr::from_bytes(b"bad\xff\xfe.txt");

    let backup = w.sbx(&["backup", &sb.id]);
    assert_success(&backup, "backup");
    let said = stderr(&backup);
    assert!(
        said.contains("left out 2 entries that are not a file, directory or symlink")
            && said.contains("\"workspace/pipe\"")
            && said.contains("\"workspace/sock\""),
        "{said}"
    );
    let names = |data: &[u8]| -> Vec<Vec<u8>> {
        tar::Archive::new(data).entries().unwrap().map(|e| e.unwrap().path_bytes().into_owned()).collect()
    };
    assert!(names(&backup.stdout).contains(&bad.as_bytes().to_vec()), "{:?}", names(&backup.stdout));

    // Restored (replacing the workspace) and backed up again: still there.
    assert_success(&w.sbx_stdin(&["restore", &sb.id], &backup.stdout), "restore");
    let again = w.sbx(&["backup", &sb.id]);
    assert_success(&again, "backup after restore");
    assert!(names(&again.stdout).contains(&bad.as_bytes().to_vec()), "{:?}", names(&again.stdout));
    assert!(!stderr(&again).contains("left out"), "restore made no fifo: {}", stderr(&again));

    // cp to the host and back in keep it too; cp says what it left out.
    atk(&w, &sb, &["fifo", &format!("{ws}/pipe")]);
    let host = w.socket_root.join("out");
    let out = w.sbx(&["--json", "cp", &format!("{}:{ws}", sb.id), host.to_str().unwrap()]);
    assert_success(&out, "cp out");
    assert!(
        stderr(&out).contains(r#""kind":"skipped""#) && stderr(&out).contains("left out 1 entry"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(host.join(bad)).unwrap(), b"hidden\n");
    assert_success(&w.sbx(&["cp", host.to_str().unwrap(), &format!("{}:/tmp", sb.id)]), "cp in");
    let back = w.socket_root.join("back");
    assert_success(&w.sbx(&["cp", &format!("{}:/tmp/out", sb.id), back.to_str().unwrap()]), "cp out again");
    assert_eq!(std::fs::read(back.join(bad)).unwrap(), b"hidden\n");
}

fn error_of(out: &std::process::Output) -> serde_json::Value {
    let last = stderr(out).lines().last().unwrap_or("{}").to_string();
    serde_json::from_str::<serde_json::Value>(&last).unwrap_or_default()["error"].clone()
}

/// A process in the sandbox (the helper's own user) SIGSTOPs the helper's
/// `receive`: `sbx cp HOST ID:`, `cp - ID:` and `restore` hung for ever.
/// They end at the idle deadline (4x SBX_DOCKER_TIMEOUT: restore may first
/// clear a large workspace) with `helper_timeout`, naming the helper, not
/// the engine; a stopped one-shot call (`sbx ps`) likewise.
#[test]
fn a_receive_stopped_by_its_sandbox_never_hangs_cp_in_or_restore() {
    let w = World::new();
    let sb = armed(&w);
    // Big enough that the stopper (polling /proc every 2 ms) catches the
    // helper while it still reads.
    let src = w.socket_root.join("big.bin");
    std::fs::write(&src, blob(16 << 20)).unwrap();
    let mut tar = tar::Builder::new(Vec::new());
    tar.append_path_with_name(&src, "big.bin").unwrap();
    let tar = tar.into_inner().unwrap();
    let out = w.sbx(&["exec", "-d", &sb.id, "--", "/tmp/atk", "stopper", "/run/sbx/helper receive", "300"]);
    assert_success(&out, "the stopper");
    std::thread::sleep(Duration::from_millis(500));
    let env = [("SBX_DOCKER_TIMEOUT", "2s")];
    let to = format!("{}:/tmp", sb.id);
    for (what, args, input) in [
        ("cp HOST ID:", vec!["--json", "cp", src.to_str().unwrap(), &to], &[][..]),
        ("cp - ID:", vec!["--json", "cp", "-", &to], &tar[..]),
        ("restore", vec!["--json", "restore", &sb.id], &tar[..]),
    ] {
        let began = Instant::now();
        let out = sbx_within_fed(&w, &args, &env, input, Duration::from_secs(90))
            .unwrap_or_else(|| panic!("{what} hung on a stopped helper"));
        assert_exit(&out, 1, what);
        let e = error_of(&out);
        assert_eq!(e["kind"], "helper_timeout", "{what}: {}", stderr(&out));
        let msg = e["message"].as_str().unwrap_or_default();
        assert!(msg.contains("sbx's helper in sandbox") && msg.contains("did not answer for 8s"), "{what}: {msg}");
        assert!(!stderr(&out).contains("engine") && !stderr(&out).contains("dockerd"), "{what}: {}", stderr(&out));
        assert!(began.elapsed() < Duration::from_secs(60), "{what} took {:?}", began.elapsed());
    }
    // A one-shot call: over in a moment, so the stopper may miss it; none
    // may hang, and one it stopped names the helper.
    let out = w.sbx(&["exec", "-d", &sb.id, "--", "/tmp/atk", "stopper", "/run/sbx/helper ps", "60"]);
    assert_success(&out, "the ps stopper");
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..3 {
        let out =
            sbx_within_fed(&w, &["--json", "ps", &sb.id], &env, b"", Duration::from_secs(40)).expect("sbx ps hung");
        if out.status.code() != Some(0) {
            assert_eq!(error_of(&out)["kind"], "helper_timeout", "{}", stderr(&out));
            assert!(!stderr(&out).contains("dockerd"), "{}", stderr(&out));
        }
    }
}

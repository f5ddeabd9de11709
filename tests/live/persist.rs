//! Persistent sessions and `--clone`: a session's volume outlives its
//! sandbox, and holds against what an image and an earlier sandbox of the
//! session can plant: nothing from
//! the image's /state reaches the volume, the volume is the sandbox user's and
//! mounted nosuid,nodev (after a restart too), a clone never follows anything
//! a sandbox wrote, and purge and gc remove whatever tree a sandbox left.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::support::*;

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

/// The fixture with a root-owned 0755 /state holding a setuid-root binary
/// and a plain file, packed with `docker import`.
pub(crate) fn image_with_hostile_state(w: &World) -> Image {
    let tree = ImageTree::new(&["etc", "state"]).for_case(w);
    let root = tree.root();
    std::fs::copy(fixture_binary(), root.join("state/suid")).unwrap();
    std::fs::set_permissions(root.join("state/suid"), std::fs::Permissions::from_mode(0o4755)).unwrap();
    std::fs::write(root.join("state/from-image"), b"image\n").unwrap();
    for d in ["tmp", "state"] {
        std::fs::set_permissions(root.join(d), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    tree.import()
}

fn create_from(w: &World, image: &str, args: &[&str]) -> std::process::Output {
    let label = w.case_label();
    let mut full = vec!["create", "--image", image, "--label", &label];
    full.extend_from_slice(args);
    w.sbx(&full)
}

/// Every entry under `dir`, never following links.
fn tree(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let md = std::fs::symlink_metadata(e.path()).unwrap();
        out.push((e.path(), md.mode()));
        if md.is_dir() {
            out.extend(tree(&e.path()));
        }
    }
    out
}

#[test]
fn a_session_volume_takes_nothing_from_the_image_and_is_the_sandbox_users_nosuid_nodev() {
    let w = World::new();
    let img = image_with_hostile_state(&w);
    let session = format!("{}-s", w.case);
    // What the volume binds: `data` inside the session's mounted image.
    let host = w.state_dir.join("volumes").join(&session).join("data");

    for user in [None, Some("1000")] {
        let mut args = vec!["--session", session.as_str(), "--persist"];
        if let Some(u) = user {
            args.extend(["--user", u]);
        }
        let out = create_from(&w, &img.0, &args);
        assert_success(&out, &format!("create --persist (user {user:?}) on an image with a root-owned /state"));
        let sb = w.adopt(stdout(&out).trim());
        let mine = format!("/state/mine-{}", user.unwrap_or("default"));
        assert_success(&sb.exec(&["write", &mine]), "the sandbox user writes /state");
        assert_exit(&sb.exec(&["exists", "/state/from-image"]), 1, "the image's /state is not copied in");
        assert_exit(&sb.exec(&["exists", "/state/suid"]), 1, "nor its setuid binary");
        let mountinfo = String::from_utf8_lossy(&sb.exec(&["read", "/proc/self/mountinfo"]).stdout).into_owned();
        let line = mountinfo
            .lines()
            .find(|l| l.split(' ').nth(4) == Some("/state"))
            .unwrap_or_else(|| panic!("no /state mount: {mountinfo}"));
        let opts: Vec<&str> = line.split(' ').nth(5).unwrap().split(',').collect();
        assert!(opts.contains(&"nosuid") && opts.contains(&"nodev"), "/state is not nosuid,nodev: {line}");

        let md = std::fs::symlink_metadata(&host).unwrap();
        let want = user.map_or_else(|| sb.uid(), |u| u.parse().unwrap());
        assert_eq!((md.uid(), md.gid(), md.mode() & 0o7777), (want, want, 0o700), "the host dir's owner and mode");
        assert!(!host.join("from-image").exists() && !host.join("suid").exists(), "{:?}", tree(&host));

        // A setuid-root file that does get in (put there on the host) is not honoured.
        let planted = host.join("planted-suid");
        std::fs::copy(fixture_binary(), &planted).unwrap();
        nix::unistd::chown(&planted, Some(nix::unistd::Uid::from_raw(0)), Some(nix::unistd::Gid::from_raw(0))).unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let out = docker(&["exec", &sb.id, "/state/planted-suid", "status"]);
        assert_success(&out, "run the planted setuid binary");
        assert!(stdout(&out).contains(&format!("Uid:\t{want}\t{want}\t{want}\t{want}")), "{}", stdout(&out));
        std::fs::remove_file(&planted).unwrap();
        assert_success(&w.sbx(&["destroy", &sb.id]), "destroy");
    }
    for (path, mode) in tree(&host) {
        assert_eq!(mode & 0o6000, 0, "setuid/setgid file on the host: {}", path.display());
    }
    let out = create_from(&w, &img.0, &["--session", &session, "--persist"]);
    let sb = w.adopt(stdout(&out).trim());
    assert_success(&w.sbx(&["destroy", "--purge", &sb.id]), "purge");
    w.assert_nothing_left();
}

pub(crate) fn make_repo(w: &World) -> PathBuf {
    let repo = PathBuf::from("/tmp").join(format!("sbxt-{}-repo", w.case));
    git(&["init", "-q", repo.to_str().unwrap()]);
    std::fs::write(repo.join("README"), b"from the repo\n").unwrap();
    git(&["-C", repo.to_str().unwrap(), "add", "."]);
    git(&["-C", repo.to_str().unwrap(), "commit", "-qm", "one"]);
    repo
}

#[test]
fn clone_never_follows_a_workspace_symlink_left_by_an_earlier_sandbox() {
    let w = World::new();
    let repo = make_repo(&w);
    let victim = PathBuf::from("/tmp").join(format!("sbxt-{}-victim", w.case));
    // Empty, as in the report: git would clone into it through the link.
    std::fs::create_dir_all(&victim).unwrap();
    let before = tree(&victim);
    let session = format!("{}-s", w.case);
    let url = format!("file://{}", repo.display());

    // The exact repro: the session's sandbox plants the link, then goes.
    let a = w.create(&["--session", &session, "--persist"]);
    assert_success(&a.exec(&["ln", victim.to_str().unwrap(), "/state/workspace"]), "plant the link");
    assert_success(&w.sbx(&["destroy", &a.id]), "destroy keeps the volume");

    let out = w.try_create(&["--session", &session, "--persist", "--clone", &url]);
    assert_exit(&out, 1, "--clone onto a workspace symlink");
    let err = stderr(&out);
    assert!(err.contains("workspace is a symlink") && err.contains("never clones through it"), "{err}");
    assert_eq!(tree(&victim), before, "the host directory behind the link was touched");
    assert!(!victim.join(".git").exists() && !victim.join("README").exists());
    let link = w.state_dir.join("volumes").join(&session).join("data/workspace");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link is left as it was");
    w.assert_nothing_left();
    // Nothing of the clone lingers next to the session's directory.
    let stray: Vec<String> = std::fs::read_dir(w.state_dir.join("volumes"))
        .unwrap()
        .chain(std::fs::read_dir(w.state_dir.join("volumes").join(&session)).unwrap())
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".sbx-clone"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");

    // Once the link is gone, the clone lands in the volume, owned by the sandbox user.
    std::fs::remove_file(&link).unwrap();
    let b = w.create(&["--session", &session, "--persist", "--clone", &url]);
    assert_eq!(b.exec(&["read", "/state/workspace/README"]).stdout, b"from the repo\n");
    assert_eq!(std::fs::metadata(&link).unwrap().uid(), b.uid());
    assert_success(&b.exec(&["write", "/state/workspace/by-sandbox"]), "the sandbox user writes its clone");
    assert_success(&w.sbx(&["destroy", "--purge", &b.id]), "purge");
    assert_eq!(tree(&victim), before);
    std::fs::remove_dir_all(&repo).unwrap();
    std::fs::remove_dir_all(&victim).unwrap();
}

#[test]
fn a_failed_clone_leaves_no_volume_behind() {
    let w = World::new();
    let session = format!("{}-s", w.case);
    let volume = format!("sbx-state-{session}");
    let url = format!("file:///tmp/sbxt-{}-no-such-repo", w.case);
    let out = w.try_create(&["--session", &session, "--persist", "--clone", &url]);
    assert_exit(&out, 1, "clone of a missing repository");
    assert!(stderr(&out).contains("git"), "{}", stderr(&out));
    assert!(!docker(&["volume", "inspect", &volume]).status.success(), "an empty volume was left behind");
    assert!(!w.state_dir.join("volumes").join(&session).exists(), "the session's directory was left behind");
    w.assert_nothing_left();
}

/// `sbx volumes rm KEY...` removes a session's volume, its
/// directory and its lock file; refused (exit 1) while a sandbox uses it;
/// a planted symlink in place of the directory is removed, not followed.
#[test]
fn volumes_rm_removes_volume_dir_and_lock_and_is_refused_while_in_use() {
    let w = World::new();
    let session = format!("{}-s", w.case);
    let volume = format!("sbx-state-{session}");
    let dir = w.state_dir.join("volumes").join(&session);
    let lock = w.state_dir.join("volumes").join(format!("{session}.lock"));
    let a = w.create(&["--session", &session, "--persist"]);
    assert_success(&w.sbx(&["exec", &a.id, "--", "/bin/fixture", "write", "/state/keep"]), "write");
    let out = w.sbx(&["volumes", "rm", &session]);
    assert_exit(&out, 1, "volumes rm while a sandbox uses it");
    assert!(stderr(&out).contains(&a.id), "{}", stderr(&out));
    assert!(dir.join("data/keep").exists(), "nothing removed while in use");
    assert_success(&w.sbx(&["destroy", &a.id]), "destroy");
    assert!(lock.exists() && dir.exists(), "destroy keeps the volume");
    let out = w.sbx(&["volumes", "rm", &session]);
    assert_success(&out, "volumes rm");
    assert_eq!(stdout(&out).trim(), volume);
    assert_eq!(docker_ok(&["volume", "ls", "-q", "--filter", &format!("name={volume}")]), "");
    assert!(!dir.exists() && !lock.exists(), "the directory and lock file went with the volume");
    assert!(!dir.with_extension("img").exists(), "and the image");
    assert_exit(&w.sbx(&["volumes", "rm", &session]), 1, "no such volume any more");
    assert_exit(&w.sbx(&["volumes", "rm", "../x"]), 2, "not a session key");
    // A symlink where the directory was: removed, its target untouched.
    let outside = w.socket_root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("precious"), b"x").unwrap();
    std::os::unix::fs::symlink(&outside, &dir).unwrap();
    assert_success(&w.sbx(&["volumes", "rm", &session]), "volumes rm of a leftover link");
    assert!(std::fs::symlink_metadata(&dir).is_err() && outside.join("precious").exists());
}

/// gc and session state whose volume is gone. A session's work outlives
/// its docker volume object: `docker volume rm` (or `docker volume prune`,
/// which on 20.10 removes every unused volume and leaves a bind's data on
/// disk) then the README's cron `sbx gc` deleted it. gc makes the volume
/// again instead and the next sandbox of the session finds the work; only
/// an empty directory (a create killed before `docker volume create`) and
/// its lock file go. A live session's state is never touched.
#[test]
fn gc_keeps_a_sessions_work_whose_volume_is_gone_and_removes_empty_state() {
    let w = World::new();
    let (gone, kept, empty) = (format!("{}-g", w.case), format!("{}-k", w.case), format!("{}-e", w.case));
    for s in [&gone, &kept] {
        let sb = w.create(&["--session", s, "--persist"]);
        assert_success(&w.sbx(&["exec", &sb.id, "--", "/bin/fixture", "write", "/state/keep"]), "write");
        assert_success(&w.sbx(&["destroy", &sb.id]), "destroy keeps the volume");
    }
    let vols = w.state_dir.join("volumes");
    std::fs::create_dir(vols.join(&empty)).unwrap();
    std::fs::write(vols.join(format!("{empty}.lock")), b"").unwrap();
    // The session dir stays bind-mounted nosuid,nodev until purge; the
    // engine removes the volume itself without knowing.
    let volume = format!("sbx-state-{gone}");
    assert_success(&docker(&["volume", "rm", &volume]), "docker volume rm behind sbx's back");
    let out = w.sbx(&["gc", "--dry-run"]);
    assert_success(&out, "gc --dry-run");
    assert!(stdout(&out).contains(&format!("would make again session volume {volume}")), "{}", stdout(&out));
    assert!(stdout(&out).contains(&format!("would remove orphaned session state {}", vols.join(&empty).display())));
    assert!(!stdout(&out).contains(&format!("session state {}", vols.join(&gone).display())), "{}", stdout(&out));
    assert!(!docker(&["volume", "inspect", &volume]).status.success(), "dry run made the volume");
    let out = w.sbx(&["--json", "gc"]);
    assert_success(&out, "gc");
    let report = json(&out);
    assert!(vols.join(&gone).join("data/keep").exists(), "gc deleted a session's work: {report}");
    assert_eq!(report["restored_volumes"], serde_json::json!([volume]), "{report}");
    let paths: Vec<&str> = report["volume_state"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert_eq!(paths.len(), 2, "{report}");
    assert!(!vols.join(&empty).exists() && !vols.join(format!("{empty}.lock")).exists(), "{report}");
    assert_success(&docker(&["volume", "inspect", &volume]), "gc made the volume again");
    let vl: serde_json::Value = serde_json::from_slice(&w.sbx(&["volumes", "--json"]).stdout).unwrap();
    assert!(vl.as_array().unwrap().iter().any(|v| v["name"] == volume.as_str()), "volumes lists it again: {vl}");
    // The next gc has nothing to do with it; the next sandbox finds the work.
    let again = json(&w.sbx(&["--json", "gc"]));
    assert!(again.get("restored_volumes").is_none() && again["volume_state"] == serde_json::json!([]), "{again}");
    let sb = w.create(&["--session", &gone, "--persist"]);
    assert_success(&sb.exec(&["exists", "/state/keep"]), "the next sandbox of the session finds its work");
    assert_success(&w.sbx(&["destroy", "--purge", &sb.id]), "purge");
    assert!(vols.join(&kept).join("data/keep").exists(), "a live session's state was touched");
    assert_success(&w.sbx(&["volumes", "rm", &kept]), "volumes rm");
    w.assert_nothing_left();
}

fn state_opts(sb: &Sandbox) -> Vec<String> {
    let mountinfo = String::from_utf8_lossy(&sb.exec(&["read", "/proc/self/mountinfo"]).stdout).into_owned();
    let line = mountinfo
        .lines()
        .find(|l| l.split(' ').nth(4) == Some("/state"))
        .unwrap_or_else(|| panic!("no /state mount: {mountinfo}"))
        .to_string();
    line.split(' ').nth(5).unwrap().split(',').map(str::to_string).collect()
}

/// A stopped sandbox started again (`docker start`, by anyone who may, or
/// the engine after a daemon restart) must get /state nosuid,nodev again.
#[test]
fn a_restarted_persistent_sandbox_keeps_state_nosuid_nodev() {
    let w = World::new();
    let session = format!("{}-s", w.case);
    let sb = w.create(&["--session", &session, "--persist", "--socket-wait", "0", "--", "sleep"]);
    let opts = state_opts(&sb);
    assert!(opts.contains(&"nosuid".to_string()) && opts.contains(&"nodev".to_string()), "{opts:?}");
    docker_ok(&["stop", "-t", "1", &sb.id]);
    docker_ok(&["start", &sb.id]);
    let opts = state_opts(&sb);
    assert!(
        opts.contains(&"nosuid".to_string()) && opts.contains(&"nodev".to_string()),
        "after docker start: {opts:?}"
    );
    assert_success(&w.sbx(&["destroy", "--purge", &sb.id]), "purge");
}

/// In the persistent volume: a sandbox nests
/// thousands of directories in /state, then `destroy --purge` used std's
/// `remove_dir_all` (one descriptor per level): EMFILE, exit 1, and the
/// session's host directory stayed. The sandbox user owns the volume, so
/// the nesting is the sandbox's to make (done here on the host directory
/// behind /state, the same bytes, without 5,000 docker execs).
#[test]
fn purge_removes_a_deep_tree_the_sandbox_left_in_state() {
    let w = World::new();
    let session = format!("{}-s", w.case);
    let host = w.state_dir.join("volumes").join(&session);
    let sb = w.create(&["--session", &session, "--persist"]);
    assert_success(&sb.exec(&["mkdir", "/state/top"]), "the sandbox writes /state");
    nest(&host.join("data/top"), 5_000);
    let out = sbx_limited(&w, &["destroy", "--purge", &sb.id], 64);
    assert_success(&out, "destroy --purge of a session whose /state is 5,000 levels deep");
    assert!(!host.exists(), "the session's host directory is left");
    assert!(!docker(&["volume", "inspect", &format!("sbx-state-{session}")]).status.success(), "the volume is left");
    w.assert_nothing_left();
}

/// An sbx killed mid-`--clone` leaves its scratch clone in the data dir
/// (a full, possibly private clone): the next `gc` removes it once the
/// cloning process is gone, and never a clone in progress. The clone is
/// held by a `git` on PATH that writes a file into it and waits.
#[test]
fn gc_removes_the_clone_a_killed_create_left_and_not_one_in_progress() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let bin = w.state_dir.with_extension("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let git = bin.join("git");
    // `git clone ... -- URL DEST`: DEST is the last argument.
    std::fs::write(&git, "#!/bin/sh\nfor a; do d=$a; done\nmkdir -p \"$d\" && echo secret > \"$d/key\"\nsleep 60\n")
        .unwrap();
    std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let session = format!("{}-s", w.case);
    let label = w.case_label();
    let mut create = std::process::Command::new(SBX);
    create.args(w.dir_args()).args(["create", "--image", &w.image, "--label", &label]);
    create.args(["--session", &session, "--persist", "--clone", "file:///nowhere/repo.git"]);
    let mut child = create.env("PATH", &path).stdin(std::process::Stdio::null()).spawn().unwrap();
    let volumes = w.state_dir.join("volumes");
    // Beside the session's directory, or (bounded) inside its image beside `data`.
    let scratch = || -> Vec<PathBuf> {
        [volumes.clone(), volumes.join(&session)]
            .iter()
            .flat_map(|v| std::fs::read_dir(v).into_iter().flatten().flatten().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().contains(".sbx-clone-"))
            .collect()
    };
    until(std::time::Duration::from_secs(30), || scratch().iter().any(|d| d.join("workspace/key").exists()))
        .expect("the clone never started");
    let out = w.sbx(&["gc"]);
    assert_success(&out, "gc while the clone runs");
    assert_eq!(scratch().len(), 1, "gc removed a clone in progress: {}", stdout(&out));
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::process::Command::new("pkill").args(["-f", &format!("{}/git", bin.display())]).status();
    let out = w.sbx(&["--json", "gc"]);
    assert_success(&out, "gc after the kill");
    assert_eq!(scratch(), Vec::<PathBuf>::new(), "gc left the killed create's clone");
    assert!(stdout(&out).contains("clone_scratch"), "{}", stdout(&out));
    let _ = std::fs::remove_dir_all(&bin);
}

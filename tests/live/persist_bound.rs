//! A persistent session's share of the host's disk is bounded: as root with
//! a local engine its /state is a file system of its own (`--persist-size`),
//! a write past it gets ENOSPC inside, it outlives `destroy` and is the next
//! sandbox's, and `destroy --purge` leaves no image, mount or loop device.
//! Without its mount the bare directory never becomes an unbounded /state.
//! Where sbx cannot bound it (a non-root operator), `--persist` is refused
//! unless `--persist-size unbounded` is said, which `sbx audit` fails.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::nonroot::UserWorld;
use crate::support::*;

fn image(w: &World, session: &str) -> PathBuf {
    w.state_dir.join("volumes").join(format!("{session}.img"))
}

fn mount_point(w: &World, session: &str) -> PathBuf {
    w.state_dir.join("volumes").join(session)
}

/// Whether anything is mounted at `dir` (mountinfo's fifth field).
fn is_mounted(dir: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = dir.to_str().unwrap();
    info.lines().any(|l| l.split(' ').nth(4) == Some(want))
}

/// Loop devices whose backing file is (or was, before its removal) `file`.
fn loops_backing(file: &Path) -> Vec<String> {
    let out = std::process::Command::new("losetup")
        .args(["--list", "--noheadings", "--output", "NAME,BACK-FILE"])
        .output()
        .expect("spawn losetup");
    let want = file.to_str().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.split_whitespace().nth(1).is_some_and(|b| b == want))
        .map(str::to_string)
        .collect()
}

/// `fill PATH MIB` in the sandbox: (bytes written, the error that stopped it).
fn fill(sb: &Sandbox, path: &str, mib: u64) -> (u64, String) {
    let out = sb.exec(&["fill", path, &mib.to_string()]);
    let text = stdout(&out);
    let rest = text.trim().strip_prefix("wrote ").unwrap_or_else(|| panic!("fill said {text:?}"));
    let (n, err) = rest.split_once(" bytes: ").unwrap_or_else(|| panic!("fill said {text:?}"));
    (n.parse().unwrap(), err.to_string())
}

fn volume<'a>(vols: &'a serde_json::Value, session: &str) -> &'a serde_json::Value {
    vols.as_array().unwrap().iter().find(|v| v["session"] == session).expect("volumes lists the session")
}

#[test]
fn a_bounded_session_gets_enospc_keeps_its_data_and_purge_leaves_nothing() {
    let w = World::new();
    let session = format!("{}-b", w.case);
    let img = image(&w, &session);
    let a = w.create(&["--session", &session, "--persist", "--persist-size", "64MiB"]);
    let rec = json(&w.sbx(&["inspect", &a.id]));
    assert_eq!(rec["persist_size"], "67108864", "{rec}");
    let v = json(&w.sbx(&["--json", "volumes"]));
    assert_eq!(volume(&v, &session)["limit"], 64u64 << 20, "{v}");
    assert_eq!(volume(&v, &session)["mounted"], true, "{v}");
    let md = std::fs::metadata(&img).expect("the session's image");
    assert_eq!((md.len(), md.uid(), md.mode() & 0o7777), (64 << 20, 0, 0o600), "a root-only 64 MiB image");

    assert_success(&a.exec(&["write", "/state/kept"]), "write to the persistent /state");
    let (n, err) = fill(&a, "/state/big", 256);
    assert!(err.contains("No space left"), "the bound is ENOSPC inside: {err}");
    assert!(n > (32 << 20) && n < (64 << 20), "wrote {n} bytes of a 64 MiB bound");
    // What the sandbox wrote is inside the image: the host gave it no more
    // than the image's own size.
    let allocated = std::fs::metadata(&img).unwrap().blocks() * 512;
    assert!(allocated <= 64 << 20, "the image holds {allocated} bytes");
    let used = volume(&json(&w.sbx(&["--json", "volumes"])), &session)["bytes"].as_u64().unwrap();
    assert!(used >= n && used <= 64 << 20, "volumes shows the file system's use: {used}");
    let audit = w.sbx(&["audit", &a.id]);
    assert!(stdout(&audit).lines().any(|l| l.starts_with("PASS  sbx.persist ")), "{}", stdout(&audit));

    assert_success(&w.sbx(&["destroy", &a.id]), "destroy keeps the session");
    assert!(img.exists(), "the image outlives its sandbox");
    // A smaller size than the session has is refused, with nothing made.
    let out = w.try_create(&["--session", &session, "--persist", "--persist-size", "32MiB"]);
    assert_exit(&out, 2, "shrinking a session's /state");
    assert!(stderr(&out).contains("not shrunk"), "{}", stderr(&out));
    w.assert_nothing_left();

    let b = w.create(&["--session", &session, "--persist"]);
    assert_success(&b.exec(&["exists", "/state/kept"]), "the next sandbox of the session has the data");
    assert_success(&b.exec(&["exists", "/state/big"]), "all of it");
    assert_eq!(json(&w.sbx(&["inspect", &b.id]))["persist_size"], "67108864", "no size given: the session's");
    assert_success(&w.sbx(&["destroy", &b.id]), "destroy");

    // A larger size grows it, data kept.
    let c = w.create(&["--session", &session, "--persist", "--persist-size", "128MiB"]);
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 128 << 20);
    assert_success(&c.exec(&["exists", "/state/kept"]), "grown, data kept");
    let (more, err) = fill(&c, "/state/more", 256);
    assert!(err.contains("No space left") && more > (32 << 20) && more < (64 << 20), "{more}: {err}");

    assert_success(&w.sbx(&["destroy", "--purge", &c.id]), "destroy --purge");
    assert!(!img.exists(), "--purge removes the image");
    assert!(!is_mounted(&mount_point(&w, &session)), "and its mount");
    assert_eq!(loops_backing(&img), Vec::<String>::new(), "and its loop device");
    assert!(!mount_point(&w, &session).exists(), "and its directory");
    assert!(!docker(&["volume", "inspect", &format!("sbx-state-{session}")]).status.success());
}

/// A reboot (or an unmount by hand) takes the image's mount away: the bare
/// mount point is root's 0000 and the volume binds `data/` inside the
/// image, so `docker start` of the sandbox fails instead of giving it an
/// unbounded /state; `sbx start`, and the next create, mount it again.
#[test]
fn without_its_mount_a_session_directory_never_becomes_an_unbounded_state() {
    let w = World::new();
    let session = format!("{}-u", w.case);
    let dir = mount_point(&w, &session);
    let sb = w.create(&["--session", &session, "--persist", "--persist-size", "32MiB"]);
    assert_success(&sb.exec(&["write", "/state/kept"]), "write");
    assert_success(&w.sbx(&["stop", &sb.id]), "stop");
    nix::mount::umount2(&dir, nix::mount::MntFlags::empty()).expect("unmount the image by hand");
    let md = std::fs::metadata(&dir).unwrap();
    assert_eq!((md.uid(), md.mode() & 0o7777), (0, 0), "the bare mount point is root's, mode 0000");
    assert!(!dir.join("data").exists());
    let out = docker(&["start", &sb.id]);
    assert!(!out.status.success(), "docker start without the mount must fail: {}", stdout(&out));
    assert!(stderr(&out).contains("no such file or directory"), "{}", stderr(&out));

    assert_success(&w.sbx(&["start", &sb.id]), "sbx start mounts it again");
    assert!(is_mounted(&dir));
    assert_success(&sb.exec(&["exists", "/state/kept"]), "the data is back");
    let (n, err) = fill(&sb, "/state/big", 128);
    assert!(err.contains("No space left") && n < (32 << 20), "bounded after the start: {n}: {err}");

    assert_success(&w.sbx(&["destroy", &sb.id]), "destroy");
    nix::mount::umount2(&dir, nix::mount::MntFlags::empty()).expect("unmount by hand again");
    let next = w.create(&["--session", &session, "--persist"]);
    assert_success(&next.exec(&["exists", "/state/kept"]), "create mounts it again");
    assert_success(&w.sbx(&["destroy", "--purge", &next.id]), "purge");
    assert_eq!(loops_backing(&image(&w, &session)), Vec::<String>::new());
}

#[test]
fn bad_persist_sizes_exit_2_with_nothing_made() {
    let w = World::new();
    let session = format!("{}-z", w.case);
    // Past the disk's free space (16 TiB, the largest size taken, is past
    // any CI disk's): the image is sparse, so the disk would fill first.
    let on = w.state_dir.ancestors().find(|p| p.exists()).unwrap();
    let v = nix::sys::statvfs::statvfs(on).unwrap();
    let past_free = format!("{}MiB", ((v.blocks_available() * v.fragment_size()) >> 20) + 1024);
    for size in ["1MiB", "0", "lots", "1.5G", "17TiB", "16TiB", &past_free] {
        let out = w.try_create(&["--session", &session, "--persist", "--persist-size", size]);
        assert_exit(&out, 2, &format!("--persist-size {size}"));
        assert!(stderr(&out).contains("--persist-size"), "{}", stderr(&out));
    }
    let out = w.try_create(&["--session", &session, "--persist-size", "64MiB"]);
    assert_exit(&out, 2, "--persist-size without --persist");
    w.assert_nothing_left();
    assert!(!w.state_dir.join("volumes").join(&session).exists(), "no session directory");
    assert!(!image(&w, &session).exists(), "no image");
    let part = w.state_dir.join("volumes").join(format!("{session}.img.part"));
    assert!(!part.exists(), "no half-made image");
    assert!(!docker(&["volume", "inspect", &format!("sbx-state-{session}")]).status.success(), "no volume");
}

/// sbx cannot mount a file system as a non-root operator: `--persist` is
/// refused (nothing made) unless `--persist-size unbounded` is said; then
/// it warns, records it, and `sbx audit` fails the sandbox.
#[test]
fn a_non_root_operator_gets_persist_only_explicitly_unbounded_and_audit_fails_it() {
    let w = UserWorld::new();
    let session = format!("{}-n", w.label().rsplit('=').next().unwrap());
    for size in [&[][..], &["--persist-size", "1GiB"][..]] {
        let mut args = vec!["--session", &session, "--persist"];
        args.extend_from_slice(size);
        let out = w.create(&args);
        assert_exit(&out, 2, &format!("non-root --persist {size:?}"));
        assert!(
            stderr(&out).contains("takes root") && stderr(&out).contains("--persist-size unbounded"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(docker_ok(&["ps", "-aq", "--filter", &format!("label={}", w.label())]), "", "nothing made");
    assert!(!docker(&["volume", "inspect", &format!("sbx-state-{session}")]).status.success(), "no volume");

    let out = w.create(&["--session", &session, "--persist", "--persist-size", "unbounded"]);
    assert_success(&out, "non-root --persist-size unbounded");
    assert!(stderr(&out).contains("--persist-size unbounded: session"), "the warning: {}", stderr(&out));
    let id = stdout(&out).trim().to_string();
    assert_eq!(json(&w.sbx(&["inspect", &id]))["persist_size"], "unbounded");
    let audit = w.sbx(&["audit", &id]);
    assert_exit(&audit, 1, "audit of an unbounded /state");
    assert!(stdout(&audit).lines().any(|l| l.starts_with("FAIL  sbx.persist ")), "{}", stdout(&audit));
    assert_success(&w.sbx(&["destroy", "--purge", &id]), "purge");
}

/// What a create killed while it made a session's image leaves (a
/// half-made image with a loop device on it) gc removes; an image that is
/// not mounted is the session's data, and gc leaves it for the next create.
#[test]
fn gc_removes_a_half_made_image_and_keeps_an_unmounted_one() {
    let w = World::new();
    let (kept, killed) = (format!("{}-k", w.case), format!("{}-x", w.case));
    let sb = w.create(&["--session", &kept, "--persist", "--persist-size", "32MiB"]);
    assert_success(&sb.exec(&["write", "/state/kept"]), "write");
    assert_success(&w.sbx(&["destroy", &sb.id]), "destroy");
    let dir = mount_point(&w, &kept);
    nix::mount::umount2(&dir, nix::mount::MntFlags::empty()).expect("unmount by hand");

    let part = w.state_dir.join("volumes").join(format!("{killed}.img.part"));
    std::fs::File::create(&part).unwrap().set_len(32 << 20).unwrap();
    let out = std::process::Command::new("losetup").args(["--find", "--show"]).arg(&part).output().unwrap();
    assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(loops_of(&part).len(), 1);

    let dry = w.sbx(&["gc", "--dry-run"]);
    assert!(stdout(&dry).contains(&part.display().to_string()), "{}", stdout(&dry));
    assert!(part.exists() && loops_of(&part).len() == 1, "a dry run changed nothing");
    let report = json(&w.sbx(&["--json", "gc"]));
    assert!(!part.exists(), "gc removes the half-made image: {report}");
    assert_eq!(loops_backing(&part), Vec::<String>::new(), "and its loop device: {report}");
    assert!(image(&w, &kept).exists(), "an unmounted image is data: {report}");
    let next = w.create(&["--session", &kept, "--persist"]);
    assert_success(&next.exec(&["exists", "/state/kept"]), "the next create mounts it and finds the data");
    assert_success(&w.sbx(&["destroy", "--purge", &next.id]), "purge");
}

/// Total bytes of the file system mounted at `dir`.
fn fs_size(dir: &Path) -> u64 {
    let v = nix::sys::statvfs::statvfs(dir).expect("statvfs");
    v.blocks() * v.fragment_size()
}

/// A grow is two steps: the image lengthened, then resize2fs. An sbx
/// killed between them (SIGKILL while e2fsck ran) left an image of the new
/// length holding the old file system; the next create with that size saw
/// no change and mounted it as it was, the bound half what `volumes` and the
/// record said. The next create finishes the grow, with or without a size.
#[test]
fn a_grow_killed_half_way_is_finished_by_the_next_create() {
    let w = World::new();
    let session = format!("{}-g", w.case);
    let sb = w.create(&["--session", &session, "--persist", "--persist-size", "32MiB"]);
    assert_success(&sb.exec(&["write", "/state/kept"]), "write");
    assert_success(&w.sbx(&["destroy", &sb.id]), "destroy");
    // What the killed grow left: unmounted, the file lengthened, no resize2fs.
    let dir = mount_point(&w, &session);
    nix::mount::umount2(&dir, nix::mount::MntFlags::empty()).expect("unmount");
    std::fs::File::options().write(true).open(image(&w, &session)).unwrap().set_len(64 << 20).unwrap();

    let next = w.create(&["--session", &session, "--persist", "--persist-size", "64MiB"]);
    assert_eq!(json(&w.sbx(&["inspect", &next.id]))["persist_size"], "67108864");
    assert!(fs_size(&dir) > 48 << 20, "the file system is 64 MiB, not 32: {}", fs_size(&dir));
    assert_success(&next.exec(&["exists", "/state/kept"]), "the data survives the grow");
    let (n, err) = fill(&next, "/state/big", 256);
    assert!(err.contains("No space left") && n > 40 << 20, "wrote {n} bytes: {err}");
    assert_success(&w.sbx(&["destroy", &next.id]), "destroy");

    // The same left behind, taken by a create that gives no size.
    nix::mount::umount2(&dir, nix::mount::MntFlags::empty()).expect("unmount");
    std::fs::File::options().write(true).open(image(&w, &session)).unwrap().set_len(96 << 20).unwrap();
    let last = w.create(&["--session", &session, "--persist"]);
    assert!(fs_size(&dir) > 80 << 20, "grown to 96 MiB: {}", fs_size(&dir));
    assert_eq!(json(&w.sbx(&["inspect", &last.id]))["persist_size"], "100663296");
    assert_success(&w.sbx(&["destroy", &last.id]), "destroy");

    // A grow past the disk's free space is refused before the image changes.
    let out = w.try_create(&["--session", &session, "--persist", "--persist-size", "16TiB"]);
    assert_exit(&out, 2, "a grow past the free space");
    assert!(stderr(&out).contains("free"), "{}", stderr(&out));
    assert_eq!(std::fs::metadata(image(&w, &session)).unwrap().len(), 96 << 20, "the image is as it was");
    assert_success(&w.sbx(&["volumes", "rm", &session]), "volumes rm");
}

/// While another mount of a session's file system lives (the engine's bind
/// of the volume as a removed sandbox is torn down, or any mount of it),
/// unmounting the session's directory does not end it. The grow then
/// checked and resized the file under a live file system, and mount(8)
/// reused its loop device: old size, stale cache, ENOSPC at the old bound
/// under a record of the new one. Now the grow waits for the file system
/// to end, refuses if it does not, and the next create does it.
#[test]
fn a_grow_waits_for_the_file_system_to_end_and_refuses_while_it_lives() {
    let w = World::new();
    let session = format!("{}-h", w.case);
    let sb = w.create(&["--session", &session, "--persist", "--persist-size", "32MiB"]);
    assert_success(&sb.exec(&["write", "/state/kept"]), "write");
    assert_success(&w.sbx(&["destroy", &sb.id]), "destroy");
    let dir = mount_point(&w, &session);
    let holder = w.state_dir.join("holder");
    std::fs::create_dir_all(&holder).unwrap();
    let none: Option<&str> = None;
    nix::mount::mount(Some(&dir), &holder, none, nix::mount::MsFlags::MS_BIND, none).expect("bind");

    let out = w.try_create(&["--session", &session, "--persist", "--persist-size", "64MiB"]);
    nix::mount::umount2(&holder, nix::mount::MntFlags::empty()).expect("unmount the holder");
    assert_exit(&out, 1, "a grow under a live file system");
    assert!(stderr(&out).contains("still in use"), "{}", stderr(&out));
    w.assert_nothing_left();

    let next = w.create(&["--session", &session, "--persist", "--persist-size", "64MiB"]);
    assert!(fs_size(&dir) > 48 << 20, "grown once it ended: {}", fs_size(&dir));
    assert_success(&next.exec(&["exists", "/state/kept"]), "the data survives");
    assert_success(&w.sbx(&["destroy", &next.id]), "destroy");

    // A loop device still on the image with its file system ended (what an
    // unmount leaves while the kernel's autoclear is pending, under load):
    // mount(8) reused it after the grow, at its old capacity.
    nix::mount::umount2(&dir, nix::mount::MntFlags::empty()).expect("unmount");
    let img = image(&w, &session);
    let out = std::process::Command::new("losetup").args(["--find", "--show"]).arg(&img).output().unwrap();
    assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
    let last = w.create(&["--session", &session, "--persist", "--persist-size", "96MiB"]);
    assert!(fs_size(&dir) > 80 << 20, "grown on a fresh loop device: {}", fs_size(&dir));
    assert_success(&last.exec(&["exists", "/state/kept"]), "the data survives");
    assert_success(&w.sbx(&["destroy", "--purge", &last.id]), "purge");
    assert_eq!(loops_backing(&img), Vec::<String>::new(), "no loop device left");
}

/// A session written as another uid (`--user`, or by an sbx that ran every
/// sandbox as 65534) stays writable when its next sandbox runs as the uid
/// sbx chose: the whole tree follows the session's uid.
#[test]
fn a_session_written_as_another_uid_stays_writable_under_the_next_uid() {
    let w = World::new();
    let session = format!("{}-u", w.case);
    let bound = ["--session", session.as_str(), "--persist", "--persist-size", "32MiB"];
    let a = w.create(&[&bound[..], &["--user", "4242:4242"]].concat());
    assert_success(&a.exec(&["mkdir", "/state/dir"]), "mkdir as 4242");
    assert_success(&a.exec(&["write", "/state/dir/f"]), "write as 4242");
    assert_success(&w.sbx(&["destroy", &a.id]), "destroy");
    let b = w.create(&bound);
    assert_ne!(b.uid(), 4242);
    assert_success(&b.exec(&["write", "/state/dir/f"]), "rewrite a file the earlier uid made");
    assert_success(&b.exec(&["write", "/state/dir/g"]), "a new file in its directory");
    assert_success(&w.sbx(&["destroy", "--purge", &b.id]), "destroy --purge");
}

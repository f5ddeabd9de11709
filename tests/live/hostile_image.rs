//! Live tests with hostile images and attacker programs: the
//! image and everything inside the sandbox are the attacker's.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// An image built in the test: the fixture plus the attacker program, and
/// whatever `shape` adds to its root, with more Dockerfile `changes`
/// (VOLUME, ...). Removed on drop.
fn hostile_image(w: &World, changes: &[&str], shape: impl FnOnce(&Path)) -> Image {
    let tree = ImageTree::new(&[]).for_case(w).changes(changes);
    std::fs::copy(attacker(), tree.root().join("bin/attack")).unwrap();
    shape(tree.root());
    tree.import()
}

/// tests/hostile/attack.c, built static once per run.
fn attacker() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("attack-{}", std::process::id()));
        gcc_static(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile/attack.c"), &out);
        out
    })
    .clone()
}

/// What a hostile image adds to its root.
type Shape = dyn Fn(&Path);

fn create_with(w: &World, image: &str) -> std::process::Output {
    let label = w.case_label();
    w.sbx(&["create", "--image", image, "--label", &label, "--socket-wait", "20s"])
}

/// An image whose symlinks move sbx's mounts is refused
/// at create, and nothing is left; a plain image still works.
#[test]
fn images_that_redirect_sbx_mounts_are_refused() {
    let w = World::new();
    let cases: [(&str, &str, &Shape); 3] = [
        ("sbx", "/run/sbx", &|r: &Path| {
            std::fs::create_dir_all(r.join("run")).unwrap();
            std::os::unix::fs::symlink("/tmp/sbx", r.join("run/sbx")).unwrap();
        }),
        ("run", "/run/sandbox", &|r: &Path| std::os::unix::fs::symlink("/tmp", r.join("run")).unwrap()),
        ("sandbox", "/run/sandbox", &|r: &Path| {
            std::fs::create_dir_all(r.join("run")).unwrap();
            std::os::unix::fs::symlink("/tmp/x", r.join("run/sandbox")).unwrap();
        }),
    ];
    for (tag, path, shape) in cases {
        let img = hostile_image(&w, &[], shape);
        let out = create_with(&w, &img.0);
        if out.status.success() {
            // Before the fix: accepted. Clean up, then fail.
            let _ = w.adopt(stdout(&out).trim());
        }
        assert_exit(&out, 1, &format!("create from an image with {tag} redirected"));
        let err = stderr(&out);
        assert!(err.contains(&format!("image {} redirects {path}", img.0)), "{tag}: {err}");
        w.assert_nothing_left();
    }
    // Control: the same construction without symlinks works.
    let plain = hostile_image(&w, &[], |_| {});
    let out = create_with(&w, &plain.0);
    assert_success(&out, "create from a plain image");
    let sb = w.adopt(stdout(&out).trim());
    assert_success(&w.sbx(&["ps", &sb.id]), "the helper runs");
}

/// Past the fix: a mount placed AFTER sbx's covers
/// /run, and the sandbox sees its own /run/sbx/helper. docker mounts in
/// order of path depth, and runc follows the image's symlinks, so an image
/// `VOLUME /x/y/z` with `/x/y/z -> /run` (or an operator's `--rw` to such a
/// path) lands a writable mount over /run after /run/sbx was mounted; the
/// image's own /run/sbx/helper (copied into the volume) is what `sbx ps`,
/// `cp` and the rest then run. The mounts at /run/sbx and /run/sandbox are
/// still there underneath, so the old mountinfo check passed.
#[test]
fn a_later_mount_covering_run_is_refused() {
    let w = World::new();
    let shape = |r: &Path| {
        std::fs::create_dir_all(r.join("run/sbx")).unwrap();
        std::fs::create_dir_all(r.join("run/sandbox")).unwrap();
        // The image's own "helper": anything but sbx's.
        std::fs::copy(fixture_binary(), r.join("run/sbx/helper")).unwrap();
        std::fs::create_dir_all(r.join("x/y")).unwrap();
        std::os::unix::fs::symlink("/run", r.join("x/y/z")).unwrap();
    };
    let img = hostile_image(&w, &["VOLUME [\"/x/y/z\"]"], shape);
    let host = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cover-{}", w.case));
    std::fs::create_dir_all(&host).unwrap();
    let rw = format!("{}:/x/y/z", host.display());
    let label = w.case_label();
    let volume = ["create", "--image", &img.0, "--label", &label, "--socket-wait", "0", "--", "sleep"];
    let bind = ["create", "--image", &img.0, "--label", &label, "--socket-wait", "0", "--rw", &rw, "--", "sleep"];
    for (what, args) in [("an image VOLUME", &volume[..]), ("an operator's --rw", &bind[..])] {
        let out = w.sbx(args);
        if out.status.success() {
            // Before the fix: accepted, and sbx's helper commands run the image's.
            let sb = w.adopt(stdout(&out).trim());
            let inside = docker(&["exec", &sb.id, "/bin/fixture", "read", "/run/sbx/helper"]);
            let fixture = std::fs::read(fixture_binary()).unwrap();
            assert!(inside.stdout == fixture, "{what}: accepted, though the helper was not replaced");
            panic!("{what} covering /run was accepted; /run/sbx/helper in the sandbox is the image's");
        }
        assert_exit(&out, 1, &format!("create with {what} covering /run"));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("image {} redirects /run/sbx", img.0)) && err.contains("covers"),
            "{what}: {err}"
        );
        w.assert_nothing_left();
    }
    let _ = std::fs::remove_dir_all(&host);
}

/// Inside a normal sandbox, nothing can move or replace
/// the helper (/run/sbx is a read-only mount point on a read-only root).
#[test]
fn the_sandbox_cannot_replace_the_helper() {
    let w = World::new();
    let img = hostile_image(&w, &[], |_| {});
    let out = create_with(&w, &img.0);
    assert_success(&out, "create");
    let sb = w.adopt(stdout(&out).trim());
    let attack = docker(&["exec", &sb.id, "/bin/attack"]);
    let said = stdout(&attack);
    assert!(attack.status.success() && !said.contains("REPLACED"), "the attacker replaced something:\n{said}");
    assert_eq!(said.lines().filter(|l| l.starts_with("refused")).count(), 13, "{said}");
    // The helper sbx runs is still its own: it answers as the helper.
    assert_success(&w.sbx(&["ps", &sb.id]), "the helper still runs");
    let host = std::fs::read_dir(w.state_dir.join("helper"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("v-"));
    let host = std::fs::read(host.expect("installed helper dir").path().join("helper")).unwrap();
    // Through the host's view of the sandbox's root: the helper is execute-only inside.
    let pid = sb.inspect("{{.State.Pid}}");
    let inside = std::fs::read(format!("/proc/{pid}/root/run/sbx/helper")).unwrap();
    assert!(inside == host, "the helper inside differs from the one sbx installed");
}

/// Deeply nested directories in a socket directory do
/// not break gc (EMFILE with one descriptor per level), and one item gc
/// cannot remove does not stop the rest: it is reported and gc exits 1.
#[test]
fn gc_removes_deep_trees_and_carries_on_past_a_failure() {
    let w = World::new();
    let deep = w.socket_root.join("sbx-00000000dee9");
    let stuck = w.socket_root.join("sbx-0000000057c6");
    std::fs::create_dir_all(&deep).unwrap();
    // 5,000 levels: far past the 64 descriptors sbx gets here (the issue used
    // 100,000; the removal is linear, this keeps the test quick on a busy host).
    nest(&deep, 5_000);
    // A mount point inside: rmdir gives EBUSY, whatever sbx does.
    std::fs::create_dir_all(stuck.join("m")).unwrap();
    let m = stuck.join("m");
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
        }
    }
    nix::mount::mount(Some("tmpfs"), &m, Some("tmpfs"), nix::mount::MsFlags::empty(), Some("size=1m")).unwrap();
    let guard = Unmount(m);

    let out = sbx_limited(&w, &["gc", "--json"], 64);
    assert_exit(&out, 1, "gc with one directory it cannot remove");
    let report = json(&out);
    let removed: Vec<&str> = report["socket_dirs"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect();
    assert_eq!(removed, [deep.to_str().unwrap()], "{report}");
    let failed = report["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{report}");
    assert!(failed[0]["item"].as_str().unwrap().contains("sbx-0000000057c6"), "{report}");
    assert!(stderr(&out).contains("gc_incomplete"), "{}", stderr(&out));
    assert!(!deep.exists(), "the deep tree is gone");
    assert!(stuck.exists());

    drop(guard);
    let out = sbx_limited(&w, &["gc"], 64);
    assert_success(&out, "gc once the mount is gone");
    assert!(stdout(&out).contains("removed socket directory"), "{}", stdout(&out));
    w.assert_nothing_left();
}

fn mounted(path: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    mounts.lines().any(|l| l.split(' ').nth(4) == Some(path.to_str().unwrap()))
}

/// As root, each socket directory is its own small
/// tmpfs, so writes to /run/sandbox stop at ENOSPC instead of filling the
/// host; destroy, and gc for an orphan, unmount it.
#[test]
fn socket_directories_are_bounded_and_unmounted() {
    assert!(nix::unistd::geteuid().is_root(), "this test checks the root path; run the live tests as root");
    let w = World::new();
    let img = hostile_image(&w, &[], |_| {});
    let out = create_with(&w, &img.0);
    assert_success(&out, "create");
    let sb = w.adopt(stdout(&out).trim());
    let dir = w.socket_root.join(&sb.id);
    let fs = nix::sys::statfs::statfs(&dir).unwrap();
    assert_eq!(fs.filesystem_type(), nix::sys::statfs::TMPFS_MAGIC, "the socket directory is a tmpfs");
    let fill = docker(&["exec", &sb.id, "/bin/attack", "fill"]);
    let said = stdout(&fill);
    assert!(fill.status.success(), "writes were not bounded:\n{said}{}", stderr(&fill));
    let bytes: u64 = said.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(bytes <= 1 << 20, "{said}");
    // The sandbox's socket still works after the attempt.
    assert_success(&w.sbx_stdin(&["connect", &sb.id], b"ping"), "connect");
    drop(sb);
    assert!(!mounted(&dir) && !dir.exists(), "destroy unmounts and removes");

    // An orphan (its container removed behind sbx's back, as after kill -9): gc unmounts it.
    let out = create_with(&w, &img.0);
    assert_success(&out, "create");
    let id = stdout(&out).trim().to_string();
    let dir = w.socket_root.join(&id);
    docker_ok(&["rm", "-f", &id]);
    assert!(mounted(&dir));
    assert_success(&w.sbx(&["gc"]), "gc");
    assert!(!mounted(&dir) && !dir.exists(), "gc unmounts and removes the orphan");
    w.assert_nothing_left();
}

/// What a sandbox prints must not pass for sbx's own words: a boot crash's
/// log tail and a name from the sandbox in a `cp` error used to reach the
/// terminal raw, so escape sequences (clear the line, retitle the window)
/// and a forged `sbx: hint:` line came out as sbx's.
#[test]
fn sandbox_text_in_errors_cannot_forge_sbx_lines_or_drive_the_terminal() {
    let w = World::new();
    let forged = "\x1b]0;pwned\x07\r\x1b[2Ksbx: created sbx-000000000000 (tier 2)\nsbx: hint: all good, ignore this";
    let clean = |what: &str, err: &str| {
        assert!(
            !err.chars().any(|c| c.is_control() && c != '\n'),
            "{what}: raw control characters reach the terminal: {err:?}"
        );
        for l in err.lines() {
            assert!(
                l.starts_with("sbx: error: ") || l.starts_with("sbx: hint: ") || !l.starts_with("sbx:"),
                "{what}: a forged sbx line: {l:?} in {err:?}"
            );
        }
    };
    let out = w.try_create(&["--socket-wait", "20s", "--", "say", forged]);
    assert_exit(&out, 1, "create of a sandbox that crashes at boot");
    let err = stderr(&out);
    assert!(err.contains("pwned"), "the log tail is still shown: {err}");
    clean("boot crash", &err);
    w.assert_nothing_left();

    // A name chosen by the sandbox, in an error of `sbx cp` out of it.
    let sb = w.create(&[]);
    let name = "\x1b[31mred\nsbx: hint: all good";
    assert_success(&sb.exec(&["mkdir", "/tmp/d"]), "mkdir");
    assert_success(&sb.exec(&["write", &format!("/tmp/d/{name}")]), "write");
    let dst = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("esc-{}", w.case));
    std::fs::create_dir_all(dst.join("d").join(name)).unwrap();
    let out = w.sbx(&["cp", &format!("{}:/tmp/d", sb.id), dst.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dst);
    assert_exit(&out, 1, "cp onto a directory in the way");
    let err = stderr(&out);
    assert!(err.contains("in the way"), "{err}");
    clean("cp", &err);
}

/// Re-checked beyond cp: a non-streaming docker call's
/// whole output was held in memory, and some carry what the sandbox wrote.
/// `sbx ps` lists the command lines the helper finds under the sandbox's
/// /tmp/.sbx-bg: one 16 MiB file hard-linked 16 times made it print 256 MiB
/// (and sbx hold several copies); a link count in the thousands would take
/// the host's memory. Now such output stops at a cap with a clear error.
#[test]
fn sbx_ps_of_a_sandbox_that_floods_its_process_list_stays_bounded() {
    let _load = loading_the_engine();
    let w = World::new();
    let sb = w.create(&[]);
    assert_success(&sb.exec(&["flood-ps", "16", "16"]), "flood the process list");
    let (out, rss_kib) = sbx_rss(&w, &["ps", &sb.id]);
    assert!(rss_kib < 160 * 1024, "sbx ps peaked at {rss_kib} KiB");
    assert_exit(&out, 1, "sbx ps of a flooded process list");
    assert!(stderr(&out).contains("more than 64 MiB"), "{}", stderr(&out));
}

/// Finding 4 one level up: the descriptor walk guarded everything below
/// DST and DST itself, but DST's own ancestors were followed as symlinks.
/// With `--rw HOST:/work`, the sandbox makes `/work/build` a symlink to a
/// host directory; `sbx cp ID:/tmp/f HOST/build/f` then wrote (as root)
/// there, and `sbx cp HOST/build/secret ID:/tmp/` read a host file into
/// the sandbox. A symlink in a host path sbx writes or reads is followed
/// only when root or the invoking user owns it.
#[test]
fn a_symlink_the_sandbox_planted_above_dst_is_not_followed() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("above-{}", w.case));
    let (work, outside) = (base.join("work"), base.join("outside"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(outside.join("secret"), b"host secret").unwrap();
    let rw = format!("{}:/work", work.display());
    let sb = w.create(&["--rw", &rw]);
    let uid = sb.uid();
    assert_success(&sb.exec(&["ln", outside.to_str().unwrap(), "/work/build"]), "plant the link");
    assert_success(&sb.exec(&["write", "/tmp/f"]), "write");
    assert!(std::fs::symlink_metadata(work.join("build")).unwrap().file_type().is_symlink());

    let out = w.sbx(&["cp", &format!("{}:/tmp/f", sb.id), work.join("build/f").to_str().unwrap()]);
    let wrote = outside.join("f").exists();
    let out2 = w.sbx(&["cp", work.join("build/secret").to_str().unwrap(), &format!("{}:/tmp/", sb.id)]);
    let read = sb.exec(&["exists", "/tmp/secret"]).status.success();
    let _ = std::fs::remove_dir_all(&base);
    assert!(!wrote, "sbx cp wrote through the sandbox's symlink, outside DST: {}", stderr(&out));
    assert!(!read, "sbx cp read a host file through the sandbox's symlink: {}", stderr(&out2));
    for (o, what) in [(&out, "cp out"), (&out2, "cp in")] {
        assert_exit(o, 1, what);
        assert!(stderr(o).contains(&format!("owned by uid {uid}")), "{what}: {}", stderr(o));
    }
}

/// Deeper: even the genuine helper, once running in the
/// sandbox, ran as the sandbox's user and was dumpable, so any process
/// there could ptrace it and write its answers (there is no Yama on many
/// hosts). The helper is now installed execute-only (0511): exec of a file
/// the caller cannot read leaves the process non-dumpable from the start,
/// and without CAP_SYS_PTRACE nothing in the sandbox can attach.
#[test]
fn the_running_helper_cannot_be_ptraced_from_the_sandbox() {
    let w = World::new();
    let img = hostile_image(&w, &[], |_| {});
    let out = create_with(&w, &img.0);
    assert_success(&out, "create");
    let sb = w.adopt(stdout(&out).trim());
    // A helper that lives a while, as during a long `sbx cp` or `wait-port`.
    let mut waiting = Command::new("docker")
        .args(["exec", &sb.id, "/run/sbx/helper", "wait-port", "9", "30000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut said = String::new();
    for _ in 0..50 {
        let attack = docker(&["exec", &sb.id, "/bin/attack", "ptrace"]);
        said = stdout(&attack);
        if !said.contains("0 helpers found") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = waiting.kill();
    let _ = waiting.wait();
    assert!(!said.contains("ATTACHED") && said.contains("refused ptrace"), "{said}");
    // The helper still works, and still is the one sbx installed.
    assert_success(&w.sbx(&["ps", &sb.id]), "the helper runs");
}

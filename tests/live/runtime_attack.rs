//! Hostile images and sandboxes under gVisor: the host side must
//! hold under `--runtime runsc` as it does under runc. These need runsc
//! registered as runtime `runsc`; without it they fail, never skip.

use std::path::{Path, PathBuf};

use crate::runtime_checks::require_runsc;
use crate::support::*;

/// tests/hostile/gvisor.c, built static once per run.
fn attacker() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("gvisor-attack-{}", std::process::id()));
        gcc_static(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile/gvisor.c"), &out);
        out
    })
    .clone()
}

/// An image of the fixture plus the attacker at /bin/attack, started with
/// `start`, with `changes`, shaped by `shape`.
fn image(w: &World, start: &str, changes: &[&str], shape: impl FnOnce(&Path)) -> Image {
    let tree = ImageTree::new(&[]).for_case(w).start(start).changes(changes);
    std::fs::copy(attacker(), tree.root().join("bin/attack")).unwrap();
    shape(tree.root());
    tree.import()
}

type Shape = dyn Fn(&Path);

/// Attack finding 1: gVisor places mounts following the image's
/// symlinks just as runc does, and create skipped the mount check under
/// it. An image linking /run/sbx to /tmp/a/sbx got sbx's helper mounted
/// there; its entrypoint renamed /tmp/a away and planted its own
/// /tmp/a/sbx/helper, and `sbx ps` ran that. Now sbx reads where gVisor's
/// gofer placed the mounts on the host and refuses such images, as under runc.
#[test]
fn under_runsc_images_that_redirect_sbx_mounts_are_refused() {
    require_runsc();
    let w = World::new();
    let serve = r#"ENTRYPOINT ["/bin/attack", "serve"]"#;
    // (/run itself a symlink needs no check: gVisor cannot make /run/sbx-bg
    // there, and `docker run` fails.)
    // (tag, entrypoint, image changes, socket wait, shape)
    let cases: [(&str, &str, &[&str], &str, &Shape); 1] =
        [("takeover", r#"ENTRYPOINT ["/bin/attack", "takeover", "/tmp/a"]"#, &[], "20s", &|r: &Path| {
            std::fs::create_dir_all(r.join("run")).unwrap();
            std::os::unix::fs::symlink("/tmp/a/sbx", r.join("run/sbx")).unwrap();
        })];
    let label = w.case_label();
    for (tag, start, changes, wait, shape) in cases {
        let img = image(&w, start, changes, shape);
        let args = ["create", "--runtime", "runsc", "--image", &img.0, "--label", &label, "--socket-wait", wait];
        let out = w.sbx(&args);
        if out.status.success() {
            // Before the fix: accepted, and sbx's helper commands ran the image's program.
            let sb = w.adopt(stdout(&out).trim());
            let ps = w.sbx(&["ps", &sb.id]);
            let ran = docker(&["exec", &sb.id, "/bin/fixture", "exists", "/tmp/hijacked"]).status.success();
            panic!("{tag}: accepted under runsc; `sbx ps` ran the image's helper: {ran} ({})", stderr(&ps).trim());
        }
        assert_exit(&out, 1, &format!("{tag}: create under runsc"));
        let err = stderr(&out);
        assert!(err.contains(&format!("image {} redirects /run/sbx", img.0)), "{tag}: {err}");
        w.assert_nothing_left();
    }
    // A VOLUME whose path links to /run: as docker's anonymous volume it
    // carried the image's /run (its own helper) over /run/sbx. It is an
    // empty tmpfs of sbx's now, which gVisor places at the path itself: the
    // helper `sbx ps` runs is sbx's.
    let volume = image(&w, r#"ENTRYPOINT ["/bin/fixture", "sleep"]"#, &[r#"VOLUME ["/x/y/z"]"#], |r: &Path| {
        std::fs::create_dir_all(r.join("run/sbx")).unwrap();
        std::fs::create_dir_all(r.join("run/sandbox")).unwrap();
        std::fs::copy(attacker(), r.join("run/sbx/helper")).unwrap();
        std::fs::create_dir_all(r.join("x/y")).unwrap();
        std::os::unix::fs::symlink("/run", r.join("x/y/z")).unwrap();
    });
    let out = w.sbx(&["create", "--runtime", "runsc", "--image", &volume.0, "--label", &label, "--socket-wait", "0"]);
    if out.status.success() {
        let sb = w.adopt(stdout(&out).trim());
        assert_success(&w.sbx(&["ps", &sb.id]), "sbx ps");
        let ran = docker(&["exec", &sb.id, "/bin/fixture", "exists", "/tmp/hijacked"]).status.success();
        assert!(!ran, "volume: `sbx ps` ran the image's helper");
        let write = docker(&["exec", &sb.id, "/bin/fixture", "write", "/run/sbx/helper"]);
        assert!(!write.status.success(), "volume: the sandbox can write /run/sbx: {}", stdout(&write));
    } else {
        assert_exit(&out, 1, "volume: create under runsc");
        assert!(stderr(&out).contains(&format!("image {} redirects /run/sbx", volume.0)), "{}", stderr(&out));
        w.assert_nothing_left();
    }
    // Control: the same construction without symlinks is ready under runsc.
    let plain = image(&w, serve, &[], |_| {});
    let out = w.sbx(&["create", "--runtime", "runsc", "--image", &plain.0, "--label", &label, "--socket-wait", "20s"]);
    assert_success(&out, "create under runsc from a plain image");
    w.adopt(stdout(&out).trim());
}

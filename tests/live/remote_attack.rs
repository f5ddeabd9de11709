//! A hostile image and sandbox against a remote engine, over sshd on
//! loopback (`support::Remote`): what sbx does on the engine's side for
//! them. The sandbox side of the audit attack is `remote_attack/hidename.c`.

use std::path::PathBuf;

use crate::remote::sbx;
use crate::support::*;

/// Dangling volumes on the engine holding `marker` with `token`: what a
/// filler of an image with a `VOLUME` left (the engine is this machine's,
/// so the volumes' directories are read here).
fn leaked_with(marker: &str, token: &str) -> Vec<String> {
    let out = docker_ok(&["volume", "ls", "-q", "--filter", "dangling=true"]);
    out.lines()
        .filter(|v| {
            let at = docker(&["volume", "inspect", "--format", "{{.Mountpoint}}", v]);
            let dir = PathBuf::from(stdout(&at).trim());
            std::fs::read_to_string(dir.join(marker)).is_ok_and(|t| t == token)
        })
        .map(str::to_string)
        .collect()
}

/// An image declaring a `VOLUME` with files in it (as database images
/// do) makes every filler sbx creates from it get an anonymous volume,
/// filled with those files at `docker create`. The filler goes after the
/// fill (helper volume, a session's backing volume): its anonymous volumes
/// must go with it, or each remote create leaves a copy of the image's
/// files on the engine that nothing names and gc cannot find.
#[test]
fn a_filler_of_an_image_with_volumes_leaves_no_anonymous_volume_behind() {
    let remote = Remote::start();
    let w = World::new();
    let env = remote.env();
    let token = unique("a16-leak-");
    let tree = ImageTree::new(&["data"]).for_case(&w).changes(&["VOLUME [\"/data\"]"]);
    std::fs::write(tree.root().join("data/a16-marker"), &token).unwrap();
    let img = tree.import();
    let session = format!("{}-a16", w.case);
    let label = w.case_label();
    // A fresh data dir: the first create fills the helper volume through a
    // filler of this image, the --persist one fills the backing volume.
    let out = sbx(&w, &["create", "--image", &img.0, "--label", &label], &env);
    assert_success(&out, "remote create");
    let first = w.adopt(stdout(&out).trim());
    let out = sbx(
        &w,
        &[
            "create",
            "--image",
            &img.0,
            "--label",
            &label,
            "--session",
            &session,
            "--persist",
            "--persist-size",
            "unbounded",
        ],
        &env,
    );
    assert_success(&out, "remote create --persist");
    let second = w.adopt(stdout(&out).trim());
    let leaked = leaked_with("a16-marker", &token);
    for v in &leaked {
        let _ = docker(&["volume", "rm", v]);
    }
    assert_eq!(leaked, Vec::<String>::new(), "anonymous volumes of the image's VOLUME left by sbx's fillers");
    for sb in [first, second] {
        assert_success(&sbx(&w, &["destroy", &sb.id], &env), "destroy");
    }
    assert_success(&sbx(&w, &["volumes", "rm", &session], &env), "volumes rm");
    assert_eq!(leaked_with("a16-marker", &token), Vec::<String>::new(), "left after destroy");
}

fn rule<'a>(report: &'a serde_json::Value, id: &str) -> &'a str {
    report["rules"].as_array().unwrap().iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no {id}: {report}"))
        ["detail"]
        .as_str()
        .unwrap()
}

/// The sandbox's pid 1 renames itself with bytes that are not UTF-8:
/// audit must still read its status (local and remote), never pass the
/// process rules "from the config alone", nor let the probe go on to the
/// engine's pid number in the sandbox's namespace (a process the sandbox
/// can place there).
#[test]
fn a_sandbox_cannot_hide_its_main_process_from_audit_by_its_name() {
    let remote = Remote::start();
    let w = World::new();
    let env = remote.env();
    let tree = ImageTree::new(&[]).for_case(&w).start("ENTRYPOINT [\"/bin/hidename\"]");
    std::fs::copy(attacker("remote_attack/hidename.c"), tree.root().join("bin/hidename")).unwrap();
    let img = tree.import();
    let out = w.sbx(&["create", "--image", &img.0, "--label", &w.case_label()]);
    assert_success(&out, "create");
    let sb = w.adopt(stdout(&out).trim());
    let pid = sb.inspect("{{.State.Pid}}");
    let name = std::fs::read(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(name, b"\xff\xfe\xfd\n", "the attacker did not rename pid 1: the test proves nothing");
    let local = json(&w.sbx(&["--json", "audit", &sb.id]));
    let far = json(&sbx(&w, &["--json", "audit", &sb.id], &env));
    for (how, report) in [("local", &local), ("remote", &far)] {
        for id in ["4.1", "5.4", "5.22", "5.26"] {
            let detail = rule(report, id);
            assert!(!detail.contains("config alone"), "{how} audit {id}: the process hid: {detail}");
        }
        let uid = format!("; process uid {}", sb.uid());
        assert!(rule(report, "4.1").contains(&uid), "{how}: {}", rule(report, "4.1"));
    }
    assert_eq!(far, local, "a remote audit and a local one of the same sandbox differ");
}

/// A hostile image knows where sbx's filler used to mount the backing
/// volume (`/v`) and declares a VOLUME there, with files (`/v/upper` was
/// the attack; a remote sandbox now takes only top-level VOLUMEs): the
/// fill of upper/ (the session's /state root, the sandbox user's) went
/// into that anonymous volume, and the backing volume's upper/ was the
/// empty root-owned 0755 mount point docker made, so the sandbox user
/// could not write its own /state (and `--clone` went nowhere, or was
/// "kept" as the image's files). The filler now mounts at its random
/// name, which no image can lay anything over.
#[test]
fn an_image_volume_over_the_fill_directory_does_not_divert_the_fill() {
    let remote = Remote::start();
    let w = World::new();
    let env = remote.env();
    let tree = ImageTree::new(&["v/upper/workspace", "v/helper"]).for_case(&w).changes(&["VOLUME [\"/v\"]"]);
    std::fs::write(tree.root().join("v/upper/workspace/from-image"), b"image\n").unwrap();
    let img = tree.import();
    let session = format!("{}-a16v", w.case);
    let label = w.case_label();
    let out = sbx(
        &w,
        &[
            "create",
            "--image",
            &img.0,
            "--label",
            &label,
            "--session",
            &session,
            "--persist",
            "--persist-size",
            "unbounded",
        ],
        &env,
    );
    assert_success(&out, "remote create --persist");
    let sb = w.adopt(stdout(&out).trim());
    assert_success(&sb.exec(&["write", "/state/mine"]), "the sandbox user writes its /state");
    assert_exit(&sb.exec(&["exists", "/state/workspace/from-image"]), 1, "nothing of the image is in /state");
    let back = docker_ok(&["volume", "inspect", "--format", "{{.Mountpoint}}", &format!("sbx-data-{session}")]);
    let entries: Vec<String> = std::fs::read_dir(&back)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(entries, ["lower", "upper", "work"], "the backing volume holds only sbx's directories");
    let lower: Vec<_> = std::fs::read_dir(PathBuf::from(&back).join("lower")).unwrap().flatten().collect();
    assert!(lower.is_empty(), "lower/ is empty: {lower:?}");
    assert_success(&sbx(&w, &["destroy", &sb.id], &env), "destroy");
    assert_success(&sbx(&w, &["volumes", "rm", &session], &env), "volumes rm");
}

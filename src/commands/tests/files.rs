//! `files`, `mkdir` and `watch`: what they print (text and JSON) from the
//! helper's lines, errors naming the sandbox id, bad input refused before
//! any docker call.

use super::*;

/// A directory holding a file, a symlink out, and a name made to forge a line.
const LISTING: &str = "ROOT d\n\
E f 644 5 0 61 -\n\
E l 777 4 0 746f2d657463 2f657463\n\
E f 600 0 0 780a2d72772d722d2d722d2d20303634342066616b65 -\n\
END 3 0\n";

#[test]
fn files_prints_ls_lines_or_one_json_array() {
    let rig = Rig::new();
    rig.owns();
    rig.fake.push(Output::ok(LISTING));
    let r = rig.sbx(&["files", ID, "/tmp/"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(rig.fake.calls()[1], ["exec", "--", CID, "/run/sbx/helper", "list", "/tmp", "1", "100000"]);
    assert_eq!(
        r.stdout,
        "-rw-r--r-- 0644            5 1970-01-01T00:00:00Z a\n\
         lrwxrwxrwx 0777            4 1970-01-01T00:00:00Z to-etc -> /etc\n\
         -rw------- 0600            0 1970-01-01T00:00:00Z x\\n-rw-r--r-- 0644 fake\n"
    );

    rig.owns();
    rig.fake.push(Output::ok(LISTING));
    let r = rig.sbx(&["--json", "files", "-r", ID, "/tmp"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(rig.fake.calls()[3][6..], ["16", "100000"]);
    let v = json(&r.stdout);
    assert_eq!(v.as_array().unwrap().len(), 3);
    assert_eq!((&v[1]["path"], &v[1]["target"]), (&"/tmp/to-etc".into(), &"/etc".into()));
    assert_eq!(v[2]["name"], "x\n-rw-r--r-- 0644 fake");

    // An empty directory under --json is an empty array; truncation is warned about.
    rig.owns();
    rig.fake.push(Output::ok("ROOT d\nE f 644 5 0 61 -\nT\nEND 1 0\n"));
    let r = rig.sbx(&["--json", "files", "--limit", "1", ID, "/tmp"]);
    assert_eq!(r.code, 0);
    assert_eq!(json(r.stderr.lines().next().unwrap())["warning"]["kind"], "truncated");
    rig.owns();
    rig.fake.push(Output::ok("ROOT d\nEND 0 0\n"));
    assert_eq!(json(&rig.sbx(&["--json", "files", ID, "/tmp"]).stdout), serde_json::json!([]));
}

#[test]
fn depth_note_only_when_recursion_was_asked_for() {
    let rig = Rig::new();
    let cut = "ROOT d\nE d 755 0 0 61 -\nEND 1 1\n";
    rig.owns();
    rig.fake.push(Output::ok(cut));
    let r = rig.sbx(&["files", ID, "/tmp"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    rig.owns();
    rig.fake.push(Output::ok(cut));
    let r = rig.sbx(&["--json", "files", "-r", "--max-depth", "1", ID, "/tmp"]);
    let n = json(&r.stderr);
    assert_eq!(n["note"]["kind"], "depth_limit");
    assert_eq!(n["note"]["message"], "1 directory at depth 1 was not descended into (--max-depth)");
    assert_eq!(rig.fake.verbs(), ["container inspect", "exec", "container inspect", "exec"]);
    let calls = rig.fake.calls();
    assert_eq!(calls[1], ["exec", "--", CID, "/run/sbx/helper", "list", "/tmp", "1", "100000"]);
    assert_eq!(calls[3], calls[1], "without -r the listing is depth 1 too");
}

#[test]
fn files_errors_name_the_sandbox_and_bad_input_calls_no_docker() {
    let rig = Rig::new();
    for args in [
        vec!["files", ID, "tmp"],
        vec!["files", ID, "/a/../b"],
        vec!["files", "--max-depth", "0", ID, "/tmp"],
        vec!["files", "--max-depth", "65", ID, "/tmp"],
        vec!["files", "--limit", "0", ID, "/tmp"],
        vec!["files", "--limit", "18446744073709551615", ID, "/tmp"],
        vec!["files", "nope", "/tmp"],
        vec!["mkdir", ID, "rel"],
        vec!["mkdir", ID, "/"],
        vec!["watch", ID, "rel"],
    ] {
        rig.refused(&args);
    }
    rig.owns();
    rig.fake.push(Output::fail(crate::workbench::helper_exit::NO_SUCH_PATH, ""));
    let r = rig.sbx(&["--json", "files", ID, "/tmp/nope"]);
    let e = json(&r.stderr);
    assert_eq!((r.code, e["error"]["kind"].as_str()), (1, Some("no_such_path")));
    assert_eq!(e["error"]["message"], format!("sandbox {ID} has no /tmp/nope"));
    // A fresh sandbox has no /state/workspace: the hint says how to make it, whatever the command.
    rig.owns();
    rig.fake.push(Output::fail(crate::workbench::helper_exit::NO_SUCH_PATH, ""));
    let e = json(&rig.sbx(&["--json", "files", ID, "/state/workspace"]).stderr);
    let hint = e["error"]["hint"].as_str().unwrap();
    assert!(hint.contains(&format!("sbx mkdir -p {ID} /state/workspace")) && !hint.contains("backup"), "{hint}");
    // The helper's output breaking the format: refused, the sandbox named.
    rig.owns();
    rig.fake.push(Output::ok("ROOT d\nE f 644 5 0 2f -\nEND 1 0\n"));
    let r = rig.sbx(&["files", ID, "/tmp"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains(&format!("listing {ID}:/tmp: refusing the helper's listing")), "{}", r.stderr);
    assert!(!r.stderr.contains(CID), "{}", r.stderr);
}

#[test]
fn mkdir_prints_nothing_or_json_and_says_its_errors() {
    let rig = Rig::new();
    rig.owns();
    rig.fake.push(Output::ok("created\n"));
    let r = rig.sbx(&["mkdir", "-p", ID, "/tmp/a/b"]);
    assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (0, "", ""));
    assert_eq!(rig.fake.calls()[1], ["exec", "--", CID, "/run/sbx/helper", "mkdir", "/tmp/a/b", "-p"]);
    rig.owns();
    rig.fake.push(Output::ok("existed\n"));
    let r = rig.sbx(&["--json", "mkdir", "-p", ID, "/tmp/a/b"]);
    assert_eq!(json(&r.stdout), serde_json::json!({"path": "/tmp/a/b", "created": false}));
    rig.owns();
    rig.fake.push(Output::fail(crate::workbench::helper_exit::EXISTS, ""));
    let r = rig.sbx(&["mkdir", ID, "/tmp/a"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        format!("sbx: error: /tmp/a already exists in sandbox {ID}\nsbx: hint: pass -p to accept a directory that is already there\n")
    );
}

#[test]
fn watch_prints_one_line_per_change() {
    let rig = Rig::new();
    rig.owns();
    rig.fake.push(Output::ok("READY\nEV created d 64\nEV modified f 64/61\nMV 64/61 64/62\nOVERFLOW\nGONE\n"));
    let r = rig.sbx(&["watch", "-r", ID, "/tmp"]);
    assert_eq!(r.code, 0);
    assert_eq!(rig.fake.calls()[1], ["exec", "-i", "--", CID, "/run/sbx/helper", "watch", "/tmp", "-r"]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[..3], ["created   /tmp/d/", "modified  /tmp/d/a", "moved     /tmp/d/a -> /tmp/d/b"]);
    assert!(lines[3].starts_with("overflow  events were lost"), "{}", r.stdout);
    assert!(r.stderr.contains("watching") && r.stderr.contains("the watch ended"), "{}", r.stderr);

    rig.owns();
    rig.fake.push(Output::ok("READY\nEV deleted f 61\nGONE\n"));
    let r = rig.sbx(&["--json", "watch", ID, "/tmp"]);
    assert_eq!(
        json(r.stdout.lines().next().unwrap()),
        serde_json::json!({"event": "deleted", "path": "/tmp/a", "type": "file"})
    );
    assert_eq!(json(r.stderr.lines().next().unwrap())["note"]["kind"], "watching");
}

use serde_json::json;

use super::*;
use crate::workbench::lines::RelPath;

#[test]
fn routes_are_the_five_unary_calls() {
    assert_eq!(Rpc::of("/filesystem.Filesystem/ListDir"), Some(Rpc::ListDir));
    assert_eq!(Rpc::of("/filesystem.Filesystem/Move"), Some(Rpc::Move));
    for other in ["/filesystem.Filesystem/WatchDir", "/filesystem.Filesystem/", "/process.Process/Stat"] {
        assert_eq!(Rpc::of(other), None, "{other}");
    }
}

#[test]
fn requests_are_checked_and_made_canonical() {
    assert_eq!(parse(Rpc::Stat, &json!({"path": "/tmp//a/"})), Ok(Asked::Stat("/tmp/a".into())));
    assert_eq!(parse(Rpc::ListDir, &json!({"path": "/", "depth": 3})), Ok(Asked::ListDir("/".into(), 3)));
    // The SDK's depth=None is 0 on the wire, envd's 1.
    assert_eq!(parse(Rpc::ListDir, &json!({"path": "/t", "depth": 0})), Ok(Asked::ListDir("/t".into(), 1)));
    assert_eq!(parse(Rpc::ListDir, &json!({"path": "/t"})), Ok(Asked::ListDir("/t".into(), 1)));
    assert_eq!(
        parse(Rpc::Move, &json!({"source": "/a", "destination": "/b/c"})),
        Ok(Asked::Move("/a".into(), "/b/c".into()))
    );
    for (rpc, msg, why) in [
        (Rpc::Stat, json!({}), "path is required"),
        (Rpc::Stat, json!({"path": "tmp/a"}), "absolute"),
        (Rpc::Remove, json!({"path": "/a/../b"}), "'..'"),
        (Rpc::Remove, json!({"path": "//"}), "may not be / itself"),
        (Rpc::MakeDir, json!({"path": "/a\u{0}b"}), "NUL"),
        (Rpc::Move, json!({"source": "/a"}), "destination is required"),
        (Rpc::ListDir, json!({"path": "/", "depth": 65}), "at most 64"),
        (Rpc::ListDir, json!({"path": "/", "depth": "2"}), "not a number"),
    ] {
        let (code, m) = parse(rpc, &msg).unwrap_err();
        assert_eq!(code, "invalid_argument");
        assert!(m.contains(why), "{msg}: {m}");
    }
}

fn entry(kind: Kind, name: &[u8], target: Option<&[u8]>) -> Entry {
    Entry {
        kind,
        mode: 0o4755,
        size: 3,
        mtime: 0,
        path: RelPath(vec![name.to_vec()]),
        target: target.map(<[u8]>::to_vec),
    }
}

#[test]
fn entries_are_connect_json_whatever_their_bytes() {
    let v = entry_json(b"/tmp/a", &entry(Kind::File, b"a", None));
    assert_eq!(
        v,
        json!({"name": "a", "type": "FILE_TYPE_FILE", "path": "/tmp/a", "size": "3", "mode": 0o755,
               "permissions": "-rwxr-xr-x", "owner": "", "group": "", "modifiedTime": "1970-01-01T00:00:00Z"})
    );
    let v = entry_json(b"/tmp/\xff\"l", &entry(Kind::Symlink, b"\xff\"l", Some(b"/etc/\xfe")));
    assert_eq!((v["name"].as_str(), v["path"].as_str()), (Some("\u{fffd}\"l"), Some("/tmp/\u{fffd}\"l")));
    assert_eq!((v["type"].as_str(), v["symlinkTarget"].as_str()), (Some("FILE_TYPE_SYMLINK"), Some("/etc/\u{fffd}")));
    assert!(serde_json::from_str::<Value>(&v.to_string()).is_ok());
    assert_eq!(entry_json(b"/d", &entry(Kind::Dir, b"d", None))["type"], "FILE_TYPE_DIRECTORY");
    assert_eq!(entry_json(b"/s", &entry(Kind::Socket, b"s", None))["type"], "FILE_TYPE_UNSPECIFIED");
    assert_eq!(permissions(Kind::Dir, 0o750), "drwxr-x---");
    assert_eq!(permissions(Kind::Symlink, 0o777), "Lrwxrwxrwx");
}

#[test]
fn errors_are_the_codes_the_sdk_maps() {
    let id = || "sbx-0123456789ab".to_string();
    let path = || "/x".to_string();
    for (e, code, status) in [
        (Error::from(Explained::NoSuchPath { id: id(), path: path() }), "not_found", 404),
        (Explained::NoParent { id: id(), path: path() }.into(), "not_found", 404),
        (Explained::Exists { id: id(), path: path() }.into(), "already_exists", 409),
        (Explained::Denied { id: id(), path: path() }.into(), "permission_denied", 403),
        (Explained::ReadOnly { id: id(), path: path() }.into(), "permission_denied", 403),
        (Explained::NotADirectory { id: id(), path: path() }.into(), "invalid_argument", 400),
    ] {
        let (c, m) = code_of(&e);
        assert_eq!((c, status_of(c).as_u16()), (code, status), "{m}");
        assert!(m.contains("/x"), "{m}");
    }
}

const ID: &str = "sbx-0123456789ab";

/// What each call asks the helper, and what its answer becomes.
#[test]
fn calls_run_through_the_helper() {
    use crate::docker::fake::FakeDocker;
    use crate::docker::Output;
    let f = FakeDocker::new();
    let t = crate::workbench::Target::test(&f, ID);
    f.push(Output::ok("ROOT d\nE d 755 0 10 61 -\nE f 644 3 10 61/62 -\nE l 777 4 10 6c 2f657463\nEND 3 0\n"));
    let v = run(&t, Asked::ListDir("/t".into(), 2)).unwrap();
    let paths: Vec<&str> = v["entries"].as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/t/a", "/t/a/b", "/t/l"]);
    assert_eq!(v["entries"][2]["symlinkTarget"], "/etc");
    f.push(Output::ok("ROOT l\nE l 777 4 10 74 2f657463\nEND 1 0\n"));
    let (code, m) = run(&t, Asked::ListDir("/t".into(), 1)).unwrap_err();
    assert_eq!(code, "invalid_argument");
    assert!(m.contains("not a directory"), "{m}");
    // A symlink to a directory is there already: never reported as made.
    f.push(Output::ok("created\n"));
    f.push(Output::ok("ROOT l\nE l 777 4 10 6e 2f746d70\nEND 1 0\n"));
    assert_eq!(run(&t, Asked::MakeDir("/t/n".into())).unwrap_err().0, "already_exists");
    f.push(Output::ok("existed\n"));
    assert_eq!(run(&t, Asked::MakeDir("/t/n".into())).unwrap_err().0, "already_exists");
    f.push(Output::ok("created\n"));
    f.push(Output::ok("ROOT d\nE d 755 0 10 6e -\nEND 1 0\n"));
    assert_eq!(run(&t, Asked::MakeDir("/t/n".into())).unwrap()["entry"]["type"], "FILE_TYPE_DIRECTORY");
    f.push(Output::fail(crate::workbench::helper_exit::NO_SUCH_PATH, ""));
    assert_eq!(run(&t, Asked::Remove("/t/x".into())).unwrap_err().0, "not_found");
    f.push(Output::ok(""));
    assert_eq!(run(&t, Asked::Remove("/t/x".into())).unwrap(), json!({}));
    f.push(Output::ok("ROOT f\nE f 644 3 10 79 -\nEND 1 0\n"));
    assert_eq!(run(&t, Asked::Move("/t/x".into(), "/t/y".into())).unwrap()["entry"]["path"], "/t/y");
    let helper = |args: &str| format!("exec -- {ID} /run/sbx/helper {args}");
    assert_eq!(
        f.brief(),
        [
            helper("list /t 2 100000"),
            helper("list /t 1 100000"),
            helper("mkdir /t/n -p"),
            helper("stat /t/n"),
            helper("mkdir /t/n -p"),
            helper("mkdir /t/n -p"),
            helper("stat /t/n"),
            helper("remove /t/x"),
            helper("remove /t/x"),
            helper("move /t/x /t/y"),
        ]
    );
}

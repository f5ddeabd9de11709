//! `--clone` into a `--persist` session on a remote engine
//! through the fake: cloned here, sent as a tar of the sandbox user's on
//! `docker cp -a`'s stdin through the session's filler, only into an
//! absent or empty workspace; a non-empty one kept, anything else refused;
//! no path of this machine in any argv.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::remote::{plain_run, remote, spec, starts_remotely};
use super::remote_persist::{backing_row, helper_ready, no_such, overlay_row, strs};
use super::*;

/// A git repository with one commit (`README`), removed when dropped.
struct Repo(PathBuf);

impl Repo {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("sbx-clone-repo-{:016x}", rand::random::<u64>()));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("README"), b"hello\n").unwrap();
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .args(["-c", "user.email=t@t", "-c", "user.name=t", "-c", "init.defaultBranch=main", "-C"])
                .arg(&dir)
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        git(&["init", "-q"]);
        git(&["add", "README"]);
        git(&["commit", "-q", "-m", "one"]);
        Repo(dir)
    }

    fn url(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const FILLER: &str = "f111e4";

/// A tar as `docker cp FILLER:/v/upper/workspace -` prints it.
fn workspace_tar(entries: &[(&str, tar::EntryType, Option<&str>)]) -> Output {
    let mut b = tar::Builder::new(Vec::new());
    for (path, kind, link) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_mode(0o755);
        h.set_size(0);
        if let Some(l) = link {
            h.set_link_name(l).unwrap();
        }
        h.set_path(path).unwrap();
        h.set_cksum();
        b.append(&h, std::io::empty()).unwrap();
    }
    Output { status: 0, stdout: b.into_inner().unwrap(), stderr: Vec::new() }
}

fn absent() -> Output {
    Output::fail(1, "Error response from daemon: Could not find the file /v/upper/workspace in container f111e4")
}

/// The session's two volumes exist; the filler is made and filled.
fn existing_session(rig: &Rig) {
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&format!("{}{}", overlay_row(rig), backing_row(rig))));
    rig.fake.push(Output::ok(&format!("{FILLER}\n")));
    rig.fake.push(Output::ok(""));
}

fn clone_spec(url: &str) -> SandboxSpec {
    spec(&["--session", "s", "--persist", "--persist-size", "unbounded", "--user", "1000:1001", "--clone", url])
}

/// No `.sbx-clone-*` left in the data dir.
fn no_scratch_left(rig: &Rig) {
    let dir = rig.state.join("volumes/.remote");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(left.iter().all(|n| n.to_string_lossy().ends_with(".lock")), "{left:?} left in {}", dir.display());
}

fn no_local_path(rig: &Rig, repo: &Path) {
    let here = [rig.root.display().to_string(), rig.state.display().to_string(), repo.display().to_string()];
    for a in rig.fake.calls().iter().flatten().filter(|a| !a.starts_with("seccomp=")) {
        assert!(!here.iter().any(|h| a.contains(h.as_str())), "{a} names a path of this machine");
    }
}

#[test]
fn a_first_remote_clone_sends_the_tree_as_the_sandbox_user_s_through_the_filler() {
    let rig = Rig::new();
    let repo = Repo::new();
    rig.image("");
    helper_ready(&rig);
    rig.fake.push(Output::ok(""));
    rig.fake.push(no_such("sbx-state-s"));
    rig.fake.push(Output::ok("sbx-data-s\n"));
    rig.fake.push(Output::ok(&backing_row(&rig)));
    rig.fake.push(Output::ok(&format!("{FILLER}\n")));
    rig.fake.push(Output::ok(""));
    rig.fake.push(absent());
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok("sbx-state-s\n"));
    rig.fake.push(Output::ok(&overlay_row(&rig)));
    starts_remotely(&rig, plain_run());
    let made = remote(&rig).create(&clone_spec(repo.url())).unwrap();
    assert!(made.warnings.iter().all(|w| !w.contains("not cloning")), "{:?}", made.warnings);
    let calls = rig.fake.calls();
    let dir = crate::sandbox::testing::fill_dir(&calls);
    assert!(dir.starts_with("/sbx-fill-"), "{dir}");
    assert_eq!(calls[7], strs(&["cp", "-a", "-", &format!("f111e4:{dir}")]), "the backing directories first");
    assert_eq!(calls[8], strs(&["cp", &format!("f111e4:{dir}/upper/workspace"), "-"]), "then the workspace looked at");
    assert_eq!(calls[9], strs(&["cp", "-a", "-", &format!("f111e4:{dir}/upper")]), "then the tree");
    assert_eq!(calls[10], strs(&["rm", "-f", "-v", "--", "f111e4"]));
    assert_eq!(calls[11][..2], strs(&["volume", "create"])[..], "the overlay after the clone");
    let inputs = rig.fake.inputs();
    assert_eq!(inputs.iter().map(|i| i.0).collect::<Vec<_>>(), [7, 9]);
    let mut a = tar::Archive::new(&inputs[1].1[..]);
    let mut seen = Vec::new();
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let h = e.header().clone();
        let path = e.path().unwrap().display().to_string();
        assert_eq!((h.uid().unwrap(), h.gid().unwrap()), (1000, 1001), "{path} is the sandbox user's");
        assert_eq!(h.mode().unwrap() & 0o6000, 0, "{path} keeps no setuid/setgid bit");
        assert!(!matches!(h.entry_type(), tar::EntryType::Link), "{path}: no hard link");
        if path == "workspace/README" {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut e, &mut s).unwrap();
            assert_eq!(s, "hello\n");
        }
        seen.push(path);
    }
    assert_eq!(seen[0], "workspace/", "the top entry");
    assert!(seen.contains(&"workspace/README".to_string()) && seen.contains(&"workspace/.git/HEAD".to_string()));
    no_local_path(&rig, &repo.0);
    no_scratch_left(&rig);
}

#[test]
fn an_empty_workspace_gets_the_clone_and_a_non_empty_one_is_kept_uncloned() {
    let rig = Rig::new();
    let repo = Repo::new();
    rig.image("");
    helper_ready(&rig);
    existing_session(&rig);
    rig.fake.push(workspace_tar(&[("workspace/", tar::EntryType::Directory, None)]));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    starts_remotely(&rig, plain_run());
    remote(&rig).create(&clone_spec(repo.url())).unwrap();
    let dir = crate::sandbox::testing::fill_dir(&rig.fake.calls());
    let fill = strs(&["cp", "-a", "-", &format!("f111e4:{dir}/upper")]);
    assert_eq!(rig.fake.calls()[7], fill, "an empty workspace is filled");

    // A workspace with files: kept, and nothing cloned (this URL has no repository).
    let rig = Rig::new();
    rig.image("");
    helper_ready(&rig);
    existing_session(&rig);
    let d = tar::EntryType::Directory;
    rig.fake.push(workspace_tar(&[("workspace/", d, None), ("workspace/mine", tar::EntryType::Regular, None)]));
    rig.fake.push(Output::ok(""));
    starts_remotely(&rig, plain_run());
    let made = remote(&rig).create(&clone_spec("/nonexistent/sbx-repo")).unwrap();
    assert!(made.warnings.iter().any(|w| w.contains("/state/workspace of session s already has files")), "{made:?}");
    let calls = rig.fake.calls();
    assert_eq!(calls[7], strs(&["rm", "-f", "-v", "--", "f111e4"]), "{calls:#?}");
    assert_eq!(rig.fake.inputs().len(), 1, "only the backing directories are sent");
    no_scratch_left(&rig);
}

#[test]
fn a_workspace_that_is_no_directory_is_refused_and_a_failed_first_clone_leaves_no_volume() {
    let rig = Rig::new();
    let repo = Repo::new();
    rig.image("");
    helper_ready(&rig);
    existing_session(&rig);
    rig.fake.push(workspace_tar(&[("workspace", tar::EntryType::Symlink, Some("/etc"))]));
    rig.fake.push(Output::ok(""));
    let e = remote(&rig).create(&clone_spec(repo.url())).unwrap_err();
    assert!(matches!(&e, Error::Session(crate::error::SessionError::WorkspaceNotDirectory { .. })), "{e}");
    assert!(e.to_string().contains("a symlink"), "{e}");
    assert_eq!(e.exit_code(), 1);
    let calls = rig.fake.calls();
    assert_eq!(
        calls.last().unwrap(),
        &strs(&["rm", "-f", "-v", "--", "f111e4"]),
        "the filler goes; nothing else: {calls:#?}"
    );
    assert_eq!(rig.fake.inputs().len(), 1, "nothing sent into upper/");
    assert_eq!(rig.fake.remaining(), 0);

    // A first create whose clone fails: the backing volume it made goes too.
    let rig = Rig::new();
    rig.image("");
    helper_ready(&rig);
    rig.fake.push(Output::ok(""));
    rig.fake.push(no_such("sbx-state-s"));
    rig.fake.push(Output::ok("sbx-data-s\n"));
    rig.fake.push(Output::ok(&backing_row(&rig)));
    rig.fake.push(Output::ok(&format!("{FILLER}\n")));
    rig.fake.push(Output::ok(""));
    rig.fake.push(absent());
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok("sbx-data-s\n"));
    let e = remote(&rig).create(&clone_spec("/nonexistent/sbx-repo")).unwrap_err();
    assert!(e.to_string().contains("git"), "{e}");
    let calls = rig.fake.calls();
    let tail = &calls[calls.len() - 2..];
    assert_eq!(tail, [strs(&["rm", "-f", "-v", "--", "f111e4"]), strs(&["volume", "rm", "--", "sbx-data-s"])]);
    no_scratch_left(&rig);
}

//! `--clone` into a `--persist` session on a remote engine,
//! reached through sshd on loopback: cloned here and copied in through the
//! session's never-started filler, the sandbox user's; a later create keeps
//! the sandbox's work; a workspace a sandbox replaced with a link is
//! refused and nothing outside followed; no argv names a path of this
//! machine. And the session's filler, left by a create killed mid-fill, is
//! reaped by gc (never while its create lives, never one whose owner token
//! is not this data dir's).
//!
//! The engine is this machine's, so the tests look at the backing volume's
//! directory to check what landed there.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::persist::make_repo;
use crate::remote::{local_paths, sbx, with};
use crate::support::*;

fn backing_dir(session: &str) -> PathBuf {
    PathBuf::from(docker_ok(&["volume", "inspect", "--format", "{{.Mountpoint}}", &format!("sbx-data-{session}")]))
}

/// Containers that mount the session's backing volume (its fillers).
fn mounting(session: &str) -> Vec<String> {
    let out = docker_ok(&["ps", "-a", "--filter", &format!("volume=sbx-data-{session}"), "--format", "{{.Names}}"]);
    out.lines().map(str::to_string).collect()
}

/// (exists, uid, mode) of what is at `p`, not following a link.
fn stat(p: &Path) -> Option<(u32, u32)> {
    std::fs::symlink_metadata(p).ok().map(|m| (m.uid(), m.mode()))
}

#[test]
fn clone_into_a_remote_session_lands_as_the_sandbox_user_s_keeps_its_work_and_never_follows_a_link() {
    let remote = Remote::start();
    let w = World::new();
    let shim = Shim::logging(&w);
    let env = with(remote.env(), &[("SBX_DOCKER", shim.path().to_str().unwrap())]);
    let repo = make_repo(&w);
    let url = format!("file://{}", repo.display());
    let session = format!("{}-rc", w.case);
    let label = w.case_label();
    let create = |more: &[&str]| {
        let mut args = vec![
            "create",
            "--image",
            &w.image,
            "--label",
            &label,
            "--session",
            &session,
            "--persist",
            "--persist-size",
            "unbounded",
        ];
        args.extend_from_slice(more);
        sbx(&w, &args, &env)
    };

    let started = std::time::Instant::now();
    let out = create(&["--clone", &url]);
    assert_success(&out, "create --persist --clone over ssh");
    eprintln!("remote create --persist --clone took {:?}", started.elapsed());
    let sb = w.adopt(stdout(&out).trim());
    assert_eq!(sb.exec(&["read", "/state/workspace/README"]).stdout, b"from the repo\n");
    let ws = backing_dir(&session).join("upper/workspace");
    for p in [ws.clone(), ws.join("README"), ws.join(".git/HEAD")] {
        assert_eq!(stat(&p).map(|s| s.0), Some(sb.uid()), "{} is not the sandbox user's", p.display());
    }
    assert_success(&sb.exec(&["write", "/state/workspace/by-sandbox"]), "the sandbox user writes its clone");
    assert_success(&sbx(&w, &["destroy", &sb.id], &env), "destroy keeps the volumes");

    // The next create keeps the work: nothing cloned again (the repository has moved on).
    std::fs::write(repo.join("NEW"), b"new\n").unwrap();
    git(&["-C", repo.to_str().unwrap(), "add", "."]);
    git(&["-C", repo.to_str().unwrap(), "commit", "-qm", "two"]);
    let out = create(&["--clone", &url]);
    assert_success(&out, "a second create --clone of the session");
    assert!(stderr(&out).contains("already has files"), "{}", stderr(&out));
    let sb = w.adopt(stdout(&out).trim());
    assert_success(&sb.exec(&["exists", "/state/workspace/by-sandbox"]), "the sandbox's work is kept");
    assert_exit(&sb.exec(&["exists", "/state/workspace/NEW"]), 1, "the workspace was cloned again");

    // The sandbox replaces its workspace with a link to /etc.
    assert_success(&sb.exec(&["mv", "/state/workspace", "/state/old"]), "move the workspace away");
    assert_success(&sb.exec(&["ln", "/etc", "/state/workspace"]), "plant the link");
    assert_success(&sbx(&w, &["destroy", &sb.id], &env), "destroy");
    let etc = [stat(Path::new("/etc")), stat(Path::new("/etc/README")), stat(Path::new("/etc/.git"))];
    let out = create(&["--clone", &url]);
    if out.status.success() {
        let _ = w.adopt(stdout(&out).trim());
    }
    assert_exit(&out, 1, "--clone onto a workspace link");
    let err = stderr(&out);
    assert!(err.contains("/state/workspace is a symlink") && err.contains("never clones through it"), "{err}");
    assert_eq!(
        etc,
        [stat(Path::new("/etc")), stat(Path::new("/etc/README")), stat(Path::new("/etc/.git"))],
        "the link was followed"
    );
    assert!(std::fs::symlink_metadata(&ws).unwrap().file_type().is_symlink(), "the link is left as it was");
    assert_eq!(mounting(&session), Vec::<String>::new(), "a filler was left");
    let scratch: Vec<_> = std::fs::read_dir(w.state_dir.join("volumes/.remote"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".sbx-clone"))
        .collect();
    assert_eq!(scratch, Vec::<String>::new(), "the local clone was left");

    assert_success(&sbx(&w, &["volumes", "rm", &session], &env), "volumes rm over ssh");
    w.assert_nothing_left();
    let argvs = shim.argvs();
    // Through the filler's mount at /NAME (its random name; see `FillerId::dir`).
    let fill = |a: &str, tail: &str| a.split_once(":/sbx-fill-").is_some_and(|(_, p)| p.ends_with(tail));
    assert!(argvs.iter().any(|a| a.len() == 4 && a[..3] == ["cp", "-a", "-"] && fill(&a[3], "/upper")));
    assert!(argvs.iter().any(|a| a.len() == 3 && a[0] == "cp" && fill(&a[1], "/upper/workspace")));
    assert_eq!(local_paths(&argvs), Vec::<String>::new(), "paths of this machine sent to a remote engine: {argvs:?}");
    assert!(!argvs.iter().flatten().any(|a| a.contains(repo.to_str().unwrap())), "the repository's path in an argv");
    std::fs::remove_dir_all(&repo).unwrap();
}

/// A create SIGKILLed while it fills its session's backing volume leaves
/// the filler; gc leaves it while the create lives, removes it once the
/// create is gone, and leaves a container carrying its labels under
/// another name (the owner token covers the name).
#[test]
fn gc_reaps_the_session_filler_of_a_create_killed_mid_fill_and_no_foreign_one() {
    let remote = Remote::start();
    let w = World::new();
    let label = w.case_label();
    // The helper volume verified first, so the fill below is the session's.
    let out = sbx(&w, &["create", "--image", &w.image, "--label", &label], &remote.env());
    assert_success(&out, "a first create over ssh");
    assert_success(&sbx(&w, &["destroy", stdout(&out).trim()], &remote.env()), "destroy");

    let session = format!("{}-kf", w.case);
    let shim = Shim::new(&w, "cp", false);
    let env = with(remote.env(), &[("SBX_DOCKER", shim.path().to_str().unwrap())]);
    let mut cmd = Command::new(SBX);
    cmd.args(w.dir_args());
    cmd.args([
        "create",
        "--image",
        &w.image,
        "--label",
        &label,
        "--session",
        &session,
        "--persist",
        "--persist-size",
        "unbounded",
    ]);
    cmd.env_remove("DOCKER_HOST").envs(env.iter().map(|(k, v)| (k, v)));
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    until(Duration::from_secs(60), || shim.reached()).expect("the create never reached the fill");
    let left = mounting(&session);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].starts_with("sbx-fill-"), "{left:?}");

    let out = sbx(&w, &["--json", "gc"], &remote.env());
    assert_success(&out, "gc while the create fills");
    assert!(!json(&out)["fillers"].to_string().contains(&left[0]), "gc reaped a live create's filler");
    assert_eq!(mounting(&session), left);

    child.kill().unwrap();
    child.wait().unwrap();
    shim.release();
    // Its labels, copied onto a container of another name: not sbx's.
    let labels =
        |k: &str| docker_ok(&["inspect", "--format", &format!("{{{{index .Config.Labels {k:?}}}}}"), &left[0]]);
    let foreign = format!("sbx-fill-{}", &w.case.replace(|c: char| !c.is_ascii_alphanumeric(), ""));
    docker_ok(&[
        "create",
        "--name",
        &foreign,
        "--label",
        &format!("sbx.helper.filler={}", labels("sbx.helper.filler")),
        "--label",
        &format!("sbx.owner={}", labels("sbx.owner")),
        "--label",
        &label,
        "--network",
        "none",
        &w.image,
    ]);

    let out = sbx(&w, &["--json", "gc"], &remote.env());
    assert_success(&out, "gc over ssh");
    let v = json(&out);
    assert!(v["fillers"].as_array().unwrap().contains(&serde_json::json!(left[0])), "{v}");
    assert!(!v["fillers"].to_string().contains(&foreign), "gc reaped a foreign container: {v}");
    assert_eq!(mounting(&session), Vec::<String>::new(), "gc left the filler");
    assert_success(&docker(&["inspect", &foreign]), "the foreign container is left");
    docker_ok(&["rm", "-f", &foreign]);
    assert_success(&sbx(&w, &["volumes", "rm", &session], &remote.env()), "volumes rm of the half-made session");
    w.assert_nothing_left();
}

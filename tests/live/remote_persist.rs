//! `--persist` on a remote engine, reached through sshd on
//! loopback: the session's /state is a nosuid,nodev overlay volume there
//! (`sbx-state-KEY` over the backing `sbx-data-KEY`), the sandbox user's
//! 0700, nothing copied from the image, kept across sandboxes and a
//! restart, removed whole by `destroy --purge` and `volumes rm`; a volume
//! of either name that is not sbx's is refused and left as it was; what a
//! sandbox plants in /state is followed by nothing on the engine's side;
//! and no argv names a path of this machine.
//!
//! The engine is this machine's, so the tests look at the backing volume's
//! directory (its `Mountpoint`) to check what sbx made there.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::persist::image_with_hostile_state;
use crate::remote::{local_paths, sbx, with};
use crate::support::*;

fn state_opts(sb: &Sandbox) -> Vec<String> {
    let mountinfo = String::from_utf8_lossy(&sb.exec(&["read", "/proc/self/mountinfo"]).stdout).into_owned();
    let line = mountinfo
        .lines()
        .find(|l| l.split(' ').nth(4) == Some("/state"))
        .unwrap_or_else(|| panic!("no /state mount: {mountinfo}"))
        .to_string();
    line.split(' ').nth(5).unwrap().split(',').map(str::to_string).collect()
}

fn assert_nosuid_nodev(sb: &Sandbox, when: &str) {
    let opts = state_opts(sb);
    assert!(opts.contains(&"nosuid".to_string()) && opts.contains(&"nodev".to_string()), "{when}: {opts:?}");
}

/// The backing volume's directory on the engine (this machine, here).
fn backing_dir(session: &str) -> PathBuf {
    PathBuf::from(docker_ok(&["volume", "inspect", "--format", "{{.Mountpoint}}", &format!("sbx-data-{session}")]))
}

/// (uid, gid, permission bits) of `p`, not following a link.
fn owner_mode(p: &Path) -> (u32, u32, u32) {
    let md = std::fs::symlink_metadata(p).unwrap();
    (md.uid(), md.gid(), md.mode() & 0o7777)
}

/// The sandbox's /state root as its processes see it.
fn state_root(sb: &Sandbox) -> (u32, u32, u32) {
    let pid = sb.inspect("{{.State.Pid}}");
    owner_mode(&PathBuf::from(format!("/proc/{pid}/root/state")))
}

fn volumes_named(session: &str) -> Vec<String> {
    let mut all = Vec::new();
    for prefix in ["sbx-state-", "sbx-data-"] {
        let name = format!("{prefix}{session}");
        let out = docker_ok(&["volume", "ls", "-q", "--filter", &format!("name={name}")]);
        all.extend(out.lines().filter(|l| *l == name).map(str::to_string));
    }
    all
}

#[test]
fn a_persistent_session_lives_on_the_remote_engine_nosuid_nocopy_and_the_sandbox_user_s() {
    let remote = Remote::start();
    let w = World::new();
    let shim = Shim::logging(&w);
    let env = with(remote.env(), &[("SBX_DOCKER", shim.path().to_str().unwrap())]);
    let img = image_with_hostile_state(&w);
    let session = format!("{}-rp", w.case);
    let label = w.case_label();
    let create = |more: &[&str]| {
        let mut args = vec![
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
        ];
        args.extend_from_slice(more);
        sbx(&w, &args, &env)
    };

    // The engine's disk is not this machine's to bound: refused unless
    // the operator says unbounded, with nothing made.
    let out = sbx(&w, &["create", "--image", &img.0, "--label", &label, "--session", &session, "--persist"], &env);
    assert_exit(&out, 2, "remote --persist without --persist-size unbounded");
    assert!(
        stderr(&out).contains("the engine is remote") && stderr(&out).contains("--persist-size unbounded"),
        "{}",
        stderr(&out)
    );
    assert!(volumes_named(&session).is_empty(), "the refusal made nothing");

    let started = std::time::Instant::now();
    let out = create(&[]);
    assert_success(&out, "create --persist over ssh");
    eprintln!("first remote create --persist took {:?}", started.elapsed());
    assert!(stderr(&out).contains("--persist-size unbounded: session"), "the warning: {}", stderr(&out));
    let sb = w.adopt(stdout(&out).trim());
    let audit = sbx(&w, &["audit", &sb.id], &env);
    assert_exit(&audit, 1, "audit of an unbounded /state");
    assert!(stdout(&audit).lines().any(|l| l.starts_with("FAIL  sbx.persist ")), "{}", stdout(&audit));
    assert_success(&sb.exec(&["write", "/state/kept"]), "the sandbox user writes /state");
    assert_exit(&sb.exec(&["exists", "/state/from-image"]), 1, "the image's /state is not copied in");
    assert_exit(&sb.exec(&["exists", "/state/suid"]), 1, "nor its setuid binary");
    assert_nosuid_nodev(&sb, "first sandbox");
    let uid = sb.uid();
    assert_eq!(state_root(&sb), (uid, uid, 0o700), "the /state root is the sandbox user's");
    let mounts = sb.inspect("{{range .Mounts}}{{.Type}} {{.Name}} {{.Destination}};{{end}}");
    assert!(mounts.contains(&format!("volume sbx-state-{session} /state;")), "{mounts}");
    let upper = backing_dir(&session).join("upper");
    assert_eq!(owner_mode(&upper), (uid, uid, 0o700));
    assert!(upper.join("kept").exists(), "the write is in the backing volume");

    // One writer at a time, and not removed while in use.
    let out = create(&[]);
    assert_exit(&out, 1, "a second sandbox on a volume in use");
    assert!(stderr(&out).contains("in use by running sandbox"), "{}", stderr(&out));
    let out = sbx(&w, &["volumes", "rm", &session], &env);
    assert_exit(&out, 1, "volumes rm of a volume in use");

    // A setuid-root binary that does get in (put there on the engine's
    // side) is not honoured, after a restart too.
    let planted = upper.join("planted-suid");
    std::fs::copy(fixture_binary(), &planted).unwrap();
    nix::unistd::chown(&planted, Some(nix::unistd::Uid::from_raw(0)), Some(nix::unistd::Gid::from_raw(0))).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o4755)).unwrap();
    docker_ok(&["restart", "-t", "1", &sb.id]);
    assert_nosuid_nodev(&sb, "after docker restart");
    let out = docker(&["exec", &sb.id, "/state/planted-suid", "status"]);
    assert_success(&out, "run the planted setuid binary");
    assert!(stdout(&out).contains(&format!("Uid:\t{uid}\t{uid}\t{uid}\t{uid}")), "{}", stdout(&out));

    // The sandbox plants what would mislead a fill resolved in /state:
    // links named like the backing directories, to /etc and /.
    for (target, link) in [("/etc", "/state/upper"), ("/", "/state/work"), ("/etc/passwd", "/state/lower")] {
        assert_success(&sb.exec(&["ln", target, link]), &format!("plant {link}"));
    }
    let vols = json(&sbx(&w, &["--json", "volumes"], &env));
    let v = vols.as_array().unwrap().iter().find(|v| v["session"] == session.as_str()).expect("volumes lists it");
    assert_eq!(v["name"], format!("sbx-state-{session}"));
    assert_eq!(v["in_use_by"], serde_json::json!([sb.id]));
    assert_success(&sbx(&w, &["destroy", &sb.id], &env), "destroy keeps the volumes");
    assert_eq!(volumes_named(&session).len(), 2, "the volumes outlive the sandbox");

    // The next sandbox, as another user, continues where the last left off.
    let etc = (owner_mode(Path::new("/etc")), owner_mode(Path::new("/etc/passwd")));
    let started = std::time::Instant::now();
    let out = create(&["--user", "1000:1001"]);
    assert_success(&out, "a second create --persist over ssh");
    eprintln!("second remote create --persist took {:?}", started.elapsed());
    let sb = w.adopt(stdout(&out).trim());
    assert_success(&sb.exec(&["exists", "/state/kept"]), "the first sandbox's file");
    assert_nosuid_nodev(&sb, "second sandbox");
    assert_eq!(state_root(&sb), (1000, 1001, 0o700), "the /state root is the new sandbox user's");
    assert_eq!(
        etc,
        (owner_mode(Path::new("/etc")), owner_mode(Path::new("/etc/passwd"))),
        "a planted link was followed"
    );
    assert!(std::fs::symlink_metadata(upper.join("upper")).unwrap().file_type().is_symlink(), "the sandbox's link");
    assert_eq!(owner_mode(&upper.join("kept")).0, uid, "the content keeps its owner: sbx never walks it");

    let out = sbx(&w, &["destroy", "--purge", &sb.id], &env);
    assert_success(&out, "destroy --purge over ssh");
    assert_eq!(volumes_named(&session), Vec::<String>::new(), "--purge left a volume");
    assert!(!w.state_dir.join("volumes/.remote").join(format!("{session}.lock")).exists(), "the lock file stays");
    assert!(!w.state_dir.join("volumes").join(&session).exists(), "a directory of this machine was made");
    w.assert_nothing_left();

    let argvs = shim.argvs();
    assert!(argvs.iter().any(|a| a.len() > 2 && a[..2] == ["cp", "-a"]), "{argvs:?}");
    assert_eq!(local_paths(&argvs), Vec::<String>::new(), "paths of this machine sent to a remote engine: {argvs:?}");
}

#[test]
fn volumes_of_the_session_s_names_that_are_not_sbx_s_are_refused_and_left_alone_and_volumes_rm_removes_sbx_s() {
    let remote = Remote::start();
    let w = World::new();
    let env = remote.env();
    let label = w.case_label();
    for (kind, name) in [("session", "sbx-state-"), ("backing", "sbx-data-")] {
        let session = format!("{}-{kind}", w.case);
        let theirs = format!("{name}{session}");
        docker_ok(&["volume", "create", "--label", "mine=1", &theirs]);
        let out = sbx(
            &w,
            &[
                "--json",
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
            ],
            &env,
        );
        if out.status.success() {
            let _ = w.adopt(json(&out)["id"].as_str().unwrap_or_default());
        }
        assert_exit(&out, 1, &format!("create --persist with someone's {theirs}"));
        let err = stderr(&out);
        assert!(err.contains("foreign_volume") && err.contains(&theirs), "{kind}: {err}");
        assert_eq!(volumes_named(&session), vec![theirs.to_string()], "{kind}: sbx made or removed a volume");
        let out = sbx(&w, &["volumes", "rm", &session], &env);
        assert_exit(&out, 1, &format!("volumes rm of someone's {theirs}"));
        assert!(stderr(&out).contains("not this sbx's"), "{}", stderr(&out));
        assert_eq!(docker_ok(&["volume", "inspect", "--format", "{{json .Labels}}", &theirs]), r#"{"mine":"1"}"#);
        let vols = json(&sbx(&w, &["--json", "volumes"], &env));
        assert!(!vols.to_string().contains(&theirs), "volumes lists someone's volume: {vols}");
        docker_ok(&["volume", "rm", &theirs]);
    }

    // The filler container is of the sandbox's image: one whose /v (where
    // the filler mounted the backing volume before it took its random
    // name) is a symlink still gets the directories into the volume, and
    // `volumes rm` removes both.
    let tree = ImageTree::new(&["state"]).for_case(&w);
    std::os::unix::fs::symlink("/tmp", tree.root().join("v")).unwrap();
    let img = tree.import();
    let session = format!("{}-v", w.case);
    let args = [
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
        "--user",
        "1000",
    ];
    let out = sbx(&w, &args, &env);
    assert_success(&out, "create --persist from an image whose /v is a symlink");
    let sb = w.adopt(stdout(&out).trim());
    assert_eq!(state_root(&sb), (1000, 1000, 0o700));
    assert_nosuid_nodev(&sb, "an image whose /v is a symlink");
    assert_success(&sbx(&w, &["destroy", &sb.id], &env), "destroy");
    assert_eq!(volumes_named(&session).len(), 2);
    let out = sbx(&w, &["volumes", "rm", &session], &env);
    assert_success(&out, "volumes rm over ssh");
    assert_eq!(stdout(&out).trim(), format!("sbx-state-{session}"));
    assert_eq!(volumes_named(&session), Vec::<String>::new(), "volumes rm left a volume");
    assert_exit(&sbx(&w, &["volumes", "rm", &session], &env), 1, "volumes rm of a session with no volume");
    w.assert_nothing_left();
}

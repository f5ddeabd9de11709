//! A sandbox is never the user who runs sbx: not their uid, not one of
//! their groups, not the docker socket's group; and `sbx cp` writes through
//! no link such a sandbox, or any sandbox, could have made. Run as
//! `sbxtest-user`, a non-root docker-group user (see `nonroot`), where an
//! image `USER <their uid>` once let a sandbox plant `/work/build ->
//! ~/.ssh` that `sbx cp ID:/tmp/authorized_keys ~/project/build/...`
//! wrote through. Also: host paths that are the kernel's interfaces are no
//! mount sources.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::nonroot::{user, UserWorld};
use crate::support::*;

/// The docker socket's group: who may drive the engine.
fn docker_gid() -> u32 {
    std::fs::metadata("/var/run/docker.sock").expect("the docker socket").gid()
}

/// An image of the fixture with `USER user`, and `/etc/passwd`, `/etc/group`
/// naming its uid `atk` and putting `atk` in `groups` (docker adds the
/// groups of a user named by name from there).
fn image_with_user(user: &str, uid: u32, groups: &[u32]) -> Image {
    let tree = ImageTree::new(&["etc"]).changes(&[&format!("USER {user}")]);
    std::fs::write(tree.root().join("etc/passwd"), format!("atk:x:{uid}:{uid}::/:/bin/fixture\n")).unwrap();
    let lines: String = groups.iter().map(|g| format!("g{g}:x:{g}:atk\n")).collect();
    std::fs::write(tree.root().join("etc/group"), lines).unwrap();
    tree.import()
}

/// `Uid:`, `Gid:` and `Groups:` of a process in the sandbox, as its kernel says.
fn ids_inside(w: &UserWorld, id: &str) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let out = w.sbx(&["exec", id, "--", "/bin/fixture", "read", "/proc/self/status"]);
    assert_success(&out, "reading /proc/self/status in the sandbox");
    let text = stdout(&out);
    let field = |k: &str| -> Vec<u32> {
        let line = text.lines().find(|l| l.starts_with(k)).unwrap_or_else(|| panic!("no {k} in {text}"));
        line[k.len()..].split_whitespace().map(|n| n.parse().unwrap()).collect()
    };
    (field("Uid:"), field("Gid:"), field("Groups:"))
}

#[test]
fn images_naming_the_callers_or_the_docker_sockets_ids_never_get_them() {
    let w = UserWorld::new();
    let (uid, gid) = user();
    let docker = docker_gid();
    let label = w.label();
    // The last: a uid of no one here, named `atk` in the image's /etc/passwd
    // and a member of both groups in its /etc/group, which docker would
    // add were the user passed by name or without a gid. No image USER is
    // used: each runs as a uid:gid of sbx's range, passed as numbers.
    for user_line in [format!("{uid}:{gid}"), format!("65534:{docker}"), "4242".into()] {
        let img = image_with_user(&user_line, 4242, &[gid, docker]);
        let out = w.sbx(&["--json", "create", "--image", &img.0, "--label", &label]);
        assert_success(&out, &format!("create from an image with USER {user_line}"));
        let created = json(&out);
        let id = created["id"].as_str().unwrap().to_string();
        let warned = created["warnings"].to_string();
        assert!(warned.contains("is not used"), "USER {user_line}: {warned}");
        let (uids, gids, groups) = ids_inside(&w, &id);
        assert!(!uids.contains(&uid), "USER {user_line}: ran as the caller: {uids:?}");
        for g in [gid, docker] {
            assert!(!gids.contains(&g) && !groups.contains(&g), "USER {user_line}: has group {g}: {gids:?} {groups:?}");
        }
        let own = created["user"].as_str().unwrap().split(':').next().unwrap().parse::<u32>().unwrap();
        assert!((0x7000_0000..0x7100_0000).contains(&own), "{}", created["user"]);
        assert_eq!((uids[0], gids[0]), (own, own), "{}", created["user"]);
        assert!(groups.iter().all(|g| *g == own), "no group from the image's /etc/group: {groups:?}");
        assert_success(&w.sbx(&["destroy", &id]), "destroy");
    }
    // Named by --user: refused, exit 2, nothing made.
    let before = docker_ok(&["ps", "-aq", "--filter", &format!("label={label}")]);
    for u in [uid.to_string(), format!("65534:{docker}"), format!("1000:{gid}")] {
        let out = w.create(&["--user", &u]);
        assert_exit(&out, 2, &format!("--user {u}"));
        assert!(stderr(&out).contains("a sandbox running as the user who runs sbx"), "{}", stderr(&out));
    }
    assert_eq!(docker_ok(&["ps", "-aq", "--filter", &format!("label={label}")]), before, "nothing created");
}

/// The directories of the F3 reproduction, the docker user's, removed on drop.
struct Project {
    dir: PathBuf,
}

impl Project {
    fn new(w: &UserWorld) -> Self {
        let (uid, gid) = user();
        let dir = w.socket_root.with_extension("project");
        for d in ["", "project", "ssh"] {
            let p = dir.join(d);
            std::fs::create_dir_all(&p).unwrap();
            std::os::unix::fs::chown(&p, Some(uid), Some(gid)).unwrap();
        }
        // Writable by any sandbox user, so the link gets planted whoever it runs as.
        std::fs::set_permissions(dir.join("project"), std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::write(dir.join("ssh/authorized_keys"), b"ORIGINAL").unwrap();
        std::os::unix::fs::chown(dir.join("ssh/authorized_keys"), Some(uid), Some(gid)).unwrap();
        Project { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.join(p)
    }

    fn keys(&self) -> Vec<u8> {
        std::fs::read(self.path("ssh/authorized_keys")).unwrap()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn cp_through(w: &UserWorld, id: &str, project: &Project, link: &str) -> std::process::Output {
    let dst = project.path(&format!("project/{link}/authorized_keys"));
    w.sbx(&["cp", &format!("{id}:/tmp/authorized_keys"), dst.to_str().unwrap()])
}

#[test]
fn cp_never_writes_through_a_link_planted_in_a_rw_mount() {
    let w = UserWorld::new();
    let (uid, gid) = user();
    let project = Project::new(&w);
    let img = image_with_user(&format!("{uid}:{gid}"), 4242, &[]);
    let rw = format!("{}:/work", project.path("project").display());
    let label = w.label();
    let out = w.sbx(&["create", "--image", &img.0, "--label", &label, "--rw", &rw]);
    assert_success(&out, "create --rw");
    let id = stdout(&out).trim().to_string();
    let target = project.path("ssh");
    let ln = w.sbx(&["exec", &id, "--", "/bin/fixture", "ln", target.to_str().unwrap(), "/work/build"]);
    assert_success(&ln, "the sandbox plants /work/build -> the caller's ~/.ssh");
    // Nor does the next sandbox get the keys mounted through it.
    let through = format!("{}:/keys", project.path("project/build").display());
    let out = w.sbx(&["create", "--image", &img.0, "--label", &label, "--ro", &through]);
    assert_exit(&out, 2, "--ro through the sandbox's link");
    assert!(stderr(&out).contains("symlink owned by uid"), "{}", stderr(&out));
    // Root's links would be followed: no root command where a host mount is writable.
    let root_ln = w.sbx(&["exec", "-u", "0", &id, "--", "/bin/fixture", "ln", "/", "/work/rootlink"]);
    assert_exit(&root_ln, 2, "exec -u 0 with a --rw mount");
    assert!(!project.path("project/rootlink").exists());
    assert_success(&w.sbx(&["exec", &id, "--", "/bin/fixture", "write", "/tmp/authorized_keys"]), "write");
    let out = cp_through(&w, &id, &project, "build");
    assert_exit(&out, 1, "sbx cp through the sandbox's link");
    assert!(stderr(&out).contains("symlink owned by uid"), "{}", stderr(&out));
    assert_eq!(project.keys(), b"ORIGINAL", "written through the link");

    // A link of the caller's uid (as a sandbox someone else started as it
    // would make one): not followed either, only root's are.
    let theirs = project.path("project/theirs");
    std::os::unix::fs::symlink(&target, &theirs).unwrap();
    std::os::unix::fs::lchown(&theirs, Some(uid), Some(gid)).unwrap();
    let out = cp_through(&w, &id, &project, "theirs");
    assert_exit(&out, 1, "sbx cp through a link of the caller's uid");
    assert!(stderr(&out).contains(&format!("symlink owned by uid {uid}, not by root")), "{}", stderr(&out));
    assert_eq!(project.keys(), b"ORIGINAL", "written through the caller's link");
    // Root's link is followed: the ordinary `/var/run -> /run` kind.
    let roots = project.path("project/roots");
    std::os::unix::fs::symlink(project.path("project"), &roots).unwrap();
    assert_success(&cp_through(&w, &id, &project, "roots"), "sbx cp through root's link");
    assert_eq!(std::fs::read(project.path("project/authorized_keys")).unwrap(), b"x");
}

#[test]
fn kernel_interfaces_are_no_mount_sources() {
    let w = World::new();
    let d = w.socket_root.join("links");
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::symlink("/proc", d.join("p")).unwrap();
    let via_link = format!("{}:/hostproc", d.join("p").display());
    let cases = [
        vec!["--ro", "/proc:/hostproc"],
        vec!["--rw", "/proc/self/..:/hostproc"],
        vec!["--ro", "/./sys:/hostsys"],
        vec!["--ro", "/dev:/hostdev"],
        vec!["--ro", via_link.as_str()],
        vec!["--ro", "/run/containerd:/c"],
        vec!["--state-dir", "/proc"],
    ];
    for args in cases {
        if args[1].starts_with("/run/containerd") && !Path::new("/run/containerd").exists() {
            continue;
        }
        let out = w.try_create(&args);
        assert_exit(&out, 2, &format!("{args:?}"));
        let err = stderr(&out);
        assert!(err.contains("sbx: error: invalid") && err.contains("it "), "{args:?}: {err}");
    }
    let out = w.try_create(&["--ro", "/proc:/hostproc"]);
    assert!(stderr(&out).contains("the host kernel's interface"), "{}", stderr(&out));
    // Root's links in a writable mount are ones cp trusts: no --user 0 with one.
    let rw = format!("{}:/w", d.display());
    assert_exit(&w.try_create(&["--user", "0", "--rw", &rw]), 2, "--user 0 --rw");
    std::fs::remove_dir_all(&d).unwrap();
    w.assert_nothing_left();
}

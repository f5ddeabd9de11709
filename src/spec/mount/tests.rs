//! Mount specs: what is refused as a target and as a host source.
use super::*;

/// A scratch directory removed when the test ends, pass or fail (issue
/// 10 item 9: these were left behind in /tmp, root-owned, on every run).
struct TmpDir(PathBuf);

impl std::ops::Deref for TmpDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmpdir(tag: &str) -> TmpDir {
    let d = std::env::temp_dir().join(format!("sbx-mount-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    TmpDir(d.canonicalize().unwrap())
}

#[test]
fn scratch_directories_are_removed() {
    let d = tmpdir("gone");
    std::fs::write(d.join("f"), b"x").unwrap();
    let p = d.to_path_buf();
    drop(d);
    assert!(!p.exists(), "{} left behind", p.display());
}

#[test]
fn parses_host_and_target() {
    let d = tmpdir("ok");
    let m = MountSpec::parse(&format!("{}:/data", d.display()), true, &[]).unwrap();
    assert_eq!(m.host, *d);
    assert_eq!(m.sandbox, "/data");
    assert_eq!(m.mount_arg(), format!("type=bind,src={},dst=/data,readonly", d.display()));
    let m = MountSpec::parse(&d.display().to_string(), false, &[]).unwrap();
    assert_eq!(m.sandbox, d.display().to_string());
    assert!(!m.mount_arg().contains("readonly"));
}

#[test]
fn refuses_sbx_own_directories_and_what_holds_or_is_inside_them() {
    let d = tmpdir("own");
    for sub in ["data/stopped", "run/sbx-0123456789ab", "run/data", "project"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    let (data, run) = (d.join("data"), d.join("run"));
    let m = |p: &str| MountSpec::parse(&format!("{}:/x", d.join(p).display()), false, &[]).unwrap();
    for fine in ["project", "run/data"] {
        check_not_sbx_dirs(&[m(fine)], None, &data, &run).unwrap();
    }
    for (mount, how) in [
        ("data", "it is sbx's own data"),
        ("", "it holds"),
        ("data/stopped", "it is inside"),
        ("run/sbx-0123456789ab", "it is inside sbx's own socket"),
    ] {
        let e = check_not_sbx_dirs(&[m(mount)], None, &data, &run).unwrap_err();
        assert!(e.reason.starts_with(how), "{mount}: {}", e.reason);
    }
    let e = check_not_sbx_dirs(&[], Some(&m("run")), &data, &run).unwrap_err();
    assert_eq!(e.what, "--state-dir");
    assert!(e.reason.contains("socket directory"), "{}", e.reason);
}

#[test]
fn refuses_hostile_specs() {
    let d = tmpdir("bad");
    let ds = d.display();
    let cases = [
        (format!("{ds}:/data,readonly=false"), "inject"),
        (format!("{ds},ro"), "inject"),
        (format!("{ds}:/a\"b"), "inject"),
        (format!("{ds}:relative"), "not absolute"),
        (format!("{ds}:/a/../proc"), "'..'"),
        (format!("{ds}:/"), "over /"),
        (format!("{ds}:/proc"), "over /proc"),
        (format!("{ds}:/proc/sys"), "over /proc"),
        (format!("{ds}:/sys"), "over /sys"),
        (format!("{ds}:/dev/"), "over /dev"),
        (format!("{ds}:/run"), "over /run"),
        (format!("{ds}:/run/sandbox"), "over /run/sandbox"),
        (format!("{ds}:/run/sandbox/x"), "over /run/sandbox"),
        (format!("{ds}:/var/run"), "over /var/run"),
        (format!("{ds}:/tmp"), "sbx's own tmpfs"),
        (format!("{ds}:/state/workspace"), "sbx's own tmpfs"),
        (format!("{ds}:/run/sbx-bg"), "sbx's own tmpfs"),
        (format!("{ds}:/run/sbx"), "over /run/sbx"),
        (format!("{ds}:/run/sbx/helper"), "over /run/sbx"),
        (format!("{ds}:/var/run/sbx/helper"), "over /run/sbx"),
        (format!("{ds}:/var/run/sandbox/sandbox.sock"), "over /run/sandbox"),
        (format!("{ds}:/var/run/"), "over /var/run"),
        (format!("{ds}:/a:/b"), "more than one"),
        ("/definitely/not/here:/data".to_string(), "must exist"),
        ("-x:/data".to_string(), "starts with '-'"),
        (":/data".to_string(), "empty"),
    ];
    for (spec, why) in cases {
        let err = MountSpec::parse(&spec, true, &[]).unwrap_err();
        assert!(err.reason.contains(why), "{spec:?}: {}", err.reason);
    }
}

/// `--ro /proc:/hostproc` handed the sandbox every same-uid process's
/// root and environ: the kernel's trees are refused as sources however
/// the path names them, and so are the engine's socket directories.
#[test]
fn refuses_kernel_interfaces_and_socket_dirs_as_sources() {
    let d = tmpdir("kern");
    std::os::unix::fs::symlink("/proc", d.join("p")).unwrap();
    std::os::unix::fs::symlink("/sys/fs/cgroup", d.join("cg")).unwrap();
    let mut cases = vec![
        ("/proc".to_string(), "is or lies in /proc"),
        ("/proc/self/..".into(), "is or lies in /proc"),
        ("/./proc".into(), "is or lies in /proc"),
        ("/proc/self/environ".into(), "/proc"),
        ("/sys".into(), "/sys"),
        ("/dev".into(), "is or lies in /dev"),
        ("/dev/null".into(), "/dev"),
        (d.join("p").display().to_string(), "is or lies in /proc"),
        (d.join("cg").display().to_string(), "is or lies in /sys"),
    ];
    for dir in ["/run", "/var/run", "/run/dbus", "/var/lib/docker", "/run/containerd", "/run/user"] {
        if Path::new(dir).exists() {
            // (/run may hold a kernel mount first: the engine's netns files.)
            cases.push((dir.into(), "it "));
        }
    }
    for (host, why) in cases {
        for ro in [true, false] {
            let err = MountSpec::parse(&format!("{host}:/hostx"), ro, &[]).unwrap_err();
            assert!(err.reason.contains(why), "{host}: {}", err.reason);
        }
    }
    let err = MountSpec::state_dir("/proc/self/..", &[]).unwrap_err();
    assert!(err.reason.contains("/proc"), "{}", err.reason);
    // A socket of any service, not only docker's.
    let sock = d.join("containerd.sock");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let err = MountSpec::parse(&format!("{}:/s", sock.display()), true, &[]).unwrap_err();
    assert!(err.reason.contains("a unix socket"), "{}", err.reason);
    // A directory holding one is fine: only known socket directories are refused.
    MountSpec::parse(&format!("{}:/s", d.display()), true, &[]).unwrap();
}

/// A source reached through a link a sandbox could have made (any owner
/// but root) is refused, as `sbx cp` refuses to follow one: with `--rw
/// P:/work` the sandbox makes `P/build -> ~/.ssh`, and `--ro P/build`
/// would mount the operator's keys into the next sandbox.
#[test]
fn a_source_through_a_link_not_roots_is_refused() {
    let d = tmpdir("links");
    std::fs::create_dir_all(d.join("real/sub")).unwrap();
    std::os::unix::fs::symlink(d.join("real"), d.join("roots")).unwrap();
    MountSpec::parse(&format!("{}:/x", d.join("roots/sub").display()), true, &[]).unwrap();
    MountSpec::parse(&format!("{}:/x", d.join("roots/../real").display()), true, &[]).unwrap();
    if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::symlink("real", d.join("theirs")).unwrap();
        std::os::unix::fs::lchown(d.join("theirs"), Some(65534), Some(65534)).unwrap();
        for src in ["theirs", "theirs/sub", "roots/../theirs/sub"] {
            let e = MountSpec::parse(&format!("{}:/x", d.join(src).display()), false, &[]).unwrap_err();
            assert!(e.reason.contains("symlink owned by uid 65534, not by root"), "{src}: {}", e.reason);
            assert!(e.reason.contains(&d.join("real").display().to_string()), "{}", e.reason);
        }
        let e = MountSpec::state_dir(&d.join("theirs").display().to_string(), &[]).unwrap_err();
        assert!(e.reason.contains("uid 65534"), "{}", e.reason);
    }
    assert_eq!(untrusted_link(Path::new("/proc/self/..")), None, "/proc/self is the kernel's (root's)");
}

/// A bind-mount alias of /proc is a /proc no path names: judged by the
/// filesystem mounted there (mountinfo), also when the source holds it.
#[test]
fn kernel_filesystems_are_found_wherever_mounted() {
    let info = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:5 / /mnt/host\\040proc rw,relatime - proc proc rw
31 22 0:6 / /srv/cg rw - cgroup2 cgroup2 rw
32 22 8:1 /data /srv/data rw - ext4 /dev/sda1 rw
33 22 0:4 net:[4026531840] /run/netns/h rw - nsfs nsfs rw
";
    let k = kernel_mount_points(info);
    assert_eq!(k, [PathBuf::from("/mnt/host proc"), "/srv/cg".into(), "/run/netns/h".into()]);
    let d = tmpdir("alias");
    for (src, why) in
        [("/mnt/host proc/1", "is or lies in /mnt/host proc"), ("/srv", "holds /srv/cg"), ("/mnt", "holds")]
    {
        let e = check_host_source(Path::new(src), &k).unwrap_err();
        assert!(e.contains(why), "{src}: {e}");
    }
    check_host_source(&d, &k).unwrap();
    check_host_source(Path::new("/srv/data-not-here"), &[]).unwrap_err();
}

#[test]
fn refuses_the_docker_socket_and_its_parents() {
    let d = tmpdir("sock");
    let sock = d.join("docker.sock");
    std::fs::write(&sock, b"").unwrap();
    let socks = vec![sock.clone()];
    for spec in [sock.display().to_string(), d.display().to_string(), "/".to_string()] {
        let err = MountSpec::parse(&format!("{spec}:/x"), true, &socks).unwrap_err();
        assert!(err.reason.contains("docker socket"), "{spec}: {}", err.reason);
    }
    let err = MountSpec::state_dir(&d.display().to_string(), &socks).unwrap_err();
    assert!(err.reason.contains("docker socket"));
}

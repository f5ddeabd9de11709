//! Create through the fake, on what the image says: the user it picks (never root, never the caller), its
//! labels, and its VOLUMEs, each judged from the one inspect create makes.

use super::*;
use crate::error::ImageError;
use crate::sandbox::create::choose_user;
use crate::sandbox::testing::{reserved, CALLER, DOCKER_GID};
use crate::spec::{UserSpec, NOBODY};
#[test]
fn users_never_default_to_root() {
    let mut w = Vec::new();
    assert_eq!(choose_user(None, "", &reserved(), &mut w).unwrap(), UserSpec { uid: NOBODY, gid: NOBODY });
    assert!(w.is_empty());
    assert_eq!(choose_user(None, "root", &reserved(), &mut w).unwrap(), UserSpec { uid: NOBODY, gid: NOBODY });
    assert_eq!(choose_user(None, "0:0", &reserved(), &mut w).unwrap(), UserSpec { uid: NOBODY, gid: NOBODY });
    assert_eq!(w.len(), 2);
    assert_eq!(choose_user(None, "1000:100", &reserved(), &mut w).unwrap(), UserSpec { uid: 1000, gid: 100 });
    let mut w = Vec::new();
    assert_eq!(
        choose_user(Some(UserSpec { uid: 0, gid: 0 }), "1000", &reserved(), &mut w).unwrap(),
        UserSpec { uid: 0, gid: 0 }
    );
    assert!(w[0].contains("root"));
}

/// An image USER naming the caller's uid let a sandbox plant links sbx cp
/// trusted as the caller's own (it replaced ~/.ssh/authorized_keys) and
/// take the caller's inotify instances: such ids are replaced like uid 0,
/// the docker socket's group and the caller's groups likewise.
#[test]
fn the_image_user_is_never_the_caller_nor_in_the_callers_or_dockers_group() {
    let r = reserved();
    let mut w = Vec::new();
    assert_eq!(
        choose_user(None, &format!("{CALLER}:{CALLER}"), &r, &mut w).unwrap(),
        UserSpec { uid: NOBODY, gid: NOBODY }
    );
    assert!(w[0].contains(&format!("uid {CALLER} is yours")) && w[0].contains("--user"), "{w:?}");
    let mut w = Vec::new();
    assert_eq!(choose_user(None, &CALLER.to_string(), &r, &mut w).unwrap(), UserSpec { uid: NOBODY, gid: NOBODY });
    let mut w = Vec::new();
    assert_eq!(
        choose_user(None, &format!("65534:{DOCKER_GID}"), &r, &mut w).unwrap(),
        UserSpec { uid: 65534, gid: 65534 }
    );
    assert!(w[0].contains(&format!("gid {DOCKER_GID} is the group of the docker socket")), "{w:?}");
    let mut w = Vec::new();
    assert_eq!(choose_user(None, &format!("1000:{CALLER}"), &r, &mut w).unwrap(), UserSpec { uid: 1000, gid: 1000 });
    assert!(w[0].contains("one of your groups"), "{w:?}");
    // The uid as the group would be the docker group: nobody's group instead.
    let mut w = Vec::new();
    let u = choose_user(None, &format!("{DOCKER_GID}:{DOCKER_GID}"), &r, &mut w).unwrap();
    assert_eq!(u, UserSpec { uid: DOCKER_GID, gid: NOBODY });
    let mut w = Vec::new();
    assert_eq!(
        choose_user(None, &format!("{DOCKER_GID}:0"), &r, &mut w).unwrap(),
        UserSpec { uid: DOCKER_GID, gid: NOBODY }
    );
    // sbx run as nobody: no safe default is left, so the create is refused.
    let mut nobody = crate::model::ids::Reserved::default();
    nobody.uid(NOBODY, "yours (the user running sbx)");
    let e = choose_user(None, "", &nobody, &mut Vec::new()).unwrap_err();
    assert!(e.reason.contains("uid 65534 is yours") && e.hint.unwrap().contains("--user"), "{}", e.reason);
    // --user naming them is exit 2; root is asked for by name and stays allowed.
    for (uid, gid) in [(CALLER, 1000), (1000, CALLER), (65534, DOCKER_GID)] {
        let e = UserSpec { uid, gid }.not_reserved(&r).unwrap_err();
        assert_eq!(e.what, "--user");
        assert!(e.reason.contains("a sandbox running as the user who runs sbx"), "{}", e.reason);
    }
    assert!(UserSpec { uid: 0, gid: 0 }.not_reserved(&r).is_ok());
    assert!(UserSpec { uid: 1000, gid: 1000 }.not_reserved(&r).is_ok());
}

#[test]
fn create_refuses_a_user_flag_naming_the_caller_before_any_docker_call() {
    let rig = Rig::new();
    let err =
        rig.driver().create(&spec(CreateRequest { user: Some(CALLER.to_string()), ..Default::default() })).unwrap_err();
    assert!(matches!(&err, Error::Invalid(i) if i.what == "--user"), "{err:?}");
    assert_eq!(err.exit_code(), 2);
    assert!(rig.fake.calls().is_empty(), "{:?}", rig.fake.calls());
}

#[test]
fn create_runs_an_image_naming_the_caller_as_nobody() {
    let rig = Rig::new();
    rig.image(&format!("{CALLER}:{DOCKER_GID}"));
    rig.starts_and_binds();
    let c = rig.driver().create(&spec(CreateRequest::default())).unwrap();
    assert_eq!(c.record.user, "65534:65534");
    assert!(rig.fake.calls()[1].windows(2).any(|w| w[0] == "--user" && w[1] == "65534:65534"));
    assert!(!rig.fake.calls()[1].iter().any(|a| a == "--group-add"), "no supplementary group is ever added");
    assert!(c.warnings.iter().any(|w| w.contains("is not used")), "{:?}", c.warnings);
}

#[test]
fn group_0_only_when_asked_for_and_then_with_a_warning() {
    // Issue 9 finding 10: `USER 1000:0` ran as gid 0 with no warning.
    let mut w = Vec::new();
    assert_eq!(choose_user(None, "1000:0", &reserved(), &mut w).unwrap(), UserSpec { uid: 1000, gid: 1000 });
    assert!(w[0].contains("group 0") && w[0].contains("--user 1000:0"), "{w:?}");
    let mut w = Vec::new();
    assert_eq!(choose_user(None, "1000", &reserved(), &mut w).unwrap(), UserSpec { uid: 1000, gid: 1000 });
    assert!(w.is_empty());
    let mut w = Vec::new();
    assert_eq!(
        choose_user(Some(UserSpec { uid: 65534, gid: 0 }), "", &reserved(), &mut w).unwrap(),
        UserSpec { uid: 65534, gid: 0 }
    );
    assert!(w[0].contains("group 0 (root)") && w[0].contains("--user 65534:0"), "{w:?}");
    let mut w = Vec::new();
    choose_user(Some(UserSpec { uid: 1000, gid: 1000 }), "1000:0", &reserved(), &mut w).unwrap();
    assert!(w.is_empty(), "--user wins over the image, silently");
}

#[test]
fn the_image_user_is_cached_by_digest() {
    let rig = Rig::new();
    rig.image("1000");
    rig.starts_and_binds();
    rig.driver().create(&spec(CreateRequest::default())).unwrap();
    socket::remove_dir(&rig.sock_dir(), ID).unwrap();
    // Second create of the same image: docker run only.
    rig.starts_and_binds();
    rig.driver().create(&spec(CreateRequest::default())).unwrap();
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "run", "container inspect"]);
    assert!(rig.fake.calls()[3].windows(2).any(|w| w[0] == "--user" && w[1] == "1000:1000"), "the cached user is used");
    // The image removed since: docker run says so, sbx says what to do.
    socket::remove_dir(&rig.sock_dir(), ID).unwrap();
    rig.fake.push(Output::fail(125, &format!("Unable to find image '{IMG}' locally")));
    rig.removed();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(err, Error::Image(ImageError::Missing { .. })), "{err:?}");
}

#[test]
fn an_image_with_an_sbx_label_is_refused_before_anything_is_made() {
    // Issue 9 finding 5: `LABEL sbx.private=...` would become the sandbox's record.
    let rig = Rig::new();
    rig.fake.push(Output::ok(r#"["1000",{"sbx.private":"{\"sbx-rtsvc\":\"rtsvc\"}","a":"b"},null,""]"#));
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    match &err {
        Error::Image(ImageError::HasSbxLabel { label, .. }) => assert_eq!(label, "sbx.private"),
        other => panic!("{other:?}"),
    }
    assert_eq!(err.exit_code(), 1);
    assert!(err.hint().unwrap().contains("rebuild the image without"));
    assert_eq!(rig.fake.verbs(), ["image inspect"], "nothing made");
    assert!(!rig.sock_dir().exists());
    // The verdict is cached per digest: the next create is refused with no docker call.
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(err, Error::Image(ImageError::HasSbxLabel { .. })), "{err:?}");
    assert_eq!(rig.fake.verbs(), ["image inspect"]);
}

/// An image VOLUME was an anonymous volume: host disk without bound under a
/// read-only root. It becomes sbx's tmpfs, read from the inspect create
/// already makes (no docker call more), and a `--rw` at that path wins.
#[test]
fn image_volumes_become_tmpfs_from_the_inspect_create_already_makes() {
    let rig = Rig::new();
    let dir = std::env::temp_dir().canonicalize().unwrap().join(format!("sbx-image-volumes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    rig.fake.push(Output::ok("[\"1000\",null,{\"/data\":{},\"/work\":{},\"/cache/\":{}},\"/app\"]\n"));
    rig.starts_and_binds();
    let rw = vec![format!("{}:/work", dir.display())];
    rig.driver().create(&spec(CreateRequest { rw, ..Default::default() })).unwrap();
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect"]);
    let run = &rig.fake.calls()[1];
    let tmpfs: Vec<&str> = run.windows(2).filter(|w| w[0] == "--tmpfs").map(|w| w[1].as_str()).collect();
    // Two VOLUMEs share a quarter of the 4096 MiB default.
    let own = "rw,exec,nosuid,nodev,size=262144k,nr_inodes=32768,mode=0755,uid=1000,gid=1000";
    assert!(tmpfs.contains(&format!("/data:{own}").as_str()) && tmpfs.contains(&format!("/cache:{own}").as_str()));
    assert!(!tmpfs.iter().any(|t| t.starts_with("/work")), "the --rw wins: {tmpfs:?}");
    assert!(run.contains(&"--no-healthcheck".to_string()), "{run:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The image's VOLUME list is hostile: one sbx will not mount, or too many,
/// is refused (exit 2) before anything exists, and the verdict is not cached
/// as a pass.
#[test]
fn an_image_with_a_volume_sbx_will_not_mount_is_refused_before_anything_is_made() {
    let many: Vec<String> = (0..33).map(|i| format!("\"/v{i}\":{{}}")).collect();
    for (volumes, workdir, why) in [
        ("{\"/proc\":{}}".to_string(), "", "VOLUME \"/proc\": it is or lies inside /proc"),
        ("{\"/a:size=9g\":{}}".into(), "", "':'"),
        (format!("{{{}}}", many.join(",")), "", "33 VOLUMEs"),
        ("null".into(), "/state/a/b", "WORKDIR \"/state/a/b\": it lies inside sbx's mount at /state"),
    ] {
        let rig = Rig::new();
        rig.fake.push(Output::ok(&format!("[\"1000\",null,{volumes},{workdir:?}]\n")));
        let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
        match &err {
            Error::Image(ImageError::ConfigRefused { reason, .. }) => assert!(reason.contains(why), "{reason}"),
            other => panic!("{other:?}"),
        }
        assert_eq!((err.exit_code(), err.kind()), (2, "image_config_refused"));
        assert!(err.hint().unwrap().contains("nothing was created"));
        assert_eq!(rig.fake.verbs(), ["image inspect"], "nothing made");
        assert!(!rig.sock_dir().exists());
        // Cached by digest, and refused again from the cache.
        let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
        assert!(matches!(err, Error::Image(ImageError::ConfigRefused { .. })), "{err:?}");
        assert_eq!(rig.fake.verbs(), ["image inspect"]);
    }
}

/// A verdict cached by an sbx that did not read VOLUMEs says nothing of
/// them: it is not used, the image is asked again.
#[test]
fn an_image_verdict_cached_without_volumes_is_asked_again() {
    let rig = Rig::new();
    let dir = rig.state().dir.join("image-config");
    std::fs::create_dir_all(&dir).unwrap();
    let key = format!("i-{}", IMG.rsplit_once("sha256:").unwrap().1);
    std::fs::write(dir.join(key), r#"{"user":"1000","sbx_label":null}"#).unwrap();
    rig.fake.push(Output::ok("[\"1000\",null,{\"/data\":{}},\"\"]\n"));
    rig.starts_and_binds();
    rig.driver().create(&spec(CreateRequest::default())).unwrap();
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect"]);
    assert!(rig.fake.calls()[1].iter().any(|a| a.starts_with("/data:")), "{:?}", rig.fake.calls()[1]);
}

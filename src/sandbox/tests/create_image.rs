//! Create through the fake, on what the image says: the user it picks (its own uid, never the image's), its
//! labels, and its VOLUMEs, each judged from the one inspect create makes.

use super::*;
use crate::error::ImageError;
use crate::model::ids::SBX_UID_BASE;
use crate::sandbox::ops::create::choose_user;
use crate::sandbox::testing::{reserved, CALLER, DOCKER_GID, UID, USER};
use crate::spec::UserSpec;
/// Whatever the image says, a sandbox gets a uid of its own: the image's
/// USER is not used (a uid sbx has not handed out may be the caller's, a
/// host account's or a neighbour's, whose kernel limits it would share).
#[test]
fn only_the_flag_chooses_the_user_and_an_image_user_in_sbxs_range_is_refused() {
    let mut w = Vec::new();
    for image_user in ["", "root", "0:0", "1000:100", "node", &format!("{CALLER}:{DOCKER_GID}"), "65534"] {
        assert_eq!(choose_user(None, IMG, image_user, &mut w).unwrap(), None, "{image_user}");
    }
    assert!(w.is_empty(), "{w:?}");
    for image_user in [SBX_UID_BASE.to_string(), format!("1000:{}", SBX_UID_BASE + 5), format!("node:{UID}")] {
        let e = choose_user(None, IMG, &image_user, &mut w).unwrap_err();
        assert!(matches!(&e, ImageError::UserInSbxRange { user, .. } if *user == image_user), "{e:?}");
        assert_eq!(Error::Image(e).exit_code(), 2);
    }
    // --user wins over the image, silently, even over one in the range.
    let u = UserSpec { uid: 1000, gid: 1000 };
    assert_eq!(choose_user(Some(u), IMG, &SBX_UID_BASE.to_string(), &mut w).unwrap(), Some(u));
    assert!(w.is_empty());
    let root = UserSpec { uid: 0, gid: 0 };
    assert_eq!(choose_user(Some(root), IMG, "1000", &mut w).unwrap(), Some(root));
    assert!(w[0].contains("root"));
}

#[test]
fn the_warning_names_the_uid_only_when_the_image_asked_for_a_non_root_user() {
    use crate::sandbox::ops::create::image_user_warning as warn;
    for asked in ["", "0", "root", "0:1000", "root:root"] {
        assert_eq!(warn(asked, UID), None, "{asked}");
    }
    let w = warn("node:node", UID).unwrap();
    assert!(w.contains("\"node:node\" is not used") && w.contains(USER) && w.contains("--user"), "{w}");
    assert!(warn("1000", UID).is_some());
}

/// An image USER naming the caller's uid let a sandbox plant links sbx cp
/// trusted as the caller's own (it replaced ~/.ssh/authorized_keys): it is
/// never used. --user naming the caller's or docker's ids is exit 2, and
/// so is one in sbx's range (a neighbour's).
#[test]
fn a_user_flag_naming_the_caller_docker_or_sbxs_range_is_refused() {
    let r = reserved();
    for (uid, gid) in [(CALLER, 1000), (1000, CALLER), (65534, DOCKER_GID)] {
        let e = UserSpec { uid, gid }.not_reserved(&r).unwrap_err();
        assert_eq!(e.what, "--user");
        assert!(e.reason.contains("a sandbox running as the user who runs sbx"), "{}", e.reason);
    }
    assert!(UserSpec { uid: 0, gid: 0 }.not_reserved(&r).is_ok());
    assert!(UserSpec { uid: 1000, gid: 1000 }.not_reserved(&r).is_ok());
    for (uid, gid) in [(UID, UID), (1000, SBX_UID_BASE), (SBX_UID_BASE + (1 << 24) - 1, 1000)] {
        let e = UserSpec { uid, gid }.outside_sbx_range("--user").unwrap_err();
        assert!(e.reason.contains("sbx's own range (1879048192-1895825407)"), "{}", e.reason);
    }
    let edge = UserSpec { uid: SBX_UID_BASE - 1, gid: SBX_UID_BASE + (1 << 24) };
    assert_eq!(edge.outside_sbx_range("--user").unwrap(), edge);
}

#[test]
fn create_refuses_a_user_flag_naming_the_caller_or_sbxs_range_before_any_docker_call() {
    let rig = Rig::new();
    let err =
        rig.driver().create(&spec(CreateRequest { user: Some(CALLER.to_string()), ..Default::default() })).unwrap_err();
    assert!(matches!(&err, Error::Invalid(i) if i.what == "--user"), "{err:?}");
    assert_eq!(err.exit_code(), 2);
    let req = CreateRequest { image: IMG.into(), user: Some(UID.to_string()), ..Default::default() };
    let err = Error::from(SandboxSpec::from_request(&req, None).unwrap_err());
    assert!(matches!(&err, Error::Invalid(i) if i.what == "--user"), "{err:?}");
    assert_eq!(err.exit_code(), 2);
    assert!(rig.fake.calls().is_empty(), "{:?}", rig.fake.calls());
}

#[test]
fn create_runs_an_image_naming_the_caller_as_its_own_uid_and_says_so() {
    let rig = Rig::new();
    rig.image(&format!("{CALLER}:{DOCKER_GID}"));
    rig.starts_and_binds();
    let c = rig.driver().create(&spec(CreateRequest::default())).unwrap();
    assert_eq!(c.record.user, USER);
    assert!(rig.fake.calls()[1].windows(2).any(|w| w[0] == "--user" && w[1] == USER));
    assert!(!rig.fake.calls()[1].iter().any(|a| a == "--group-add"), "no supplementary group is ever added");
    assert!(c.warnings.iter().any(|w| w.contains("is not used") && w.contains(USER)), "{:?}", c.warnings);
}

#[test]
fn an_image_user_in_sbxs_range_is_refused_before_anything_is_made() {
    let rig = Rig::new();
    rig.image(&UID.to_string());
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(&err, Error::Image(ImageError::UserInSbxRange { .. })), "{err:?}");
    assert_eq!(err.exit_code(), 2);
    assert_eq!(rig.fake.verbs(), ["image inspect"]);
}

#[test]
fn group_0_only_when_asked_for_and_then_with_a_warning() {
    // `USER 1000:0` ran as gid 0 with no warning; the
    // image's group is never used now, the flag's is.
    let mut w = Vec::new();
    let u = UserSpec { uid: 65534, gid: 0 };
    assert_eq!(choose_user(Some(u), IMG, "", &mut w).unwrap(), Some(u));
    assert!(w[0].contains("group 0 (root)") && w[0].contains("--user 65534:0"), "{w:?}");
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
    assert!(rig.fake.calls()[3].windows(2).any(|w| w[0] == "--user" && w[1] == USER), "the cached verdict is used");
    // The image removed since: docker run says so, sbx says what to do.
    socket::remove_dir(&rig.sock_dir(), ID).unwrap();
    rig.fake.push(Output::fail(125, &format!("Unable to find image '{IMG}' locally")));
    rig.removed();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(err, Error::Image(ImageError::Missing { .. })), "{err:?}");
}

#[test]
fn an_image_with_an_sbx_label_is_refused_before_anything_is_made() {
    // `LABEL sbx.private=...` would become the sandbox's record.
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
    let own = format!("rw,exec,nosuid,nodev,size=262144k,nr_inodes=32768,mode=0755,uid={UID},gid={UID}");
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

use super::*;

fn strs(a: &[OsString]) -> Vec<String> {
    a.iter().map(|s| s.to_string_lossy().into_owned()).collect()
}

#[test]
fn the_image_commands_are_argv_with_the_paths_after_dashes() {
    let (img, dir) = (Path::new("/var/lib/sbx/volumes/s1.img"), Path::new("/var/lib/sbx/volumes/s1"));
    assert_eq!(strs(&mkfs_argv(img)), ["mkfs.ext4", "-q", "-F", "-m", "0", "--", "/var/lib/sbx/volumes/s1.img"]);
    assert_eq!(
        strs(&mount_argv(img, dir)),
        [
            "mount",
            "-t",
            "ext4",
            "-o",
            "loop,nosuid,nodev",
            "--",
            "/var/lib/sbx/volumes/s1.img",
            "/var/lib/sbx/volumes/s1"
        ]
    );
    assert_eq!(
        strs(&loops_argv(img)),
        ["losetup", "--list", "--noheadings", "--output", "NAME", "--associated", "/var/lib/sbx/volumes/s1.img"]
    );
    assert_eq!(strs(&detach_argv("/dev/loop3")), ["losetup", "--detach", "/dev/loop3"]);
    let [check, resize] = grow_argv(img);
    assert_eq!(strs(&check), ["e2fsck", "-f", "-p", "--", "/var/lib/sbx/volumes/s1.img"]);
    assert_eq!(strs(&resize), ["resize2fs", "--", "/var/lib/sbx/volumes/s1.img"]);
}

#[test]
fn files_under_volumes_name_their_session_and_the_device_follows_the_image() {
    for (name, s) in [("s1", "s1"), ("s1.lock", "s1"), ("s1.img", "s1"), ("s1.img.part", "s1"), ("a.b", "a.b")] {
        assert_eq!(session_of(name), s, "{name}");
    }
    let data = std::env::temp_dir().join(format!("sbx-img-{:016x}", rand::random::<u64>()));
    std::fs::create_dir_all(data.join("volumes")).unwrap();
    assert_eq!(volume_device(&data, "s1"), data.join("volumes/s1"));
    assert!(!is_bounded(&data, "s1"));
    std::fs::write(image_path(&data, "s1"), b"").unwrap();
    assert_eq!(volume_device(&data, "s1"), data.join("volumes/s1/data"));
    assert!(is_bounded(&data, "s1"));
    assert!(!mounted(&data.join("volumes")));
    std::fs::remove_dir_all(&data).unwrap();
}

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use super::*;

/// A directory removed when the test ends.
struct Tmp(PathBuf);

impl Tmp {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn tempdir() -> Tmp {
    let d = std::env::temp_dir().join(format!("sbx-ckpt-{}-{:x}", std::process::id(), rand::random::<u64>()));
    fs::create_dir(&d).unwrap();
    Tmp(d)
}

fn engine_image(dir: &Path, bytes: &[u8]) -> PathBuf {
    let img = dir.join("engine");
    fs::create_dir_all(img.join("sub")).unwrap();
    fs::write(img.join("checkpoint.img"), bytes).unwrap();
    fs::write(img.join("sub").join("pages.img"), b"pages").unwrap();
    img
}

fn spec(token: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("sbx.token".to_string(), token.to_string())])
}

fn restore(store: &Store, id: &str, name: &str, tmp: &Path) -> Result<Meta> {
    let to = tmp.join(format!("restored-{}", rand::random::<u32>()));
    let meta = store.restore_into(id, name, &to);
    if meta.is_err() {
        assert!(!to.exists(), "a refused restore leaves nothing where runsc would read");
    }
    meta
}

#[test]
fn an_image_comes_back_byte_exact_private_and_checked() {
    let tmp = tempdir();
    let store = Store::at(tmp.path());
    let from = engine_image(tmp.path(), b"memory");
    let meta = store.save("sbx-0000000000b1", "c1", &from, &spec("t"), Limits::default()).unwrap();
    assert_eq!(meta.size, 11);
    assert_eq!(store.list(Some("sbx-0000000000b1")), vec![meta.clone()]);
    assert_eq!(store.list(None).len(), 1);
    for p in [store.root.clone(), store.dir("sbx-0000000000b1"), store.image("sbx-0000000000b1", "c1")] {
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o700, "{}", p.display());
    }
    let file = store.image("sbx-0000000000b1", "c1").join("checkpoint.img");
    assert_eq!(fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
    assert_eq!(fs::metadata(store.meta_path("sbx-0000000000b1", "c1")).unwrap().mode() & 0o777, 0o600);

    let to = tmp.path().join("restored");
    assert_eq!(store.restore_into("sbx-0000000000b1", "c1", &to).unwrap(), meta);
    assert_eq!(fs::read(to.join("checkpoint.img")).unwrap(), b"memory");
    assert_eq!(fs::read(to.join("sub/pages.img")).unwrap(), b"pages");

    assert!(store.remove("sbx-0000000000b1", "c1").unwrap());
    assert!(!store.remove("sbx-0000000000b1", "c1").unwrap());
    assert!(store.list(None).is_empty());
}

#[test]
fn an_edited_swapped_or_foreign_image_is_refused() {
    let tmp = tempdir();
    let store = Store::at(tmp.path());
    let from = engine_image(tmp.path(), b"memory");
    store.save("sbx-0000000000b1", "c1", &from, &spec("t1"), Limits::default()).unwrap();
    store.save("sbx-0000000000b2", "c1", &from, &spec("t2"), Limits::default()).unwrap();

    // One byte changed in place.
    let file = store.image("sbx-0000000000b1", "c1").join("checkpoint.img");
    fs::write(&file, b"memorz").unwrap();
    let e = restore(&store, "sbx-0000000000b1", "c1", tmp.path()).unwrap_err();
    assert!(e.to_string().contains("MAC does not match"), "{e}");
    fs::write(&file, b"memory").unwrap();
    restore(&store, "sbx-0000000000b1", "c1", tmp.path()).unwrap();

    // sb2's image and record put in sb1's place: the same bytes, another sandbox.
    fs::remove_dir_all(store.dir("sbx-0000000000b1")).unwrap();
    fs::create_dir(store.dir("sbx-0000000000b1")).unwrap();
    fs::set_permissions(store.dir("sbx-0000000000b1"), fs::Permissions::from_mode(0o700)).unwrap();
    let mut m = store.get("sbx-0000000000b2", "c1").unwrap();
    m.sandbox = "sbx-0000000000b1".into();
    fs::write(store.meta_path("sbx-0000000000b1", "c1"), serde_json::to_vec(&m).unwrap()).unwrap();
    Copy { mac: &mut store.mac("x", "y", &spec("")).unwrap(), size: 0, cap: u64::MAX }
        .tree(&store.image("sbx-0000000000b2", "c1"), &store.image("sbx-0000000000b1", "c1"), 0)
        .ok()
        .unwrap();
    assert!(restore(&store, "sbx-0000000000b1", "c1", tmp.path()).is_err(), "an image is bound to its sandbox");

    // A spec changed in the record (the MAC covered the old one).
    let mut m = store.get("sbx-0000000000b2", "c1").unwrap();
    m.spec = spec("t1");
    fs::write(store.meta_path("sbx-0000000000b2", "c1"), serde_json::to_vec(&m).unwrap()).unwrap();
    assert!(restore(&store, "sbx-0000000000b2", "c1", tmp.path()).is_err());

    // A valid image of another data dir, copied in whole.
    fs::create_dir(tmp.path().join("other")).unwrap();
    let other = Store::at(&tmp.path().join("other"));
    other.save("sbx-0000000000b3", "c1", &from, &spec("t3"), Limits::default()).unwrap();
    fs::create_dir(store.dir("sbx-0000000000b3")).unwrap();
    fs::set_permissions(store.dir("sbx-0000000000b3"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::copy(other.meta_path("sbx-0000000000b3", "c1"), store.meta_path("sbx-0000000000b3", "c1")).unwrap();
    Copy { mac: &mut store.mac("x", "y", &spec("")).unwrap(), size: 0, cap: u64::MAX }
        .tree(&other.image("sbx-0000000000b3", "c1"), &store.image("sbx-0000000000b3", "c1"), 0)
        .ok()
        .unwrap();
    assert!(restore(&store, "sbx-0000000000b3", "c1", tmp.path()).is_err(), "another data dir's key");
    assert!(restore(&other, "sbx-0000000000b3", "c1", tmp.path()).is_ok());
}

#[test]
fn a_link_in_an_image_or_a_name_taken_or_a_full_quota_keeps_nothing() {
    let tmp = tempdir();
    let store = Store::at(tmp.path());
    let from = engine_image(tmp.path(), b"memory");
    std::os::unix::fs::symlink("/etc/shadow", from.join("link")).unwrap();
    assert!(store.save("sbx-0000000000b1", "c1", &from, &spec("t"), Limits::default()).is_err());
    assert!(store.list(None).is_empty());
    let left: Vec<_> = fs::read_dir(store.dir("sbx-0000000000b1")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [LOCK], "no half-copied image");
    fs::remove_file(from.join("link")).unwrap();

    store.save("sbx-0000000000b1", "c1", &from, &spec("t"), Limits::default()).unwrap();
    let e = store.save("sbx-0000000000b1", "c1", &from, &spec("t"), Limits::default()).unwrap_err();
    assert_eq!(e.kind(), "checkpoint_exists");

    let small = Limits { per_sandbox: 15, total: u64::MAX };
    let e = store.save("sbx-0000000000b1", "c2", &from, &spec("t"), small).unwrap_err();
    assert_eq!(e.kind(), "checkpoint_too_big", "{e}");
    let small = Limits { per_sandbox: u64::MAX, total: 15 };
    assert_eq!(
        store.save("sbx-0000000000b2", "c1", &from, &spec("t"), small).unwrap_err().kind(),
        "checkpoint_too_big"
    );
    assert_eq!(store.list(None).len(), 1);
}

#[test]
fn a_key_that_is_a_link_or_short_is_never_used() {
    let tmp = tempdir();
    let store = Store::at(tmp.path());
    fs::create_dir(&store.root).unwrap();
    fs::set_permissions(&store.root, fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(tmp.path().join("planted"), [7u8; 32]).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("planted"), store.root.join("key")).unwrap();
    assert!(store.key().is_err());
    fs::remove_file(store.root.join("key")).unwrap();
    fs::write(store.root.join("key"), [7u8; 5]).unwrap();
    assert!(store.key().is_err());
}

#[test]
fn names() {
    assert!(valid_name("c1") && valid_name("before-fix.2"));
    for bad in ["", ".x", "-x", "a/b", "..", "a b", &"x".repeat(65)] {
        assert!(!valid_name(bad), "{bad:?}");
    }
}

/// `sbx checkpoints rm ID NAME` takes NAME from the command line: one that
/// is not a checkpoint's name (or an id that is not a sandbox's) never
/// becomes a path, so nothing outside `checkpoints/ID/` is read or removed.
#[test]
fn a_name_or_id_that_is_no_checkpoints_never_reaches_a_path() {
    let tmp = tempdir();
    let store = Store::at(tmp.path());
    let id = "sbx-0000000000b1";
    let from = engine_image(tmp.path(), b"memory");
    store.save(id, "c1", &from, &spec("t"), Limits::default()).unwrap();
    let victim = tmp.path().join("victim");
    fs::create_dir(&victim).unwrap();
    fs::write(victim.join("work"), b"w").unwrap();
    for name in ["../../victim", "..", "", ".", "c1/../../../victim", "/tmp"] {
        let e = store.remove(id, name).unwrap_err();
        assert_eq!(e.kind(), "invalid_input", "{name:?}: {e}");
        assert!(store.save(id, name, &from, &spec("t"), Limits::default()).is_err(), "{name:?}");
        assert!(store.restore_into(id, name, &tmp.path().join("r")).is_err(), "{name:?}");
    }
    for bad in ["..", "", "../victim", "sbx-0000000000b1/.."] {
        assert_eq!(store.remove_transient(bad).unwrap_err().kind(), "invalid_input", "{bad:?}");
        assert!(store.list(Some(bad)).is_empty());
    }
    assert!(victim.join("work").exists(), "nothing outside checkpoints/ID/ is removed");
    assert!(store.get(id, "c1").is_some() && store.key().is_ok(), "nor the sandbox's own, nor the key");
}

/// The MAC frames each directory: a file moved into or out of a directory
/// (the same names and bytes met in the same order) is another image.
#[test]
fn a_file_moved_between_directories_is_refused() {
    let tmp = tempdir();
    let store = Store::at(tmp.path());
    let id = "sbx-0000000000b1";
    let from = tmp.path().join("engine");
    fs::create_dir_all(from.join("a")).unwrap();
    fs::write(from.join("a").join("x"), b"x").unwrap();
    fs::write(from.join("y"), b"y").unwrap();
    store.save(id, "c1", &from, &spec("t"), Limits::default()).unwrap();
    let image = store.image(id, "c1");
    fs::rename(image.join("y"), image.join("a").join("y")).unwrap();
    let e = restore(&store, id, "c1", tmp.path()).unwrap_err();
    assert_eq!(e.kind(), "checkpoint_untrusted", "{e}");
    fs::rename(image.join("a").join("y"), image.join("y")).unwrap();
    restore(&store, id, "c1", tmp.path()).unwrap();
}

/// What a save killed part way leaves in `checkpoints/ID/` (a half-copied
/// `.NAME.*`, an image whose record was never written, a record's temp
/// file) is counted nowhere: the next save of that sandbox removes it, and
/// keeps every whole checkpoint.
#[test]
fn a_save_removes_what_a_killed_save_left() {
    let tmp = tempdir();
    let store = Store::at(tmp.path());
    let id = "sbx-0000000000b1";
    let from = engine_image(tmp.path(), b"memory");
    store.save(id, "c0", &from, &spec("t"), Limits::default()).unwrap();
    let dir = store.dir(id);
    fs::create_dir(dir.join(".c1.0123456789abcdef")).unwrap();
    fs::write(dir.join(".c1.0123456789abcdef").join("checkpoint.img"), b"half").unwrap();
    fs::create_dir(dir.join("c2")).unwrap();
    fs::write(dir.join("c2").join("checkpoint.img"), b"whole, no record").unwrap();
    fs::write(dir.join("c3.tmp01234567"), b"{").unwrap();
    store.save(id, "c4", &from, &spec("t"), Limits::default()).unwrap();
    let mut left: Vec<String> =
        fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    left.sort();
    assert_eq!(left, [".lock", "c0", "c0.json", "c4", "c4.json"]);
    restore(&store, id, "c0", tmp.path()).unwrap();
}

#[test]
fn a_gone_sandbox_keeps_its_named_checkpoints_only() {
    let tmp = tempdir();
    let store = Store::at(tmp.path());
    let (id, bare) = ("sbx-0000000000c1", "sbx-0000000000c2");
    let from = engine_image(tmp.path(), b"memory");
    for name in ["named", HIBERNATED, "fork-0123456789abcdef"] {
        store.save(id, name, &from, &spec("t"), Limits::default()).unwrap();
    }
    store.save(bare, HIBERNATED, &from, &spec("t"), Limits::default()).unwrap();
    fs::create_dir(store.dir(id).join(".half.0123456789abcdef")).unwrap();
    let mut with = store.with_transient();
    with.sort();
    assert_eq!(with, [id, bare]);
    store.remove_transient(id).unwrap();
    let mut left: Vec<String> =
        fs::read_dir(store.dir(id)).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    left.sort();
    assert_eq!(left, ["named", "named.json"], "the named one stays, whole");
    restore(&store, id, "named", tmp.path()).unwrap();
    store.remove_transient(bare).unwrap();
    assert!(!store.dir(bare).exists(), "nothing named: the directory goes too");
    assert_eq!(store.with_transient(), Vec::<String>::new());
    // Its last one removed, the directory goes; one left empty is a leftover gc takes.
    assert!(store.remove(id, "named").unwrap());
    assert!(!store.dir(id).exists());
    fs::create_dir(store.dir(id)).unwrap();
    assert_eq!(store.with_transient(), [id]);
    store.remove_transient(id).unwrap();
    assert!(!store.dir(id).exists());
}

#[test]
fn gc_removes_a_killed_forks_checkpoint_and_keeps_a_running_ones() {
    let tmp = tempdir();
    let store = Store::at(tmp.path());
    let id = "sbx-0000000000d1";
    let from = engine_image(tmp.path(), b"memory");
    let me = crate::host::state::ProcId::current().unwrap();
    let running = fork_name(me.pid, me.start);
    let killed = fork_name(0, 0);
    for name in [running.as_str(), killed.as_str(), "fork-of-no-shape", "named"] {
        store.save(id, name, &from, &spec("t"), Limits::default()).unwrap();
    }
    let alive = |pid, start| crate::host::state::ProcId { pid, start }.is_alive();
    let mut gone = store.remove_abandoned_forks(&alive);
    gone.sort();
    let mut want = vec![(id.to_string(), killed.clone()), (id.to_string(), "fork-of-no-shape".to_string())];
    want.sort();
    assert_eq!(gone, want);
    let mut left: Vec<String> = store.list(Some(id)).into_iter().map(|m| m.name).collect();
    left.sort();
    let mut expect = vec![running, "named".to_string()];
    expect.sort();
    assert_eq!(left, expect);
}

#[test]
fn gc_sweeps_what_a_killed_save_left_unless_a_save_holds_the_lock() {
    let tmp = tempdir();
    let store = Store::at(tmp.path());
    let (free, busy) = ("sbx-0000000000e1", "sbx-0000000000e2");
    let from = engine_image(tmp.path(), b"memory");
    for id in [free, busy] {
        store.save(id, "whole", &from, &spec("t"), Limits::default()).unwrap();
        fs::create_dir(store.dir(id).join(".half.0123456789abcdef")).unwrap();
    }
    let _held = crate::host::lockfile::exclusive(&store.dir(busy).join(LOCK)).unwrap();
    store.sweep_unheld();
    assert!(!store.dir(free).join(".half.0123456789abcdef").exists(), "a killed save's copy stayed");
    assert!(store.dir(busy).join(".half.0123456789abcdef").exists(), "a save in flight lost its copy");
    assert!(store.get(free, "whole").is_some() && store.get(busy, "whole").is_some());
}

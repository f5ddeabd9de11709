//! The host writer and reader against hostile streams, races and links.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::{invalid, send_host, HostWriter, Resolve};
use crate::workbench::transfer::wire::{Decoder, Encoder, Limits, MAGIC};

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sbx-xfer-{tag}-{}-{:x}", std::process::id(), rand::random::<u32>()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn stream_of(src: &Path) -> Vec<u8> {
    let mut enc = Encoder::new(Vec::new()).unwrap();
    send_host(src, &mut enc).unwrap();
    enc.end().unwrap()
}

fn write(stream: &[u8], root: &str, dst: &Path) -> io::Result<()> {
    let mut dec = Decoder::new(stream, root, Limits::default())?;
    HostWriter::new(dst, root)?.write_from(&mut dec)
}

use crate::workbench::transfer::wire::tests::raw;

#[test]
fn round_trip_through_the_stream_and_the_host() {
    let src = tmp("src");
    let tree = src.join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("sub/a.bin"), [0u8, 1, 2, 255]).unwrap();
    std::fs::set_permissions(tree.join("sub/a.bin"), std::fs::Permissions::from_mode(0o751)).unwrap();
    std::os::unix::fs::symlink("sub/a.bin", tree.join("link")).unwrap();
    let s = stream_of(&tree);
    assert_eq!(&s[..8], MAGIC);
    let dst = tmp("dst");
    write(&s, "tree", &dst).unwrap();
    assert_eq!(std::fs::read(dst.join("tree/sub/a.bin")).unwrap(), [0u8, 1, 2, 255]);
    assert_eq!(std::fs::metadata(dst.join("tree/sub/a.bin")).unwrap().mode() & 0o7777, 0o751);
    assert_eq!(std::fs::read_link(dst.join("tree/link")).unwrap(), PathBuf::from("sub/a.bin"));
    // To a new name instead of into a directory; a single file too.
    write(&s, "tree", &dst.join("renamed")).unwrap();
    assert!(dst.join("renamed/sub/a.bin").exists());
    write(&raw(&[(b'F', 0o600, "one", b"1")]), "one", &dst.join("other-name")).unwrap();
    assert_eq!(std::fs::read(dst.join("other-name")).unwrap(), b"1");
    // Again over what is there: files replaced, directories merged.
    write(&raw(&[(b'F', 0o600, "one", b"22")]), "one", &dst.join("other-name")).unwrap();
    assert_eq!(std::fs::read(dst.join("other-name")).unwrap(), b"22");
    write(&s, "tree", &dst).unwrap();
    std::fs::remove_dir_all(src).unwrap();
    std::fs::remove_dir_all(dst).unwrap();
}

#[test]
fn sparse_files_stay_sparse_both_ways() {
    let src = tmp("sparse");
    let f = File::create(src.join("big")).unwrap();
    f.set_len(1 << 30).unwrap();
    f.write_all_at(b"middle", 512 << 20).unwrap();
    drop(f);
    let s = stream_of(&src.join("big"));
    assert!(s.len() < 1 << 20, "the stream carries the data, not the holes: {} bytes", s.len());
    let dst = tmp("sparse-dst");
    let mut dec = Decoder::new(s.as_slice(), "big", Limits { max_bytes: 2 << 30, ..Limits::default() }).unwrap();
    HostWriter::new(&dst, "big").unwrap().write_from(&mut dec).unwrap();
    let md = std::fs::metadata(dst.join("big")).unwrap();
    assert_eq!(md.len(), 1 << 30);
    assert!(md.blocks() * 512 < 4 << 20, "{} blocks allocated", md.blocks());
    let mut got = [0u8; 6];
    File::open(dst.join("big")).unwrap().read_exact_at(&mut got, 512 << 20).unwrap();
    assert_eq!(&got, b"middle");
    std::fs::remove_dir_all(src).unwrap();
    std::fs::remove_dir_all(dst).unwrap();
}

/// A replaced helper answered `cp ID:/tmp/report.txt .`
/// in a git checkout with a sibling and `.git/hooks/pre-commit`.
#[test]
fn a_stream_naming_siblings_or_git_hooks_writes_nothing_outside() {
    let dst = tmp("hostile");
    std::fs::create_dir_all(dst.join(".git/hooks")).unwrap();
    let s = raw(&[
        (b'F', 0o644, "report.txt", b"the report"),
        (b'F', 0o644, "sibling.txt", b"x"),
        (b'F', 0o755, ".git/hooks/pre-commit", b"#!/bin/sh\n"),
    ]);
    let err = write(&s, "report.txt", &dst).unwrap_err();
    assert!(err.to_string().contains("refusing entry \"sibling.txt\""), "{err}");
    assert!(err.to_string().contains("incomplete"), "says what was left: {err}");
    assert!(!dst.join("sibling.txt").exists());
    assert!(!dst.join(".git/hooks/pre-commit").exists());
    for bad in ["../x", "/etc/x", "report.txt/../../x", ""] {
        let err = write(&raw(&[(b'F', 0o644, bad, b"x")]), "report.txt", &dst).unwrap_err();
        assert!(err.to_string().contains("refusing"), "{bad}: {err}");
    }
    std::fs::remove_dir_all(dst).unwrap();
}

#[test]
fn a_hostile_stream_cannot_leave_the_destination() {
    for how in [Resolve::Openat2, Resolve::Walk] {
        let dst = tmp("hostile");
        let outside = tmp("outside");
        // A symlink planted first, then a file "inside" it.
        let s = raw(&[
            (b'D', 0o755, "t", b""),
            (b'L', 0o777, "t/escape", outside.to_str().unwrap().as_bytes()),
            (b'F', 0o644, "t/escape/pwned", b"x"),
        ]);
        let mut dec = Decoder::new(s.as_slice(), "t", Limits::default()).unwrap();
        let err = HostWriter::new(&dst, "t").unwrap().with_resolve(how).write_from(&mut dec).unwrap_err();
        assert!(err.to_string().contains("symlink"), "{how:?}: {err}");
        assert!(!outside.join("pwned").exists());
        // A file over an existing symlink replaces the link, not its target.
        std::fs::create_dir_all(dst.join("u")).unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), dst.join("u/f")).unwrap();
        write(&raw(&[(b'D', 0o755, "u", b""), (b'F', 0o644, "u/f", b"mine")]), "u", &dst).unwrap();
        assert!(!outside.join("victim").exists());
        assert_eq!(std::fs::read(dst.join("u/f")).unwrap(), b"mine");
        // setuid does not survive the trip to the host, nor group/other write.
        write(&raw(&[(b'F', 0o4755, "suid", b"x")]), "suid", &dst).unwrap();
        assert_eq!(std::fs::metadata(dst.join("suid")).unwrap().mode() & 0o7777, 0o755);
        write(&raw(&[(b'D', 0o777, "open", b""), (b'F', 0o666, "open/f", b"x")]), "open", &dst).unwrap();
        assert_eq!(std::fs::metadata(dst.join("open")).unwrap().mode() & 0o7777, 0o755);
        assert_eq!(std::fs::metadata(dst.join("open/f")).unwrap().mode() & 0o7777, 0o644);
        // A destination that is itself a link is refused, not followed.
        std::os::unix::fs::symlink(&outside, dst.join("dlink")).unwrap();
        let err = write(&raw(&[(b'F', 0o644, "f", b"x")]), "f", &dst.join("dlink")).unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
        assert!(!outside.join("f").exists());
        std::fs::remove_dir_all(dst).unwrap();
        std::fs::remove_dir_all(outside).unwrap();
    }
}

/// The pre-fix writer, kept here only to show the race is real: check
/// that no component is a symlink, then open by path (finding 4).
fn check_then_open(base: &Path, rel: &str, data: &[u8], between: &mut dyn FnMut(&str)) -> io::Result<()> {
    let target = base.join(rel);
    let mut cur = base.to_path_buf();
    for c in Path::new(rel).parent().unwrap().components() {
        cur.push(c);
        if std::fs::symlink_metadata(&cur)?.file_type().is_symlink() {
            return Err(invalid("symlink".into()));
        }
    }
    between(rel);
    std::fs::write(target, data)
}

/// Made deterministic: the hook swaps the entry's
/// parent directory for a symlink to outside between resolving the
/// parent and creating the file.
#[test]
fn swapping_a_directory_for_a_symlink_mid_copy_cannot_redirect_a_write() {
    let swap = |dst: PathBuf, outside: PathBuf| {
        move |rel: &str| {
            if rel == "report/sub/f" {
                std::fs::rename(dst.join("report/sub"), dst.join("report/sub.moved")).unwrap();
                std::os::unix::fs::symlink(&outside, dst.join("report/sub")).unwrap();
            }
        }
    };
    // The old way writes outside: the race is real.
    let dst = tmp("race-old");
    let outside = tmp("race-outside");
    std::fs::create_dir_all(dst.join("report/sub")).unwrap();
    check_then_open(&dst, "report/sub/f", b"x", &mut swap(dst.clone(), outside.clone())).unwrap();
    assert!(outside.join("f").exists(), "the check-then-open writer was redirected");
    std::fs::remove_dir_all(&dst).unwrap();
    std::fs::remove_dir_all(&outside).unwrap();

    for how in [Resolve::Openat2, Resolve::Walk] {
        let dst = tmp("race");
        let outside = tmp("race-outside");
        let s =
            raw(&[(b'D', 0o755, "report", b""), (b'D', 0o755, "report/sub", b""), (b'F', 0o644, "report/sub/f", b"x")]);
        let mut dec = Decoder::new(s.as_slice(), "report", Limits::default()).unwrap();
        let mut w = HostWriter::new(&dst, "report").unwrap().with_resolve(how);
        w.between = Some(Box::new(swap(dst.clone(), outside.clone())));
        w.write_from(&mut dec).unwrap();
        assert!(!outside.join("f").exists(), "{how:?}: written outside the destination");
        // It went into the directory it resolved, which stayed inside.
        assert_eq!(std::fs::read(dst.join("report/sub.moved/f")).unwrap(), b"x");
        std::fs::remove_dir_all(&dst).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }
}

#[test]
fn reading_the_host_never_follows_links() {
    let src = tmp("read");
    let secret = tmp("secret");
    std::fs::write(secret.join("s"), b"host secret").unwrap();
    std::fs::create_dir_all(src.join("t")).unwrap();
    std::os::unix::fs::symlink(secret.join("s"), src.join("t/l")).unwrap();
    std::os::unix::fs::symlink(&secret, src.join("t/d")).unwrap();
    let s = stream_of(&src.join("t"));
    assert!(!s.windows(11).any(|w| w == b"host secret"), "a link's target was read");
    std::fs::remove_dir_all(src).unwrap();
    std::fs::remove_dir_all(secret).unwrap();
}

/// Symlinks above DST: followed when root or this user owns them (an
/// operator's /home -> /usr/home), refused when someone else does.
#[test]
fn symlinks_above_dst_are_followed_only_when_trusted() {
    let base = tmp("above");
    std::fs::create_dir_all(base.join("real/sub")).unwrap();
    std::os::unix::fs::symlink("real", base.join("mine")).unwrap();
    std::os::unix::fs::symlink(base.join("real/sub"), base.join("abs")).unwrap();
    for via in ["mine/sub", "abs", "real/sub/../sub", "mine/../mine/sub"] {
        write(&raw(&[(b'F', 0o644, "f", via.as_bytes())]), "f", &base.join(via).join("f")).unwrap();
        assert_eq!(std::fs::read(base.join("real/sub/f")).unwrap(), via.as_bytes(), "{via}");
    }
    if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::symlink("real", base.join("theirs")).unwrap();
        std::os::unix::fs::lchown(base.join("theirs"), Some(65534), Some(65534)).unwrap();
        let err = write(&raw(&[(b'F', 0o644, "g", b"x")]), "g", &base.join("theirs/sub/g")).unwrap_err();
        assert!(err.to_string().contains("owned by uid 65534"), "{err}");
        assert!(!base.join("real/sub/g").exists());
        let mut enc = Encoder::new(Vec::new()).unwrap();
        assert!(send_host(&base.join("theirs/sub/f"), &mut enc).is_err(), "read through their link");
    }
    std::fs::remove_dir_all(base).unwrap();
}

/// The writer kept the path of every
/// directory whose mode denies its owner until the end of the stream,
/// so a million 0500 directories with 4 KiB paths held ~4 GiB on the
/// host. A directory's final mode is now set when the stream leaves it:
/// what is held is bounded by the path depth. Observed from the hook:
/// when the third sibling comes, the first two already have their mode.
#[test]
fn restrictive_directory_modes_are_set_when_the_stream_leaves_them() {
    use std::cell::RefCell;
    let dst = tmp("modes");
    let mut recs: Vec<(u8, u32, String, &[u8])> = vec![(b'D', 0o755, "t".into(), b"")];
    for i in 0..3 {
        recs.push((b'D', 0o500, format!("t/d{i}"), b""));
        recs.push((b'F', 0o644, format!("t/d{i}/f"), b"x"));
    }
    let borrowed: Vec<(u8, u32, &str, &[u8])> = recs.iter().map(|(k, m, p, d)| (*k, *m, p.as_str(), *d)).collect();
    let s = raw(&borrowed);
    let seen = RefCell::new(Vec::new());
    let (d0, d1) = (dst.join("t/d0"), dst.join("t/d1"));
    let mut dec = Decoder::new(s.as_slice(), "t", Limits::default()).unwrap();
    let mut w = HostWriter::new(&dst, "t").unwrap();
    w.between = Some(Box::new(|rel: &str| {
        if rel == "t/d2" {
            let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
            seen.borrow_mut().extend([mode(&d0), mode(&d1)]);
        }
    }));
    w.write_from(&mut dec).unwrap();
    drop(w);
    assert_eq!(*seen.borrow(), [0o500, 0o500], "modes of the directories the stream had left");
    for i in 0..3 {
        let d = dst.join(format!("t/d{i}"));
        assert_eq!(std::fs::metadata(&d).unwrap().mode() & 0o777, 0o500);
        assert_eq!(std::fs::read(d.join("f")).unwrap(), b"x", "filled before its mode was set");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    std::fs::remove_dir_all(dst).unwrap();
}

/// Symlink targets take host disk (a block each past ~60 bytes) and
/// count against --max-bytes like file sizes: a million 4 KiB targets
/// made 4 GiB of links under a 1 GiB cap.
#[test]
fn symlink_targets_count_against_the_byte_cap() {
    let t = "x".repeat(4000);
    let s = raw(&[(b'D', 0o755, "t", b""), (b'L', 0o777, "t/a", t.as_bytes()), (b'L', 0o777, "t/b", t.as_bytes())]);
    let mut dec = Decoder::new(s.as_slice(), "t", Limits { max_bytes: 6000, ..Limits::default() }).unwrap();
    let mut n = 0;
    let err = loop {
        match dec.next_record() {
            Ok(Some(_)) => n += 1,
            Ok(None) => panic!("two 4000-byte targets passed a 6000-byte cap"),
            Err(e) => break e,
        }
    };
    assert_eq!(n, 2, "the first link fits");
    assert!(err.to_string().contains("--max-bytes") && err.to_string().contains("t/b"), "{err}");
}

#[test]
fn a_truncated_file_is_removed_not_left_half_written() {
    let dst = tmp("trunc");
    let s = raw(&[(b'F', 0o644, "f", b"0123456789")]);
    // Into the file's final zero segment (the end record is 23 bytes).
    let cut = &s[..s.len() - 30];
    let err = write(cut, "f", &dst).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
    assert!(!dst.join("f").exists());
    std::fs::remove_dir_all(dst).unwrap();
}

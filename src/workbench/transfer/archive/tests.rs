//! Tar out of record streams and record streams out of tar, on streams and archives built by hand.

use super::*;
use crate::workbench::transfer::wire::tests::raw;
use crate::workbench::transfer::Limits;

fn tar_of(stream: &[u8], root: &str) -> Vec<u8> {
    let mut dec = Decoder::new(stream, root, Limits::default()).unwrap();
    let mut out = Vec::new();
    to_tar(&mut dec, &mut out).unwrap();
    out
}

fn spooled(data: &[u8]) -> Result<File, Problem> {
    spool(data, 1 << 20)
}

#[test]
fn tar_round_trip_and_escapes_refused() {
    let s = raw(&[
        (b'D', 0o755, "workspace", b""),
        (b'F', 0o640, "workspace/a.txt", b"hello"),
        (b'L', 0o777, "workspace/l", b"a.txt"),
    ]);
    let t = tar_of(&s, "workspace");
    let mut f = spooled(&t).unwrap();
    assert_eq!(check(&mut f).unwrap(), 3);
    let mut enc = Encoder::new(Vec::new()).unwrap();
    send_tar(&mut f, "workspace", &mut enc).unwrap();
    // Back to the same tar.
    assert_eq!(tar_of(&enc.end().unwrap(), "workspace"), t);

    for evil in ["../escape", "/abs"] {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_mode(0o644);
        // Write the name raw: the builder itself refuses such paths.
        h.as_old_mut().name[..evil.len()].copy_from_slice(evil.as_bytes());
        h.set_cksum();
        b.append(&h, &b"x"[..]).unwrap();
        let data = b.into_inner().unwrap();
        match check(&mut spooled(&data).unwrap()) {
            Err(Problem::Refused(m)) => assert!(m.contains("escape"), "{evil}: {m}"),
            other => panic!("{evil}: {other:?}"),
        }
    }
}

/// `restore < /dev/null` emptied the workspace.
#[test]
fn empty_truncated_and_non_tar_input_is_refused() {
    match spool(&b""[..], 100) {
        Err(Problem::NotTar(m)) => assert_eq!(m, "stdin is not a tar archive (0 bytes)"),
        other => panic!("{other:?}"),
    }
    let s = raw(&[(b'D', 0o755, "w", b""), (b'F', 0o640, "w/a.txt", &[7u8; 3000])]);
    let t = tar_of(&s, "w");
    // Cut anywhere, including at block boundaries: refused.
    for cut in (1..t.len()).step_by(256) {
        match check(&mut spooled(&t[..cut]).unwrap()) {
            Err(Problem::NotTar(_)) => {}
            other => panic!("cut at {cut} of {}: {other:?}", t.len()),
        }
    }
    match check(&mut spooled(b"this is not a tar archive, just some text\n").unwrap()) {
        Err(Problem::NotTar(m)) => assert!(m.contains("not a whole tar"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(spool(&t[..], 100), Err(Problem::Refused(_))));
    // What backup writes for an empty workspace is a valid archive.
    let empty = tar_of(&raw(&[(b'D', 0o755, "w", b"")]), "w");
    assert_eq!(check(&mut spooled(&empty).unwrap()).unwrap(), 1);
}

/// Every entry had mtime 0.
#[test]
fn tar_entries_keep_times_and_modes() {
    let mut enc = Encoder::new(Vec::new()).unwrap();
    enc.dir("w", 0o750, 1_600_000_000).unwrap();
    enc.file("w/a", 0o640, 1_700_000_000, 1).unwrap();
    enc.segment(0, 1, &mut &b"x"[..]).unwrap();
    enc.end_file().unwrap();
    enc.symlink("w/l", 0o777, 1_650_000_000, b"a").unwrap();
    let t = tar_of(&enc.end().unwrap(), "w");
    let mut a = tar::Archive::new(t.as_slice());
    let got: Vec<(String, u32, u64, u64)> = a
        .entries()
        .unwrap()
        .map(|e| {
            let h = e.unwrap().header().clone();
            (h.path().unwrap().display().to_string(), h.mode().unwrap(), h.mtime().unwrap(), h.uid().unwrap())
        })
        .collect();
    assert_eq!(
        got,
        [
            (".".to_string(), 0o750, 1_600_000_000, 0),
            ("a".into(), 0o640, 1_700_000_000, 0),
            ("l".into(), 0o755, 1_650_000_000, 0)
        ]
    );
}

/// A root `tar -x` of a backup made root-owned setuid binaries and
/// world-writable directories of what the sandbox had chmodded: tar
/// entries get the modes `cp` gives the host.
#[test]
fn tar_entries_carry_no_setuid_setgid_or_group_or_other_write() {
    let s = raw(&[
        (b'D', 0o777, "w", b""),
        (b'F', 0o4755, "w/rootshell", b"x"),
        (b'F', 0o2775, "w/sgidtool", b"x"),
        (b'F', 0o6777, "w/both", b"x"),
        (b'D', 0o1777, "w/sticky", b""),
        (b'D', 0o3770, "w/shared", b""),
    ]);
    for rooted in [false, true] {
        let mut dec = Decoder::new(s.as_slice(), "w", Limits::default()).unwrap();
        let mut t = Vec::new();
        write_tar(&mut dec, &mut t, rooted).unwrap();
        let modes: Vec<u32> =
            tar::Archive::new(t.as_slice()).entries().unwrap().map(|e| e.unwrap().header().mode().unwrap()).collect();
        assert_eq!(modes, [0o755, 0o755, 0o755, 0o755, 0o1755, 0o1750], "rooted: {rooted}");
    }
}

#[test]
fn holes_become_zeros_in_tar() {
    let mut enc = Encoder::new(Vec::new()).unwrap();
    enc.file("f", 0o644, 0, 10).unwrap();
    enc.segment(3, 2, &mut &b"ab"[..]).unwrap();
    enc.segment(8, 1, &mut &b"c"[..]).unwrap();
    enc.end_file().unwrap();
    let t = tar_of(&enc.end().unwrap(), "f");
    let mut a = tar::Archive::new(t.as_slice());
    let mut e = a.entries().unwrap().next().unwrap().unwrap();
    let mut got = Vec::new();
    e.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"\0\0\0ab\0\0\0c\0");
}

/// A name that is not UTF-8 goes into the tar as its bytes, and restore
/// takes it back (it refused such entries, and the walk never sent them).
#[test]
fn names_that_are_not_utf8_survive_backup_and_restore() {
    use crate::workbench::transfer::wire::tests::raw_bytes;
    let s = raw_bytes(&[(b'D', 0o755, b"w", b""), (b'F', 0o644, b"w/bad\xff\xfe.txt", b"hidden")]);
    let t = tar_of(&s, "w");
    let names: Vec<Vec<u8>> =
        tar::Archive::new(t.as_slice()).entries().unwrap().map(|e| e.unwrap().path_bytes().into_owned()).collect();
    assert_eq!(names, [b".".to_vec(), b"bad\xff\xfe.txt".to_vec()]);
    let mut f = spooled(&t).unwrap();
    assert_eq!(check(&mut f).unwrap(), 2);
    let mut enc = Encoder::new(Vec::new()).unwrap();
    send_tar(&mut f, "w", &mut enc).unwrap();
    assert_eq!(tar_of(&enc.end().unwrap(), "w"), t);
}

/// What the helper's decoder refuses (a path twice, one below a symlink)
/// `check` refuses first: restore clears the workspace before the stream
/// reaches the helper, so half-way is too late.
#[test]
fn an_archive_with_a_path_twice_or_below_a_symlink_is_refused_before_anything_changes() {
    let archive = |entries: &[(&str, tar::EntryType, &str)]| {
        let mut b = tar::Builder::new(Vec::new());
        for (path, kind, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_mode(0o644);
            h.set_size(0);
            if kind.is_symlink() {
                b.append_link(&mut h, path, link).unwrap();
            } else {
                b.append_data(&mut h, path, io::empty()).unwrap();
            }
        }
        b.into_inner().unwrap()
    };
    use tar::EntryType::{Directory, Regular, Symlink};
    for (entries, want) in [
        (vec![("x", Symlink, "/root/.ssh"), ("x/authorized_keys", Regular, "")], "below \"x\""),
        (vec![("a", Regular, ""), ("./a", Regular, "")], "twice"),
        (vec![("d", Directory, ""), ("d/", Directory, "")], "twice"),
    ] {
        match check(&mut spooled(&archive(&entries)).unwrap()) {
            Err(Problem::Refused(m)) => assert!(m.contains(want), "{entries:?}: {m}"),
            other => panic!("{entries:?}: {other:?}"),
        }
    }
    // Parents the archive leaves implicit are fine, as tar has them.
    let ok = archive(&[("d/e/f", Regular, ""), ("d/g", Regular, "")]);
    assert_eq!(check(&mut spooled(&ok).unwrap()).unwrap(), 2);
}

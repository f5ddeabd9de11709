//! Files between host and sandbox, in the record stream the in-sandbox
//! helper speaks (see `helper/sbx_helper.rs`), and to and from tar for
//! `backup`/`restore`.
//!
//! The sandbox is untrusted: a stream it sends may name `../../etc/passwd`,
//! or plant a symlink and then a file "inside" it. Writing on the host never
//! leaves the destination that was named and never follows a link (the
//! docker cp symlink race, CVE-2018-15664, is the cautionary tale), and
//! setuid/setgid bits are dropped: sbx often runs as root.

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    pub mode: u32,
    /// Relative, '/'-separated, starting with the top-level name.
    pub path: String,
    /// File content or symlink target.
    pub data: Vec<u8>,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

pub fn encode(entries: &[Entry], out: &mut impl Write) -> io::Result<()> {
    for e in entries {
        let kind = match e.kind {
            Kind::File => b'F',
            Kind::Dir => b'D',
            Kind::Symlink => b'L',
        };
        out.write_all(&[kind])?;
        out.write_all(&e.mode.to_be_bytes())?;
        out.write_all(&(e.path.len() as u16).to_be_bytes())?;
        out.write_all(e.path.as_bytes())?;
        out.write_all(&(e.data.len() as u64).to_be_bytes())?;
        out.write_all(&e.data)?;
    }
    out.write_all(&[b'E', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
}

pub fn decode(mut r: impl Read) -> io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    loop {
        let mut head = [0u8; 7];
        r.read_exact(&mut head)?;
        let plen = u16::from_be_bytes([head[5], head[6]]) as usize;
        let mut path = vec![0u8; plen];
        r.read_exact(&mut path)?;
        let mut len = [0u8; 8];
        r.read_exact(&mut len)?;
        let kind = match head[0] {
            b'E' => return Ok(out),
            b'F' => Kind::File,
            b'D' => Kind::Dir,
            b'L' => Kind::Symlink,
            other => return Err(invalid(format!("unknown record type {other}"))),
        };
        let len = u64::from_be_bytes(len);
        let mut data = Vec::new();
        (&mut r).take(len).read_to_end(&mut data)?;
        if data.len() as u64 != len {
            return Err(invalid("truncated stream".into()));
        }
        let path = String::from_utf8(path).map_err(|_| invalid("a path is not UTF-8".into()))?;
        out.push(Entry { kind, mode: u32::from_be_bytes([head[1], head[2], head[3], head[4]]) & 0o7777, path, data });
    }
}

/// A path that stays inside whatever it is joined to.
pub fn check_relative(path: &str) -> io::Result<&Path> {
    let p = Path::new(path);
    if path.is_empty() || !p.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(invalid(format!("refusing {path:?}: it would leave the destination")));
    }
    Ok(p)
}

/// Read a host path into entries, never following symlinks below it.
pub fn read_host(src: &Path) -> io::Result<Vec<Entry>> {
    let name = src
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| invalid(format!("{} has no usable name", src.display())))?;
    let mut out = Vec::new();
    walk(src, name.to_string(), &mut out)?;
    Ok(out)
}

fn walk(path: &Path, rel: String, out: &mut Vec<Entry>) -> io::Result<()> {
    let md = std::fs::symlink_metadata(path)?;
    let mode = md.mode() & 0o7777;
    if md.file_type().is_symlink() {
        let target = std::fs::read_link(path)?;
        out.push(Entry { kind: Kind::Symlink, mode, path: rel, data: target.into_os_string().into_encoded_bytes() });
    } else if md.is_dir() {
        out.push(Entry { kind: Kind::Dir, mode, path: rel.clone(), data: Vec::new() });
        let mut names: Vec<_> = std::fs::read_dir(path)?.flatten().map(|e| e.file_name()).collect();
        names.sort();
        for n in names {
            let Some(s) = n.to_str() else { continue };
            walk(&path.join(&n), format!("{rel}/{s}"), out)?;
        }
    } else if md.is_file() {
        out.push(Entry { kind: Kind::File, mode, path: rel, data: std::fs::read(path)? });
    }
    Ok(())
}

/// Fail if any existing component from `base` down to `path` is a symlink.
fn no_links_between(base: &Path, path: &Path) -> io::Result<()> {
    let rel =
        path.strip_prefix(base).map_err(|_| invalid(format!("{} is outside {}", path.display(), base.display())))?;
    let mut cur = base.to_path_buf();
    for c in rel.components() {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(md) if md.file_type().is_symlink() => {
                return Err(invalid(format!("{} is a symlink; refusing to write through it", cur.display())))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Write entries under `dst` on the host, as `cp` does: into `dst` when it
/// is an existing directory, otherwise as `dst` itself.
pub fn write_host(entries: &[Entry], dst: &Path) -> io::Result<()> {
    let into_dir = std::fs::symlink_metadata(dst).map(|m| m.is_dir()).unwrap_or(false);
    let base = if into_dir {
        dst.to_path_buf()
    } else {
        dst.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf()
    };
    let mut dirs = Vec::new();
    for e in entries {
        let rel = check_relative(&e.path)?;
        let rest: PathBuf = rel.components().skip(1).collect();
        let target: PathBuf = if into_dir {
            dst.join(rel)
        } else if rest.as_os_str().is_empty() {
            dst.to_path_buf()
        } else {
            dst.join(rest)
        };
        // The destination's parent exists and was named by the operator; from
        // there down nothing may be a symlink (ones this stream made included).
        no_links_between(&base, target.parent().unwrap_or(&base))?;
        if std::fs::symlink_metadata(&target).map(|m| m.file_type().is_symlink()).unwrap_or(false) {
            std::fs::remove_file(&target)?;
        }
        // No setuid/setgid from a sandbox onto the host.
        let mode = e.mode & 0o1777;
        match e.kind {
            Kind::Dir => {
                if !target.is_dir() {
                    std::fs::create_dir(&target)?;
                }
                dirs.push((target, mode));
            }
            Kind::File => {
                let mut f = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .custom_flags(nix::libc::O_NOFOLLOW)
                    .mode(0o600)
                    .open(&target)?;
                f.write_all(&e.data)?;
                f.set_permissions(std::fs::Permissions::from_mode(mode))?;
            }
            Kind::Symlink => {
                let _ = std::fs::remove_file(&target);
                std::os::unix::fs::symlink(
                    <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&e.data),
                    &target,
                )?;
            }
        }
    }
    for (d, mode) in dirs.into_iter().rev() {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// Entries as a tar stream whose root is the top-level entry itself.
pub fn to_tar(entries: &[Entry], out: impl Write) -> io::Result<()> {
    let mut b = tar::Builder::new(out);
    b.follow_symlinks(false);
    for e in entries {
        let rest: PathBuf = Path::new(&e.path).components().skip(1).collect();
        let name = if rest.as_os_str().is_empty() { PathBuf::from(".") } else { rest };
        let mut h = tar::Header::new_gnu();
        h.set_mode(e.mode);
        h.set_mtime(0);
        match e.kind {
            Kind::Dir => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                b.append_data(&mut h, &name, io::empty())?;
            }
            Kind::File => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(e.data.len() as u64);
                b.append_data(&mut h, &name, e.data.as_slice())?;
            }
            Kind::Symlink => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                let target = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&e.data);
                b.append_link(&mut h, &name, target)?;
            }
        }
    }
    b.finish()
}

/// A tar stream as entries under the top-level name `root`. Every entry is
/// checked before anything is written: one that would escape (absolute,
/// `..`, a hard link, a device) refuses the whole archive.
pub fn from_tar(input: impl Read, root: &str) -> io::Result<Vec<Entry>> {
    let mut out = vec![Entry { kind: Kind::Dir, mode: 0o755, path: root.to_string(), data: Vec::new() }];
    let mut a = tar::Archive::new(input);
    for e in a.entries()? {
        let mut e = e?;
        let raw = e.path()?.into_owned();
        let rel: PathBuf = raw.components().filter(|c| !matches!(c, Component::CurDir)).collect();
        if rel.as_os_str().is_empty() {
            continue;
        }
        let rel_s = rel.to_str().ok_or_else(|| invalid(format!("{} is not UTF-8", raw.display())))?.to_string();
        check_relative(&rel_s).map_err(|_| {
            invalid(format!("refusing the archive: entry {:?} would escape the workspace", raw.display()))
        })?;
        let mode = e.header().mode().unwrap_or(0o644) & 0o7777;
        let path = format!("{root}/{rel_s}");
        let kind = e.header().entry_type();
        let entry = if kind.is_dir() {
            Entry { kind: Kind::Dir, mode, path, data: Vec::new() }
        } else if kind.is_file() {
            let mut data = Vec::new();
            e.read_to_end(&mut data)?;
            Entry { kind: Kind::File, mode, path, data }
        } else if kind.is_symlink() {
            let target = e.link_name()?.ok_or_else(|| invalid(format!("symlink {rel_s} has no target")))?;
            Entry { kind: Kind::Symlink, mode, path, data: target.into_owned().into_os_string().into_encoded_bytes() }
        } else {
            return Err(invalid(format!(
                "refusing the archive: entry {rel_s:?} is a {kind:?}, not a file, directory or symlink"
            )));
        };
        out.push(entry);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sbx-xfer-{tag}-{}-{:x}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn e(kind: Kind, mode: u32, path: &str, data: &[u8]) -> Entry {
        Entry { kind, mode, path: path.into(), data: data.to_vec() }
    }

    #[test]
    fn round_trip_through_the_stream_and_the_host() {
        let src = tmp("src");
        let tree = src.join("tree");
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        std::fs::write(tree.join("sub/a.bin"), [0u8, 1, 2, 255]).unwrap();
        std::fs::set_permissions(tree.join("sub/a.bin"), std::fs::Permissions::from_mode(0o751)).unwrap();
        std::os::unix::fs::symlink("sub/a.bin", tree.join("link")).unwrap();
        let entries = read_host(&tree).unwrap();
        let mut buf = Vec::new();
        encode(&entries, &mut buf).unwrap();
        let back = decode(buf.as_slice()).unwrap();
        assert_eq!(back, entries);
        let dst = tmp("dst");
        write_host(&back, &dst).unwrap();
        assert_eq!(std::fs::read(dst.join("tree/sub/a.bin")).unwrap(), [0u8, 1, 2, 255]);
        assert_eq!(std::fs::metadata(dst.join("tree/sub/a.bin")).unwrap().mode() & 0o7777, 0o751);
        assert_eq!(std::fs::read_link(dst.join("tree/link")).unwrap(), PathBuf::from("sub/a.bin"));
        // To a new name instead of into a directory; a single file too.
        write_host(&back, &dst.join("renamed")).unwrap();
        assert!(dst.join("renamed/sub/a.bin").exists());
        write_host(&[e(Kind::File, 0o600, "one", b"1")], &dst.join("other-name")).unwrap();
        assert_eq!(std::fs::read(dst.join("other-name")).unwrap(), b"1");
        std::fs::remove_dir_all(src).unwrap();
        std::fs::remove_dir_all(dst).unwrap();
    }

    #[test]
    fn a_hostile_stream_cannot_leave_the_destination() {
        let dst = tmp("hostile");
        let outside = tmp("outside");
        for bad in ["../x", "/etc/x", "a/../../x", ""] {
            let err = write_host(&[e(Kind::File, 0o644, bad, b"x")], &dst).unwrap_err();
            assert!(err.to_string().contains("refusing"), "{bad}: {err}");
        }
        // A symlink planted first, then a file "inside" it.
        let entries = vec![
            e(Kind::Dir, 0o755, "t", b""),
            e(Kind::Symlink, 0o777, "t/escape", outside.to_str().unwrap().as_bytes()),
            e(Kind::File, 0o644, "t/escape/pwned", b"x"),
        ];
        let err = write_host(&entries, &dst).unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
        assert!(!outside.join("pwned").exists());
        // A file over an existing symlink replaces the link, not its target.
        std::fs::create_dir_all(dst.join("u")).unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), dst.join("u/f")).unwrap();
        write_host(&[e(Kind::Dir, 0o755, "u", b""), e(Kind::File, 0o644, "u/f", b"mine")], &dst).unwrap();
        assert!(!outside.join("victim").exists());
        assert_eq!(std::fs::read(dst.join("u/f")).unwrap(), b"mine");
        // setuid does not survive the trip to the host.
        write_host(&[e(Kind::File, 0o4755, "suid", b"x")], &dst).unwrap();
        assert_eq!(std::fs::metadata(dst.join("suid")).unwrap().mode() & 0o7777, 0o755);
        std::fs::remove_dir_all(dst).unwrap();
        std::fs::remove_dir_all(outside).unwrap();
    }

    #[test]
    fn tar_round_trip_and_escapes_refused() {
        let entries = vec![
            e(Kind::Dir, 0o755, "workspace", b""),
            e(Kind::File, 0o640, "workspace/a.txt", b"hello"),
            e(Kind::Symlink, 0o777, "workspace/l", b"a.txt"),
        ];
        let mut tar = Vec::new();
        to_tar(&entries, &mut tar).unwrap();
        let back = from_tar(tar.as_slice(), "workspace").unwrap();
        assert_eq!(back[1..], entries[1..]);

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
            let err = from_tar(data.as_slice(), "workspace").unwrap_err();
            assert!(err.to_string().contains("escape"), "{evil}: {err}");
        }
    }
}

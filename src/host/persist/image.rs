//! A session's bounded /state (root, local engine): a sparse ext4 image
//! `volumes/KEY.img` (0600 root) loop-mounted nosuid,nodev at the
//! session's directory `volumes/KEY`, so a write past `--persist-size`
//! gets ENOSPC inside the sandbox instead of filling the disk the engine
//! lives on. The session's volume binds `volumes/KEY/data`, which exists
//! only inside the mounted image: when the mount is gone (a reboot, an
//! unmount by hand) the engine finds no source and refuses to start the
//! container, so the bare mount point can never become an unbounded
//! /state. The mount point itself is root's, mode 0000, for the same end.
//! `create` and `sbx start` mount it again (under the session's lock).
//!
//! mount(8) sets the loop device up with autoclear, so an unmount frees it;
//! `destroy --purge` also detaches whatever loop still holds the image
//! (`losetup --associated`). The commands are argv, never a shell.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{host_dir, prepare_dir, stale_scratch, unbind};

mod room;
mod superblock;
use crate::error::{Error, Result, SessionError};
use crate::spec::DEFAULT_PERSIST_BYTES;

/// The image of a session's bounded /state.
pub fn image_path(data_dir: &Path, session: &str) -> PathBuf {
    data_dir.join("volumes").join(format!("{session}.img"))
}

/// A session's image while it is made: renamed to [`image_path`] once
/// mkfs succeeded, so a create killed before that leaves only this (gc's).
pub fn part_path(data_dir: &Path, session: &str) -> PathBuf {
    data_dir.join("volumes").join(format!("{session}.img.part"))
}

/// The session key a file under `volumes/` belongs to (`KEY`, `KEY.lock`,
/// `KEY.img`, `KEY.img.part`).
pub fn session_of(name: &str) -> &str {
    [".img.part", ".img", ".lock"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name)
}

/// What the session's volume binds: `KEY/data` inside the mounted image
/// when the session has one, else the session's directory itself (an
/// unbounded session: `--persist-size unbounded`, or from an older sbx).
pub fn volume_device(data_dir: &Path, session: &str) -> PathBuf {
    let dir = host_dir(data_dir, session);
    match image_path(data_dir, session).exists() {
        true => dir.join("data"),
        false => dir,
    }
}

/// Whether the session has a bounded /state (an image), mounted or not.
pub fn is_bounded(data_dir: &Path, session: &str) -> bool {
    std::fs::symlink_metadata(image_path(data_dir, session)).is_ok()
}

pub fn mkfs_argv(img: &Path) -> Vec<OsString> {
    // No reserved blocks: the bound is all the sandbox's. -F: it is a file.
    let mut a: Vec<OsString> = ["mkfs.ext4", "-q", "-F", "-m", "0", "--"].map(OsString::from).into();
    a.push(img.into());
    a
}

pub fn mount_argv(img: &Path, dir: &Path) -> Vec<OsString> {
    let mut a: Vec<OsString> = ["mount", "-t", "ext4", "-o", "loop,nosuid,nodev", "--"].map(OsString::from).into();
    a.extend([img.into(), dir.into()]);
    a
}

/// The loop devices backed by `img`, one name a line.
pub fn loops_argv(img: &Path) -> Vec<OsString> {
    let mut a: Vec<OsString> =
        ["losetup", "--list", "--noheadings", "--output", "NAME", "--associated"].map(OsString::from).into();
    a.push(img.into());
    a
}

pub fn detach_argv(dev: &str) -> Vec<OsString> {
    ["losetup", "--detach", dev].map(OsString::from).into()
}

/// After the image grew, unmounted: checked (resize2fs wants that), then
/// ext4 grown to its length. Offline, since online resizing is refused by
/// some kernels (EPERM from the resize ioctl on this project's CI).
pub fn grow_argv(img: &Path) -> [Vec<OsString>; 2] {
    let with = |a: &[&str]| -> Vec<OsString> {
        let mut v: Vec<OsString> = a.iter().map(OsString::from).collect();
        v.push(img.into());
        v
    };
    [with(&["e2fsck", "-f", "-p", "--"]), with(&["resize2fs", "--"])]
}

/// Run one of the argv above; its stdout.
fn run(argv: &[OsString], session: &str, what: &str) -> Result<String> {
    run_ok_codes(argv, session, what, &[0])
}

/// [`run`], taking the exit codes in `ok` as success (e2fsck's 1: errors fixed).
fn run_ok_codes(argv: &[OsString], session: &str, what: &str, ok: &[i32]) -> Result<String> {
    let program = argv[0].to_string_lossy().into_owned();
    let fail =
        |detail: String| Error::Session(SessionError::Bound { session: session.into(), what: what.into(), detail });
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| fail(format!("could not run {program}: {e}")))?;
    if !out.status.code().is_some_and(|c| ok.contains(&c)) {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(fail(format!("{program} exited with {}: {err}", out.status.code().unwrap_or(-1))));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The loop devices that hold `img` (none when it is absent).
pub fn loops_of(img: &Path, session: &str) -> Result<Vec<String>> {
    if std::fs::symlink_metadata(img).is_err() {
        return Ok(Vec::new());
    }
    let out = run(&loops_argv(img), session, "listing its loop devices")?;
    Ok(out.lines().map(str::trim).filter(|l| l.starts_with("/dev/")).map(str::to_string).collect())
}

/// Whether a file system other than the one `dir` is on is mounted at it
/// (sbx's image; a bind of the directory onto itself does not count).
/// Never through a link.
pub fn mounted(dir: &Path) -> bool {
    use nix::fcntl::OFlag;
    use std::os::fd::AsRawFd;
    let dev = |p: &Path| {
        let fd = crate::host::socket::open_dir_at(None, p, OFlag::O_NOFOLLOW).ok()?;
        nix::sys::stat::fstat(fd.as_raw_fd()).ok().map(|s| s.st_dev)
    };
    match (dev(dir), dir.parent().and_then(dev)) {
        (Some(a), Some(b)) => a != b,
        _ => false,
    }
}

/// The mounted images' directories: a `--clone` into a bounded session
/// clones beside its `data`, so a killed one's scratch is there (gc).
pub fn mounted_dirs(data_dir: &Path) -> Vec<PathBuf> {
    let dir = data_dir.join("volumes");
    let names = std::fs::read_dir(&dir).into_iter().flatten().flatten();
    names
        .filter_map(|e| Some(e.file_name().into_string().ok()?.strip_suffix(".img")?.to_string()))
        .map(|s| host_dir(data_dir, &s))
        .filter(|d| mounted(d))
        .collect()
}

/// Bytes used and the size of the file system mounted at `dir`.
pub fn usage(dir: &Path) -> Option<(u64, u64)> {
    let v = nix::sys::statvfs::statvfs(dir).ok()?;
    let frsize = v.fragment_size() as u64;
    let (blocks, free) = (v.blocks() as u64, v.blocks_free() as u64);
    Some((blocks.saturating_sub(free).saturating_mul(frsize), blocks.saturating_mul(frsize)))
}

/// What a bounded session's /state became: its bound and whether its
/// image was made now.
pub struct Bounded {
    pub bytes: u64,
    pub fresh: bool,
}

/// The session's image, made on first use (`want` bytes, or the default),
/// grown to `want` when that is larger (unmounted: see `grow_argv`),
/// mounted at its directory, and its `data` directory (all the sandbox
/// sees; mkfs's lost+found stays beside it) given to the sandbox user. Held under the session's
/// lock. A smaller `want` than the image is refused (ext4 does not shrink
/// online); a directory of an unbounded session with data in it is
/// refused rather than hidden under the mount. `idle`: no sandbox uses the
/// session (the caller checked, under the lock), so it may be unmounted
/// to grow; otherwise (`sbx start`) it is only mounted.
pub fn ensure(
    data_dir: &Path,
    session: &str,
    want: Option<u64>,
    idle: bool,
    (uid, gid): (u32, u32),
) -> Result<Bounded> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let dir = host_dir(data_dir, session);
    let img = image_path(data_dir, session);
    let io = |what: String| move |e: std::io::Error| Error::io(what, e);
    let size = want.unwrap_or(DEFAULT_PERSIST_BYTES);
    if std::fs::symlink_metadata(&img).is_err() {
        room::check(&data_dir.join("volumes"), session, None, size)?;
    }
    match std::fs::DirBuilder::new().mode(0o000).create(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(Error::io(format!("creating {}", dir.display()), e))
        }
        _ => {}
    }
    let mut fresh = false;
    if std::fs::symlink_metadata(&img).is_err() {
        if super::holds_data(&dir) {
            return Err(crate::model::invalid::Invalid::new(
                "--persist-size",
                want.map(|n| n.to_string()).unwrap_or_default(),
                format!("session {session}'s /state is an unbounded directory ({}) from an earlier sbx", dir.display()),
            )
            .hint(format!(
                "keep using it unbounded with --persist-size unbounded, or move its data out and `sbx volumes rm {session}`"
            ))
            .into());
        }
        let part = part_path(data_dir, session);
        let _ = std::fs::remove_file(&part);
        let f = std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&part)
            .map_err(io(format!("creating {}", part.display())))?;
        if let Err(e) = f.set_len(size) {
            let _ = std::fs::remove_file(&part);
            return Err(Error::io(format!("sizing {}", part.display()), e));
        }
        drop(f);
        if let Err(e) = run(&mkfs_argv(&part), session, "making its file system") {
            let _ = std::fs::remove_file(&part);
            return Err(e);
        }
        std::fs::rename(&part, &img).map_err(io(format!("moving {} into place", part.display())))?;
        fresh = true;
    }
    let have = std::fs::metadata(&img).map_err(io(format!("reading {}", img.display())))?.len();
    let len = match want {
        Some(n) if n < have => {
            return Err(crate::model::invalid::Invalid::new(
                "--persist-size",
                n.to_string(),
                format!("session {session}'s /state is already {have} bytes, and a file system is not shrunk"),
            )
            .hint(format!(
                "give --persist-size {have} or more (or leave it out), or start over with `sbx volumes rm {session}` (its data goes)"
            ))
            .into())
        }
        Some(n) if n > have => {
            room::check(&data_dir.join("volumes"), session, Some(&img), n)?;
            std::fs::File::options()
                .write(true)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&img)
                .and_then(|f| f.set_len(n))
                .map_err(io(format!("growing {}", img.display())))?;
            n
        }
        _ => have,
    };
    // The file system is grown to the file's length by what it spans, not
    // by whether the length changed now: a grow an sbx was killed in (the
    // file longer, resize2fs not run) is finished by the next create.
    // resize2fs grows to whole blocks (at most 64 KiB each).
    let short = superblock::fs_bytes(&img).is_some_and(|fs| len.saturating_sub(fs) >= 64 << 10);
    if short && idle {
        if mounted(&dir) {
            nix::mount::umount2(&dir, nix::mount::MntFlags::empty())
                .map_err(|e| Error::io(format!("unmounting {} to grow it", dir.display()), e.into()))?;
        }
        released(&img, session)?;
        let [check, resize] = grow_argv(&img);
        let what = format!("growing its file system to {len} bytes");
        run_ok_codes(&check, session, &what, &[0, 1])?;
        run(&resize, session, &what)?;
    }
    let bytes = len;
    if !mounted(&dir) {
        // An older sbx's nosuid bind of the directory onto itself.
        unbind(&dir);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o000))
            .map_err(io(format!("chmod 0000 {}", dir.display())))?;
        run(&mount_argv(&img, &dir), session, &format!("mounting {} at {}", img.display(), dir.display()))?;
        if !mounted(&dir) {
            return Err(Error::Session(SessionError::Bound {
                session: session.into(),
                what: format!("mounting {}", img.display()),
                detail: format!("mount(8) succeeded but {} is still not a mount point", dir.display()),
            }));
        }
    }
    // A clone killed mid-way left its scratch beside `data`, inside the bound.
    for p in stale_scratch(&dir) {
        let _ = crate::host::socket::remove_tree(&dir, &p.file_name().unwrap_or_default().to_string_lossy());
    }
    prepare_dir(&dir.join("data"), uid, gid)?;
    Ok(Bounded { bytes, fresh })
}

/// Wait (bounded) until no loop device holds `img`: unmounting its
/// directory does not end its file system while another mount of it lives
/// (the engine's bind of the volume, a removed container's mounts not yet
/// torn down). Under load the grow ran e2fsck and resize2fs on the file of
/// a file system still mounted, and mount(8) then reused the loop device,
/// stale cache and old size with it: the session got ENOSPC at its old
/// bound, and a checker had written under a live file system.
fn released(img: &Path, session: &str) -> Result<()> {
    for _ in 0..200 {
        let held = loops_of(img, session)?;
        if held.is_empty() {
            return Ok(());
        }
        // Frees one nothing holds; on a busy one it only sets autoclear.
        for dev in &held {
            let _ = run(&detach_argv(dev), session, "detaching its loop device");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Err(Error::Session(SessionError::Bound {
        session: session.into(),
        what: "growing its file system".into(),
        detail: format!(
            "{} is still in use after its unmount (a sandbox of the session still being removed, or a mount of it \
             elsewhere); try again, or find it with `losetup --associated {}`",
            img.display(),
            img.display()
        ),
    }))
}

/// Unmount the session's image, detach every loop device of it (or of a
/// half-made one) and remove both files: `destroy --purge`, `volumes rm`.
pub fn remove(data_dir: &Path, session: &str) -> Result<()> {
    let dir = host_dir(data_dir, session);
    unbind(&dir);
    for img in [image_path(data_dir, session), part_path(data_dir, session)] {
        for dev in loops_of(&img, session)? {
            run(&detach_argv(&dev), session, &format!("detaching {dev}"))?;
        }
        match std::fs::remove_file(&img) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io(format!("removing {}", img.display()), e))
            }
            _ => {}
        }
    }
    Ok(())
}

/// What a killed create left of bounded sessions whose lock is free: a
/// half-made image, and loop devices of an image that is not mounted.
/// An image that is not mounted is the session's data and stays. With
/// `clean`, detaches and removes them too. Returns what it found.
pub fn leftovers(data_dir: &Path, clean: bool) -> Vec<String> {
    let dir = data_dir.join("volumes");
    let mut found = Vec::new();
    for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let Ok(name) = e.file_name().into_string() else { continue };
        if !(name.ends_with(".img") || name.ends_with(".img.part")) {
            continue;
        }
        let session = session_of(&name);
        if crate::spec::parse_session(session).is_err() {
            continue;
        }
        let Ok(Some(_lock)) = super::try_lock(data_dir, session) else { continue };
        let path = dir.join(&name);
        let part = name.ends_with(".part");
        // A mounted image's loop is its mount's: no losetup for it.
        let stale = match part || !mounted(&host_dir(data_dir, session)) {
            true => loops_of(&path, session).unwrap_or_default(),
            false => Vec::new(),
        };
        for dev in &stale {
            found.push(format!("{dev} ({})", path.display()));
            if clean {
                let _ = run(&detach_argv(dev), session, "detaching a leftover loop device");
            }
        }
        if part {
            found.push(path.display().to_string());
            if clean {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests;

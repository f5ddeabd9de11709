//! The files: `<data dir>/secrets/<id>.json` (0600, its directory 0700:
//! values and the CA key) and `<data dir>/secrets-ca/<id>/ca-bundle.pem`
//! (0644 in 0755: certificates only, mounted into the sandbox). Both
//! written whole to a new file renamed into place, never through a symlink.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::{Kept, BUNDLE_FILE};
use crate::error::{Error, Result};
use crate::model::invalid::Invalid;

/// The largest kept file read back (the roots are the bulk).
const MAX_KEPT: u64 = 8 << 20;

fn root(data: &Path) -> PathBuf {
    data.join("secrets")
}

fn file(data: &Path, id: &str) -> PathBuf {
    root(data).join(format!("{id}.json"))
}

fn bundle_root(data: &Path) -> PathBuf {
    data.join("secrets-ca")
}

/// The directory mounted read-only at `BUNDLE_DIR` in sandbox `id`.
pub fn bundle_dir(data: &Path, id: &str) -> PathBuf {
    bundle_root(data).join(id)
}

fn io(what: &str, p: &Path, e: std::io::Error) -> Error {
    Error::io(format!("{what} {}", p.display()), e)
}

/// `d` made with `mode` (whatever the umask), and a directory, not a link.
fn own_dir(d: &Path, mode: u32) -> Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(mode).create(d).map_err(|e| io("creating", d, e))?;
    let meta = std::fs::symlink_metadata(d).map_err(|e| io("reading", d, e))?;
    if !meta.is_dir() {
        return Err(io("using", d, std::io::Error::other("not a directory")));
    }
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode)).map_err(|e| io("creating", d, e))
}

/// `bytes` as `dir/name`, mode `mode`, atomically.
fn put(dir: &Path, name: &str, mode: u32, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(format!(".{name}.{}.{}", std::process::id(), rand::random::<u32>()));
    let dst = dir.join(name);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &dst)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("writing", &dst, e));
    }
    Ok(())
}

/// Keep `kept` for sandbox `id` and write its bundle; returns the bundle's directory.
pub fn write(data: &Path, id: &str, kept: &Kept) -> Result<PathBuf> {
    save(data, id, kept)?;
    let b = bundle_dir(data, id);
    own_dir(&bundle_root(data), 0o755)?;
    own_dir(&b, 0o755)?;
    put(&b, BUNDLE_FILE, 0o644, kept.bundle().as_bytes())?;
    Ok(b)
}

/// Replace what is kept for sandbox `id` (its bundle stays).
pub fn save(data: &Path, id: &str, kept: &Kept) -> Result<()> {
    let r = root(data);
    own_dir(&r, 0o700)?;
    let json = serde_json::to_vec(kept).map_err(|e| io("writing", &file(data, id), std::io::Error::other(e)))?;
    put(&r, &format!("{id}.json"), 0o600, &json)
}

/// What was kept for sandbox `id`; None when nothing was (no secret, or
/// removed).
pub fn load(data: &Path, id: &str) -> Result<Option<Kept>> {
    use std::io::Read;
    let p = file(data, id);
    let f = match std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_NOFOLLOW).open(&p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("reading", &p, e)),
    };
    let mut text = Vec::new();
    f.take(MAX_KEPT).read_to_end(&mut text).map_err(|e| io("reading", &p, e))?;
    // serde_json's error names a position, never the text.
    let kept = serde_json::from_slice(&text).map_err(|e| io("reading", &p, std::io::Error::other(e.to_string())))?;
    Ok(Some(kept))
}

/// Replace secret `name`'s value of sandbox `id` (its placeholder stays);
/// returns what is kept now. Exit 2 when the sandbox has no such secret.
pub fn set_value(data: &Path, id: &str, name: &str, value: String) -> Result<Kept> {
    let _lock = crate::host::lockfile::exclusive(&root(data).join(format!("{id}.lock")))?;
    let no_secret = || {
        Invalid::new("NAME", name, format!("sandbox {id} has no secret of that name"))
            .hint(format!("`sbx inspect {id}` lists its secrets"))
    };
    let mut kept = load(data, id)?.ok_or_else(no_secret)?;
    let s = kept.secrets.iter_mut().find(|s| s.name == name).ok_or_else(no_secret)?;
    s.value = value;
    save(data, id, &kept)?;
    Ok(kept)
}

/// Remove sandbox `id`'s kept file and bundle; already gone is fine.
pub fn remove(data: &Path, id: &str) -> Result<()> {
    let gone = |r: std::io::Result<()>, p: &Path| match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("removing", p, e)),
        _ => Ok(()),
    };
    let f = file(data, id);
    gone(std::fs::remove_file(&f), &f)?;
    let l = root(data).join(format!("{id}.lock"));
    gone(std::fs::remove_file(&l), &l)?;
    let b = bundle_dir(data, id);
    gone(std::fs::remove_dir_all(&b), &b)
}

/// The sandboxes something is kept for here (gc's list).
pub fn ids(data: &Path) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for (dir, strip) in [(root(data), ".json"), (bundle_root(data), "")] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_suffix(strip) else { continue };
            if crate::spec::parse_id(id).is_ok() && !ids.iter().any(|i| i == id) {
                ids.push(id.to_string());
            }
        }
    }
    ids.sort();
    ids
}

/// gc: remove what is kept for every sandbox not in `live`; returns the
/// ids removed. Files not named like sbx's own are left alone.
pub fn remove_all_but(data: &Path, live: &dyn Fn(&str) -> bool) -> Result<Vec<String>> {
    let ids: Vec<String> = ids(data).into_iter().filter(|id| !live(id)).collect();
    for id in &ids {
        remove(data, id)?;
    }
    Ok(ids)
}

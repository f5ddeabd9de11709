//! The in-sandbox helper (`helper/sbx_helper.rs`, built static by build.rs
//! and embedded here): installed once per version under the data dir and
//! bind-mounted read-only at /run/sbx/helper in every sandbox, so exec -d,
//! ps, kill, logs, cp, wait-port, port-forward, backup and restore work on an
//! image with no shell, no coreutils and no tar.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

pub const BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sbx-helper"));
const KEY: &str = include_str!(concat!(env!("OUT_DIR"), "/sbx-helper.key"));
/// Where sandboxes see it.
pub const SANDBOX_PATH: &str = "/run/sbx/helper";

/// The helper's path on the host, writing it on first use. `None` when this
/// sbx was built without one (no static libc at build time).
pub fn install(data_dir: &Path) -> Result<Option<PathBuf>> {
    if BYTES.is_empty() {
        return Ok(None);
    }
    let dir = data_dir.join("helper");
    let path = dir.join(format!("sbx-helper-{KEY}"));
    if std::fs::metadata(&path).map(|m| m.len() == BYTES.len() as u64).unwrap_or(false) {
        return Ok(Some(path));
    }
    let io = |what: &str, e| Error::io(format!("{what} {}", path.display()), e);
    std::fs::create_dir_all(&dir).map_err(|e| io("creating the directory of", e))?;
    let tmp = dir.join(format!(".sbx-helper.{}.{:x}", std::process::id(), rand::random::<u32>()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(&tmp)
        .map_err(|e| io("writing", e))?;
    f.write_all(BYTES).and_then(|()| f.sync_all()).map_err(|e| io("writing", e))?;
    std::fs::rename(&tmp, &path).map_err(|e| io("installing", e))?;
    Ok(Some(path))
}

/// The error for a sandbox that has no helper (built without one, or made by
/// an sbx before the helper existed).
pub fn missing(id: &str) -> Error {
    Error::HelperMissing { id: id.to_string() }
}

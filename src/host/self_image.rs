//! sbx's own image: this executable (and the shared libraries it needs)
//! packed with `docker import`, so no registry is involved. Doctor's probe
//! runs it as `/sbx __probe`, the egress gate as `/sbx __gate`, audit's
//! remote probe as `/sbx __status-probe`.
//!
//! It is run only by the image id this data dir's own `docker import`
//! returned, recorded per engine in `self-image.json`. Never by a label or a
//! tag: anything on the engine can carry those, and the tar is reproducible,
//! so an image of an attacker's carrying sbx's label and a `Created` of
//! 2099 became the egress gate of every later sandbox. An image id is the
//! digest of the image's config (which names its layers), so no other
//! image can answer to the one recorded.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::docker::{argv, parse, DockerExec};
use crate::error::{Error, Result};

/// Where the record lives and which engine it is asked for: the data dir,
/// and the engine's endpoint as sbx resolved it (no docker call).
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub dir: &'a Path,
    pub endpoint: &'a str,
}

/// The record's file in the data dir.
pub const RECORD: &str = "self-image.json";
const LOCK: &str = "self-image.lock";

/// What this data dir imported, per engine.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Records {
    /// Endpoint -> the engine's ID (`docker info`'s `.ID`) at the last import.
    #[serde(default)]
    endpoints: BTreeMap<String, String>,
    /// Engine ID -> the images imported there, oldest first.
    #[serde(default)]
    engines: BTreeMap<String, Vec<Imported>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Imported {
    /// What `docker import` printed.
    id: String,
    /// The build it was made from (see [`exe_key`]).
    exe: String,
}

impl Records {
    fn read(dir: &Path) -> Records {
        std::fs::read(dir.join(RECORD)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    /// The image of build `exe` recorded for the engine at `endpoint`.
    fn current(&self, endpoint: &str, exe: &str) -> Option<&str> {
        let engine = self.endpoints.get(endpoint)?;
        // Only an image id goes into docker's argv, whoever edited the file.
        let id = self.engines.get(engine)?.iter().rev().find(|i| i.exe == exe).map(|i| i.id.as_str())?;
        let hex = id.strip_prefix("sha256:")?;
        (!hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
    }

    /// Written whole to a temporary file and renamed over the record, so a
    /// reader without the lock sees the old record or the new one.
    fn write(&self, dir: &Path) -> Result<()> {
        let dst = dir.join(RECORD);
        let tmp = dir.join(format!(".{RECORD}.{}", std::process::id()));
        let text = serde_json::to_vec(self).expect("the record serializes");
        let _ = std::fs::remove_file(&tmp);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&text))
            .and_then(|()| std::fs::rename(&tmp, &dst));
        written.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::io(format!("writing {}", dst.display()), e)
        })
    }
}

/// sbx's image on the engine at `place`: the id recorded for this build
/// with no docker call, else imported (and recorded) now.
pub fn ensure(exec: &dyn DockerExec, exe: &Path, place: Place) -> Result<String> {
    if let Some(key) = exe_key(exe) {
        if let Some(id) = Records::read(place.dir).current(place.endpoint, &key) {
            return Ok(id.to_string());
        }
    }
    import(exec, exe, place, None)
}

/// Whether `e`, docker's refusal of a `create`/`run` of sbx's image, says
/// that image is not there: removed by hand, by `docker image prune`, or by
/// another data dir's sbx of another build.
pub fn is_gone(e: &Error) -> bool {
    match e {
        Error::Image(crate::error::ImageError::Missing { .. }) => true,
        Error::Docker(crate::docker::DockerError::Status { stderr, .. }) => parse::image_missing_at_run(stderr),
        _ => parse::image_missing_at_run(&e.to_string()),
    }
}

/// What every user of sbx's image (the egress gate, audit's probe,
/// doctor's probe) does with the result of a `create`/`run` of `image`:
/// when docker said it is gone ([`is_gone`]), import it again, forgetting
/// the recorded id, and `retry` with the new one, once; any other result
/// stands.
pub fn again_if_gone<T>(
    first: Result<T>,
    exec: &dyn DockerExec,
    exe: &Path,
    place: Place,
    image: &str,
    retry: impl FnOnce(&str) -> Result<T>,
) -> Result<T> {
    match first {
        Err(e) if is_gone(&e) => retry(&import(exec, exe, place, Some(image))?),
        r => r,
    }
}

/// Under the record's lock: learn the engine's ID, take an id another sbx
/// of this build recorded meanwhile (unless it is `gone`), else pack and
/// import this executable, record the id, and remove the images this data
/// dir recorded for other builds on that engine (docker refuses one in use,
/// which stays recorded for a later try).
fn import(exec: &dyn DockerExec, exe: &Path, place: Place, gone: Option<&str>) -> Result<String> {
    let _lock = crate::host::lockfile::exclusive(&place.dir.join(LOCK))?;
    let engine = engine_id(exec)?;
    let key = exe_key(exe).unwrap_or_default();
    let mut records = Records::read(place.dir);
    records.endpoints.insert(place.endpoint.to_string(), engine.clone());
    let mine = records.engines.entry(engine.clone()).or_default();
    if let Some(gone) = gone {
        mine.retain(|i| i.id != gone);
    }
    if let Some(id) = mine.iter().rev().find(|i| i.exe == key && !key.is_empty()).map(|i| i.id.clone()) {
        records.write(place.dir)?;
        return Ok(id);
    }
    // Doctor's probe and the egress gate wait for this on a first run.
    let mut bar = crate::output::progress();
    bar.update("building sbx's own image (packing this executable)");
    let tar = image_tar(exe).map_err(|e| Error::io(format!("packing {} into sbx's image", exe.display()), e))?;
    bar.update("building sbx's own image (docker import)");
    let args = argv::import();
    let out = exec.run_input(&args, &tar)?;
    if out.status != 0 {
        return Err(crate::docker::status_error(&args, &out).into());
    }
    let id = parse::imported_id(&out.stdout_str()).ok_or_else(|| {
        Error::Docker(crate::docker::DockerError::Parse {
            command: crate::docker::render(&args),
            reason: format!("expected the new image's sha256:ID, got {:?}", out.stdout_str().trim()),
        })
    })?;
    let mine = records.engines.entry(engine).or_default();
    mine.push(Imported { id: id.clone(), exe: key.clone() });
    // Same-build images of a concurrent import stay: another sbx is about
    // to run its own.
    let stale: Vec<String> = mine.iter().filter(|i| i.exe != key).map(|i| i.id.clone()).collect();
    if !stale.is_empty() {
        let still = remove_images(exec, &stale);
        mine.retain(|i| i.exe == key || still.contains(&i.id));
    }
    records.write(place.dir)?;
    Ok(id)
}

/// Remove `ids` (best effort), returning those docker kept (in use, or a
/// call that failed): they stay recorded, so a later import tries again.
fn remove_images(exec: &dyn DockerExec, ids: &[String]) -> Vec<String> {
    let Ok(out) = exec.run(&argv::remove_images(ids)) else { return ids.to_vec() };
    if out.status == 0 {
        return Vec::new();
    }
    let stderr = out.stderr_str();
    ids.iter().filter(|id| parse::rmi_kept(&stderr, id)).cloned().collect()
}

/// The engine's own ID, what the record is kept under: two endpoints
/// (a socket and ssh) may reach one engine, and one endpoint another
/// engine after a reinstall.
fn engine_id(exec: &dyn DockerExec) -> Result<String> {
    let args = argv::engine_id();
    let out = crate::docker::run_ok(exec, &args)?;
    parse::engine_id(&out.stdout_str()).ok_or_else(|| {
        Error::Docker(crate::docker::DockerError::Parse {
            command: crate::docker::render(&args),
            reason: format!("expected the engine's ID, got {:?}", out.stdout_str().trim()),
        })
    })
}

/// Test support: record `id` as build `exe`'s image on engine `engine`
/// reached at `place`, as an import would have.
#[cfg(test)]
pub fn record_for_test(place: Place, exe: &Path, engine: &str, id: &str) {
    let mut r = Records::read(place.dir);
    r.endpoints.insert(place.endpoint.to_string(), engine.to_string());
    r.engines.entry(engine.to_string()).or_default().push(Imported { id: id.into(), exe: exe_key(exe).unwrap() });
    std::fs::create_dir_all(place.dir).unwrap();
    r.write(place.dir).unwrap();
}

/// What identifies this build of the executable on this host
/// (`dev:ino:size:mtime_ns`).
fn exe_key(exe: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(exe).ok()?;
    Some(format!("{}:{}:{}:{}.{}", m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
}

/// The files of the image: the sbx executable at /sbx, the shared objects
/// `ldd` names at their own paths, and empty 0755 /tmp, /etc, /state (as
/// many images have, so the probe also checks that /tmp is writable anyway).
pub fn image_tar(exe: &Path) -> std::io::Result<Vec<u8>> {
    let mut files: Vec<(PathBuf, PathBuf)> = vec![(PathBuf::from("sbx"), exe.to_path_buf())];
    for lib in shared_objects(exe) {
        files.push((lib.strip_prefix("/").unwrap_or(&lib).to_path_buf(), lib));
    }
    let mut b = tar::Builder::new(Vec::new());
    for dir in ["tmp", "etc", "state"] {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        h.set_mtime(0);
        b.append_data(&mut h, dir, std::io::empty())?;
    }
    for (inside, host) in files {
        let data = std::fs::read(&host)?;
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o755);
        h.set_size(data.len() as u64);
        // Fixed metadata: the same binary gives the same layer.
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        b.append_data(&mut h, inside, data.as_slice())?;
    }
    b.into_inner()
}

/// Absolute paths of the shared objects a dynamic executable loads; none
/// for a static one (or where `ldd` is missing, when the image may lack
/// them and the probe says so by failing to start).
fn shared_objects(exe: &Path) -> Vec<PathBuf> {
    let Ok(out) = std::process::Command::new("ldd").arg(exe).output() else { return Vec::new() };
    parse_ldd(&String::from_utf8_lossy(&out.stdout))
}

pub fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

#[cfg(test)]
mod tests;

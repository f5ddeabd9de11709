//! A persistent session's /state on a remote engine: made for
//! create, removed by `volumes rm` and `destroy --purge`, listed by
//! `volumes`. Two volumes on the engine (see `docker::argv::remote_state`):
//! nothing of this machine is in any argv, and this machine never reads
//! what the sandbox wrote (only docker's answers about the volumes).
//!
//! Both carry an owner token of this data dir's key: a volume of either
//! name without it is someone else's, never used, filled or removed.

use std::collections::BTreeMap;
use std::path::Path;

use crate::docker::argv::remote_state::{self as rs, STATE_OF};
use crate::docker::argv::{self, remote};
use crate::docker::parse::{self, VolumeUser};
use crate::docker::{run_ok, status_error};
use crate::error::{Error, Result, SandboxError, SessionError};
use crate::host::persist::{self, Cloned, VolumeInfo};
use crate::host::state;
use crate::model::record;
use crate::sandbox::Driver;
use crate::spec::{CloneSpec, UserSpec};

/// One volume as `state_volumes_inspect` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::sandbox) struct Found {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub options: BTreeMap<String, String>,
    pub mountpoint: String,
}

type Row = (String, Option<BTreeMap<String, String>>, Option<BTreeMap<String, String>>, String);

fn foreign(name: &str, why: impl Into<String>) -> Error {
    Error::Session(SessionError::ForeignVolume { name: name.to_string(), why: why.into() })
}

/// `found` carries this key's owner token for its name and `label=session`.
fn check_ours(found: &Found, key: &[u8], label: &str, session: &str) -> Result<()> {
    let owner = state::owner_token(key, &found.name);
    if found.labels.get(record::OWNER) != Some(&owner) {
        return Err(foreign(&found.name, format!("no {} label of this data dir's key", record::OWNER)));
    }
    if found.labels.get(label).map(String::as_str) != Some(session) {
        return Err(foreign(&found.name, format!("its {label} label is not {session}")));
    }
    Ok(())
}

/// The session volume is the overlay of the backing volume at `mountpoint`.
fn check_overlay(found: &Found, mountpoint: &str) -> Result<()> {
    let opt = |k: &str| found.options.get(k).map(String::as_str);
    let want = rs::overlay_options(mountpoint);
    if opt("type") != Some("overlay") || opt("device") != Some("overlay") || opt("o") != Some(want.as_str()) {
        return Err(foreign(
            &found.name,
            format!(
                "its options are not a nosuid,nodev overlay of {mountpoint} (`sbx volumes rm` removes both volumes)"
            ),
        ));
    }
    Ok(())
}

/// A mount point the engine reported, safe to name in overlay options
/// (`,` and `:` separate them): an absolute path of plain characters.
fn usable_mountpoint(m: &str) -> bool {
    m.len() > 1
        && m.starts_with('/')
        && m.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+@".contains(&b))
        && !m.split('/').any(|c| c == "..")
}

/// What `docker cp -a` extracts into the backing volume: `upper/` (the
/// merged root: the sandbox user's, 0700), `work/` (overlay's, root 0700)
/// and an empty `lower/` (root 0755). Onto existing directories it only
/// sets their owner and mode (the sandbox user may change between creates,
/// as locally); what is inside them is never touched.
fn backing_tar(user: UserSpec) -> Vec<u8> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let mut b = tar::Builder::new(Vec::new());
    for (name, uid, gid, mode) in
        [("upper/", user.uid, user.gid, 0o700), ("work/", 0, 0, 0o700), ("lower/", 0, 0, 0o755)]
    {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_uid(uid.into());
        h.set_gid(gid.into());
        h.set_mode(mode);
        h.set_mtime(now);
        h.set_size(0);
        h.set_path(name).expect("a short relative path");
        h.set_cksum();
        b.append(&h, std::io::empty()).expect("writing to a Vec");
    }
    b.into_inner().expect("writing to a Vec")
}

impl Driver {
    /// The engine's answer about `names` (those it has).
    fn inspect_state(&self, names: &[&str]) -> Result<Vec<Found>> {
        let args = rs::state_volumes_inspect(names);
        let out = self.docker.run(&args)?;
        if out.status != 0 && !parse::no_such_volume(&out.stderr_str()) {
            return Err(status_error(&args, &out).into());
        }
        Ok(parse::rows::<Row>(&out.stdout_str())
            .into_iter()
            .filter(|(name, ..)| names.contains(&name.as_str()))
            .map(|(name, labels, options, mountpoint)| Found {
                name,
                labels: labels.unwrap_or_default(),
                options: options.unwrap_or_default(),
                mountpoint,
            })
            .collect())
    }

    /// `volume`, then sbx's by its labels: docker answers `volume create`
    /// of an existing name with success, whoever made it.
    fn made(&self, args: &[std::ffi::OsString], name: &str, key: &[u8], label: &str, session: &str) -> Result<Found> {
        run_ok(&*self.docker, args)?;
        let found = self.inspect_state(&[name])?.into_iter().next();
        let found = found.ok_or_else(|| foreign(name, "the engine does not have it right after creating it"))?;
        check_ours(&found, key, label, session)?;
        Ok(found)
    }

    /// The session's remote /state volume, made on first use, its root
    /// given to `user` (0700) on every create. The caller holds the
    /// session's lock and has checked no running sandbox uses it.
    /// `image`: the sandbox's, already on the engine, for the filler
    /// container (never started).
    /// `clone`: `--clone` into its workspace (see `remote_clone`), with a
    /// private directory of this machine to clone in; what it did.
    pub(in crate::sandbox) fn prepare_remote_state(
        &self,
        key: &[u8],
        session: &str,
        user: UserSpec,
        image: &str,
        clone: Option<(&CloneSpec, &Path)>,
    ) -> Result<(String, Option<Cloned>)> {
        let volume = persist::volume_name(session);
        let backing = rs::backing_name(session);
        let found = self.inspect_state(&[&volume, &backing])?;
        let get = |n: &str| found.iter().find(|f| f.name == n);
        // Both checked before anything is made or filled (a session volume
        // of this key that is no overlay: a local engine's, bound to a
        // directory of the engine's machine).
        if let Some(v) = get(&volume) {
            check_ours(v, key, record::SESSION, session)?;
            if v.options.get("type").map(String::as_str) != Some("overlay") {
                return Err(foreign(&v.name, "it is not an overlay: a session volume of a local engine's sbx"));
            }
        }
        let (b, fresh) = match get(&backing) {
            Some(b) => {
                check_ours(b, key, STATE_OF, session)?;
                (b.clone(), false)
            }
            None => {
                let owner = state::owner_token(key, &backing);
                (self.made(&rs::backing_create(&backing, session, &owner), &backing, key, STATE_OF, session)?, true)
            }
        };
        if !usable_mountpoint(&b.mountpoint) {
            return Err(foreign(
                &backing,
                format!("its mount point {:?} cannot be named in overlay options", b.mountpoint),
            ));
        }
        if let Some(v) = get(&volume) {
            check_overlay(v, &b.mountpoint)?;
        }
        let cloned = match self.fill_backing(key, &backing, image, user, clone) {
            Ok(c) => c,
            Err(e) => {
                // As locally: a failed fill or clone leaves no
                // volume this create made behind (its filler is gone).
                if fresh && get(&volume).is_none() {
                    let _ = self.docker.run(&argv::volume_remove(&backing));
                }
                return Err(e);
            }
        };
        if get(&volume).is_none() {
            let owner = state::owner_token(key, &volume);
            let args = rs::overlay_create(&volume, &b.mountpoint, session, &owner);
            check_overlay(&self.made(&args, &volume, key, record::SESSION, session)?, &b.mountpoint)?;
        }
        Ok((volume, cloned))
    }

    /// [`backing_tar`] into the backing volume through a never-started
    /// container of `image` that mounts it (`volume-nocopy`; named and
    /// labelled so gc reaps it if sbx dies meanwhile), then `--clone`
    /// through it too, then removed.
    fn fill_backing(
        &self,
        key: &[u8],
        backing: &str,
        image: &str,
        user: UserSpec,
        clone: Option<(&CloneSpec, &Path)>,
    ) -> Result<Option<Cloned>> {
        let id = crate::sandbox::shared::fillers::new_id(key);
        let cid = run_ok(&*self.docker, &rs::backing_filler(image, backing, &id))?.stdout_str().trim().to_string();
        let filled = (|| {
            let args = rs::copy_in_archive(&cid, &id.dir());
            let out = self.docker.run_input(&args, &backing_tar(user))?;
            if out.status != 0 {
                return Err(status_error(&args, &out).into());
            }
            clone.map(|(c, scratch)| self.clone_remote((&cid, &id.dir()), c, user, scratch)).transpose()
        })();
        let _ = self.docker.run(&remote::remove_filler(&cid));
        filled
    }

    /// Remove a remote session's two volumes under its lock: refused while
    /// a running sandbox uses it, and (before either goes) when either is
    /// not sbx's. None there: `NotFound`, or Ok with `gone_ok` (a purge).
    /// Returns the session volume's name.
    pub(in crate::sandbox) fn remove_remote_state(&self, session: &str, gone_ok: bool) -> Result<String> {
        let crate::sandbox::HostState { state, key } = self.state()?;
        let volume = persist::volume_name(session);
        let backing = rs::backing_name(session);
        let _lock = persist::remote_lock(&state.dir, session)?;
        let users = run_ok(&*self.docker, &argv::volume_users(Some(&volume)))?;
        if let Some(user) = parse::rows::<VolumeUser>(&users.stdout_str()).into_iter().next() {
            return Err(Error::Session(SessionError::VolumeInUse { session: session.to_string(), id: user.container }));
        }
        let found = self.inspect_state(&[&volume, &backing])?;
        if found.is_empty() && !gone_ok {
            return Err(Error::Sandbox(SandboxError::NotFound { id: volume }));
        }
        for f in &found {
            let label = if f.name == volume { record::SESSION } else { STATE_OF };
            check_ours(f, key, label, session)?;
        }
        // The overlay first: the backing volume holds its directories.
        for name in [&volume, &backing].into_iter().filter(|n| found.iter().any(|f| f.name == **n)) {
            let args = argv::volume_remove(name);
            let out = self.docker.run(&args)?;
            if out.status != 0 && !parse::no_such_volume(&out.stderr_str()) {
                return Err(status_error(&args, &out).into());
            }
        }
        let _ = std::fs::remove_file(persist::remote_lock_path(&state.dir, session));
        // Its files are gone: the session's uid may be another's now.
        self.release_uids(&[crate::host::uids::Holder::Session(session.to_string())]);
        Ok(volume)
    }

    /// `volumes` on a remote engine: each session's volume (its backing
    /// volume named as its path; size not measured), and a backing volume
    /// whose session volume is gone.
    pub(in crate::sandbox) fn remote_state_list(&self) -> Result<Vec<VolumeInfo>> {
        let key = &self.state()?.key;
        let out = run_ok(&*self.docker, &rs::state_volumes())?;
        let users = run_ok(&*self.docker, &argv::volume_users(None))?;
        let users: Vec<VolumeUser> = parse::rows(&users.stdout_str());
        let rows: Vec<(String, String, String, String)> = parse::rows(&out.stdout_str());
        let rows: Vec<_> =
            rows.into_iter().filter(|(name, _, owner, _)| *owner == state::owner_token(key, name)).collect();
        let sessions: Vec<&str> = rows
            .iter()
            .filter(|(name, session, ..)| *name == persist::volume_name(session))
            .map(|(_, session, ..)| session.as_str())
            .collect();
        let info = |name: &str, session: &str| VolumeInfo {
            in_use_by: users.iter().filter(|u| u.volume == name).map(|u| u.container.clone()).collect(),
            bytes: 0,
            // The remote engine's disk: nothing bounds it (`--persist-size unbounded`).
            limit: None,
            mounted: None,
            path: format!("volume {} on the engine", rs::backing_name(session)),
            name: name.to_string(),
            session: session.to_string(),
        };
        let mut list: Vec<VolumeInfo> = sessions.iter().map(|s| info(&persist::volume_name(s), s)).collect();
        for (name, _, _, of) in &rows {
            if !of.is_empty() && *name == rs::backing_name(of) && !sessions.contains(&of.as_str()) {
                list.push(info(name, of));
            }
        }
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_absolute_mount_points_go_into_overlay_options() {
        assert!(usable_mountpoint("/var/lib/docker/volumes/sbx-data-s/_data"));
        for bad in ["", "/", "relative/x", "/a,upperdir=/etc", "/a:/b", "/a/../b", "/a b", "/a\n"] {
            assert!(!usable_mountpoint(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_backing_tar_gives_upper_to_the_sandbox_user_and_the_rest_to_root() {
        let t = backing_tar(UserSpec { uid: 1000, gid: 1001 });
        let mut a = tar::Archive::new(&t[..]);
        let got: Vec<(String, u64, u64, u32, bool)> = a
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                let dir = h.entry_type() == tar::EntryType::Directory;
                (e.path().unwrap().display().to_string(), h.uid().unwrap(), h.gid().unwrap(), h.mode().unwrap(), dir)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("upper/".into(), 1000, 1001, 0o700, true),
                ("work/".into(), 0, 0, 0o700, true),
                ("lower/".into(), 0, 0, 0o755, true)
            ]
        );
    }
}

//! Create against a remote engine. Nothing of this machine goes
//! into an argv: the channel is relayed (`--channel exec`, its socket in a
//! tmpfs inside the sandbox), sbx's helper comes from a named volume sbx
//! fills on that engine, and where the mounts land is checked through
//! `docker cp` of the created sandbox's /run instead of this machine's /proc.

use std::path::PathBuf;

use crate::docker::argv::remote;
use crate::docker::run_ok;
use crate::error::{Error, HostError, Result};
use crate::model::channel::Choice;
use crate::model::invalid::Invalid;
use crate::sandbox::shared::boot::helper_in_tar;
use crate::sandbox::Driver;
use crate::spec::SandboxSpec;

/// Fills of the helper volume tried before giving up (concurrent creates
/// fill it with the same bytes; one more pass settles a torn read).
const FILL_TRIES: usize = 3;

impl Driver {
    /// With a remote engine, before any docker call: what would put a path
    /// of this machine into an argv (or `--clone` without `--persist`),
    /// exit 2. Host-path flags were refused on the request
    /// (`spec::refuse_host_paths`); they are checked again here for creates
    /// that do not come from one (a pool's refill).
    pub(super) fn refuse_remote(&self, spec: &SandboxSpec) -> Result<()> {
        let engine = self.engine()?;
        if !engine.is_remote() {
            return Ok(());
        }
        if spec.state_dir.is_some() || !spec.mounts.is_empty() || spec.clone.is_some() {
            let req = crate::spec::CreateRequest {
                ro: spec.mounts.iter().filter(|m| m.readonly).map(|m| m.host.display().to_string()).collect(),
                rw: spec.mounts.iter().filter(|m| !m.readonly).map(|m| m.host.display().to_string()).collect(),
                state_dir: spec.state_dir.as_ref().map(|m| m.host.display().to_string()),
                clone: spec.clone.as_ref().map(|c| c.url.clone()),
                persist: spec.persist,
                session: spec.session.clone(),
                ..Default::default()
            };
            crate::spec::refuse_host_paths(&req, engine)?;
        }
        if let Some(e) = spec.egress.as_ref().filter(|e| !e.policy.terminate.is_empty()) {
            let (flag, value) = match e.secrets.first() {
                Some(s) => ("--secret", format!("{}@{}:{}", s.name, s.host, s.port)),
                None => ("--allow", e.policy.terminate[0].host.clone()),
            };
            return Err(Invalid::new(
                flag,
                value,
                format!(
                    "the engine is remote ({}): a terminating gate needs this machine's CA bundle mounted into the sandbox, \
                     and a secret's value would travel to that engine's machine, which sbx does not vouch for",
                    engine.endpoint
                ),
            )
            .hint("run sbx on the engine's machine, or leave out --secret and request rules (`--allow HOST` stays end-to-end TLS)")
            .into());
        }
        if spec.channel == Choice::Direct {
            return Err(Invalid::new(
                "--channel",
                "direct",
                format!(
                    "the direct channel is a socket file on the engine's machine, and the engine is remote ({}): sbx cannot dial it from here",
                    engine.endpoint
                ),
            )
            .hint("drop --channel (a remote engine always gets the relayed channel, `--channel exec`)")
            .into());
        }
        Ok(())
    }

    /// The remote engine's helper volume, `sbx-helper-KEY` (`-r`: the
    /// readable copy gVisor needs), made and filled on first use: a volume
    /// labelled with the helper's key, filled by `docker cp` into a
    /// never-started container that mounts it, and read back before it is
    /// trusted. That container is of the sandbox's own `image`, already on
    /// the engine (sbx's own image would be imported over the network
    /// first): nothing of it runs, and whatever its layout does to the
    /// fill, each sandbox's /run is checked before start
    /// (`check_remote_layout`). Once verified, a line in the data dir
    /// (`helper/remote-verified`: endpoint and volume) spares later
    /// creates all but one `docker volume inspect`, which still catches a
    /// volume removed (docker would make an empty one at `run`) or replaced.
    ///
    /// Concurrent first creates each fill it with the same bytes; a fill
    /// replaces the file (docker removes and rewrites it), so each reads
    /// back after its own fill and fills again if it read a torn file.
    pub(super) fn helper_volume(&self, data_dir: &std::path::Path, image: &str, readable: bool) -> Result<String> {
        let key = crate::host::helper::key();
        let name = format!("sbx-helper-{key}{}", if readable { "-r" } else { "" });
        let endpoint = self.engine()?.endpoint.clone();
        let untrusted = |reason: String| {
            Error::Host(HostError::HelperUntrusted {
                path: PathBuf::from(format!("volume {name} on {endpoint}")),
                reason,
            })
        };
        let cache = data_dir.join("helper").join("remote-verified");
        let line = format!("{endpoint} {name}");
        let out = self.docker.run(&remote::helper_volume_labels(&name))?;
        let labelled = out.status == 0 && labels_say(&out.stdout_str(), key);
        if labelled && std::fs::read_to_string(&cache).is_ok_and(|t| t.lines().any(|l| l == line)) {
            return Ok(name);
        }
        if out.status == 0 && !labelled {
            // Not sbx's (or made empty by a `run` after its removal): never trusted, never removed.
            return Err(untrusted(format!(
                "it exists without the label {}={key}; remove it (`docker volume rm {name}`) if nothing uses it",
                remote::HELPER_LABEL
            )));
        }
        if out.status != 0 {
            run_ok(&*self.docker, &remote::helper_volume_create(&name, key))?;
        }
        // Named and labelled so gc removes it if this process is killed mid-fill.
        let filler = crate::sandbox::shared::fillers::new_id(&self.state()?.key);
        let args = remote::helper_filler(image, &name, &filler);
        let cid = run_ok(&*self.docker, &args)?.stdout_str().trim().to_string();
        let filled = self.fill_helper(&cid, &filler.dir(), readable);
        let _ = self.docker.run(&remote::remove_filler(&cid));
        filled.map_err(untrusted)?;
        // Best effort: without it the next create verifies again.
        let _ = std::fs::create_dir_all(data_dir.join("helper"));
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&cache)
            .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()));
        Ok(name)
    }

    /// Read the helper back from the filler's volume; fill it when it is
    /// not exactly this sbx's. Err: why it is still not, after the tries.
    /// `dir`: where the filler mounts the volume.
    fn fill_helper(&self, cid: &str, dir: &str, readable: bool) -> std::result::Result<(), String> {
        let path = format!("{dir}/helper");
        let mut why = String::new();
        for _ in 0..FILL_TRIES {
            match self.docker.run(&remote::copy_out(cid, &path)) {
                Ok(out) if out.status == 0 => match helper_in_tar(&out.stdout, "helper", readable) {
                    Ok(()) => return Ok(()),
                    Err(e) => why = e,
                },
                Ok(out) => why = format!("reading it back failed: {}", out.stderr_str().trim()),
                Err(e) => why = e.to_string(),
            }
            let tar = crate::host::helper::tar(readable);
            match self.docker.run_input(&remote::copy_in(cid, dir), &tar) {
                Ok(out) if out.status == 0 => {}
                Ok(out) => why = format!("filling it failed: {}", out.stderr_str().trim()),
                Err(e) => why = e.to_string(),
            }
        }
        Err(why)
    }
}

/// `{{json .Labels}}` of the helper volume carries `sbx.helper=KEY`.
fn labels_say(json: &str, key: &str) -> bool {
    serde_json::from_str::<std::collections::BTreeMap<String, String>>(json.trim())
        .is_ok_and(|l| l.get(remote::HELPER_LABEL).is_some_and(|v| v == key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::shared::boot::check_run_tar;

    use crate::sandbox::testing::tar_of;

    #[test]
    fn the_run_layout_must_be_plain_directories_holding_sbx_s_helper() {
        use tar::EntryType::{Directory as D, Regular as F, Symlink as L};
        let h = crate::host::helper::BYTES;
        let good = tar_of(&[
            ("run", D, b"", 0o755, None),
            ("run/sbx", D, b"", 0o755, None),
            ("run/sbx/helper", F, h, 0o511, None),
        ]);
        check_run_tar(&good, false).unwrap();
        assert!(check_run_tar(&good, true).unwrap_err().contains("mode is 511"));
        let linked = tar_of(&[("run", D, b"", 0o755, None), ("run/sbx", L, b"", 0o777, Some("/tmp/a/sbx"))]);
        let e = check_run_tar(&linked, false).unwrap_err();
        assert!(e.contains("/run/sbx in the image is a Symlink to /tmp/a/sbx"), "{e}");
        let run_linked = tar_of(&[("run", L, b"", 0o777, Some("/tmp/run"))]);
        assert!(check_run_tar(&run_linked, false).unwrap_err().contains("/run in the image"));
        let covered = tar_of(&[
            ("run", D, b"", 0o755, None),
            ("run/sbx", D, b"", 0o755, None),
            ("run/sbx/helper", F, b"evil", 0o511, None),
        ]);
        assert!(check_run_tar(&covered, false).unwrap_err().contains("bytes, not"));
        let sock = tar_of(&[("run", D, b"", 0o755, None), ("run/sandbox", L, b"", 0o777, Some("/tmp"))]);
        assert!(check_run_tar(&sock, false).unwrap_err().contains("/run/sandbox"));
        assert!(check_run_tar(&tar_of(&[("run", D, b"", 0o755, None)]), false).unwrap_err().contains("no /run/sbx"));
    }

    #[test]
    fn only_a_volume_labelled_with_this_helper_s_key_is_sbx_s() {
        assert!(labels_say(r#"{"sbx.helper":"abc"}"#, "abc"));
        assert!(!labels_say(r#"{"sbx.helper":"abd"}"#, "abc"));
        assert!(!labels_say("null", "abc"));
        assert!(!labels_say("{}", "abc"));
    }
}

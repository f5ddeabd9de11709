//! Audit's read of a sandbox's process against a remote engine:
//! a probe container of sbx's own image joins the sandbox's pid namespace
//! and prints its main process's status (`status_probe`); the probe is
//! removed with `--rm`, by name if its run failed, and by gc once its
//! `sbx.expires` has passed if sbx died meanwhile. The AppArmor fact is
//! the engine's (`docker info`), not this machine's /sys.

use std::time::{Duration, SystemTime};

use super::status_probe::{self, Found};
use super::ProcStatus;
use crate::docker::parse::RawContainer;
use crate::docker::DockerError;
use crate::docker::{argv, run_ok, status_error};
use crate::error::{CheckError, Error, Result};
use crate::sandbox::Driver;

/// How long a probe may stand before gc takes it for a leftover: its run
/// takes a second or two, and it exits by itself within ten.
pub const PROBE_LIFETIME: Duration = Duration::from_secs(45);

/// The status of `raw`'s main process, read by a probe on its engine, or
/// why there is none.
pub fn process_status(driver: &Driver, id: &str, raw: &RawContainer) -> Result<(Option<ProcStatus>, String)> {
    let full = &raw.full;
    if let Some(why) = super::proc_status::not_running(full) {
        return Ok((None, why));
    }
    let cid = full["Id"].as_str().filter(|c| c.len() == 64 && c.bytes().all(|b| b.is_ascii_hexdigit()));
    let Some(cid) = cid else {
        return Err(
            CheckError::AuditProbe { id: id.into(), reason: "the engine reports no container id".into() }.into()
        );
    };
    let crate::sandbox::HostState { state, key } = driver.state()?;
    // So gc looks for probes this host left (best effort: without it, a
    // probe left by a killed sbx stays until an audit writes it).
    let _ = std::fs::write(state.dir.join(crate::model::record::AUDIT_PROBES_MARK), b"");
    let pid = full["State"]["Pid"].as_i64().unwrap_or(0);
    let probe = |image: &str| -> Result<crate::docker::Output> {
        let name = format!("sbx-audit-{}-{:08x}", id.trim_start_matches("sbx-"), rand::random::<u32>());
        let owner = crate::host::state::owner_token(key, &name);
        let expires = humantime::format_rfc3339_seconds(SystemTime::now() + PROBE_LIFETIME).to_string();
        let plan =
            argv::ProbePlan { name: &name, sandbox: id, container: cid, pid, owner: &owner, expires: &expires, image };
        let args = argv::audit_probe(&plan);
        match driver.docker().run(&args) {
            Ok(out) if out.status == 0 => Ok(out),
            failed => {
                // A probe that hung or failed to start must not stay (best effort: gc takes it otherwise).
                let _ = driver.docker().run(&argv::remove(&[name.as_str()]));
                Err(status_error(&args, &failed?).into())
            }
        }
    };
    let image = driver.self_image()?;
    // Another sbx build on this engine may have dropped sbx's image meanwhile.
    let probed = driver.self_image_again(probe(&image), &image, probe);
    let out = match probed {
        // The sandbox stopped between the inspect and the probe.
        Err(Error::Docker(DockerError::Status { stderr, .. })) if stderr.contains("non running container") => {
            return Ok((None, "the sandbox stopped while audit read it: it has no process to read".into()));
        }
        r => r?,
    };
    match status_probe::parse(&out.stdout) {
        Ok(Found::Process { status, .. }) => Ok((Some(status), String::new())),
        Ok(Found::Nothing) => {
            Ok((None, "the audit probe saw no process of the sandbox in its pid namespace (did it just stop?)".into()))
        }
        Err(reason) => Err(CheckError::AuditProbe { id: id.into(), reason }.into()),
    }
}

/// Whether the engine's host enforces AppArmor, as the engine says.
pub fn apparmor(driver: &Driver) -> Result<bool> {
    let out = run_ok(driver.docker(), &argv::security_options())?;
    let opts: Vec<String> = serde_json::from_str(out.stdout_str().trim()).unwrap_or_default();
    Ok(opts.iter().any(|o| o.split(',').next() == Some("name=apparmor")))
}

#[cfg(test)]
mod tests;

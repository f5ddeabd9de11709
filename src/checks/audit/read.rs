//! Reading one sandbox for audit: its inspect, its host process, its
//! image's labels, the host's AppArmor, and its runtime's registration.

use super::proc_status::not_running;
use super::{audit, runtime_summary, AuditReport, Facts, ProcStatus, RuntimeFacts};

pub fn apparmor_enabled() -> bool {
    std::fs::read_to_string("/sys/module/apparmor/parameters/enabled").map(|s| s.trim() == "Y").unwrap_or(false)
}

/// Check sandbox `id` against the CIS runtime rules: its inspect, its main
/// process's status and the labels of its image, read through the driver.
pub fn of_sandbox(driver: &crate::sandbox::Driver, id: &str) -> crate::error::Result<AuditReport> {
    use crate::docker::{argv, parse, status_error};
    let remote = driver.engine()?.is_remote();
    let raw = driver.inspect_one(id)?;
    let full = &raw.full;
    // The process's status: from this machine's /proc, or (remote) from a
    // probe of sbx's own in the sandbox's pid namespace on the engine.
    let (status, unread) = if remote {
        super::remote::process_status(driver, id, &raw)?
    } else {
        let pid = full["State"]["Pid"].as_i64().unwrap_or(0);
        match ProcStatus::of_pid(pid) {
            Some(p) => (Some(p), String::new()),
            None => {
                (None, not_running(full).unwrap_or_else(|| format!("its process (pid {pid}) is not readable here")))
            }
        }
    };
    // The image's own labels: a container inherits them, sbx's record must not.
    let image = full["Image"].as_str().unwrap_or_default();
    let args = argv::image_labels(image);
    let out = driver.docker().run(&args)?;
    let image_labels = match out.status {
        0 => serde_json::from_str(out.stdout_str().trim()).map_err(|e| format!("unreadable answer: {e}")),
        // Removed under the container: its labels cannot be checked.
        _ if parse::no_such_image(&out.stderr_str()) => Err(out.stderr_str()),
        _ => return Err(status_error(&args, &out).into()),
    };
    let apparmor = if remote { super::remote::apparmor(driver)? } else { apparmor_enabled() };
    let forwarded = forwarded_members(driver, &raw)?;
    let facts = Facts { apparmor, image_labels, runtime: runtime_of(driver, full)?, unread, forwarded };
    let rules = audit(full, status.as_ref(), &facts);
    let runtime = runtime_summary(status.as_ref(), &facts);
    let note = paused(full);
    Ok(AuditReport { id: id.to_string(), passed: rules.iter().all(|r| r.pass), runtime, rules, note })
}

/// Who is on each of the sandbox's private route networks that have a
/// forwarder (from its `sbx.private` record): one `docker network inspect`,
/// none without such a route. A network already gone (revoked) has nobody.
fn forwarded_members(
    driver: &crate::sandbox::Driver,
    raw: &crate::docker::parse::RawContainer,
) -> crate::error::Result<Vec<(String, Vec<String>)>> {
    use crate::model::{forward, record};
    let private: std::collections::BTreeMap<String, String> =
        raw.labels.get(record::PRIVATE).and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
    let nets: Vec<String> =
        private.into_iter().map(record::PrivateRoute::from).filter(forward::is_forwarder).map(|p| p.network).collect();
    let nets: Vec<String> = nets.into_iter().filter(|n| raw.networks.contains(n)).collect();
    if nets.is_empty() {
        return Ok(Vec::new());
    }
    let args = crate::docker::argv::network_members(&nets);
    let out = crate::docker::run_ok(driver.docker(), &args)?;
    let mut found = Vec::new();
    for line in out.stdout_str().lines().filter(|l| !l.trim().is_empty()) {
        let (name, members): (String, Option<std::collections::BTreeMap<String, serde_json::Value>>) =
            serde_json::from_str(line).map_err(|e| crate::docker::DockerError::Parse {
                command: crate::docker::render(&args),
                reason: e.to_string(),
            })?;
        let names = members.unwrap_or_default().values().filter_map(|m| m["Name"].as_str().map(String::from)).collect();
        found.push((name, names));
    }
    Ok(found)
}

/// A paused sandbox's process is read as it stands, frozen: say so.
fn paused(c: &serde_json::Value) -> Option<String> {
    (c["State"]["Paused"] == true).then(|| {
        "the sandbox is paused: its process was read frozen, as it stands (`sbx resume` runs it again)".to_string()
    })
}

/// The runtime the engine ran the container under (`HostConfig.Runtime`,
/// else sbx's label) and, unless it is runc, the engine's registration of
/// it now (`docker info`).
fn runtime_of(driver: &crate::sandbox::Driver, c: &serde_json::Value) -> crate::error::Result<RuntimeFacts> {
    use crate::docker::{argv, parse, status_error};
    use crate::model::runtime::DEFAULT;
    let label = c["Config"]["Labels"][crate::model::record::RUNTIME].as_str().filter(|s| !s.is_empty());
    let engine = c["HostConfig"]["Runtime"].as_str().filter(|s| !s.is_empty());
    let name = engine.or(label).unwrap_or(DEFAULT).to_string();
    let label_disagrees = label.filter(|l| *l != name).map(str::to_string);
    if name == DEFAULT {
        return Ok(RuntimeFacts { label_disagrees, ..RuntimeFacts::runc() });
    }
    let args = argv::runtimes();
    let out = driver.docker().run(&args)?;
    if out.status != 0 {
        return Err(status_error(&args, &out).into());
    }
    let all = parse::runtimes(&out.stdout_str()).ok_or_else(|| crate::error::RuntimeError::Unreadable {
        reason: format!("not a JSON object: {:?}", out.stdout_str().trim()),
    })?;
    Ok(RuntimeFacts {
        registered: all.get(&name).cloned(),
        listed: all.keys().cloned().collect(),
        name,
        label_disagrees,
    })
}

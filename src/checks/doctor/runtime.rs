//! Doctor's runtime checks: the runtimes the engine has, and
//! whether the one `--runtime` names is registered so that sbx's promises
//! hold under it, before the probe runs under it.

use super::{check, Check, Doctor, Status};
use crate::docker::{argv, parse, status_error};
use crate::error::RuntimeError;
use crate::model::channel::{Choice, Kind};
use crate::model::runtime::{fragment, Family, Registered, DEFAULT, SNAPSHOTS};
use crate::spec::Route;

/// What a family means for the workload's kernel, in a word or two.
pub fn family_name(f: Family) -> &'static str {
    match f {
        Family::Runc => "host kernel",
        Family::Gvisor => "gVisor",
        Family::Kata => "Kata VM",
        Family::Other => "unknown kind",
    }
}

impl Doctor<'_> {
    /// The engine's runtimes (a check line naming each), then the
    /// registration of the probe's runtime: Some when the probe can run
    /// under it, None (with a FAIL saying what to change) when it cannot.
    pub(super) fn runtimes(&self, routes: &[Route], checks: &mut Vec<Check>) -> Option<Registered> {
        let args = argv::runtimes();
        let listed = match self.exec.run(&args) {
            Ok(out) if out.status == 0 => parse::runtimes(&out.stdout_str())
                .ok_or_else(|| format!("not a JSON object: {:?}", out.stdout_str().trim())),
            Ok(out) => Err(status_error(&args, &out).to_string()),
            Err(e) => Err(e.to_string()),
        };
        let all = match listed {
            Ok(all) => all,
            Err(why) => {
                // runc needs no registration: only a runtime that was asked for fails here.
                let asked = self.runtime != DEFAULT;
                let e = RuntimeError::Unreadable { reason: why };
                checks.push(check(
                    "runtimes",
                    if asked { Status::Fail } else { Status::Warn },
                    e.to_string(),
                    e.hint(),
                ));
                return (!asked).then(|| Registered { name: DEFAULT.into(), path: DEFAULT.into(), args: vec![] });
            }
        };
        let names: Vec<String> = all.values().map(|r| format!("{} ({})", r.name, family_name(r.family()))).collect();
        checks.push(check("runtimes", Status::Ok, names.join(", "), None));

        let Some(reg) = all.get(self.runtime) else {
            let e = RuntimeError::Missing {
                name: self.runtime.to_string(),
                have: all.keys().cloned().collect::<Vec<_>>().join(", "),
            };
            checks.push(check("runtime", Status::Fail, e.to_string(), e.hint()));
            return None;
        };
        // What create would need of it for this probe: a network for the
        // routes doctor was given, a host socket for the channel it picks.
        // A remote engine always gets the relayed channel.
        let remote = self.driver.engine().is_ok_and(|e| e.is_remote());
        let snapshots = self.runtime == SNAPSHOTS;
        let direct = !remote && !snapshots && Choice::Auto.resolve(nix::unistd::geteuid().as_raw()) == Kind::Direct;
        if snapshots && !self.snapshots_ready(reg, checks) {
            return None;
        }
        let problems = reg.problems(!routes.is_empty(), direct);
        if !problems.is_empty() {
            let e = RuntimeError::Misconfigured { name: reg.name.clone(), path: reg.path.clone(), problems };
            checks.push(check("runtime", Status::Fail, e.to_string(), e.hint()));
            return None;
        }
        let mut detail = format!("the probe runs under {} ({}, {}", reg.name, family_name(reg.family()), reg.path);
        for a in &reg.args {
            detail.push(' ');
            detail.push_str(a);
        }
        detail.push_str(&format!("): {}", reg.seccomp_meaning()));
        if reg.family() == Family::Gvisor && !remote && std::path::Path::new("/dev/kvm").exists() {
            // Information only: runsc's kvm platform hung at container start on engine 20.10 here.
            detail.push_str("; /dev/kvm exists (sbx is tested with runsc's default platform, not kvm)");
        }
        checks.push(check("runtime", Status::Ok, detail, None));
        Some(reg.clone())
    }

    /// What `--snapshots` needs: a registration runsc can checkpoint under,
    /// and the engine's experimental features (`docker checkpoint`).
    fn snapshots_ready(&self, reg: &Registered, checks: &mut Vec<Check>) -> bool {
        let fix = format!(
            "merge {} into /etc/docker/daemon.json and restart dockerd (a SIGHUP does not apply `experimental`; \
             without live-restore running containers stop), or run `sudo .ci/register-runsc-snap`",
            fragment(SNAPSHOTS, Some(&reg.path))
        );
        if !reg.snapshots() {
            let detail = format!(
                "{} is registered with {:?}: runsc 20221219 checkpoints only a sandbox with --network=none and no --host-uds",
                reg.name, reg.args
            );
            checks.push(check("snapshots", Status::Fail, detail, Some(fix)));
            return false;
        }
        let args = argv::experimental();
        let on = self.exec.run(&args).is_ok_and(|o| o.status == 0 && o.stdout_str().trim() == "true");
        if !on {
            let detail = "the engine runs without experimental features, which `docker checkpoint` needs".to_string();
            checks.push(check("snapshots", Status::Fail, detail, Some(fix)));
            return false;
        }
        checks.push(check(
            "snapshots",
            Status::Ok,
            format!("{} can checkpoint (no network, no host sockets) and the engine is experimental", reg.name),
            None,
        ));
        true
    }
}

#[cfg(test)]
mod tests;

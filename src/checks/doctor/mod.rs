//! `sbx doctor`: proves on this host, end to end, that sbx can do its job
//! and that the boundary is what sbx claims, and says how to fix what fails.
//!
//! [`Doctor::run`] checks the engine and the host's directories
//! (`engine`) and the runtime the probe is to run under (`runtime`), then
//! starts a real probe sandbox and judges what it saw from inside
//! (`probe_run`).

mod engine;
mod judge;
mod location;
mod probe_run;
mod runtime;

use std::path::Path;

use serde::Serialize;

use crate::docker::DockerExec;
use crate::spec::Route;

pub use engine::{engine_dns_check, runc_check, version_triple};
pub use judge::{evaluate, Seen};
pub use runtime::family_name;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
    Skip,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    pub fix: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DoctorReport {
    /// True when nothing that was checked failed (warnings allowed).
    pub ok: bool,
    pub checks: Vec<Check>,
}

fn check(name: &str, status: Status, detail: impl Into<String>, fix: Option<String>) -> Check {
    Check { name: name.to_string(), status, detail: detail.into(), fix }
}

pub struct Doctor<'a> {
    pub driver: &'a crate::sandbox::Driver,
    pub exec: &'a dyn DockerExec,
    /// The sbx executable to pack into the probe image.
    pub exe: &'a Path,
    /// The runtime the probe sandbox runs under (`doctor --runtime`).
    pub runtime: &'a str,
}

impl Doctor<'_> {
    pub fn run(&self, routes: &[Route]) -> DoctorReport {
        let mut checks = Vec::new();
        // With a remote engine the probe sandbox takes create's remote path
        // (the relayed channel, the helper volume) and its host process is
        // read by audit's status probe.
        self.location(&mut checks);
        let docker_ok = self.docker(&mut checks);
        self.host_dirs(&mut checks);
        if docker_ok {
            match self.runtimes(routes, &mut checks) {
                Some(reg) => self.probe(routes, &reg, &mut checks),
                None => checks.push(check(
                    "probe",
                    Status::Skip,
                    format!("needs runtime {} registered as sbx needs it", self.runtime),
                    None,
                )),
            }
        } else {
            checks.push(check("probe", Status::Skip, "needs a Docker engine that answers", None));
        }
        let ok = !checks.iter().any(|c| c.status == Status::Fail);
        DoctorReport { ok, checks }
    }
}

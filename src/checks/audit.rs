//! `sbx audit`: a sandbox checked against the runtime rules of the CIS
//! Docker Benchmark (section 5, and 4.1 for the user) that apply to it,
//! numbered as docker-bench-security 1.6 numbers them, plus sbx's own rules
//! (`sbx.*`: its seccomp profile, the log cap, no `sbx.` label from the
//! image, no network but its routes, no healthcheck, no volume but its
//! own, a persistent /state bounded), from `docker inspect`, the image's
//! labels, and what its process actually has, as the kernel reports it in
//! /proc/PID/status. Under gVisor that process is gVisor's Sentry, not the
//! workload: `runtime` says what audit is looking at, and the rules that
//! read the process say how they were established instead.

mod proc_status;
mod read;
mod remote;
mod runtime;
pub mod status_probe;

pub use proc_status::ProcStatus;
pub use read::{apparmor_enabled, of_sandbox};
pub use remote::{process_status, PROBE_LIFETIME};
pub use runtime::RuntimeFacts;
use runtime::View;

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    /// CIS Docker Benchmark recommendation number.
    pub id: &'static str,
    pub title: &'static str,
    pub pass: bool,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditReport {
    pub id: String,
    pub passed: bool,
    /// The runtime the sandbox runs under, and whether the workload has a
    /// kernel of its own (the `sbx.runtime` rule's verdict).
    pub runtime: RuntimeSummary,
    pub rules: Vec<Rule>,
    /// What the report is read from, when that needs saying (a paused sandbox).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeSummary {
    pub name: String,
    /// None when the engine no longer lists the runtime.
    pub family: Option<crate::model::runtime::Family>,
    pub registered: bool,
    pub kernel_isolation: bool,
}

const SENSITIVE: &[&str] = &["/", "/boot", "/dev", "/etc", "/lib", "/proc", "/sys", "/usr"];
const ZERO: &str = "0000000000000000";

fn strs(v: &serde_json::Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// One entry of the container's inspected `Mounts`.
struct Mount {
    source: String,
    destination: String,
    propagation: String,
}

impl Mount {
    fn all(c: &serde_json::Value) -> Vec<Mount> {
        let field = |m: &serde_json::Value, k: &str| m[k].as_str().unwrap_or_default().to_string();
        c["Mounts"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|m| Mount {
                        source: field(m, "Source"),
                        destination: field(m, "Destination"),
                        propagation: field(m, "Propagation"),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// What `audit` needs besides the container's own inspect.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    /// Whether the host enforces AppArmor.
    pub apparmor: bool,
    /// The image's own `Config.Labels` (`docker image inspect`), or why they
    /// could not be read.
    pub image_labels: Result<serde_json::Value, String>,
    /// The runtime it runs under, and the engine's registration of it.
    pub runtime: RuntimeFacts,
    /// Why the process's status was not read, when it was not (a stopped
    /// sandbox has no process): the rules that read it say so.
    pub unread: String,
    /// Each private route network that has sbx's forwarder, with the names
    /// of the containers docker says are on it (`argv::network_members`).
    pub forwarded: Vec<(String, Vec<String>)>,
}

/// The runtime part of the report: what `sbx.runtime` found.
pub fn runtime_summary(proc_status: Option<&ProcStatus>, facts: &Facts) -> RuntimeSummary {
    let rt = &facts.runtime;
    let (_, _, kernel_isolation) = runtime::rule(rt, &View::of(rt, proc_status, &facts.unread));
    RuntimeSummary { name: rt.name.clone(), family: rt.family(), registered: rt.registered.is_some(), kernel_isolation }
}

fn sbx_seccomp(sec: &[String]) -> (bool, String) {
    let profiles = sec.iter().filter(|s| s.starts_with("seccomp=") || s.starts_with("seccomp:")).count();
    if crate::host::seccomp::is_sbx_profile(sec) {
        return (true, "the profile sbx ships (io_uring refused)".into());
    }
    let what = match profiles {
        0 => "the engine's default profile".to_string(),
        _ if sec.iter().any(|s| s.replace(':', "=") == "seccomp=unconfined") => "seccomp=unconfined".into(),
        n => format!("{n} profile(s) that are not sbx's (a custom --seccomp-profile, or another sbx version)"),
    };
    (false, what)
}

mod container_rules;
mod rules;
#[cfg(test)]
mod tests;

pub use rules::audit;

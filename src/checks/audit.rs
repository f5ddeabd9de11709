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

use crate::model::record::is_reserved_label;
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

/// Judge one container. Numbers follow the CIS Docker Benchmark as
/// docker-bench-security 1.6 numbers it (section 5, and 4.1 for the user);
/// `sbx.*` rules check sbx's own hardening.
pub fn audit(c: &serde_json::Value, proc_status: Option<&ProcStatus>, facts: &Facts) -> Vec<Rule> {
    let hc = &c["HostConfig"];
    let mut rules = Vec::new();
    let mut rule = |id: &'static str, title: &'static str, pass: bool, detail: String| {
        rules.push(Rule { id, title, pass, detail })
    };
    let view = View::of(&facts.runtime, proc_status, &facts.unread);
    let mode = |k: &str| hc[k].as_str().unwrap_or_default().to_string();
    let sec = strs(&hc["SecurityOpt"]);
    let mounts = Mount::all(c);

    let profile = c["AppArmorProfile"].as_str().unwrap_or_default();
    if facts.apparmor {
        rule("5.2", "AppArmor profile", !profile.is_empty() && profile != "unconfined", format!("profile {profile:?}"));
    } else {
        rule("5.2", "AppArmor profile", true, "AppArmor is not enabled on this host (not applicable)".into());
    }
    let (drop, add) = (strs(&hc["CapDrop"]), strs(&hc["CapAdd"]));
    let (ok_in, why_in) = view.judge(
        |p| {
            (
                p.cap_eff == ZERO && p.cap_prm == ZERO && p.cap_bnd == ZERO,
                format!("process CapEff {} CapPrm {} CapBnd {}", p.cap_eff, p.cap_prm, p.cap_bnd),
            )
        },
        // The Sentry keeps CAP_SYS_PTRACE for its ptrace platform; the
        // workload's capabilities are gVisor's to apply, from this config.
        |p| (true, format!("established from the config: the workload runs inside gVisor's kernel, which applies them; not read from the host process (gVisor's Sentry: CapEff {})", p.cap_eff)),
    );
    rule(
        "5.4",
        "capabilities dropped",
        drop.iter().any(|d| d.eq_ignore_ascii_case("ALL")) && add.is_empty() && ok_in,
        format!("CapDrop {drop:?}, CapAdd {add:?}; {why_in}"),
    );
    rule("5.5", "not privileged", hc["Privileged"] == false, format!("Privileged {}", hc["Privileged"]));
    let sensitive: Vec<&String> =
        mounts.iter().map(|m| &m.source).filter(|s| SENSITIVE.contains(&s.as_str())).collect();
    rule(
        "5.6",
        "no sensitive host directory mounted",
        sensitive.is_empty(),
        format!("sensitive sources: {sensitive:?}"),
    );
    let ports = hc["PortBindings"].as_object().map(|m| m.len()).unwrap_or(0);
    rule("5.9", "no ports published", ports == 0, format!("{ports} port binding(s)"));
    rule(
        "5.10",
        "host network namespace not shared",
        mode("NetworkMode") != "host",
        format!("NetworkMode {:?}", mode("NetworkMode")),
    );
    let mem = hc["Memory"].as_i64().unwrap_or(0);
    rule("5.11", "memory limited", mem > 0, format!("Memory {} MiB", mem / (1024 * 1024)));
    // docker-bench 1.6 also accepts CpuShares; a share is no limit, so sbx does not.
    let (nano, quota) = (hc["NanoCpus"].as_i64().unwrap_or(0), hc["CpuQuota"].as_i64().unwrap_or(0));
    rule(
        "5.12",
        "CPU limited",
        nano > 0 || quota > 0,
        format!("NanoCpus {nano} ({} CPUs), CpuQuota {quota}", nano as f64 / 1e9),
    );
    rule(
        "5.13",
        "root filesystem read-only",
        hc["ReadonlyRootfs"] == true,
        format!("ReadonlyRootfs {}", hc["ReadonlyRootfs"]),
    );
    let restart = hc["RestartPolicy"]["Name"].as_str().unwrap_or_default();
    let retries = hc["RestartPolicy"]["MaximumRetryCount"].as_i64().unwrap_or(0);
    rule(
        "5.15",
        "restart policy bounded",
        matches!(restart, "" | "no") || (restart == "on-failure" && retries <= 5),
        format!("RestartPolicy {restart:?} (max {retries})"),
    );
    rule("5.16", "host PID namespace not shared", mode("PidMode") != "host", format!("PidMode {:?}", mode("PidMode")));
    rule("5.17", "host IPC namespace not shared", mode("IpcMode") != "host", format!("IpcMode {:?}", mode("IpcMode")));
    let devices = hc["Devices"].as_array().map(|a| a.len()).unwrap_or(0);
    rule("5.18", "no host devices", devices == 0, format!("{devices} device(s)"));
    let ulimits: Vec<String> = hc["Ulimits"]
        .as_array()
        .map(|a| a.iter().filter_map(|u| u["Name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    rule(
        "5.19",
        "ulimits set",
        ulimits.iter().any(|u| u == "nofile") && ulimits.iter().any(|u| u == "core"),
        format!("ulimits {ulimits:?}"),
    );
    let shared: Vec<&String> = mounts
        .iter()
        .filter(|m| matches!(m.propagation.as_str(), "shared" | "rshared"))
        .map(|m| &m.destination)
        .collect();
    rule("5.20", "mount propagation not shared", shared.is_empty(), format!("shared propagation on {shared:?}"));
    rule("5.21", "host UTS namespace not shared", mode("UTSMode") != "host", format!("UTSMode {:?}", mode("UTSMode")));
    let unconfined = sec.iter().any(|s| s.replace(':', "=").starts_with("seccomp=unconfined"));
    let (ok_in, why_in) = view.judge(
        |p| (p.seccomp == "2", format!("process Seccomp {}", p.seccomp)),
        // What reaches the host kernel is the Sentry's calls: its filter is the one that counts.
        |p| {
            (
                p.seccomp == "2",
                format!("the workload's system calls go to gVisor's Sentry; gVisor's Sentry: Seccomp {}", p.seccomp),
            )
        },
    );
    let shown: Vec<String> =
        sec.iter().map(|s| if s.starts_with("seccomp=") { "seccomp=<profile>".into() } else { s.clone() }).collect();
    rule("5.22", "seccomp not unconfined", !unconfined && ok_in, format!("SecurityOpt {shown:?}; {why_in}"));
    let cgroup = hc["CgroupParent"].as_str().unwrap_or_default();
    rule("5.25", "default cgroup", cgroup.is_empty(), format!("CgroupParent {cgroup:?}"));
    let nnp =
        sec.iter().any(|s| s == "no-new-privileges" || s == "no-new-privileges:true" || s == "no-new-privileges=true");
    let (ok_in, why_in) = view.judge(
        |p| (p.no_new_privs == "1", format!("process NoNewPrivs {}", p.no_new_privs)),
        |p| (true, format!("established from the config: gVisor's kernel keeps the workload's flag (not visible from the host); gVisor's Sentry: NoNewPrivs {}", p.no_new_privs)),
    );
    rule("5.26", "no new privileges", nnp && ok_in, format!("SecurityOpt {shown:?}; {why_in}"));
    let pids = hc["PidsLimit"].as_i64().unwrap_or(0);
    rule("5.29", "pids limited", pids > 0, format!("PidsLimit {pids}"));
    let net = mode("NetworkMode");
    rule(
        "5.30",
        "not on the default bridge",
        !matches!(net.as_str(), "default" | "bridge"),
        format!("NetworkMode {net:?}"),
    );
    rule(
        "5.31",
        "host user namespace not shared",
        mode("UsernsMode") != "host",
        format!("UsernsMode {:?}", mode("UsernsMode")),
    );
    let socketish: Vec<String> = mounts
        .iter()
        .filter(|m| {
            let (src, dst) = (m.source.as_str(), m.destination.as_str());
            src.ends_with("docker.sock")
                || dst.ends_with("docker.sock")
                || ["/run", "/var/run"].contains(&src)
                || ["/run", "/var/run"].contains(&dst)
        })
        .map(|m| format!("{}:{}", m.source, m.destination))
        .collect();
    rule(
        "5.32",
        "no docker socket, /run or /var/run mounted",
        socketish.is_empty(),
        format!("offending mounts: {socketish:?}"),
    );
    let user = c["Config"]["User"].as_str().unwrap_or_default().to_string();
    let root_cfg = user.is_empty() || user == "root" || user.split(':').next() == Some("0");
    let (ok_in, why_in) = view.judge(
        |p| (p.uid != "0" && !p.uid.is_empty(), format!("process uid {}", p.uid)),
        // gVisor runs its Sentry as root on the host by design; the workload's uid is the config's.
        |p| (true, format!("established from the config: the workload runs as that user inside gVisor's kernel; not read from the host process (gVisor's Sentry, host uid {})", p.uid)),
    );
    rule("4.1", "runs as a non-root user", !root_cfg && ok_in, format!("User {user:?}; {why_in}"));

    // sbx's own rules (finding 14): what the engine does not do for a sandbox.
    let (ok, why) = sbx_seccomp(&sec);
    let (ok, why) = match runtime::seccomp(&facts.runtime, &view) {
        Some((applied, meaning)) if ok => (applied, meaning),
        _ => (ok, why),
    };
    rule("sbx.seccomp", "seccomp profile is sbx's", ok, why);
    let (ok, why) = log_capped(&hc["LogConfig"]);
    rule("sbx.log", "log driver and size capped", ok, why);
    let (ok, why) = match &facts.image_labels {
        Ok(labels) => {
            let keys: Vec<&String> =
                labels.as_object().map(|m| m.keys().filter(|k| is_reserved_label(k)).collect()).unwrap_or_default();
            (keys.is_empty(), format!("image labels sbx reads: {keys:?}"))
        }
        Err(e) => (false, format!("could not read the image's labels: {e}")),
    };
    rule("sbx.labels", "no label from the image that sbx reads", ok, why);
    let (ok, why) = only_route_networks(c);
    rule("sbx.networks", "on no network but its routes", ok, why);
    let (ok, why) = no_healthcheck(&c["Config"]["Healthcheck"]);
    rule("sbx.health", "no healthcheck run by the engine", ok, why);
    let (ok, why) = no_anonymous_volume(c);
    rule("sbx.volumes", "no volume but sbx's own", ok, why);
    let (ok, why) = persist_bounded(c);
    rule("sbx.persist", "persistent /state bounded", ok, why);
    if !facts.forwarded.is_empty() {
        let (ok, why) =
            only_forwarders(c["Name"].as_str().unwrap_or_default().trim_start_matches('/'), &facts.forwarded);
        rule("sbx.forwarders", "private routes reach only sbx's forwarder", ok, why);
    }
    let (ok, why, _) = runtime::rule(&facts.runtime, &view);
    rule("sbx.runtime", "kernel isolation", ok, why);
    rules
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
#[cfg(test)]
mod tests;

use container_rules::{
    log_capped, no_anonymous_volume, no_healthcheck, only_forwarders, only_route_networks, persist_bounded,
};

//! The rules `audit` judges a container by, as one table in report order:
//! each row is an id (the CIS Docker Benchmark number as docker-bench-security
//! 1.6 numbers it, section 5 and 4.1 for the user; `sbx.*` for sbx's own
//! hardening, what the engine does not do for a sandbox), a title, and the
//! check that reads what was seen.

use serde_json::Value;

use super::container_rules::{
    log_capped, no_anonymous_volume, no_healthcheck, only_forwarders, only_route_networks, persist_bounded,
};
use super::runtime::{self, View};
use super::{sbx_seccomp, strs, Facts, Mount, ProcStatus, Rule, SENSITIVE, ZERO};
use crate::model::record::is_reserved_label;

/// What every rule reads: the container's inspect, what its process is
/// (the workload, gVisor's Sentry, or nothing readable) and the facts
/// gathered beside them.
struct Seen<'a> {
    c: &'a Value,
    hc: &'a Value,
    view: View<'a>,
    sec: Vec<String>,
    /// `sec` with any seccomp profile's text replaced, for details.
    shown: Vec<String>,
    mounts: Vec<Mount>,
    facts: &'a Facts,
}

impl Seen<'_> {
    fn mode(&self, k: &str) -> String {
        self.hc[k].as_str().unwrap_or_default().to_string()
    }
}

/// (pass, detail), or None where the rule does not apply (left out).
type Check = fn(&Seen) -> Option<(bool, String)>;

const RULES: &[(&str, &str, Check)] = &[
    ("5.2", "AppArmor profile", apparmor),
    ("5.4", "capabilities dropped", capabilities),
    ("5.5", "not privileged", not_privileged),
    ("5.6", "no sensitive host directory mounted", no_sensitive_mount),
    ("5.9", "no ports published", no_ports),
    ("5.10", "host network namespace not shared", |s| host_mode(s, "NetworkMode")),
    ("5.11", "memory limited", memory_limited),
    ("5.12", "CPU limited", cpu_limited),
    ("5.13", "root filesystem read-only", read_only_root),
    ("5.15", "restart policy bounded", restart_bounded),
    ("5.16", "host PID namespace not shared", |s| host_mode(s, "PidMode")),
    ("5.17", "host IPC namespace not shared", |s| host_mode(s, "IpcMode")),
    ("5.18", "no host devices", no_devices),
    ("5.19", "ulimits set", ulimits_set),
    ("5.20", "mount propagation not shared", propagation_not_shared),
    ("5.21", "host UTS namespace not shared", |s| host_mode(s, "UTSMode")),
    ("5.22", "seccomp not unconfined", seccomp_confined),
    ("5.25", "default cgroup", default_cgroup),
    ("5.26", "no new privileges", no_new_privileges),
    ("5.29", "pids limited", pids_limited),
    ("5.30", "not on the default bridge", not_default_bridge),
    ("5.31", "host user namespace not shared", |s| host_mode(s, "UsernsMode")),
    ("5.32", "no docker socket, /run or /var/run mounted", no_docker_socket),
    ("4.1", "runs as a non-root user", non_root),
    ("sbx.seccomp", "seccomp profile is sbx's", sbx_profile),
    ("sbx.log", "log driver and size capped", |s| Some(log_capped(&s.hc["LogConfig"]))),
    ("sbx.labels", "no label from the image that sbx reads", no_sbx_label),
    ("sbx.networks", "on no network but its routes", |s| Some(only_route_networks(s.c))),
    ("sbx.health", "no healthcheck run by the engine", |s| Some(no_healthcheck(&s.c["Config"]["Healthcheck"]))),
    ("sbx.volumes", "no volume but sbx's own", |s| Some(no_anonymous_volume(s.c))),
    ("sbx.persist", "persistent /state bounded", |s| Some(persist_bounded(s.c))),
    ("sbx.forwarders", "private routes reach only sbx's forwarder", forwarders),
    ("sbx.runtime", "kernel isolation", kernel_isolation),
];

/// Judge one container by every rule that applies to it, in table order.
pub fn audit(c: &Value, proc_status: Option<&ProcStatus>, facts: &Facts) -> Vec<Rule> {
    let sec = strs(&c["HostConfig"]["SecurityOpt"]);
    let shown =
        sec.iter().map(|s| if s.starts_with("seccomp=") { "seccomp=<profile>".into() } else { s.clone() }).collect();
    let seen = Seen {
        c,
        hc: &c["HostConfig"],
        view: View::of(&facts.runtime, proc_status, &facts.unread),
        sec,
        shown,
        mounts: Mount::all(c),
        facts,
    };
    RULES
        .iter()
        .filter_map(|&(id, title, check)| check(&seen).map(|(pass, detail)| Rule { id, title, pass, detail }))
        .collect()
}

fn apparmor(s: &Seen) -> Option<(bool, String)> {
    let profile = s.c["AppArmorProfile"].as_str().unwrap_or_default();
    Some(match s.facts.apparmor {
        true => (!profile.is_empty() && profile != "unconfined", format!("profile {profile:?}")),
        false => (true, "AppArmor is not enabled on this host (not applicable)".into()),
    })
}

fn capabilities(s: &Seen) -> Option<(bool, String)> {
    let (drop, add) = (strs(&s.hc["CapDrop"]), strs(&s.hc["CapAdd"]));
    let (ok_in, why_in) = s.view.judge(
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
    let pass = drop.iter().any(|d| d.eq_ignore_ascii_case("ALL")) && add.is_empty() && ok_in;
    Some((pass, format!("CapDrop {drop:?}, CapAdd {add:?}; {why_in}")))
}

fn not_privileged(s: &Seen) -> Option<(bool, String)> {
    Some((s.hc["Privileged"] == false, format!("Privileged {}", s.hc["Privileged"])))
}

fn no_sensitive_mount(s: &Seen) -> Option<(bool, String)> {
    let sensitive: Vec<&String> =
        s.mounts.iter().map(|m| &m.source).filter(|src| SENSITIVE.contains(&src.as_str())).collect();
    Some((sensitive.is_empty(), format!("sensitive sources: {sensitive:?}")))
}

fn no_ports(s: &Seen) -> Option<(bool, String)> {
    let ports = s.hc["PortBindings"].as_object().map(|m| m.len()).unwrap_or(0);
    Some((ports == 0, format!("{ports} port binding(s)")))
}

/// A namespace (`NetworkMode`, `PidMode`, ...) not the host's.
fn host_mode(s: &Seen, key: &str) -> Option<(bool, String)> {
    let mode = s.mode(key);
    Some((mode != "host", format!("{key} {mode:?}")))
}

fn memory_limited(s: &Seen) -> Option<(bool, String)> {
    let mem = s.hc["Memory"].as_i64().unwrap_or(0);
    Some((mem > 0, format!("Memory {} MiB", mem / (1024 * 1024))))
}

/// docker-bench 1.6 also accepts CpuShares; a share is no limit, so sbx does not.
fn cpu_limited(s: &Seen) -> Option<(bool, String)> {
    let (nano, quota) = (s.hc["NanoCpus"].as_i64().unwrap_or(0), s.hc["CpuQuota"].as_i64().unwrap_or(0));
    Some((nano > 0 || quota > 0, format!("NanoCpus {nano} ({} CPUs), CpuQuota {quota}", nano as f64 / 1e9)))
}

fn read_only_root(s: &Seen) -> Option<(bool, String)> {
    Some((s.hc["ReadonlyRootfs"] == true, format!("ReadonlyRootfs {}", s.hc["ReadonlyRootfs"])))
}

fn restart_bounded(s: &Seen) -> Option<(bool, String)> {
    let restart = s.hc["RestartPolicy"]["Name"].as_str().unwrap_or_default();
    let retries = s.hc["RestartPolicy"]["MaximumRetryCount"].as_i64().unwrap_or(0);
    let pass = matches!(restart, "" | "no") || (restart == "on-failure" && retries <= 5);
    Some((pass, format!("RestartPolicy {restart:?} (max {retries})")))
}

fn no_devices(s: &Seen) -> Option<(bool, String)> {
    let devices = s.hc["Devices"].as_array().map(|a| a.len()).unwrap_or(0);
    Some((devices == 0, format!("{devices} device(s)")))
}

fn ulimits_set(s: &Seen) -> Option<(bool, String)> {
    let ulimits: Vec<String> = s.hc["Ulimits"]
        .as_array()
        .map(|a| a.iter().filter_map(|u| u["Name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let pass = ulimits.iter().any(|u| u == "nofile") && ulimits.iter().any(|u| u == "core");
    Some((pass, format!("ulimits {ulimits:?}")))
}

fn propagation_not_shared(s: &Seen) -> Option<(bool, String)> {
    let shared: Vec<&String> = s
        .mounts
        .iter()
        .filter(|m| matches!(m.propagation.as_str(), "shared" | "rshared"))
        .map(|m| &m.destination)
        .collect();
    Some((shared.is_empty(), format!("shared propagation on {shared:?}")))
}

fn seccomp_confined(s: &Seen) -> Option<(bool, String)> {
    let unconfined = s.sec.iter().any(|x| x.replace(':', "=").starts_with("seccomp=unconfined"));
    let (ok_in, why_in) = s.view.judge(
        |p| (p.seccomp == "2", format!("process Seccomp {}", p.seccomp)),
        // What reaches the host kernel is the Sentry's calls: its filter is the one that counts.
        |p| {
            (
                p.seccomp == "2",
                format!("the workload's system calls go to gVisor's Sentry; gVisor's Sentry: Seccomp {}", p.seccomp),
            )
        },
    );
    Some((!unconfined && ok_in, format!("SecurityOpt {:?}; {why_in}", s.shown)))
}

fn default_cgroup(s: &Seen) -> Option<(bool, String)> {
    let cgroup = s.hc["CgroupParent"].as_str().unwrap_or_default();
    Some((cgroup.is_empty(), format!("CgroupParent {cgroup:?}")))
}

fn no_new_privileges(s: &Seen) -> Option<(bool, String)> {
    let nnp = s
        .sec
        .iter()
        .any(|x| x == "no-new-privileges" || x == "no-new-privileges:true" || x == "no-new-privileges=true");
    let (ok_in, why_in) = s.view.judge(
        |p| (p.no_new_privs == "1", format!("process NoNewPrivs {}", p.no_new_privs)),
        |p| (true, format!("established from the config: gVisor's kernel keeps the workload's flag (not visible from the host); gVisor's Sentry: NoNewPrivs {}", p.no_new_privs)),
    );
    Some((nnp && ok_in, format!("SecurityOpt {:?}; {why_in}", s.shown)))
}

fn pids_limited(s: &Seen) -> Option<(bool, String)> {
    let pids = s.hc["PidsLimit"].as_i64().unwrap_or(0);
    Some((pids > 0, format!("PidsLimit {pids}")))
}

fn not_default_bridge(s: &Seen) -> Option<(bool, String)> {
    let net = s.mode("NetworkMode");
    Some((!matches!(net.as_str(), "default" | "bridge"), format!("NetworkMode {net:?}")))
}

fn no_docker_socket(s: &Seen) -> Option<(bool, String)> {
    let socketish: Vec<String> = s
        .mounts
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
    Some((socketish.is_empty(), format!("offending mounts: {socketish:?}")))
}

fn non_root(s: &Seen) -> Option<(bool, String)> {
    let user = s.c["Config"]["User"].as_str().unwrap_or_default().to_string();
    let root_cfg = user.is_empty() || user == "root" || user.split(':').next() == Some("0");
    let (ok_in, why_in) = s.view.judge(
        |p| (p.uid != "0" && !p.uid.is_empty(), format!("process uid {}", p.uid)),
        // gVisor runs its Sentry as root on the host by design; the workload's uid is the config's.
        |p| (true, format!("established from the config: the workload runs as that user inside gVisor's kernel; not read from the host process (gVisor's Sentry, host uid {})", p.uid)),
    );
    Some((!root_cfg && ok_in, format!("User {user:?}; {why_in}")))
}

fn sbx_profile(s: &Seen) -> Option<(bool, String)> {
    let (ok, why) = sbx_seccomp(&s.sec);
    Some(match runtime::seccomp(&s.facts.runtime, &s.view) {
        Some((applied, meaning)) if ok => (applied, meaning),
        _ => (ok, why),
    })
}

fn no_sbx_label(s: &Seen) -> Option<(bool, String)> {
    Some(match &s.facts.image_labels {
        Ok(labels) => {
            let keys: Vec<&String> =
                labels.as_object().map(|m| m.keys().filter(|k| is_reserved_label(k)).collect()).unwrap_or_default();
            (keys.is_empty(), format!("image labels sbx reads: {keys:?}"))
        }
        Err(e) => (false, format!("could not read the image's labels: {e}")),
    })
}

/// Only where the sandbox has private routes with sbx's forwarder.
fn forwarders(s: &Seen) -> Option<(bool, String)> {
    if s.facts.forwarded.is_empty() {
        return None;
    }
    Some(only_forwarders(s.c["Name"].as_str().unwrap_or_default().trim_start_matches('/'), &s.facts.forwarded))
}

fn kernel_isolation(s: &Seen) -> Option<(bool, String)> {
    let (ok, why, _) = runtime::rule(&s.facts.runtime, &s.view);
    Some((ok, why))
}

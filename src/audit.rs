//! `sbx audit`: a sandbox checked against the runtime rules of the CIS
//! Docker Benchmark (section 5, and 4.1 for the user) that apply to it, from
//! `docker inspect` and from what its process actually has, as the kernel
//! reports it in /proc/PID/status.

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
    pub rules: Vec<Rule>,
}

/// What the kernel says about the sandbox's main process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcStatus {
    pub uid: String,
    pub cap_eff: String,
    pub cap_prm: String,
    pub cap_bnd: String,
    pub no_new_privs: String,
    pub seccomp: String,
}

impl ProcStatus {
    pub fn parse(status: &str) -> Self {
        let f = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.split_whitespace().next())
                .unwrap_or_default()
                .to_string()
        };
        ProcStatus {
            uid: f("Uid"),
            cap_eff: f("CapEff"),
            cap_prm: f("CapPrm"),
            cap_bnd: f("CapBnd"),
            no_new_privs: f("NoNewPrivs"),
            seccomp: f("Seccomp"),
        }
    }

    /// The status of a container's main process, when it runs on this host.
    pub fn of_pid(pid: i64) -> Option<Self> {
        if pid <= 0 {
            return None;
        }
        std::fs::read_to_string(format!("/proc/{pid}/status")).ok().map(|s| ProcStatus::parse(&s))
    }
}

const SENSITIVE: &[&str] = &["/", "/boot", "/dev", "/etc", "/lib", "/proc", "/sys", "/usr"];
const ZERO: &str = "0000000000000000";

fn strs(v: &serde_json::Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// Judge one container. `apparmor` says whether the host enforces AppArmor.
pub fn audit(c: &serde_json::Value, proc_status: Option<&ProcStatus>, apparmor: bool) -> Vec<Rule> {
    let hc = &c["HostConfig"];
    let mut rules = Vec::new();
    let mut rule = |id: &'static str, title: &'static str, pass: bool, detail: String| {
        rules.push(Rule { id, title, pass, detail })
    };
    let inside = |f: &dyn Fn(&ProcStatus) -> (bool, String)| -> (bool, String) {
        match proc_status {
            Some(p) => f(p),
            None => (true, "process not visible from here (remote engine?)".into()),
        }
    };
    let mode = |k: &str| hc[k].as_str().unwrap_or_default().to_string();
    let sec = strs(&hc["SecurityOpt"]);
    let mounts: Vec<(String, String, String)> = c["Mounts"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| {
                    let s = |k: &str| m[k].as_str().unwrap_or_default().to_string();
                    (s("Source"), s("Destination"), s("Propagation"))
                })
                .collect()
        })
        .unwrap_or_default();

    let profile = c["AppArmorProfile"].as_str().unwrap_or_default();
    if apparmor {
        rule("5.1", "AppArmor profile", !profile.is_empty() && profile != "unconfined", format!("profile {profile:?}"));
    } else {
        rule("5.1", "AppArmor profile", true, "AppArmor is not enabled on this host (not applicable)".into());
    }
    let (drop, add) = (strs(&hc["CapDrop"]), strs(&hc["CapAdd"]));
    let (ok_in, why_in) = inside(&|p| {
        (
            p.cap_eff == ZERO && p.cap_prm == ZERO && p.cap_bnd == ZERO,
            format!("process CapEff {} CapPrm {} CapBnd {}", p.cap_eff, p.cap_prm, p.cap_bnd),
        )
    });
    rule(
        "5.3",
        "capabilities dropped",
        drop.iter().any(|d| d.eq_ignore_ascii_case("ALL")) && add.is_empty() && ok_in,
        format!("CapDrop {drop:?}, CapAdd {add:?}; {why_in}"),
    );
    rule("5.4", "not privileged", hc["Privileged"] == false, format!("Privileged {}", hc["Privileged"]));
    let sensitive: Vec<&String> = mounts.iter().map(|m| &m.0).filter(|s| SENSITIVE.contains(&s.as_str())).collect();
    rule(
        "5.5",
        "no sensitive host directory mounted",
        sensitive.is_empty(),
        format!("sensitive sources: {sensitive:?}"),
    );
    let ports = hc["PortBindings"].as_object().map(|m| m.len()).unwrap_or(0);
    rule("5.8", "no ports published", ports == 0, format!("{ports} port binding(s)"));
    rule(
        "5.9",
        "host network namespace not shared",
        mode("NetworkMode") != "host",
        format!("NetworkMode {:?}", mode("NetworkMode")),
    );
    let mem = hc["Memory"].as_i64().unwrap_or(0);
    rule("5.10", "memory limited", mem > 0, format!("Memory {} MiB", mem / (1024 * 1024)));
    rule(
        "5.12",
        "root filesystem read-only",
        hc["ReadonlyRootfs"] == true,
        format!("ReadonlyRootfs {}", hc["ReadonlyRootfs"]),
    );
    let restart = hc["RestartPolicy"]["Name"].as_str().unwrap_or_default();
    let retries = hc["RestartPolicy"]["MaximumRetryCount"].as_i64().unwrap_or(0);
    rule(
        "5.14",
        "restart policy bounded",
        matches!(restart, "" | "no") || (restart == "on-failure" && retries <= 5),
        format!("RestartPolicy {restart:?} (max {retries})"),
    );
    rule("5.15", "host PID namespace not shared", mode("PidMode") != "host", format!("PidMode {:?}", mode("PidMode")));
    rule("5.16", "host IPC namespace not shared", mode("IpcMode") != "host", format!("IpcMode {:?}", mode("IpcMode")));
    let devices = hc["Devices"].as_array().map(|a| a.len()).unwrap_or(0);
    rule("5.17", "no host devices", devices == 0, format!("{devices} device(s)"));
    let ulimits: Vec<String> = hc["Ulimits"]
        .as_array()
        .map(|a| a.iter().filter_map(|u| u["Name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    rule(
        "5.18",
        "ulimits set",
        ulimits.iter().any(|u| u == "nofile") && ulimits.iter().any(|u| u == "core"),
        format!("ulimits {ulimits:?}"),
    );
    let shared: Vec<&String> =
        mounts.iter().filter(|m| matches!(m.2.as_str(), "shared" | "rshared")).map(|m| &m.1).collect();
    rule("5.19", "mount propagation not shared", shared.is_empty(), format!("shared propagation on {shared:?}"));
    rule("5.20", "host UTS namespace not shared", mode("UTSMode") != "host", format!("UTSMode {:?}", mode("UTSMode")));
    let unconfined = sec.iter().any(|s| s.replace(':', "=").starts_with("seccomp=unconfined"));
    let (ok_in, why_in) = inside(&|p| (p.seccomp == "2", format!("process Seccomp {}", p.seccomp)));
    rule("5.21", "seccomp not unconfined", !unconfined && ok_in, format!("SecurityOpt {sec:?}; {why_in}"));
    let cgroup = hc["CgroupParent"].as_str().unwrap_or_default();
    rule("5.24", "default cgroup", cgroup.is_empty(), format!("CgroupParent {cgroup:?}"));
    let nnp =
        sec.iter().any(|s| s == "no-new-privileges" || s == "no-new-privileges:true" || s == "no-new-privileges=true");
    let (ok_in, why_in) = inside(&|p| (p.no_new_privs == "1", format!("process NoNewPrivs {}", p.no_new_privs)));
    rule("5.25", "no new privileges", nnp && ok_in, format!("SecurityOpt {sec:?}; {why_in}"));
    let pids = hc["PidsLimit"].as_i64().unwrap_or(0);
    rule("5.28", "pids limited", pids > 0, format!("PidsLimit {pids}"));
    let net = mode("NetworkMode");
    rule(
        "5.29",
        "not on the default bridge",
        !matches!(net.as_str(), "default" | "bridge"),
        format!("NetworkMode {net:?}"),
    );
    rule(
        "5.30",
        "host user namespace not shared",
        mode("UsernsMode") != "host",
        format!("UsernsMode {:?}", mode("UsernsMode")),
    );
    let socketish: Vec<String> = mounts
        .iter()
        .filter(|(src, dst, _)| {
            src.ends_with("docker.sock")
                || dst.ends_with("docker.sock")
                || ["/run", "/var/run"].contains(&src.as_str())
                || ["/run", "/var/run"].contains(&dst.as_str())
        })
        .map(|m| format!("{}:{}", m.0, m.1))
        .collect();
    rule(
        "5.31",
        "no docker socket, /run or /var/run mounted",
        socketish.is_empty(),
        format!("offending mounts: {socketish:?}"),
    );
    let user = c["Config"]["User"].as_str().unwrap_or_default().to_string();
    let root_cfg = user.is_empty() || user == "root" || user.split(':').next() == Some("0");
    let (ok_in, why_in) = inside(&|p| (p.uid != "0" && !p.uid.is_empty(), format!("process uid {}", p.uid)));
    rule("4.1", "runs as a non-root user", !root_cfg && ok_in, format!("User {user:?}; {why_in}"));
    rules
}

pub fn apparmor_enabled() -> bool {
    std::fs::read_to_string("/sys/module/apparmor/parameters/enabled").map(|s| s.trim() == "Y").unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> serde_json::Value {
        serde_json::json!({
            "AppArmorProfile": "docker-default",
            "Config": {"User": "65534:65534"},
            "Mounts": [{"Source": "/run/sbx/sandboxes/sbx-1", "Destination": "/run/sandbox", "Propagation": "rprivate"}],
            "HostConfig": {
                "CapDrop": ["ALL"], "CapAdd": null, "Privileged": false, "PortBindings": {}, "NetworkMode": "none",
                "Memory": 4294967296i64, "ReadonlyRootfs": true, "RestartPolicy": {"Name": "no", "MaximumRetryCount": 0},
                "PidMode": "", "IpcMode": "private", "Devices": [], "UTSMode": "", "CgroupParent": "",
                "Ulimits": [{"Name": "nofile"}, {"Name": "core"}], "SecurityOpt": ["no-new-privileges"],
                "PidsLimit": 512, "UsernsMode": ""
            }
        })
    }

    fn proc_ok() -> ProcStatus {
        ProcStatus::parse("Uid:\t65534\t65534\t65534\t65534\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n")
    }

    fn failing(c: &serde_json::Value, p: Option<&ProcStatus>) -> Vec<&'static str> {
        audit(c, p, true).into_iter().filter(|r| !r.pass).map(|r| r.id).collect()
    }

    #[test]
    fn a_hardened_sandbox_passes_every_rule() {
        let rules = audit(&good(), Some(&proc_ok()), true);
        assert!(rules.iter().all(|r| r.pass), "{rules:#?}");
        assert_eq!(rules.len(), 23);
    }

    #[test]
    fn each_weakness_fails_its_rule() {
        type Weaken = fn(&mut serde_json::Value);
        let cases: Vec<(&str, Weaken)> = vec![
            ("5.1", |c| c["AppArmorProfile"] = "unconfined".into()),
            ("5.3", |c| c["HostConfig"]["CapAdd"] = serde_json::json!(["NET_ADMIN"])),
            ("5.4", |c| c["HostConfig"]["Privileged"] = true.into()),
            ("5.5", |c| c["Mounts"] = serde_json::json!([{"Source": "/etc", "Destination": "/x"}])),
            ("5.8", |c| c["HostConfig"]["PortBindings"] = serde_json::json!({"80/tcp": [{}]})),
            ("5.9", |c| c["HostConfig"]["NetworkMode"] = "host".into()),
            ("5.10", |c| c["HostConfig"]["Memory"] = 0.into()),
            ("5.12", |c| c["HostConfig"]["ReadonlyRootfs"] = false.into()),
            ("5.14", |c| c["HostConfig"]["RestartPolicy"]["Name"] = "always".into()),
            ("5.15", |c| c["HostConfig"]["PidMode"] = "host".into()),
            ("5.16", |c| c["HostConfig"]["IpcMode"] = "host".into()),
            ("5.17", |c| c["HostConfig"]["Devices"] = serde_json::json!([{"PathOnHost": "/dev/kvm"}])),
            ("5.18", |c| c["HostConfig"]["Ulimits"] = serde_json::json!([])),
            ("5.19", |c| c["Mounts"][0]["Propagation"] = "rshared".into()),
            ("5.20", |c| c["HostConfig"]["UTSMode"] = "host".into()),
            ("5.21", |c| {
                c["HostConfig"]["SecurityOpt"] = serde_json::json!(["no-new-privileges", "seccomp:unconfined"])
            }),
            ("5.24", |c| c["HostConfig"]["CgroupParent"] = "/custom".into()),
            ("5.25", |c| c["HostConfig"]["SecurityOpt"] = serde_json::json!([])),
            ("5.28", |c| c["HostConfig"]["PidsLimit"] = 0.into()),
            ("5.29", |c| c["HostConfig"]["NetworkMode"] = "default".into()),
            ("5.30", |c| c["HostConfig"]["UsernsMode"] = "host".into()),
            ("5.31", |c| {
                c["Mounts"] = serde_json::json!([{"Source": "/var/run/docker.sock", "Destination": "/x.sock"}])
            }),
            ("4.1", |c| c["Config"]["User"] = "".into()),
        ];
        for (id, weaken) in cases {
            let mut c = good();
            weaken(&mut c);
            assert_eq!(failing(&c, Some(&proc_ok())), vec![id], "weakening {id}");
        }
    }

    #[test]
    fn what_the_process_has_counts_too() {
        let mut p = proc_ok();
        p.cap_eff = "00000000a80425fb".into();
        assert_eq!(failing(&good(), Some(&p)), vec!["5.3"]);
        let p = ProcStatus { seccomp: "0".into(), no_new_privs: "0".into(), uid: "0".into(), ..proc_ok() };
        assert_eq!(failing(&good(), Some(&p)), vec!["5.21", "5.25", "4.1"]);
        assert!(failing(&good(), None).is_empty(), "config alone when the process is not visible");
        assert!(audit(&good(), Some(&proc_ok()), false)[0].detail.contains("not applicable"));
    }
}

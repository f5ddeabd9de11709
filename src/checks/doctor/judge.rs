//! Doctor's judgement of what the probe saw from inside, against what sbx
//! promises, under the runtime it ran under (under gVisor some of
//! /proc/self/status is not reported, and is established from the host).

use super::{check, Check, Status};
use crate::checks::audit::ProcStatus;
use crate::checks::probe::Report;
use crate::model::runtime::{Family, Registered};
use crate::spec::Route;

/// What the host knows of the probe, to judge what it saw from inside.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The registration the probe ran under.
    pub runtime: Registered,
    /// This host's /proc/version, to tell its kernel from another.
    pub host_kernel: String,
    /// The probe container's SecurityOpt, as the engine reports it.
    pub security_opt: Vec<String>,
    /// The container's host process, when visible (gVisor's Sentry under runsc).
    pub host_process: Option<ProcStatus>,
}

/// gVisor's /proc/version banner, the same in every release ("Linux version
/// 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016" under runsc 20221219).
const GVISOR_BANNER: &str = "#1 SMP Sun Jan 10 15:06:54 PST 2016";

/// Which kernel the probe saw, against what its runtime claims; and
/// whether it ran inside gVisor's kernel.
fn kernel(r: &Report, seen: &Seen) -> (Check, bool) {
    let (k, host) = (r.kernel.as_str(), seen.host_kernel.as_str());
    let hosts = !host.is_empty() && k == host;
    let reg = &seen.runtime;
    let fix = || {
        Some(format!(
            "check that {} is what the engine runs for {} (`{} --version`) and re-register it: {}",
            reg.path,
            reg.name,
            reg.path,
            crate::model::runtime::fragment(&reg.name, Some(&reg.path))
        ))
    };
    if k.is_empty() {
        return (check("kernel", Status::Fail, "the probe could not read /proc/version", None), false);
    }
    match reg.family() {
        Family::Gvisor if hosts || (host.is_empty() && !k.contains(GVISOR_BANNER)) => (
            check(
                "kernel",
                Status::Fail,
                format!("{} is registered as gVisor, but the probe saw the host's kernel: {k}", reg.name),
                fix(),
            ),
            false,
        ),
        Family::Gvisor => {
            let whose = if k.contains(GVISOR_BANNER) { "gVisor's kernel" } else { "a kernel other than the host's" };
            (check("kernel", Status::Ok, format!("{whose}, not the host's: {k}"), None), true)
        }
        Family::Kata if hosts => (
            check(
                "kernel",
                Status::Fail,
                format!("{} is Kata, but the probe saw the host's kernel: {k}", reg.name),
                fix(),
            ),
            false,
        ),
        Family::Kata => (check("kernel", Status::Ok, format!("the VM's guest kernel: {k}"), None), false),
        Family::Runc | Family::Other if hosts => {
            (check("kernel", Status::Ok, format!("the host's kernel, shared (no kernel isolation): {k}"), None), false)
        }
        Family::Runc | Family::Other => (
            check("kernel", Status::Ok, format!("{k} (the engine's kernel; not this host's /proc/version)"), None),
            false,
        ),
    }
}

/// Under gVisor the probe's /proc/self/status has no NoNewPrivs line and
/// Seccomp 0 (the Sentry serves its calls): what holds is established from
/// the container's SecurityOpt and gVisor's Sentry, never assumed.
fn gvisor_status(r: &Report, seen: &Seen, checks: &mut Vec<Check>) {
    let sentry = seen.host_process.as_ref();
    let not_sentry = sentry.filter(|p| !p.is_sentry()).map(|p| p.program.clone());
    let sentry = sentry.filter(|p| p.is_sentry());
    if r.no_new_privs.is_empty() {
        let on_config = seen
            .security_opt
            .iter()
            .any(|s| ["no-new-privileges", "no-new-privileges:true", "no-new-privileges=true"].contains(&s.as_str()));
        let (status, detail) = match (on_config, sentry, &not_sentry) {
            (false, _, _) => (Status::Fail, format!("not reported inside gVisor, and the container's SecurityOpt {:?} lacks no-new-privileges", seen.security_opt)),
            (true, _, Some(p)) => (Status::Fail, format!("not reported inside gVisor; set on the container (SecurityOpt), but its host process is {p:?}, not gVisor's Sentry")),
            (true, Some(s), None) if s.no_new_privs != "1" => (Status::Fail, format!("not reported inside gVisor; set on the container (SecurityOpt), but gVisor's Sentry has NoNewPrivs {}", s.no_new_privs)),
            (true, Some(_), None) => (Status::Ok, "not reported inside gVisor; set on the container (SecurityOpt) and on gVisor's Sentry (NoNewPrivs 1)".to_string()),
            (true, None, None) => (Status::Ok, "not reported inside gVisor; set on the container (SecurityOpt); gVisor's Sentry is not visible from here".to_string()),
        };
        let fix = (status == Status::Fail).then(|| "the engine ignored --security-opt no-new-privileges".to_string());
        checks.push(check("no-new-privileges", status, detail, fix));
    } else {
        checks.push(plain_nnp(r));
    }
    if r.seccomp == "2" {
        checks.push(plain_seccomp(r));
        return;
    }
    let inside = format!("Seccomp {} inside gVisor: {}", r.seccomp, seen.runtime.seccomp_meaning());
    let (status, detail) = match (sentry, not_sentry) {
        (_, Some(p)) => {
            (Status::Fail, format!("{inside}; but the container's host process is {p:?}, not gVisor's Sentry"))
        }
        (Some(s), None) if s.seccomp == "2" => (Status::Ok, format!("{inside}; gVisor's Sentry: Seccomp 2")),
        (Some(s), None) => {
            (Status::Fail, format!("{inside}; gVisor's Sentry: Seccomp {} (its host filter is off)", s.seccomp))
        }
        (None, None) => {
            (Status::Warn, format!("{inside}; gVisor's Sentry is not visible from here to confirm its filter"))
        }
    };
    let fix =
        (status == Status::Fail).then(|| "run runsc with its own host filter (no debug or TESTONLY flags)".to_string());
    checks.push(check("seccomp", status, detail, fix));
}

fn plain_nnp(r: &Report) -> Check {
    if r.no_new_privs == "1" {
        check("no-new-privileges", Status::Ok, "NoNewPrivs=1", None)
    } else {
        check(
            "no-new-privileges",
            Status::Fail,
            format!("NoNewPrivs={}", r.no_new_privs),
            Some("the engine ignored --security-opt no-new-privileges".into()),
        )
    }
}

fn plain_seccomp(r: &Report) -> Check {
    if r.seccomp == "2" {
        check("seccomp", Status::Ok, "a seccomp filter is on", None)
    } else {
        check(
            "seccomp",
            Status::Fail,
            format!("Seccomp={} (2 means filtered)", r.seccomp),
            Some("start dockerd with its default seccomp profile (not seccomp=unconfined)".into()),
        )
    }
}

/// Judge what the probe saw against what sbx promises, under the runtime it ran under.
pub fn evaluate(r: &Report, nonce: &str, routes: &[Route], targets: &[String], seen: &Seen, checks: &mut Vec<Check>) {
    let (kernel_check, in_gvisor) = kernel(r, seen);
    let zero = "0000000000000000";
    let judged = |name: &str, ok: bool, good: String, bad: String, fix: &str| {
        let (status, detail, fix) =
            if ok { (Status::Ok, good, None) } else { (Status::Fail, bad, Some(fix.to_string())) };
        check(name, status, detail, fix)
    };
    checks.push(kernel_check);
    checks.push(judged(
        "channel",
        r.echo == nonce,
        "bytes went both ways over the socket".into(),
        format!("sent {nonce:?}, got back {:?}", r.echo),
        "check that nothing else binds the socket directory",
    ));
    // gVisor 20221219 has no CapAmb line; ambient is a subset of permitted, so CapPrm 0 implies it.
    let amb_unreported = in_gvisor && r.cap_amb.is_empty();
    let caps = [&r.cap_eff, &r.cap_prm, &r.cap_bnd];
    checks.push(judged(
        "capabilities",
        caps.iter().all(|c| c.as_str() == zero) && (r.cap_amb == zero || amb_unreported),
        if amb_unreported {
            "none (effective, permitted, bounding all 0; CapAmb not reported inside gVisor, 0 as CapPrm is)".into()
        } else {
            "none (effective, permitted, bounding, ambient all 0)".into()
        },
        format!("CapEff {} CapPrm {} CapBnd {} CapAmb {}", r.cap_eff, r.cap_prm, r.cap_bnd, r.cap_amb),
        "the engine ignored --cap-drop ALL; check for a daemon-wide default or an authorization plugin",
    ));
    if in_gvisor {
        gvisor_status(r, seen, checks);
    } else {
        checks.push(plain_nnp(r));
        checks.push(plain_seccomp(r));
    }
    checks.push(judged(
        "read-only root",
        r.read_only_root,
        "the root filesystem refuses writes".into(),
        "the root filesystem is writable".into(),
        "the engine ignored --read-only",
    ));
    checks.push(judged(
        "user",
        !r.uid.is_empty() && r.uid != "0",
        format!("uid {} gid {}", r.uid, r.gid),
        format!("running as uid {}", r.uid),
        "check for a userns or daemon user override",
    ));
    checks.push(judged(
        "scratch",
        r.tmp_writable && r.state_writable,
        "/tmp and /state are writable".into(),
        format!("/tmp writable: {}, /state writable: {}", r.tmp_writable, r.state_writable),
        "the tmpfs mounts did not take the sandbox user's ownership",
    ));
    let mut ifaces = r.interfaces.clone();
    ifaces.sort();
    let nets: std::collections::BTreeSet<String> = routes.iter().map(Route::network).collect();
    let expect = 1 + nets.len();
    checks.push(judged(
        "network",
        ifaces.len() == expect && ifaces.contains(&"lo".to_string()),
        format!("interfaces: {}", ifaces.join(", ")),
        format!("expected lo and {} route interface(s), saw {}", nets.len(), ifaces.join(", ")),
        "check the engine's network configuration",
    ));
    for (route, target) in routes.iter().filter(|r| route_port(r).is_some()).zip(targets) {
        let seen = r.routes.iter().find(|c| &c.target == target);
        let name = format!("route {}", route.kind);
        match seen {
            Some(c) if c.reached => checks.push(check(&name, Status::Ok, format!("{target} reachable over {} ({})", route.network(), c.detail), None)),
            Some(c) => checks.push(check(&name, Status::Fail, format!("{target} not reachable over {}: {}", route.network(), c.detail),
                Some(format!("attach the service to the network (`docker network connect {} {}`) and check it listens on the port", route.network(), route.host)))),
            None => checks.push(check(&name, Status::Fail, format!("the probe did not try {target}"), None)),
        }
    }
    for route in routes.iter().filter(|r| route_port(r).is_none()) {
        checks.push(check(
            &format!("route {}", route.kind),
            Status::Skip,
            format!("{} names no port to try", route.target),
            None,
        ));
    }
}

/// The port route `r` reaches: its own, else its scheme's (none for a bare host).
pub(super) fn route_port(r: &Route) -> Option<u16> {
    r.port.or_else(|| match r.target.split_once("://").map(|(s, _)| s) {
        Some("http") | Some("ws") => Some(80),
        Some("https") | Some("wss") => Some(443),
        _ => None,
    })
}

#[cfg(test)]
mod tests;

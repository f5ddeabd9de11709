//! Audit's status probe: the short-lived container of sbx's own
//! image that reads a sandbox's main process's status from inside its pid
//! namespace (`checks::audit::status_probe`), and the listing gc reaps
//! leftovers by.

use std::ffi::OsString;

use super::os;
use crate::model::record;

/// Everything audit has resolved for one probe.
#[derive(Debug, Clone)]
pub struct ProbePlan<'a> {
    /// The probe container's name (`sbx-audit-...`).
    pub name: &'a str,
    /// The sandbox's id, for the `sbx.audit-of` label.
    pub sandbox: &'a str,
    /// The sandbox's full container id (64 hex digits): whose pid namespace to join.
    pub container: &'a str,
    /// The sandbox's main process as the engine reports it (`State.Pid`).
    pub pid: i64,
    /// `token::owner_token` of `name`.
    pub owner: &'a str,
    /// When gc may take it for a leftover (RFC 3339).
    pub expires: &'a str,
    /// sbx's own image (`host::self_image`).
    pub image: &'a str,
}

/// The limits of a short-lived helper container (audit's probe, a volume
/// filler): cpu, memory (no swap on top) and processes, as every container
/// sbx runs has (CIS 5.11, 5.12, 5.29).
#[derive(Debug, Clone, Copy)]
pub struct HelperLimits {
    pub cpus: &'static str,
    pub memory: &'static str,
    pub pids: &'static str,
}

pub const LIMITS: HelperLimits = HelperLimits { cpus: "0.5", memory: "32m", pids: "16" };

impl HelperLimits {
    /// The flags, with `--no-healthcheck`: the image's HEALTHCHECK would run
    /// in the engine, outside these limits.
    pub fn args(&self) -> Vec<OsString> {
        os(&[
            "--cpus",
            self.cpus,
            "--memory",
            self.memory,
            "--memory-swap",
            self.memory,
            "--pids-limit",
            self.pids,
            "--no-healthcheck",
        ])
    }
}

/// `docker run --rm` of the probe: in the sandbox's pid namespace, on no
/// network, under runc (a probe under gVisor would see its own kernel's
/// processes), read-only, as root (uid 0: a sandbox's non-root user can
/// neither trace it nor open its /proc entries) with every capability
/// dropped but CAP_SYS_PTRACE, which reading another user's /proc/PID/exe
/// needs, and which a sandbox without it lacks, so even a sandbox running
/// as root cannot trace the probe (the kernel asks a tracer for a superset
/// of its target's capabilities). Its status fields are world-readable.
pub fn audit_probe(p: &ProbePlan) -> Vec<OsString> {
    let mut a = os(&["run", "--rm", "--name", p.name]);
    let mut push = |k: &str, v: String| {
        a.push(k.into());
        a.push(v.into());
    };
    push("--label", format!("{}={}", record::AUDIT_OF, p.sandbox));
    push("--label", format!("{}={}", record::OWNER, p.owner));
    push("--label", format!("{}={}", record::EXPIRES, p.expires));
    push("--pid", format!("container:{}", p.container));
    push("--network", "none".into());
    push("--runtime", crate::model::runtime::DEFAULT.into());
    push("--user", "0:0".into());
    push("--cap-drop", "ALL".into());
    push("--cap-add", "SYS_PTRACE".into());
    push("--security-opt", "no-new-privileges".into());
    push("--log-driver", "none".into());
    push("--pull", "never".into());
    push("--entrypoint", "/sbx".into());
    a.push("--read-only".into());
    a.extend(LIMITS.args());
    a.push("--".into());
    a.push(p.image.into());
    a.extend(os(&["__audit-probe", p.container, &p.pid.max(0).to_string()]));
    a
}

/// Every audit probe: `[name, owner token, expiry, container id]` per line.
pub fn audit_probes() -> Vec<OsString> {
    let format = format!(
        "[{{{{json .Names}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{}\")}}}},{{{{json .ID}}}}]",
        record::OWNER,
        record::EXPIRES
    );
    os(&["ps", "-a", "--no-trunc", "--filter", &format!("label={}", record::AUDIT_OF), "--format", &format])
}

#[cfg(test)]
mod tests {
    use super::super::strs;
    use super::*;

    #[test]
    fn the_probe_joins_the_sandbox_s_pid_namespace_with_nothing_else() {
        let cid = "a".repeat(64);
        let a = strs(audit_probe(&ProbePlan {
            name: "sbx-audit-0123456789ab-00ff00ff",
            sandbox: "sbx-0123456789ab",
            container: &cid,
            pid: 4242,
            owner: "tok",
            expires: "2026-11-30T10:00:00Z",
            image: "sha256:abc",
        }));
        let pair = |k: &str, v: &str| a.windows(2).any(|w| w[0] == k && w[1] == v);
        assert!(pair("--pid", &format!("container:{cid}")), "{a:?}");
        assert!(pair("--network", "none") && pair("--runtime", "runc") && pair("--user", "0:0"), "{a:?}");
        assert!(pair("--cap-drop", "ALL") && pair("--cap-add", "SYS_PTRACE"), "{a:?}");
        assert_eq!(a.iter().filter(|x| *x == "--cap-add").count(), 1, "{a:?}");
        assert!(pair("--security-opt", "no-new-privileges") && a.contains(&"--read-only".into()), "{a:?}");
        assert!(pair("--label", "sbx.audit-of=sbx-0123456789ab") && pair("--label", "sbx.owner=tok"), "{a:?}");
        assert!(a.contains(&"--rm".into()) && pair("--pull", "never"), "{a:?}");
        // Limited as every container sbx runs, and no healthcheck from the image.
        assert!(pair("--cpus", "0.5") && pair("--memory", "32m") && pair("--memory-swap", "32m"), "{a:?}");
        assert!(pair("--pids-limit", "16") && a.contains(&"--no-healthcheck".into()), "{a:?}");
        // Nothing of this machine: no mount, no file, no path but the image's own /sbx.
        for bad in ["-v", "--volume", "--mount", "--env-file", "--cidfile", "--privileged"] {
            assert!(!a.iter().any(|x| x == bad), "{bad} in {a:?}");
        }
        assert!(a.iter().filter(|x| x.starts_with('/')).all(|x| x == "/sbx"), "{a:?}");
        let dashes = a.iter().position(|x| x == "--").unwrap();
        assert_eq!(a[dashes + 1..], ["sha256:abc", "__audit-probe", &cid, "4242"]);
    }
}

//! The status of a sandbox's main process, as the kernel reports it in
//! /proc/PID/status: read from this host's /proc, or by audit's status
//! probe from inside the sandbox's pid namespace (`status_probe`).

use super::status_probe;

/// What the kernel says about the sandbox's main process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcStatus {
    pub uid: String,
    pub cap_eff: String,
    pub cap_prm: String,
    pub cap_bnd: String,
    pub no_new_privs: String,
    pub seccomp: String,
    /// The program it runs (the executable's name, else argv[0]): tells
    /// gVisor's Sentry (`runsc`, argv[0] `runsc-sandbox`) from a workload.
    pub program: String,
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
            program: String::new(),
        }
    }

    /// Whether this is gVisor's Sentry (by its executable, which only the
    /// engine's runtime could have started as the container's process).
    pub fn is_sentry(&self) -> bool {
        matches!(self.program.as_str(), "runsc" | "runsc-sandbox")
    }

    /// The status of a container's main process, when it runs on this host.
    pub fn of_pid(pid: i64) -> Option<Self> {
        Self::read(std::path::Path::new("/proc"), pid)
    }

    /// Process `pid`'s status under the procfs at `proc` (this host's, or
    /// the audit probe's own in the sandbox's pid namespace).
    pub fn read(proc: &std::path::Path, pid: i64) -> Option<Self> {
        if pid <= 0 {
            return None;
        }
        let dir = proc.join(pid.to_string());
        let mut p = ProcStatus::parse(&status_probe::read_bounded(&dir.join("status"))?);
        let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
        // The executable when readable (root, or the same user); argv[0] otherwise.
        p.program = match std::fs::read_link(dir.join("exe")) {
            Ok(exe) => base(&exe.to_string_lossy()),
            Err(_) => {
                use std::io::Read;
                let mut c = Vec::new();
                let _ = std::fs::File::open(dir.join("cmdline")).and_then(|f| f.take(4096).read_to_end(&mut c));
                base(&String::from_utf8_lossy(c.split(|b| *b == 0).next().unwrap_or_default()))
            }
        };
        Some(p)
    }
}

/// Why a sandbox has no process to read: it is not running (docker's
/// `created`, `exited`, `dead`...).
pub(super) fn not_running(c: &serde_json::Value) -> Option<String> {
    if c["State"]["Running"] == true {
        return None;
    }
    let status = c["State"]["Status"].as_str().unwrap_or("not running");
    Some(format!("the sandbox is not running ({status}): it has no process to read (`sbx start` runs it again)"))
}

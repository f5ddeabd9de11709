//! Doctor's checks of the engine (version, known CVEs, a hung daemon, the
//! platform) and of the host directories sbx needs.

use super::{check, Check, Doctor, Status};
use crate::docker::{argv, parse};
use crate::host::socket;

/// `major.minor.patch` from a version such as `1.1.5+ds1` or `20.10.24+dfsg1`.
pub fn version_triple(v: &str) -> Option<(u64, u64, u64)> {
    let core = v.trim().trim_start_matches('v');
    let mut parts = core.split(|c: char| !c.is_ascii_digit()).filter(|p| !p.is_empty()).map(|p| p.parse::<u64>().ok());
    Some((parts.next()??, parts.next().flatten().unwrap_or(0), parts.next().flatten().unwrap_or(0)))
}

/// runc before 1.2.8 lets a container escape or write host files
/// (CVE-2024-21626 "Leaky Vessels"; CVE-2025-31133, -52565, -52881).
pub fn runc_check(version: Option<&str>) -> Check {
    let fix = Some(
        "upgrade runc to 1.2.8 or later (your distribution's runc or containerd.io package), then restart dockerd"
            .to_string(),
    );
    match version.and_then(|v| version_triple(v).map(|t| (v, t))) {
        Some((v, t)) if t >= (1, 2, 8) => check("runc", Status::Ok, format!("runc {v}"), None),
        Some((v, _)) => check(
            "runc",
            Status::Warn,
            format!("runc {v} is older than 1.2.8: container escapes CVE-2024-21626, CVE-2025-31133, CVE-2025-52565, CVE-2025-52881 are not fixed"),
            fix,
        ),
        None => check("runc", Status::Warn, "the engine does not report a runc version; cannot rule out CVE-2024-21626 and later runc escapes", fix),
    }
}

/// Docker's embedded DNS forwards lookups from internal networks upstream
/// before 26.0.0 / 25.0.4 / 23.0.11 (CVE-2024-29018): a data channel out.
pub fn engine_dns_check(version: &str) -> Check {
    match version_triple(version) {
        Some(t) if t < (23, 0, 11) || ((24, 0, 0)..(25, 0, 4)).contains(&t) => check(
            "engine-dns",
            Status::Warn,
            format!("engine {version} forwards DNS from internal networks to external resolvers (CVE-2024-29018): names can carry data out of a tier-2 sandbox"),
            Some("upgrade Docker Engine to 26.0.0, 25.0.4 or 23.0.11 or later".into()),
        ),
        Some(_) => check("engine-dns", Status::Ok, format!("engine {version} is not affected by CVE-2024-29018"), None),
        None => check("engine-dns", Status::Warn, format!("cannot parse engine version {version:?}"), None),
    }
}

impl Doctor<'_> {
    /// The engine answers, and what it is. False when nothing that needs
    /// the engine can run.
    pub(super) fn docker(&self, checks: &mut Vec<Check>) -> bool {
        let args = argv::version();
        let out = match self.exec.run(&args) {
            Ok(o) => o,
            Err(e) => {
                checks.push(check(
                    "docker",
                    Status::Fail,
                    format!("{e}"),
                    Some("install the docker CLI (or set SBX_DOCKER to its path)".into()),
                ));
                return false;
            }
        };
        let v = parse::engine_version(&out.stdout);
        let server = v.server;
        if out.status != 0 || server.is_empty() {
            let why = out.stderr_str();
            checks.push(check(
                "docker",
                Status::Fail,
                format!("the docker daemon does not answer: {}", if why.is_empty() { "no server version" } else { &why }),
                Some("start dockerd (e.g. `systemctl start docker`), or point DOCKER_HOST at a running engine; `docker version` must show a Server".into()),
            ));
            return false;
        }
        let api = v.api.as_deref().unwrap_or("?");
        let client = v.client.as_deref().unwrap_or("?");
        checks.push(check("docker", Status::Ok, format!("engine {server} (API {api}), CLI {client}"), None));
        checks.push(runc_check(v.runc.as_deref()));
        checks.push(engine_dns_check(&server));
        // A hung engine (20.10's network-controller deadlock) still answers
        // `version`, which the daemon serves without taking its locks, but
        // not `info` or `ps`: that is the state to report here.
        let info = self.exec.run(&argv::info_os());
        let ps = self.exec.run(&argv::ps_quiet());
        if let Some(e) = [&info, &ps].into_iter().find_map(|r| r.as_ref().err()) {
            checks.push(check(
                "engine",
                Status::Fail,
                format!("the engine answers `docker version` but is hung: {e}"),
                Some("restart dockerd (`systemctl restart docker`); engine 20.10 can deadlock when many containers are removed at once".into()),
            ));
            return false;
        }
        let os =
            info.ok().filter(|o| o.status == 0).map(|o| parse::operating_system(&o.stdout_str())).unwrap_or_default();
        if os.contains("Docker Desktop") {
            checks.push(check(
                "platform",
                Status::Fail,
                format!("{os} runs containers in a VM, and Docker Desktop (on macOS in particular) cannot carry unix sockets from the VM to the host: `sbx connect` cannot reach a sandbox"),
                Some("run sbx on a Linux host with Docker Engine (a Linux VM of your own works)".into()),
            ));
        } else {
            checks.push(check(
                "platform",
                Status::Ok,
                format!("{os}: sockets bound in a sandbox are reachable from the host"),
                None,
            ));
        }
        true
    }

    pub(super) fn host_dirs(&self, checks: &mut Vec<Check>) {
        match self.driver.socket_root() {
            Ok(root) => {
                let example = socket::socket_path(&root, "sbx-000000000000");
                let len = example.as_os_str().len();
                if len > socket::MAX_SOCKET_PATH {
                    checks.push(check(
                        "sockets",
                        Status::Fail,
                        format!("{}: socket paths would be {len} bytes, over the 107 Linux allows", root.display()),
                        Some("use a shorter --socket-dir (or SBX_SOCKET_DIR)".into()),
                    ));
                } else if !nix::unistd::geteuid().is_root() {
                    // The sandbox user's socket is not writable by a non-root caller.
                    checks.push(check(
                        "sockets",
                        Status::Ok,
                        format!("{} is writable; not root, so sandboxes are reached through the relayed channel (docker exec), their /run/sandbox a 1 MiB tmpfs inside", root.display()),
                        None,
                    ));
                } else {
                    checks.push(check(
                        "sockets",
                        Status::Ok,
                        format!("{} is writable; socket paths are {len} of 107 bytes", root.display()),
                        None,
                    ));
                }
            }
            Err(e) => checks.push(check("sockets", Status::Fail, e.to_string(), e.hint())),
        }
        match self.driver.state() {
            Ok(crate::sandbox::HostState { state: st, .. }) => {
                checks.push(check("state", Status::Ok, format!("{} (ownership key, TTLs)", st.dir.display()), None))
            }
            Err(e) => checks.push(check(
                "state",
                Status::Fail,
                e.to_string(),
                Some("pass --data-dir DIR (or SBX_DATA_DIR)".into()),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(version_triple("1.1.5+ds1"), Some((1, 1, 5)));
        assert_eq!(version_triple("20.10.24+dfsg1"), Some((20, 10, 24)));
        assert_eq!(version_triple("v1.2.8"), Some((1, 2, 8)));
        assert_eq!(version_triple("26.1"), Some((26, 1, 0)));
        assert_eq!(version_triple("dev"), None);
        assert_eq!(runc_check(Some("1.1.5+ds1")).status, Status::Warn);
        assert!(runc_check(Some("1.1.5")).detail.contains("CVE-2024-21626"));
        assert_eq!(runc_check(Some("1.2.8")).status, Status::Ok);
        assert_eq!(runc_check(Some("1.3.0")).status, Status::Ok);
        assert_eq!(runc_check(None).status, Status::Warn);
        for (v, vulnerable) in [
            ("20.10.24", true),
            ("23.0.11", false),
            ("24.0.9", true),
            ("25.0.3", true),
            ("25.0.4", false),
            ("26.0.0", false),
        ] {
            assert_eq!(engine_dns_check(v).status == Status::Warn, vulnerable, "{v}");
        }
    }
}

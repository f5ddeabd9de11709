//! The OCI runtime a sandbox runs under: runc shares the host's
//! kernel; gVisor's runsc puts a user-space kernel (the Sentry) between the
//! workload and the host's. What sbx needs of a runtime's registration in
//! the engine, and the daemon.json fragment that gives it.

use std::collections::BTreeMap;

use serde::Serialize;

/// The runtime sbx uses unless told otherwise; every engine has it.
pub const DEFAULT: &str = "runc";

/// The arguments sbx needs runsc registered with (see `.ci/register-runsc`):
/// - `--network=host`: gVisor's own netstack cannot start in the engine's
///   network namespaces ("cannot run with network enabled in root network
///   namespace"); with `host` it uses the container's namespace (never the
///   host's) through the host kernel's stack.
/// - `--host-uds=create`: the sandbox may bind /run/sandbox/sandbox.sock on
///   the host (the direct channel), and nothing more (`open`/`all` would
///   also let it connect to host sockets in its mounts).
///
/// Not `--oci-seccomp`: under runsc the workload's system calls are served
/// by the Sentry, never the host kernel, and the Sentry runs under gVisor's
/// own host filter; sbx's OCI profile is then not applied inside (audit says
/// so). With it, runsc 20221219 ignores the profile's `errnoRet`, so the
/// ENOSYS that makes glibc fall back from clone3 to clone becomes EPERM and
/// no program can start a thread (measured): sbx refuses that registration.
pub const RUNSC_ARGS: &[&str] = &["--network=host", "--host-uds=create"];

/// The runtime `--snapshots` runs a sandbox under (see
/// `.ci/register-runsc-snap`): runsc with `--network=none` and no
/// `--host-uds`, the one shape runsc 20221219 can checkpoint.
pub const SNAPSHOTS: &str = "runsc-snap";

/// The arguments of that registration.
pub const SNAPSHOT_ARGS: &[&str] = &["--network=none"];

/// One runtime as `docker info` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Registered {
    pub name: String,
    pub path: String,
    #[serde(rename = "args")]
    pub args: Vec<String>,
}

/// What a runtime is, as far as sbx's promises go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// runc (or crun): namespaces, seccomp and capabilities on the host's kernel.
    Runc,
    /// gVisor: the workload's system calls go to a user-space kernel.
    Gvisor,
    /// Kata Containers: a virtual machine with its own guest kernel.
    Kata,
    /// Anything else the engine lists: sbx applies the same flags and
    /// claims nothing about the kernel.
    Other,
}

impl Family {
    /// Whether the workload talks to a kernel other than the host's.
    pub fn isolates_kernel(self) -> bool {
        matches!(self, Family::Gvisor | Family::Kata)
    }
}

impl Registered {
    pub fn family(&self) -> Family {
        let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
        let (path, name) = (base(&self.path), self.name.as_str());
        if path == "runsc" || (path.is_empty() && name == "runsc") {
            Family::Gvisor
        } else if path.starts_with("kata") || path.contains("containerd-shim-kata") {
            Family::Kata
        } else if ["runc", "crun"].contains(&path.as_str()) || name == "runc" {
            Family::Runc
        } else {
            Family::Other
        }
    }

    /// The value of `--KEY=V` or `--KEY V` among the runtime's arguments
    /// (runsc also takes a single dash); `Some("")` for a bare `--KEY`.
    pub fn arg(&self, key: &str) -> Option<String> {
        let mut it = self.args.iter();
        let mut found = None;
        while let Some(a) = it.next() {
            let Some(rest) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else { continue };
            if rest == key {
                let v = it.clone().next().filter(|n| !n.starts_with('-')).cloned();
                if v.is_some() {
                    it.next();
                }
                found = Some(v.unwrap_or_default());
            } else if let Some(v) = rest.strip_prefix(key).and_then(|r| r.strip_prefix('=')) {
                found = Some(v.to_string());
            }
        }
        found
    }

    /// Whether runsc can checkpoint a sandbox under this registration: no
    /// network stack to save (hostinet is refused) and no host-backed
    /// unix socket (gvisor#10897).
    pub fn snapshots(&self) -> bool {
        self.family() == Family::Gvisor
            && self.arg("network").as_deref() == Some("none")
            && self.arg("host-uds").is_none_or(|v| v == "none")
            && self.arg("fsgofer-host-uds").is_none()
    }

    /// runsc applies the OCI seccomp profile (sbx's own) only with `--oci-seccomp`.
    pub fn applies_seccomp(&self) -> bool {
        match self.family() {
            Family::Gvisor => self.arg("oci-seccomp").is_some_and(|v| v.is_empty() || v == "true"),
            _ => true,
        }
    }

    /// How the sandbox's system calls are filtered, in one sentence for audit and doctor.
    pub fn seccomp_meaning(&self) -> &'static str {
        match self.family() {
            Family::Gvisor => "gVisor's Sentry serves the sandbox's system calls (the host kernel never sees them) and runs under gVisor's own host filter; sbx's OCI profile is not applied inside",
            Family::Kata => "the profile is applied inside the VM's guest kernel",
            Family::Runc | Family::Other => "sbx's profile filters the sandbox's system calls to the host kernel",
        }
    }

    /// What is wrong with this registration for a sandbox that needs a
    /// network (routes or an egress gate) and/or the direct channel; each
    /// problem says what to change. Empty: sbx can run it.
    pub fn problems(&self, needs_network: bool, direct: bool) -> Vec<String> {
        if self.family() != Family::Gvisor {
            return Vec::new();
        }
        let mut v = Vec::new();
        let network = self.arg("network").unwrap_or_else(|| "sandbox".into());
        match network.as_str() {
            "host" => {}
            "none" if !needs_network => {}
            "none" => v.push(
                "it is registered with --network=none, so the sandbox has no network for its routes or its egress gate; \
                 register it with --network=host (the container's own namespace, not the host's)"
                    .to_string(),
            ),
            other => v.push(format!(
                "it is registered with --network={other}: gVisor's own network stack cannot start in the engine's \
                 network namespaces (\"cannot run with network enabled in root network namespace\"); \
                 register it with --network=host (the container's own namespace, not the host's)"
            )),
        }
        if self.applies_seccomp() {
            v.push(
                "it is registered with --oci-seccomp: runsc then ignores the profile's errnoRet, so glibc's clone3 \
                 probe gets EPERM instead of ENOSYS and no program in the sandbox can start a thread; remove \
                 --oci-seccomp (the Sentry, not the host kernel, serves the sandbox's system calls)"
                    .to_string(),
            );
        }
        if direct {
            let uds = self.arg("host-uds").unwrap_or_else(|| "none".into());
            if !["create", "all"].contains(&uds.as_str()) && self.arg("fsgofer-host-uds").is_none() {
                v.push(format!(
                    "it is registered with --host-uds={uds}, so the sandbox's socket never appears on the host; \
                     register it with --host-uds=create (or create the sandbox with --channel exec)"
                ));
            }
        }
        v
    }
}

/// The daemon.json fragment that registers `name` the way sbx needs it.
pub fn fragment(name: &str, path: Option<&str>) -> String {
    let gvisor = Registered { name: name.into(), path: path.unwrap_or("").into(), args: vec![] }.family()
        == Family::Gvisor
        || name.contains("runsc");
    let path = path.map(str::to_string).unwrap_or_else(|| {
        if gvisor {
            "/usr/bin/runsc".into()
        } else {
            format!("/usr/bin/{name}")
        }
    });
    let mut entry = serde_json::json!({ "path": path });
    if name == SNAPSHOTS {
        entry["runtimeArgs"] = serde_json::json!(SNAPSHOT_ARGS);
        // `docker checkpoint` needs it; read at dockerd's start only.
        return serde_json::json!({ "experimental": true, "runtimes": { name: entry } }).to_string();
    }
    if gvisor {
        entry["runtimeArgs"] = serde_json::json!(RUNSC_ARGS);
    }
    serde_json::json!({ "runtimes": { name: entry } }).to_string()
}

/// How to load a changed daemon.json without stopping running containers.
pub const RELOAD: &str = "sudo kill -HUP $(pidof dockerd)";

/// A runtime name as `--runtime` takes it: what daemon.json keys look like.
pub fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// The runtimes the engine lists, by name.
pub type Runtimes = BTreeMap<String, Registered>;

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(path: &str, args: &[&str]) -> Registered {
        Registered { name: "runsc".into(), path: path.into(), args: args.iter().map(|s| s.to_string()).collect() }
    }

    #[test]
    fn only_a_registration_without_network_or_host_sockets_snapshots() {
        assert!(reg("/usr/bin/runsc", SNAPSHOT_ARGS).snapshots());
        assert!(reg("/usr/bin/runsc", &["--network", "none", "--host-uds=none"]).snapshots());
        assert!(!reg("/usr/bin/runsc", RUNSC_ARGS).snapshots());
        assert!(!reg("/usr/bin/runsc", &["--network=none", "--host-uds=create"]).snapshots());
        assert!(!reg("/usr/bin/runsc", &[]).snapshots(), "gVisor's default network is its own stack");
        assert!(!reg("/usr/bin/runc", &["--network=none"]).snapshots());
    }

    #[test]
    fn families() {
        assert_eq!(reg("/usr/bin/runsc", &[]).family(), Family::Gvisor);
        assert_eq!(Registered { name: "runc".into(), path: "runc".into(), args: vec![] }.family(), Family::Runc);
        assert_eq!(reg("/usr/local/bin/crun", &[]).family(), Family::Runc);
        assert_eq!(reg("/opt/kata/bin/kata-runtime", &[]).family(), Family::Kata);
        assert_eq!(reg("/opt/x/youki", &[]).family(), Family::Other);
        assert!(Family::Gvisor.isolates_kernel() && !Family::Runc.isolates_kernel());
    }

    #[test]
    fn args_in_every_spelling() {
        let r = reg("/usr/bin/runsc", &["--network=host", "-host-uds", "create", "--oci-seccomp"]);
        assert_eq!(r.arg("network").as_deref(), Some("host"));
        assert_eq!(r.arg("host-uds").as_deref(), Some("create"));
        assert_eq!(r.arg("oci-seccomp").as_deref(), Some(""));
        assert_eq!(r.arg("platform"), None);
        assert!(r.applies_seccomp());
        assert!(r.problems(false, false)[0].contains("--oci-seccomp"));
        assert!(!reg("/usr/bin/runsc", RUNSC_ARGS).applies_seccomp());
        assert!(!reg("/usr/bin/runsc", &["--oci-seccomp=false"]).applies_seccomp());
        assert!(reg("runc", &[]).applies_seccomp());
    }

    #[test]
    fn problems_say_what_to_change() {
        let good = reg("/usr/bin/runsc", RUNSC_ARGS);
        assert!(good.problems(true, true).is_empty());
        let none = reg("/usr/bin/runsc", &["--network=none", "--host-uds=create"]);
        assert!(none.problems(false, true).is_empty());
        assert!(none.problems(true, true)[0].contains("--network=host"));
        let bare = reg("/usr/bin/runsc", &[]);
        let p = bare.problems(false, true);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("--network=sandbox") && p[1].contains("--host-uds=create"), "{p:?}");
        let all = reg("/usr/bin/runsc", &["--network=host", "--host-uds=all"]);
        assert!(all.problems(true, true).is_empty());
        let no_uds = reg("/usr/bin/runsc", &["--network=host"]);
        assert!(no_uds.problems(true, false).is_empty(), "the exec channel needs no host socket");
        assert!(reg("runc", &[]).problems(true, true).is_empty());
    }

    #[test]
    fn fragments() {
        let f: serde_json::Value = serde_json::from_str(&fragment("runsc", None)).unwrap();
        assert_eq!(f["runtimes"]["runsc"]["path"], "/usr/bin/runsc");
        assert_eq!(f["runtimes"]["runsc"]["runtimeArgs"][1], "--host-uds=create");
        let f: serde_json::Value = serde_json::from_str(&fragment("crun", None)).unwrap();
        assert_eq!(f["runtimes"]["crun"], serde_json::json!({ "path": "/usr/bin/crun" }));
        for ok in ["runc", "runsc", "kata-fc", "io.containerd.runsc.v1"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-x", "a b", "a/b", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}

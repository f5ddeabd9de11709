//! The argv of `docker run`/`docker create` for one sandbox: its labels
//! (the record), its hardening, its mounts and its environment.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use super::os;
use crate::model::paths::{SANDBOX_SOCKET, SANDBOX_SOCKET_DIR};
use crate::model::record::{PrivateRoute, RouteNetwork};
use crate::model::scratch::{tmpfs_bounds, Scratch};
use crate::model::{channel, gate, paths, record};
use crate::spec::egress::{EgressSpec, Mode};
use crate::spec::SandboxSpec;

/// The sandbox's log on the host: json-file (so `docker logs` and `sbx logs`
/// work on any engine), at most LOG_MAX_FILES files of LOG_MAX_SIZE (20 MiB).
pub const LOG_DRIVER: &str = "json-file";
pub const LOG_MAX_SIZE: &str = "10m";
pub const LOG_MAX_FILES: &str = "2";

/// Everything `create` has resolved for one sandbox.
#[derive(Debug, Clone)]
pub struct RunPlan<'a> {
    pub id: &'a str,
    pub spec: &'a SandboxSpec,
    pub uid: u32,
    pub gid: u32,
    pub tier: u8,
    pub socket_dir: &'a Path,
    pub socket_path: &'a Path,
    pub created_at: &'a str,
    pub owner: &'a str,
    pub expires_at: Option<&'a str>,
    /// In route order.
    pub networks: &'a [RouteNetwork],
    /// The private route networks sbx made for this sandbox.
    pub private: &'a [PrivateRoute],
    /// `--dns` for the sandbox (see `model::boundary::CONTAINED_DNS`).
    pub dns: Option<&'a str>,
    /// The in-sandbox helper on the host, mounted read-only (see `helper`).
    pub helper: Option<&'a Path>,
    /// A remote engine's helper volume, mounted read-only at
    /// /run/sbx instead of `helper`'s bind of a directory of this machine.
    pub helper_volume: Option<&'a str>,
    /// The session's persistent /state volume (`create --persist`).
    pub volume: Option<&'a str>,
    /// With `volume`: its bound, the `sbx.persist-size` label (`PersistSize::label`).
    pub persist_size: Option<&'a str>,
    /// The seccomp profile file the docker CLI reads (see `seccomp`).
    pub seccomp: &'a Path,
    /// Direct: `socket_dir` is bind-mounted at /run/sandbox. Exec: a small
    /// tmpfs there instead, reached through the helper (see `channel`).
    pub channel: channel::Kind,
    /// `--add-host NAME:IP` entries: route hosts (and the gate) resolved by
    /// sbx for runtimes where Docker's embedded DNS does not answer (gVisor).
    pub hosts: &'a [(String, String)],
    /// What the engine's registration of `spec.runtime` is (see `runtime`).
    pub family: crate::model::runtime::Family,
    /// The image's VOLUMEs that get a tmpfs of sbx's, checked and cleaned
    /// (see `sandbox::ops::create::image`).
    pub image_volumes: &'a [String],
    /// A sandbox whose gate terminates TLS (a secret or a request rule).
    pub trust: Option<TrustPlan<'a>>,
}

/// What a sandbox whose gate terminates TLS gets: its CA bundle's directory
/// on this machine (mounted read-only at `paths::CA_BUNDLE_DIR`) and its
/// variables (the bundle's, each secret's `NAME=<placeholder>`; no value).
#[derive(Debug, Clone, Copy)]
pub struct TrustPlan<'a> {
    pub bundle_dir: &'a Path,
    pub env: &'a [(String, String)],
}

impl RunPlan<'_> {
    pub fn labels(&self) -> Vec<(String, String)> {
        let s = self.spec;
        let routes: BTreeMap<&str, &str> =
            self.networks.iter().map(|r| (r.kind.as_str(), r.network.as_str())).collect();
        let targets: BTreeMap<&str, &str> = s.routes.iter().map(|r| (r.kind.as_str(), r.target.as_str())).collect();
        let mut v = vec![
            (record::MANAGED.to_string(), "1".to_string()),
            (record::ID.to_string(), self.id.to_string()),
            (record::SESSION.to_string(), s.session.clone().unwrap_or_else(|| self.id.to_string())),
            (record::IMAGE.to_string(), s.image.as_str().to_string()),
            (record::TIER.to_string(), self.tier.to_string()),
            (record::SOCKET.to_string(), self.socket_path.display().to_string()),
            (record::ROUTES.to_string(), serde_json::to_string(&routes).unwrap_or_default()),
            (record::TARGETS.to_string(), serde_json::to_string(&targets).unwrap_or_default()),
            (record::USER.to_string(), format!("{}:{}", self.uid, self.gid)),
            (record::CREATED.to_string(), self.created_at.to_string()),
            (record::VERSION.to_string(), env!("CARGO_PKG_VERSION").to_string()),
            (record::OWNER.to_string(), self.owner.to_string()),
            (record::RUNTIME.to_string(), s.runtime.clone()),
        ];
        if let Some(m) = s.memory_mib {
            v.push((record::MEMORY.to_string(), m.to_string()));
        }
        if let Some(e) = self.expires_at {
            v.push((record::EXPIRES.to_string(), e.to_string()));
        }
        if let Some(vol) = self.volume {
            v.push((record::VOLUME.to_string(), vol.to_string()));
            if let Some(size) = self.persist_size {
                v.push((record::PERSIST_SIZE.to_string(), size.to_string()));
            }
        }
        if let Some(c) = self.channel.label() {
            v.push((record::CHANNEL.to_string(), c.to_string()));
        }
        if !self.private.is_empty() {
            let private: BTreeMap<&str, &str> =
                self.private.iter().map(|p| (p.network.as_str(), p.service.as_str())).collect();
            v.push((record::PRIVATE.to_string(), serde_json::to_string(&private).unwrap_or_default()));
        }
        if let Some(p) = &s.pool {
            v.push((record::POOL.to_string(), p.clone()));
        }
        if let Some(r) = &s.remake {
            let request: serde_json::Value = serde_json::from_str(r).unwrap_or_default();
            let remake = serde_json::json!({ "request": request, "idle": s.idle });
            v.push((record::REMAKE.to_string(), remake.to_string()));
        }
        if let Some(e) = &s.egress {
            v.push((record::EGRESS.to_string(), mode_name(e.policy.mode).to_string()));
            v.push((record::EGRESS_NETWORK.to_string(), egress_network(e).to_string()));
            if !e.secrets.is_empty() {
                v.push((record::SECRETS.to_string(), secrets_label(e)));
            }
        }
        v.extend(s.labels.iter().cloned());
        v
    }
}

/// The `sbx.secrets` label: what each secret is, never its value,
/// placeholder or source path.
pub fn secrets_label(e: &EgressSpec) -> String {
    let list: Vec<record::SecretInfo> = e
        .secrets
        .iter()
        .map(|s| record::SecretInfo {
            name: s.name.clone(),
            host: s.host.clone(),
            port: s.port,
            header: s.header.clone(),
            source: s.source.kind().to_string(),
        })
        .collect();
    serde_json::to_string(&list).unwrap_or_default()
}

/// `enforce` or `observe`, as labels, the environment and JSON say it.
pub fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Enforce => "enforce",
        Mode::Observe => "observe",
    }
}

/// The network a sandbox's gate reaches out through: `--egress-network`, else sbx's own.
pub fn egress_network(e: &EgressSpec) -> &str {
    e.network.as_deref().unwrap_or(gate::DEFAULT_NETWORK)
}

/// The proxy variables of a sandbox with an egress gate: every common
/// spelling points at the gate; NO_PROXY keeps the routes' hosts and the
/// sandbox's own loopback direct.
fn proxy_env(s: &SandboxSpec) -> Vec<String> {
    let mut v = Vec::new();
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
        v.push(format!("{k}={}", gate::PROXY_URL));
        v.push(format!("{}={}", k.to_ascii_lowercase(), gate::PROXY_URL));
    }
    let mut direct: Vec<&str> = s.routes.iter().map(|r| r.host.as_str()).collect();
    direct.dedup();
    direct.extend(["localhost", "127.0.0.1"]);
    let no_proxy = direct.join(",");
    v.push(format!("NO_PROXY={no_proxy}"));
    v.push(format!("no_proxy={no_proxy}"));
    v
}

/// The hardening every container sbx runs gets, sandbox and egress gate
/// alike, so a flag added here reaches both. Never --rm: the container is
/// the record until `destroy`.
pub(super) fn harden(a: &mut Vec<OsString>, seccomp: &Path, log_max_size: &str, log_max_files: &str) {
    let mut push = |k: &str, v: String| {
        a.push(k.into());
        a.push(v.into());
    };
    push("--restart", "no".into());
    // The image's HEALTHCHECK would run in the engine, outside the container's
    // --cpus: a 1 ms interval made an idle sandbox cost 113% of a host CPU,
    // 73% of it in dockerd, containerd and runc.
    a.push("--no-healthcheck".into());
    let mut push = |k: &str, v: String| {
        a.push(k.into());
        a.push(v.into());
    };
    push("--cap-drop", "ALL".into());
    push("--security-opt", "no-new-privileges".into());
    // sbx's profile, never the engine's default: 20.10's allows io_uring (finding 14).
    push("--security-opt", format!("seccomp={}", seccomp.display()));
    // A log cap that holds whatever the daemon's default driver is: max-size
    // means nothing to journald or syslog, so the driver is set too (finding 14).
    push("--log-driver", LOG_DRIVER.into());
    push("--log-opt", format!("max-size={log_max_size}"));
    push("--log-opt", format!("max-file={log_max_files}"));
}

/// `docker run -d ...` (one route or none) or `docker create ...` (several
/// routes: the rest are attached before `docker start`, because engines
/// before 25 refuse more than one `--network` at run).
pub fn container(plan: &RunPlan, detach_run: bool) -> Vec<OsString> {
    let s = plan.spec;
    let mut a: Vec<OsString> = if detach_run { os(&["run", "-d"]) } else { os(&["create"]) };
    let mut push = |k: &str, v: String| {
        a.push(k.into());
        a.push(v.into());
    };
    push("--name", plan.id.to_string());
    // sbx pulls (bounded, by digest, as --pull says) before this; docker's
    // own implicit pull would be none of that.
    push("--pull", "never".into());
    // Always named, so the record says what really runs it even where the
    // daemon's `default-runtime` is not runc.
    push("--runtime", s.runtime.clone());
    for (k, v) in plan.labels() {
        push("--label", format!("{k}={v}"));
    }
    harden(&mut a, plan.seccomp, LOG_MAX_SIZE, LOG_MAX_FILES);
    let mut push = |k: &str, v: String| {
        a.push(k.into());
        a.push(v.into());
    };
    // Every tmpfs is a share of --memory (see `model::scratch`), whatever the
    // daemon's `default-shm-size` says; /dev/shm is sbx's own tmpfs so it
    // gets an inode bound too (--shm-size has none).
    let memory = s.memory_mib.unwrap_or(crate::spec::DEFAULT_MEMORY_MIB);
    let scratch = Scratch::for_memory(memory, plan.image_volumes.len());
    push("--shm-size", format!("{}k", scratch.shm_kib));
    push("--user", format!("{}:{}", plan.uid, plan.gid));
    push("--pids-limit", s.pids.to_string());
    push("--ulimit", "nofile=1024:1024".into());
    push("--ulimit", "core=0:0".into());
    if let Some(m) = s.memory_mib {
        push("--memory", format!("{m}m"));
        // Same as --memory: no swap on top, so the limit is the limit.
        push("--memory-swap", format!("{m}m"));
    }
    if let Some(c) = &s.cpus {
        push("--cpus", c.clone());
    }
    push("--network", plan.networks.first().map(|r| r.network.clone()).unwrap_or_else(|| "none".into()));
    if let Some(dns) = plan.dns {
        push("--dns", dns.to_string());
    }
    for (host, ip) in plan.hosts {
        push("--add-host", format!("{host}:{ip}"));
    }
    // Read-only root; writable scratch is tmpfs. uid/gid make the sandbox
    // user own it: on engine 20.10 a tmpfs over a directory the image has
    // (a 0755 root /tmp) takes that directory's mode whatever `mode=` says.
    a.push("--read-only".into());
    let own = format!("uid={},gid={}", plan.uid, plan.gid);
    let mut push = |k: &str, v: String| {
        a.push(k.into());
        a.push(v.into());
    };
    push("--tmpfs", format!("/dev/shm:rw,nosuid,nodev,noexec,{},mode=1777", tmpfs_bounds(scratch.shm_kib)));
    push("--tmpfs", format!("/tmp:rw,exec,nosuid,{},mode=1777,{own}", tmpfs_bounds(scratch.tmp_kib)));
    match (plan.volume, &s.state_dir) {
        // volume-nocopy: nothing of the image's /state (a setuid binary, its
        // root owner and mode) reaches the session's volume.
        (Some(v), _) => push("--mount", format!("type=volume,src={v},dst=/state,volume-nocopy")),
        (None, Some(m)) => push("--mount", m.mount_arg()),
        (None, None) => {
            push("--tmpfs", format!("/state:rw,exec,nosuid,{},mode=1777,{own}", tmpfs_bounds(scratch.state_kib)))
        }
    }
    match plan.channel {
        channel::Kind::Direct => {
            push("--mount", format!("type=bind,src={},dst={SANDBOX_SOCKET_DIR}", plan.socket_dir.display()))
        }
        // Without root the socket directory is still bounded, and nothing of it is on the host.
        channel::Kind::Exec => push(
            "--tmpfs",
            format!("{SANDBOX_SOCKET_DIR}:rw,noexec,nosuid,nodev,{},mode=0700,{own}", paths::SOCKET_TMPFS_OPTIONS),
        ),
    }
    let helper = match (plan.helper_volume, plan.helper) {
        // volume-nocopy: the image's /run/sbx never reaches the volume.
        (Some(v), _) => Some(format!("type=volume,src={v},dst={},readonly,volume-nocopy", paths::HELPER_DIR)),
        (None, Some(h)) => Some(format!("type=bind,src={},dst={},readonly", h.display(), paths::HELPER_DIR)),
        (None, None) => None,
    };
    if let Some(mount) = helper {
        // The helper's directory AT /run/sbx: a mount point the sandbox
        // cannot rename or replace (see `helper`).
        push("--mount", mount);
        // The helper's background-process state, off the sandbox's /tmp;
        // only the helper uses it, so noexec.
        let bounds = tmpfs_bounds(scratch.bg_kib);
        push("--tmpfs", format!("{}:rw,noexec,nosuid,nodev,{bounds},mode=1777,{own}", paths::HELPER_BG_DIR));
    }
    // Without one, docker gives each image VOLUME an anonymous volume:
    // unbounded host disk under a read-only root.
    for v in plan.image_volumes {
        push("--tmpfs", format!("{v}:rw,exec,nosuid,nodev,{},mode=0755,{own}", tmpfs_bounds(scratch.volume_kib)));
    }
    for m in &s.mounts {
        push("--mount", m.mount_arg());
    }
    for (k, v) in &s.env {
        push("--env", format!("{k}={v}"));
    }
    push("--env", format!("SBX_SANDBOX_ID={}", plan.id));
    push("--env", format!("SBX_SOCKET={SANDBOX_SOCKET}"));
    if let Some(e) = &s.egress {
        for kv in proxy_env(s) {
            push("--env", kv);
        }
        push("--env", format!("SBX_SANDBOX_EGRESS={}", mode_name(e.policy.mode)));
    }
    push("--env", format!("SBX_SANDBOX_RUNTIME={}", s.runtime));
    // Last, so nothing before it can override the tier the sandbox sees.
    push("--env", format!("SBX_SANDBOX_TIER={}", plan.tier));
    // After --env: the bundle's variables win over an operator's (a secret's
    // NAME is never SBX_*).
    push_trust(&mut a, plan.trust);
    push_program(&mut a, s);
    a
}

/// A terminating gate's CA bundle, read-only, and the sandbox's variables
/// (the bundle's, the placeholders).
fn push_trust(a: &mut Vec<OsString>, trust: Option<TrustPlan>) {
    let Some(t) = trust else { return };
    a.push("--mount".into());
    a.push(format!("type=bind,src={},dst={},readonly", t.bundle_dir.display(), paths::CA_BUNDLE_DIR).into());
    for (k, v) in t.env {
        a.push("--env".into());
        a.push(format!("{k}={v}").into());
    }
}

/// What the sandbox runs: the image's program (or the command given), or,
/// for an idle sandbox, sbx's helper, from sbx's own mount that nothing of
/// the image can replace.
fn push_program(a: &mut Vec<OsString>, s: &SandboxSpec) {
    if s.idle {
        a.extend(os(&["--entrypoint", paths::HELPER_PATH]));
    }
    a.push("--".into());
    a.push(s.image.as_str().into());
    if s.idle {
        a.push("idle".into());
    } else {
        a.extend(s.command.iter().map(OsString::from));
    }
}

#[cfg(test)]
mod tests;

//! The argv of `docker run`/`docker create` for one sandbox: its labels
//! (the record), its hardening, its mounts and its environment.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use super::os;
use crate::model::paths::{SANDBOX_SOCKET, SANDBOX_SOCKET_DIR};
use crate::model::record::{PrivateRoute, RouteNetwork};
use crate::model::{channel, paths, record};
use crate::spec::SandboxSpec;

/// The sandbox's log on the host: json-file (so `docker logs` and `sbx logs`
/// work on any engine), at most LOG_MAX_FILES files of LOG_MAX_SIZE (20 MiB).
pub const LOG_DRIVER: &str = "json-file";
pub const LOG_MAX_SIZE: &str = "10m";
pub const LOG_MAX_FILES: &str = "2";
/// /dev/shm, whatever the daemon's `default-shm-size` says.
pub const SHM_SIZE: &str = "64m";

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
    /// The session's persistent /state volume (`create --persist`).
    pub volume: Option<&'a str>,
    /// The seccomp profile file the docker CLI reads (see `seccomp`).
    pub seccomp: &'a Path,
    /// Direct: `socket_dir` is bind-mounted at /run/sandbox. Exec: a small
    /// tmpfs there instead, reached through the helper (see `channel`).
    pub channel: channel::Kind,
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
        ];
        if let Some(e) = self.expires_at {
            v.push((record::EXPIRES.to_string(), e.to_string()));
        }
        if let Some(vol) = self.volume {
            v.push((record::VOLUME.to_string(), vol.to_string()));
        }
        if let Some(c) = self.channel.label() {
            v.push((record::CHANNEL.to_string(), c.to_string()));
        }
        if !self.private.is_empty() {
            let private: BTreeMap<&str, &str> =
                self.private.iter().map(|p| (p.network.as_str(), p.service.as_str())).collect();
            v.push((record::PRIVATE.to_string(), serde_json::to_string(&private).unwrap_or_default()));
        }
        v.extend(s.labels.iter().cloned());
        v
    }
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
    for (k, v) in plan.labels() {
        push("--label", format!("{k}={v}"));
    }
    // Hardening. Never --rm: the container is the record until `destroy`.
    push("--restart", "no".into());
    push("--cap-drop", "ALL".into());
    push("--security-opt", "no-new-privileges".into());
    // sbx's profile, never the engine's default: 20.10's allows io_uring (finding 14).
    push("--security-opt", format!("seccomp={}", plan.seccomp.display()));
    // A log cap that holds whatever the daemon's default driver is: max-size
    // means nothing to journald or syslog, so the driver is set too (finding 14).
    push("--log-driver", LOG_DRIVER.into());
    push("--log-opt", format!("max-size={LOG_MAX_SIZE}"));
    push("--log-opt", format!("max-file={LOG_MAX_FILES}"));
    push("--shm-size", SHM_SIZE.into());
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
    // Read-only root; writable scratch is tmpfs. uid/gid make the sandbox
    // user own it: on engine 20.10 a tmpfs over a directory the image has
    // (a 0755 root /tmp) takes that directory's mode whatever `mode=` says.
    a.push("--read-only".into());
    let own = format!("uid={},gid={}", plan.uid, plan.gid);
    let mut push = |k: &str, v: String| {
        a.push(k.into());
        a.push(v.into());
    };
    push("--tmpfs", format!("/tmp:rw,exec,nosuid,size=512m,mode=1777,{own}"));
    match (plan.volume, &s.state_dir) {
        // volume-nocopy: nothing of the image's /state (a setuid binary, its
        // root owner and mode) reaches the session's volume (issue 9 finding 13).
        (Some(v), _) => push("--mount", format!("type=volume,src={v},dst=/state,volume-nocopy")),
        (None, Some(m)) => push("--mount", m.mount_arg()),
        (None, None) => push("--tmpfs", format!("/state:rw,exec,nosuid,size=512m,mode=1777,{own}")),
    }
    match plan.channel {
        channel::Kind::Direct => {
            push("--mount", format!("type=bind,src={},dst={SANDBOX_SOCKET_DIR}", plan.socket_dir.display()))
        }
        // Issue 9 finding 7 without root: bounded, and nothing of it on the host.
        channel::Kind::Exec => push(
            "--tmpfs",
            format!("{SANDBOX_SOCKET_DIR}:rw,noexec,nosuid,nodev,{},mode=0700,{own}", paths::SOCKET_TMPFS_OPTIONS),
        ),
    }
    if let Some(h) = plan.helper {
        // The helper's directory AT /run/sbx: a mount point the sandbox
        // cannot rename or replace (issue 9 finding 1; see `helper`).
        push("--mount", format!("type=bind,src={},dst={},readonly", h.display(), paths::HELPER_DIR));
        // The helper's background-process state, off the sandbox's /tmp
        // (issue 10 item 9); only the helper uses it, so noexec.
        push("--tmpfs", format!("{}:rw,noexec,nosuid,nodev,size=512m,mode=1777,{own}", paths::HELPER_BG_DIR));
    }
    for m in &s.mounts {
        push("--mount", m.mount_arg());
    }
    for (k, v) in &s.env {
        push("--env", format!("{k}={v}"));
    }
    push("--env", format!("SBX_SANDBOX_ID={}", plan.id));
    push("--env", format!("SBX_SOCKET={SANDBOX_SOCKET}"));
    // Last, so nothing before it can override the tier the sandbox sees.
    push("--env", format!("SBX_SANDBOX_TIER={}", plan.tier));
    a.push("--".into());
    a.push(s.image.as_str().into());
    a.extend(s.command.iter().map(OsString::from));
    a
}

#[cfg(test)]
mod tests {
    use super::super::strs;
    use super::*;
    use crate::spec::CreateRequest;

    const IMG: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn spec(req: CreateRequest) -> SandboxSpec {
        SandboxSpec::from_request(&CreateRequest { image: IMG.into(), ..req }, None).unwrap()
    }

    fn plan(s: &SandboxSpec) -> RunPlan<'_> {
        let networks: Vec<RouteNetwork> =
            s.routes.iter().map(|r| RouteNetwork { kind: r.kind.clone(), network: r.network() }).collect();
        RunPlan {
            id: "sbx-0123456789ab",
            spec: s,
            uid: 65534,
            gid: 65534,
            tier: 2,
            socket_dir: Path::new("/run/sbx/sandboxes/sbx-0123456789ab"),
            socket_path: Path::new("/run/sbx/sandboxes/sbx-0123456789ab/sandbox.sock"),
            created_at: "2026-11-29T09:00:00Z",
            owner: "0123",
            expires_at: None,
            networks: Box::leak(networks.into_boxed_slice()),
            private: &[],
            dns: None,
            channel: channel::Kind::Direct,
            helper: None,
            volume: None,
            seccomp: Path::new("/var/lib/sbx/seccomp/sbx-seccomp-0123.json"),
        }
    }

    #[test]
    fn run_argv_no_routes() {
        let s = spec(CreateRequest { command: vec!["serve".into(), "--x".into()], ..Default::default() });
        let got = strs(container(&plan(&s), true));
        let labels: Vec<String> = got.windows(2).filter(|w| w[0] == "--label").map(|w| w[1].clone()).collect();
        assert_eq!(
            labels.len(),
            record::ALL.len() - 4,
            "every label but sbx.expires, sbx.private, sbx.volume and sbx.channel (direct)"
        );
        assert!(labels.contains(&"sbx.session=sbx-0123456789ab".to_string()));
        assert!(labels.contains(&"sbx.routes={}".to_string()));
        let rest: Vec<&str> = got.iter().skip_while(|a| *a != "--restart").map(String::as_str).collect();
        assert_eq!(
            rest,
            vec![
                "--restart",
                "no",
                "--cap-drop",
                "ALL",
                "--security-opt",
                "no-new-privileges",
                "--security-opt",
                "seccomp=/var/lib/sbx/seccomp/sbx-seccomp-0123.json",
                "--log-driver",
                "json-file",
                "--log-opt",
                "max-size=10m",
                "--log-opt",
                "max-file=2",
                "--shm-size",
                "64m",
                "--user",
                "65534:65534",
                "--pids-limit",
                "512",
                "--ulimit",
                "nofile=1024:1024",
                "--ulimit",
                "core=0:0",
                "--memory",
                "4096m",
                "--memory-swap",
                "4096m",
                "--cpus",
                "1",
                "--network",
                "none",
                "--read-only",
                "--tmpfs",
                "/tmp:rw,exec,nosuid,size=512m,mode=1777,uid=65534,gid=65534",
                "--tmpfs",
                "/state:rw,exec,nosuid,size=512m,mode=1777,uid=65534,gid=65534",
                "--mount",
                "type=bind,src=/run/sbx/sandboxes/sbx-0123456789ab,dst=/run/sandbox",
                "--env",
                "SBX_SANDBOX_ID=sbx-0123456789ab",
                "--env",
                "SBX_SOCKET=/run/sandbox/sandbox.sock",
                "--env",
                "SBX_SANDBOX_TIER=2",
                "--",
                IMG,
                "serve",
                "--x",
            ]
        );
        assert_eq!(&got[..4], &["run", "-d", "--name", "sbx-0123456789ab"]);
        assert!(!got.iter().any(|a| a == "--rm" || a == "--privileged"));
    }

    #[test]
    fn create_argv_with_routes_limits_env_and_mounts() {
        let dir = std::env::temp_dir().canonicalize().unwrap();
        let s = spec(CreateRequest {
            routes: vec!["inference:proxy:8080".into(), "tools:http://toolhost:9000/v1".into()],
            memory_mib: Some(256),
            cpus: Some("1.5".into()),
            env: vec!["A=1".into()],
            ro: vec![format!("{}:/data", dir.display())],
            session: Some("s1".into()),
            labels: vec!["ci.job=7".into()],
            ..Default::default()
        });
        let got = strs(container(&plan(&s), false));
        assert_eq!(got[0], "create");
        let has = |k: &str, v: &str| got.windows(2).any(|w| w[0] == k && w[1] == v);
        assert!(has("--network", "sbx-proxy"));
        assert!(!has("--network", "sbx-toolhost"), "later routes are attached, not passed to create");
        assert!(has("--memory", "256m") && has("--memory-swap", "256m") && has("--cpus", "1.5"));
        assert!(has("--mount", &format!("type=bind,src={},dst=/data,readonly", dir.display())));
        assert!(has("--label", r#"sbx.routes={"inference":"sbx-proxy","tools":"sbx-toolhost"}"#));
        assert!(has("--label", r#"sbx.targets={"inference":"proxy:8080","tools":"http://toolhost:9000/v1"}"#));
        assert!(has("--label", "sbx.session=s1") && has("--label", "ci.job=7"));
        let envs: Vec<&String> = got.windows(2).filter(|w| w[0] == "--env").map(|w| &w[1]).collect();
        assert_eq!(envs.first().unwrap().as_str(), "A=1");
        assert_eq!(envs.last().unwrap().as_str(), "SBX_SANDBOX_TIER=2");
    }

    #[test]
    fn state_dir_replaces_the_state_tmpfs() {
        let dir = std::env::temp_dir().canonicalize().unwrap();
        let s = spec(CreateRequest { state_dir: Some(dir.display().to_string()), ..Default::default() });
        let got = strs(container(&plan(&s), true));
        assert!(got.contains(&format!("type=bind,src={},dst=/state", dir.display())));
        assert!(!got.iter().any(|a| a.starts_with("/state:")));
    }

    #[test]
    fn a_session_volume_takes_nothing_from_the_image() {
        let s = spec(CreateRequest { persist: true, session: Some("s".into()), ..Default::default() });
        let got = strs(container(&RunPlan { volume: Some("sbx-state-s"), ..plan(&s) }, true));
        assert!(got.contains(&"type=volume,src=sbx-state-s,dst=/state,volume-nocopy".to_string()), "{got:?}");
    }
}

//! Pure builders for every docker argv sbx runs. No I/O here: each function
//! maps typed, validated input to the exact argument vector, so the vectors
//! are tested on their own. Values a user controls come after `--` wherever
//! the subcommand allows it, so none can be read as an option.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use crate::model::record;
use crate::spec::SandboxSpec;

/// Where the sandbox sees its socket directory, and the socket in it.
pub const SANDBOX_SOCKET_DIR: &str = "/run/sandbox";
pub const SANDBOX_SOCKET: &str = "/run/sandbox/sandbox.sock";
/// Lines of the sandbox's log quoted when it dies or never binds.
pub const LOG_TAIL: &str = "20";
/// The sandbox's log on the host: json-file (so `docker logs` and `sbx logs`
/// work on any engine), at most LOG_MAX_FILES files of LOG_MAX_SIZE (20 MiB).
pub const LOG_DRIVER: &str = "json-file";
pub const LOG_MAX_SIZE: &str = "10m";
pub const LOG_MAX_FILES: &str = "2";
/// /dev/shm, whatever the daemon's `default-shm-size` says.
pub const SHM_SIZE: &str = "64m";

fn os(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

fn with_tail<S: AsRef<str>>(head: &[&str], tail: &[S]) -> Vec<OsString> {
    let mut v = os(head);
    v.extend(tail.iter().map(|s| OsString::from(s.as_ref())));
    v
}

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
    /// (route kind, network), in route order.
    pub networks: &'a [(String, String)],
    /// (private route network, service container) sbx made for this sandbox.
    pub private: &'a [(String, String)],
    /// `--dns` for the sandbox (see `boundary::CONTAINED_DNS`).
    pub dns: Option<&'a str>,
    /// The in-sandbox helper on the host, mounted read-only (see `helper`).
    pub helper: Option<&'a Path>,
    /// The session's persistent /state volume (`create --persist`).
    pub volume: Option<&'a str>,
    /// The seccomp profile file the docker CLI reads (see `seccomp`).
    pub seccomp: &'a Path,
    /// Direct: `socket_dir` is bind-mounted at /run/sandbox. Exec: a small
    /// tmpfs there instead, reached through the helper (see `channel`).
    pub channel: crate::host::channel::Kind,
}

impl RunPlan<'_> {
    pub fn labels(&self) -> Vec<(String, String)> {
        let s = self.spec;
        let routes: BTreeMap<&str, &str> = self.networks.iter().map(|(k, n)| (k.as_str(), n.as_str())).collect();
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
            let private: BTreeMap<&str, &str> = self.private.iter().map(|(n, s)| (n.as_str(), s.as_str())).collect();
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
    push("--network", plan.networks.first().map(|(_, n)| n.clone()).unwrap_or_else(|| "none".into()));
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
        crate::host::channel::Kind::Direct => {
            push("--mount", format!("type=bind,src={},dst={SANDBOX_SOCKET_DIR}", plan.socket_dir.display()))
        }
        // Issue 9 finding 7 without root: bounded, and nothing of it on the host.
        crate::host::channel::Kind::Exec => push(
            "--tmpfs",
            format!(
                "{SANDBOX_SOCKET_DIR}:rw,noexec,nosuid,nodev,{},mode=0700,{own}",
                crate::host::socket::TMPFS_OPTIONS
            ),
        ),
    }
    if let Some(h) = plan.helper {
        // The helper's directory AT /run/sbx: a mount point the sandbox
        // cannot rename or replace (issue 9 finding 1; see `helper`).
        push("--mount", format!("type=bind,src={},dst={},readonly", h.display(), crate::host::helper::SANDBOX_DIR));
        // The helper's background-process state, off the sandbox's /tmp
        // (issue 10 item 9); only the helper uses it, so noexec.
        push("--tmpfs", format!("{}:rw,noexec,nosuid,nodev,size=512m,mode=1777,{own}", crate::host::helper::BG_DIR));
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

/// The image's USER and its labels in one call (see `parse::image_config`).
pub fn image_user(image: &str) -> Vec<OsString> {
    os(&["image", "inspect", "--format", super::parse::IMAGE_FORMAT, "--", image])
}

/// An image's own labels (what every container of it inherits), for `audit`.
pub fn image_labels(image: &str) -> Vec<OsString> {
    os(&["image", "inspect", "--format", "{{json .Config.Labels}}", "--", image])
}

pub fn network_inspect<S: AsRef<str>>(networks: &[S]) -> Vec<OsString> {
    with_tail(&["network", "inspect", "--format", super::parse::NETWORK_FORMAT, "--"], networks)
}

pub fn network_connect(network: &str, id: &str) -> Vec<OsString> {
    os(&["network", "connect", "--", network, id])
}

/// `--alias`: the service answers to the route's host name on the private network.
pub fn network_connect_alias(network: &str, container: &str, alias: &str) -> Vec<OsString> {
    os(&["network", "connect", "--alias", alias, "--", network, container])
}

/// A private route network: internal, and no IPv4 address on the host's
/// bridge, so neither the outside nor the host can be reached through it.
pub fn private_network(name: &str, id: &str, service: &str, owner: &str) -> Vec<OsString> {
    os(&[
        "network",
        "create",
        "--internal",
        "--opt",
        "com.docker.network.bridge.inhibit_ipv4=true",
        "--label",
        &format!("{}={id}", record::PRIVATE_FOR),
        "--label",
        &format!("{}={service}", record::SERVICE),
        "--label",
        &format!("{}={owner}", record::OWNER),
        "--",
        name,
    ])
}

pub fn network_remove<S: AsRef<str>>(networks: &[S]) -> Vec<OsString> {
    with_tail(&["network", "rm", "--"], networks)
}

/// sbx's private route networks: `[name, sandbox id, service, owner token]` per line.
pub fn private_networks() -> Vec<OsString> {
    let format = format!(
        "[{{{{json .Name}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{}\")}}}}]",
        record::PRIVATE_FOR,
        record::SERVICE,
        record::OWNER
    );
    vec![
        "network".into(),
        "ls".into(),
        "--filter".into(),
        format!("label={}", record::PRIVATE_FOR).into(),
        "--format".into(),
        format.into(),
    ]
}

pub fn network_disconnect(network: &str, id: &str) -> Vec<OsString> {
    os(&["network", "disconnect", "--force", "--", network, id])
}

pub fn start(id: &str) -> Vec<OsString> {
    os(&["start", "--", id])
}

/// `STATUS EXITCODE`, e.g. `running 0` or `exited 3`.
pub fn state(id: &str) -> Vec<OsString> {
    os(&["container", "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", "--", id])
}

/// `PID STATUS EXITCODE` of the main process, e.g. `4242 running 0` or
/// `0 exited 3`: where create reads the sandbox's mount table.
pub fn running_pid(id: &str) -> Vec<OsString> {
    os(&["container", "inspect", "--format", "{{.State.Pid}} {{.State.Status}} {{.State.ExitCode}}", "--", id])
}

pub fn logs_tail(id: &str) -> Vec<OsString> {
    os(&["logs", "--tail", LOG_TAIL, "--", id])
}

/// `-v` removes anonymous volumes the image declared, so nothing outlives it.
pub fn remove<S: AsRef<str>>(ids: &[S]) -> Vec<OsString> {
    with_tail(&["rm", "-f", "-v", "--"], ids)
}

pub fn inspect<S: AsRef<str>>(ids: &[S]) -> Vec<OsString> {
    with_tail(&["container", "inspect", "--format", "{{json .}}", "--"], ids)
}

pub fn version() -> Vec<OsString> {
    os(&["version", "--format", "{{json .}}"])
}

/// The cheapest call that needs the engine's container store: doctor's hang check.
pub fn ps_quiet() -> Vec<OsString> {
    os(&["ps", "-q", "--last", "1"])
}

pub fn info_os() -> Vec<OsString> {
    os(&["info", "--format", "{{json .OperatingSystem}}"])
}

pub fn images_labelled(label: &str) -> Vec<OsString> {
    os(&["images", "-q", "--no-trunc", "--filter", &format!("label={label}")])
}

/// `docker import` of a tar on stdin; `label` marks it so it is found again.
pub fn import(label: &str) -> Vec<OsString> {
    os(&["import", "--change", "ENTRYPOINT [\"/sbx\", \"__probe\"]", "--change", &format!("LABEL {label}"), "-"])
}

pub fn list() -> Vec<OsString> {
    let filter = format!("label={}=1", record::MANAGED);
    vec![
        "ps".into(),
        "-a".into(),
        "--no-trunc".into(),
        "--filter".into(),
        filter.into(),
        "--format".into(),
        record::ps_template().into(),
    ]
}

/// How `docker exec` runs a command: attached stdin and terminal, extra
/// environment, working directory and user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOpts {
    pub interactive: bool,
    pub tty: bool,
    pub env: Vec<(String, String)>,
    pub workdir: Option<String>,
    pub user: Option<String>,
}

/// `docker exec [-i] [-t] [-e K=V]... [-w DIR] [-u USER] -- ID CMD...`:
/// the command's argv passes through untouched, after `--`.
pub fn exec(id: &str, o: &ExecOpts, cmd: &[String]) -> Vec<OsString> {
    let mut a = os(&["exec"]);
    if o.interactive {
        a.push("-i".into());
    }
    if o.tty {
        a.push("-t".into());
    }
    for (k, v) in &o.env {
        a.push("-e".into());
        a.push(format!("{k}={v}").into());
    }
    if let Some(w) = &o.workdir {
        a.push("-w".into());
        a.push(w.into());
    }
    if let Some(u) = &o.user {
        a.push("-u".into());
        a.push(u.into());
    }
    a.push("--".into());
    a.push(id.into());
    a.extend(cmd.iter().map(OsString::from));
    a
}

/// `docker logs [--follow] [--tail N] -- ID`: the sandbox's own output.
pub fn logs(id: &str, follow: bool, tail: Option<&str>) -> Vec<OsString> {
    let mut a = os(&["logs"]);
    if follow {
        a.push("--follow".into());
    }
    if let Some(t) = tail {
        a.push("--tail".into());
        a.push(t.into());
    }
    a.push("--".into());
    a.push(id.into());
    a
}

/// `docker stats --no-stream --format '{{json .}}' -- IDS`: one JSON object
/// per sandbox (see `parse::stats`).
pub fn stats<S: AsRef<str>>(ids: &[S]) -> Vec<OsString> {
    with_tail(&["stats", "--no-stream", "--format", "{{json .}}", "--"], ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{CreateRequest, SandboxSpec};

    const IMG: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn strs(v: Vec<OsString>) -> Vec<String> {
        v.into_iter().map(|s| s.into_string().unwrap()).collect()
    }

    fn spec(req: CreateRequest) -> SandboxSpec {
        SandboxSpec::from_request(&CreateRequest { image: IMG.into(), ..req }, None).unwrap()
    }

    fn plan(s: &SandboxSpec) -> RunPlan<'_> {
        let networks: Vec<(String, String)> = s.routes.iter().map(|r| (r.kind.clone(), r.network())).collect();
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
            channel: crate::host::channel::Kind::Direct,
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

    #[test]
    fn small_builders() {
        assert_eq!(
            strs(network_inspect(&["sbx-a", "sbx-b"])),
            ["network", "inspect", "--format", super::super::parse::NETWORK_FORMAT, "--", "sbx-a", "sbx-b"]
        );
        assert_eq!(
            strs(network_disconnect("sbx-a", "sbx-1")),
            ["network", "disconnect", "--force", "--", "sbx-a", "sbx-1"]
        );
        assert_eq!(strs(remove(&["a", "b"])), ["rm", "-f", "-v", "--", "a", "b"]);
        assert_eq!(strs(list())[..5], ["ps", "-a", "--no-trunc", "--filter", "label=sbx.managed=1"]);
    }

    #[test]
    fn exec_argv_passes_the_command_through_after_dashes() {
        let o = ExecOpts {
            interactive: true,
            tty: true,
            env: vec![("A".into(), "1 2".into())],
            workdir: Some("/tmp".into()),
            user: Some("1000:1000".into()),
        };
        let cmd: Vec<String> = ["sh", "-c", "echo $A; rm -rf /"].map(String::from).to_vec();
        assert_eq!(
            strs(exec("sbx-0123456789ab", &o, &cmd)),
            [
                "exec",
                "-i",
                "-t",
                "-e",
                "A=1 2",
                "-w",
                "/tmp",
                "-u",
                "1000:1000",
                "--",
                "sbx-0123456789ab",
                "sh",
                "-c",
                "echo $A; rm -rf /"
            ]
        );
    }

    #[test]
    fn logs_and_stats() {
        assert_eq!(strs(logs("sbx-1", false, None)), ["logs", "--", "sbx-1"]);
        assert_eq!(strs(logs("sbx-1", true, Some("5"))), ["logs", "--follow", "--tail", "5", "--", "sbx-1"]);
        assert_eq!(strs(stats(&["a", "b"])), ["stats", "--no-stream", "--format", "{{json .}}", "--", "a", "b"]);
    }
}

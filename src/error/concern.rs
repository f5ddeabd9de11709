//! The failures of each concern, with their `--json` kind and their hint.
//! Every one exits 1 (see the table in the parent module).

use std::path::PathBuf;

use crate::model::boundary::Gap;

/// Routes, their networks and the services they name.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("route network(s) missing: {}", networks.join(", "))]
    NetworkMissing { networks: Vec<String> },
    #[error("routes reach beyond their targets, refused under strict egress: {}", gaps.iter().map(|g| format!("{} ({})", g.network, g.property)).collect::<Vec<_>>().join(", "))]
    NotContained { gaps: Vec<Gap> },
    #[error("with --private-routes each route's host must name a running service container; not running: {}", hosts.join(", "))]
    ServiceMissing { hosts: Vec<String> },
    #[error("sandbox {id} has no route {kind:?} (its routes: {})", if routes.is_empty() { "none".to_string() } else { routes.join(", ") })]
    Unknown { id: String, kind: String, routes: Vec<String> },
    #[error("route service {host:?} {why}; sbx never attaches a sandbox to another sandbox's route")]
    ServiceIsSandbox { host: String, why: String },
    #[error("route host {host:?} is not a container on network {network}: under runtime {runtime} Docker's DNS does not answer in the sandbox, so sbx writes each route host's address itself and must find it")]
    Unresolved { host: String, network: String, runtime: String },
}

impl RouteError {
    pub fn kind(&self) -> &'static str {
        match self {
            RouteError::NetworkMissing { .. } => "network_missing",
            RouteError::NotContained { .. } => "not_contained",
            RouteError::ServiceMissing { .. } => "service_missing",
            RouteError::Unknown { .. } => "unknown_route",
            RouteError::ServiceIsSandbox { .. } => "service_is_sandbox",
            RouteError::Unresolved { .. } => "route_unresolved",
        }
    }

    pub fn hint(&self) -> Option<String> {
        Some(match self {
            RouteError::NetworkMissing { networks } => {
                format!("{}; or create the sandbox with --private-routes", missing_network_fix(networks))
            }
            RouteError::NotContained { gaps } => {
                let mut fixes: Vec<String> = gaps.iter().map(|g| format!("{}: {}", g.network, g.fix)).collect();
                fixes.dedup();
                format!("{}; or drop --strict-egress / SBX_STRICT_EGRESS to accept tier 1", fixes.join("; "))
            }
            RouteError::ServiceMissing { .. } => {
                "start the service as a container named after the route's host (`docker run -d --name HOST ...`), or create without --private-routes".into()
            }
            RouteError::Unknown { id, .. } => {
                format!("`sbx inspect {id}` shows its routes; `sbx revoke {id} all` destroys it")
            }
            RouteError::Unresolved { host, network, .. } => format!(
                "give the route the service container's name (not a network alias) and attach it: `docker network connect {network} {host}`; or use runc"
            ),
            RouteError::ServiceIsSandbox { .. } => {
                "route to a service container that is not a sandbox; to let sandboxes talk, use a shared route network you create".into()
            }
        })
    }
}

/// How to make missing route networks; `create`'s hint and `doctor
/// --route` say the same (consistency).
pub fn missing_network_fix(networks: &[String]) -> String {
    let cmds: Vec<String> = networks.iter().map(|n| format!("`docker network create --internal {n}`")).collect();
    let attach: Vec<String> = networks
        .iter()
        .map(|n| format!("`docker network connect --alias {} {n} SERVICE`", n.trim_start_matches("sbx-")))
        .collect();
    format!(
        "create it with {} (add `-o com.docker.network.bridge.inhibit_ipv4=true` to keep the host out of reach) and attach the service with {}",
        cmds.join(" and "),
        attach.join(" and ")
    )
}

/// A sandbox's lifecycle: finding it, booting it, running its setup,
/// tearing it down.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("no sandbox {id} on this engine")]
    NotFound { id: String },
    #[error("container {id} is not a sandbox of this host (not created by sbx here, or its sbx labels were changed); refusing to touch it")]
    Foreign { id: String },
    #[error("sandbox {id} is {state}, not running")]
    NotRunning { id: String, state: String },
    /// `start`, `pause`, `resume` asked of a sandbox in a state they do not change.
    #[error("cannot {action} sandbox {id}: it is {state}")]
    WrongState { id: String, state: String, action: &'static str },
    #[error("sandbox {id} exited (code {code}{}) before binding its socket{}", if *code == 137 { ": SIGKILL, usually the OOM killer" } else { "" }, tail_suffix(logs))]
    DiedAtBoot { id: String, code: i32, logs: String },
    #[error("sandbox {id} did not bind {socket} within {waited}{}", tail_suffix(logs))]
    SocketTimeout { id: String, socket: String, waited: String, logs: String },
    #[error("sandbox {id} has no sbx helper at /run/sbx/helper (made by an older sbx, or this sbx was built without a static libc)")]
    HelperMissing { id: String },
    #[error("setup command `{command}` failed (exit {code}){}", if output.is_empty() { String::new() } else { format!(": {output}") })]
    SetupFailed { command: String, code: i32, output: String },
    #[error("the image of sandbox {id} has no shell ({tried})")]
    NoShell { id: String, tried: String },
    #[error("{command} exited with {code}{}", if stderr.is_empty() { String::new() } else { format!(": {stderr}") })]
    CommandFailed { command: String, code: i32, stderr: String },
    #[error("no pool {name} on this host")]
    NoPool { name: String },
    #[error("pool {name} has no ready sandbox (--no-fallback)")]
    PoolEmpty { name: String },
    #[error("gc could not remove {count} item(s): {}", failed.join("; "))]
    GcIncomplete { failed: Vec<String>, count: usize },
    /// Paced removals stopped after the engine failed to answer a batch, and
    /// no batch has an error of its own to report (the ids were warned about).
    #[error("removing sandboxes: {NOT_TRIED}")]
    NotTried,
    /// A line of the in-sandbox helper's output that is not what sbx asked
    /// for; the line comes from the sandbox and is only quoted.
    #[error("reading the helper's {what} output {line:?}: {source}")]
    HelperOutput {
        what: &'static str,
        line: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Why a paced batch was not tried: an earlier one found the engine not answering.
pub const NOT_TRIED: &str = "not tried: the engine did not answer an earlier batch";

fn tail_suffix(logs: &str) -> String {
    if logs.trim().is_empty() {
        String::from("; it logged nothing")
    } else {
        format!("; its last log lines:\n{}", logs.trim_end())
    }
}

impl SandboxError {
    pub fn kind(&self) -> &'static str {
        match self {
            SandboxError::NotFound { .. } => "not_found",
            SandboxError::Foreign { .. } => "foreign_container",
            SandboxError::NotRunning { .. } => "not_running",
            SandboxError::WrongState { .. } => "wrong_state",
            SandboxError::DiedAtBoot { .. } => "died_at_boot",
            SandboxError::SocketTimeout { .. } => "socket_timeout",
            SandboxError::HelperMissing { .. } => "helper_missing",
            SandboxError::SetupFailed { .. } => "setup_failed",
            SandboxError::NoShell { .. } => "no_shell",
            SandboxError::CommandFailed { .. } => "command_failed",
            SandboxError::GcIncomplete { .. } => "gc_incomplete",
            SandboxError::NoPool { .. } => "no_pool",
            SandboxError::PoolEmpty { .. } => "pool_empty",
            // These were `Io` errors once; scripts may match the kind.
            SandboxError::NotTried | SandboxError::HelperOutput { .. } => "io",
        }
    }

    pub fn hint(&self) -> Option<String> {
        Some(match self {
            SandboxError::NotFound { .. } => "`sbx ls` lists the sandboxes on this engine".into(),
            SandboxError::Foreign { .. } => "remove it with docker itself if it is yours".into(),
            SandboxError::NotRunning { id, state } if state == "paused" => format!("`sbx resume {id}` thaws it"),
            SandboxError::NotRunning { id, .. } => {
                format!("`sbx logs {id}` shows why it ended; `sbx start {id}` runs it again, `sbx destroy {id}` removes it")
            }
            SandboxError::WrongState { id, state, action } => match (*action, state.as_str()) {
                (_, "paused") => format!("`sbx resume {id}` thaws it"),
                ("start", "running") => format!("it already runs: `sbx connect {id}` talks to it"),
                ("resume", "running") => format!("only a paused sandbox resumes; `sbx pause {id}` freezes it"),
                (_, "stopped" | "exited" | "created") => format!("`sbx start {id}` runs it again"),
                (_, s) if s.starts_with("a ready member of pool ") => {
                    "claim it with `sbx create --pool NAME` first; `sbx pool rm NAME` removes the pool's unclaimed members".into()
                }
                _ => format!("`sbx inspect {id}` shows its state"),
            },
            SandboxError::DiedAtBoot { .. } => {
                "the sandbox program must start and bind /run/sandbox/sandbox.sock; run it with the same image by hand to see why it exits".into()
            }
            SandboxError::SocketTimeout { .. } => {
                "make the sandbox bind /run/sandbox/sandbox.sock, raise --socket-wait, or pass --socket-wait 0 to skip the wait".into()
            }
            SandboxError::HelperMissing { id } => format!("recreate the sandbox with this sbx (`sbx destroy {id}`, then `sbx create ...`); build sbx where a static libc is installed (Debian: libc6-dev)"),
            SandboxError::SetupFailed { .. } => "the sandbox was removed; fix the command and create again".into(),
            SandboxError::NoShell { id, .. } => format!("run a program directly: `sbx exec -i -t {id} -- PROGRAM`"),
            SandboxError::CommandFailed { .. } | SandboxError::NotTried | SandboxError::HelperOutput { .. } => {
                return None
            }
            SandboxError::NoPool { name } => {
                format!("`sbx pool ls` lists the pools; `sbx pool create {name} --size N --image ...` makes one")
            }
            SandboxError::PoolEmpty { name } => format!(
                "retry shortly (the pool refills itself), raise its size (`sbx pool rm {name}` and create it again), or drop --no-fallback for a cold create"
            ),
            SandboxError::GcIncomplete { .. } => {
                "everything else was removed; fix what is named (a mount inside a socket directory, a daemon error) and run `sbx gc` again".into()
            }
        })
    }
}

/// Persistent sessions: the `/state` volume and the cloned workspace.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("the persistent state of session {session} is in use by running sandbox {id}")]
    VolumeInUse { session: String, id: String },
    #[error("{} is {found}, not a workspace directory; --clone never clones through it", path.display())]
    WorkspaceNotDirectory { path: PathBuf, found: String },
    /// A remote session's volume of sbx's name that sbx cannot prove it made.
    #[error("volume {name} on the engine is not this sbx's ({why}); refusing to use or remove it")]
    ForeignVolume { name: String, why: String },
    /// The file system that bounds a session's /state could not be made,
    /// mounted or grown (`host::persist::image`).
    #[error("session {session}'s bounded /state: {what}: {detail}")]
    Bound { session: String, what: String, detail: String },
}

impl SessionError {
    pub fn kind(&self) -> &'static str {
        match self {
            SessionError::VolumeInUse { .. } => "volume_in_use",
            SessionError::WorkspaceNotDirectory { .. } => "workspace_not_directory",
            SessionError::ForeignVolume { .. } => "foreign_volume",
            SessionError::Bound { .. } => "persist_bound",
        }
    }

    pub fn hint(&self) -> Option<String> {
        Some(match self {
            SessionError::VolumeInUse { id, .. } => {
                format!("one writer at a time: `sbx destroy {id}` first (the volume stays)")
            }
            SessionError::ForeignVolume { name, .. } => format!("if it is yours and nothing uses it, remove it (`docker volume rm {name}`); or choose another --session"),
            SessionError::Bound { .. } => "sbx makes it with mkfs.ext4 (e2fsprogs) and mounts it with mount(8) and a loop device (util-linux), as root; check that they are installed and loop devices work (`losetup -f`)".into(),
            SessionError::WorkspaceNotDirectory { path, .. } => format!("an earlier sandbox of this session left it; remove it (`rm {}` removes a link itself, not its target) or create without --clone", path.display()),
        })
    }
}

/// The verdicts of `sbx audit` and `sbx doctor`.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("audit of {id}: failed rules: {}", failed.join(", "))]
    AuditFailed { id: String, failed: Vec<String> },
    #[error("doctor: failed checks: {}", failed.join(", "))]
    DoctorFailed { failed: Vec<String> },
    /// Audit's status probe (remote engines) gave no answer sbx can trust.
    #[error("audit of {id}: the status probe gave no usable answer: {reason}")]
    AuditProbe { id: String, reason: String },
}

impl CheckError {
    pub fn kind(&self) -> &'static str {
        match self {
            CheckError::AuditFailed { .. } => "audit_failed",
            CheckError::DoctorFailed { .. } => "doctor_failed",
            CheckError::AuditProbe { .. } => "audit_probe",
        }
    }

    pub fn hint(&self) -> Option<String> {
        Some(match self {
            CheckError::AuditFailed { id, .. } => format!("`sbx destroy {id}`; a sandbox made by `sbx create` passes every rule, so look for a changed engine default"),
            CheckError::DoctorFailed { .. } => "each failed check above says how to fix it".into(),
            CheckError::AuditProbe { id, .. } => format!("run `sbx audit {id}` again; if it fails the same way, `sbx doctor` checks the engine"),
        })
    }
}

/// Moving files in and out of a sandbox: `cp`, `backup`, `restore`.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The tar stream on stdin is empty, truncated or not tar; `command`
    /// (`restore` or `cp`) is what read it.
    #[error("{command}: {reason}")]
    NotTar { command: &'static str, reason: String },
    /// What sbx refused while moving files: the sandbox's stream broke the
    /// format or a limit (it is hostile: issue 9), or a host path would be
    /// read or written through a link. `context` says what sbx was doing.
    #[error("{context}: {reason}")]
    Refused { context: String, reason: String },
}

impl TransferError {
    pub fn kind(&self) -> &'static str {
        match self {
            // `Io` errors once; scripts may match the kind.
            TransferError::NotTar { .. } | TransferError::Refused { .. } => "io",
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            TransferError::NotTar { .. } | TransferError::Refused { .. } => None,
        }
    }
}

/// This machine: the files and directories sbx keeps, the helper it mounts.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The helper sbx would mount is not the one it embeds, or others could change it.
    #[error("the helper at {path} cannot be trusted: {reason}")]
    HelperUntrusted { path: PathBuf, reason: String },
    /// A system call on this machine failed; `context` says what sbx was doing.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// No state directory candidate could be made and written (see
    /// `host::state::StateChoice`). The text and kind are those of the
    /// `Io` error this used to be.
    #[error("no usable state directory (tried: {tried}); set SBX_DATA_DIR: no state directory")]
    NoStateDir { tried: String },
    /// The ownership key file holds something other than 32 bytes.
    #[error("{} is not a 32-byte key: invalid data", path.display())]
    BadKey { path: PathBuf },
    /// JSON sbx writes (a record, `--json` output, the probe's report) or
    /// reads (the probe's report) that does not encode or parse.
    #[error("{context}: {source}")]
    Json {
        context: String,
        #[source]
        source: serde_json::Error,
    },
    /// sbx's seccomp profile file is not what sbx just wrote there.
    #[error("verifying {}: the profile changed after it was written (is the data dir shared?)", path.display())]
    SeccompChanged { path: PathBuf },
    /// What a remote engine cannot do yet without a path of this machine in
    /// its argv; refused before any docker call.
    #[error("remote engines: not yet supported: {what}")]
    RemoteUnsupported { what: String },
    /// Every uid of sbx's range is held or refused (`host::uids`).
    #[error("no free uid left in sbx's range (table {})", table.display())]
    UidsExhausted { table: PathBuf },
    /// `sbx man DIR` could not make DIR or write a page there.
    #[error("cannot write man pages into {}: {source}", dir.display())]
    ManDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl HostError {
    pub fn kind(&self) -> &'static str {
        match self {
            HostError::HelperUntrusted { .. } => "helper_untrusted",
            // These four were `Io` errors once; scripts may match the kind.
            HostError::Io { .. }
            | HostError::NoStateDir { .. }
            | HostError::BadKey { .. }
            | HostError::Json { .. }
            | HostError::SeccompChanged { .. }
            | HostError::ManDir { .. } => "io",
            HostError::RemoteUnsupported { .. } => "remote_unsupported",
            HostError::UidsExhausted { .. } => "uids_exhausted",
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            // A helper volume on a remote engine: the reason says what to do.
            HostError::HelperUntrusted { path, .. } if path.to_string_lossy().starts_with("volume ") => None,
            HostError::HelperUntrusted { path, .. } => Some(format!(
                "make {} and its parents owned by you or root and writable by nobody else, then retry (sbx reinstalls a helper whose content differs)",
                path.display()
            )),
            HostError::ManDir { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => Some(
                "run it with sudo for a system directory, or give one of yours (`sbx man ~/.local/share/man/man1`)".into(),
            ),
            HostError::ManDir { .. } => {
                Some("give a directory (sbx creates it and its parents), e.g. `sbx man ~/.local/share/man/man1`".into())
            }
            HostError::Io { .. }
            | HostError::NoStateDir { .. }
            | HostError::BadKey { .. }
            | HostError::Json { .. }
            | HostError::SeccompChanged { .. } => None,
            HostError::UidsExhausted { .. } => {
                Some("destroy sandboxes you no longer need, then `sbx gc` (it frees the uids of sandboxes gone)".into())
            }
            HostError::RemoteUnsupported { .. } => Some(
                "run sbx on the engine's machine (or point it at a local engine: unset DOCKER_HOST, `--context default`); remote support is in progress (issue 16)".into(),
            ),
        }
    }
}

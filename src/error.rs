//! Every way an sbx command can fail, and the one place that maps a failure
//! to its exit code, its machine-readable kind and the hint that says what
//! to do next.
//!
//! Exit codes (scripts depend on them):
//!
//! | code | meaning                                                        |
//! |------|----------------------------------------------------------------|
//! | 0    | success                                                        |
//! | 1    | the operation failed (docker error, boot crash, timeout, ...)  |
//! | 2    | invalid input, caught before any docker call                   |
//! | 130  | interrupted by SIGINT (after cleaning up)                      |
//! | 143  | terminated by SIGTERM (after cleaning up)                      |

use std::path::PathBuf;

pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_INVALID: u8 = 2;

pub use crate::docker::DockerError;
pub use crate::model::invalid::Invalid;

/// Failures sbx says in its own words: the daemon's known answers and the
/// in-sandbox helper's exit codes (issue 10 item 5). Ids are the ones the
/// user gave once `commands::named` has run.
#[derive(Debug, thiserror::Error)]
pub enum Explained {
    #[error("sandbox {id} is not running (it exited or was stopped)")]
    Stopped { id: String },
    #[error("the Docker engine refused --cpus: it allows from 0.01 to {max} CPUs")]
    CpuRange { max: String },
    #[error("sandbox {id} has no background process {handle}")]
    NoProcess { id: String, handle: String },
    #[error("background process {handle} in sandbox {id} has already exited")]
    ProcessExited { id: String, handle: String },
    #[error("sandbox {id} has no {path}")]
    NoSuchPath { id: String, path: String },
    #[error("cannot write {path} in sandbox {id}: the sandbox's root file system is read-only")]
    ReadOnly { id: String, path: String },
    #[error("the sandbox's user may not access {path} in sandbox {id} (permission denied)")]
    Denied { id: String, path: String },
    #[error("no space left in sandbox {id} while writing {path}")]
    NoSpace { id: String, path: String },
    #[error("nothing listened on port {port} in sandbox {id} within {waited}")]
    PortTimeout { id: String, port: u16, waited: String },
    #[error("sandbox {id} cannot run {command:?}: {}", if *not_found { "no such file or command" } else { "it is not an executable file" })]
    /// `background`: from `exec -d`, which exits 1 (its command never had an exit code).
    CannotRun { id: String, command: String, not_found: bool, background: bool },
    /// Anything else the helper reports; `detail` is its own text, made
    /// printable: it comes from the sandbox (issue 9) and is labelled so.
    #[error("sbx's helper in sandbox {id} failed while {doing} (exit {code}){}", if detail.is_empty() { String::new() } else { format!("; the sandbox said: {detail}") })]
    Helper { id: String, doing: String, code: i32, detail: String },
}

impl Explained {
    /// The same failure naming `id` instead of the container id `target`.
    pub fn named(self, target: &str, id: &str) -> Self {
        let n = |s: String| if s == target { id.to_string() } else { s };
        use Explained::*;
        match self {
            Stopped { id } => Stopped { id: n(id) },
            NoProcess { id, handle } => NoProcess { id: n(id), handle },
            ProcessExited { id, handle } => ProcessExited { id: n(id), handle },
            NoSuchPath { id, path } => NoSuchPath { id: n(id), path },
            ReadOnly { id, path } => ReadOnly { id: n(id), path },
            Denied { id, path } => Denied { id: n(id), path },
            NoSpace { id, path } => NoSpace { id: n(id), path },
            PortTimeout { id, port, waited } => PortTimeout { id: n(id), port, waited },
            CannotRun { id, command, not_found, background } => CannotRun { id: n(id), command, not_found, background },
            Helper { id, doing, code, detail } => Helper { id: n(id), doing, code, detail },
            e @ CpuRange { .. } => e,
        }
    }

    fn exit_code(&self) -> u8 {
        match self {
            // The shell's convention, which scripts expect of `sbx exec`.
            Explained::CannotRun { background: true, .. } => EXIT_FAILED,
            Explained::CannotRun { not_found: true, .. } => 127,
            Explained::CannotRun { .. } => 126,
            _ => EXIT_FAILED,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Explained::Stopped { .. } => "not_running",
            Explained::CpuRange { .. } => "engine_cpu_range",
            Explained::NoProcess { .. } => "no_such_process",
            Explained::ProcessExited { .. } => "process_exited",
            Explained::NoSuchPath { .. } => "no_such_path",
            Explained::ReadOnly { .. } => "read_only",
            Explained::Denied { .. } => "permission_denied",
            Explained::NoSpace { .. } => "no_space",
            Explained::PortTimeout { .. } => "port_timeout",
            Explained::CannotRun { not_found: true, .. } => "command_not_found",
            Explained::CannotRun { .. } => "command_not_executable",
            Explained::Helper { .. } => "helper_failed",
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            Explained::Stopped { id } => {
                format!("`sbx logs {id}` shows why it ended; `sbx destroy {id}` and create a new sandbox")
            }
            Explained::CpuRange { max } => format!("pass --cpus between 0.01 and {max}"),
            Explained::NoProcess { id, .. } => format!("`sbx ps {id}` lists the background processes"),
            Explained::ProcessExited { id, handle } => {
                format!("`sbx ps {id}` shows its exit code, `sbx logs {id} {handle}` its output")
            }
            Explained::NoSuchPath { id, path } if path == "/state/workspace" => format!(
                "backup saves /state/workspace, which this sandbox never made: create it with `create --clone URL`, or copy a directory there with `sbx cp DIR {id}:/state/workspace`"
            ),
            Explained::NoSuchPath { id, .. } => format!("check the path with `sbx exec {id} -- ls -la DIR`"),
            Explained::ReadOnly { .. } => {
                "write under /tmp or /state, or into a directory mounted with `create --rw HOST:DIR`".into()
            }
            Explained::Denied { .. } => {
                "the sandbox runs as a non-root user: write under /tmp or /state, or create it with --user".into()
            }
            Explained::NoSpace { .. } => "/tmp and /state are small tmpfs mounts; use --state-dir or --persist for more room".into(),
            Explained::PortTimeout { id, .. } => format!(
                "start the server first (`sbx exec -d {id} -- SERVER`), check it with `sbx ps {id}` and `sbx logs {id} HANDLE`, or raise --timeout"
            ),
            Explained::CannotRun { id, not_found: true, .. } => {
                format!("give the program's absolute path; the image has only what it was built with (`sbx exec {id} -- /bin/ls /bin` if it has ls)")
            }
            Explained::CannotRun { .. } => "the path must name an executable file the sandbox's user may run".into(),
            Explained::Helper { .. } => return None,
        })
    }
}

/// Failures of the host side of the socket channel.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("no usable socket root: {tried}")]
    NoRoot { tried: String },
    #[error("socket root {path}: {reason}")]
    BadRoot { path: PathBuf, reason: String },
    #[error("socket path {path} is {len} bytes; Linux allows at most 107")]
    PathTooLong { path: PathBuf, len: usize },
    #[error("socket {path} is hostile: {reason}")]
    Hostile { path: PathBuf, reason: String },
    #[error("the sandbox's socket {path} did not accept the connection within {waited} (its backlog is full?)")]
    NotAccepting { path: PathBuf, waited: String },
    /// Direct channel: the sandbox bound its socket, but sbx's user may not
    /// write it (issue 10 item 7), so `create` must not call it ready.
    #[error("socket {path} is bound, but you (uid {uid}) may not connect to it: {reason}")]
    NotYours { path: PathBuf, uid: u32, reason: String },
    /// The relayed channel (`docker exec ... helper connect`) ended badly.
    #[error("the relayed channel to {id} failed: {detail}")]
    Relay { id: String, detail: String },
    #[error("socket {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error(transparent)]
    Docker(DockerError),
    #[error(transparent)]
    Explained(#[from] Explained),
    #[error(transparent)]
    Socket(#[from] SocketError),
    #[error("image {image} is not on this engine")]
    ImageMissing { image: String },
    #[error("route network(s) missing: {}", networks.join(", "))]
    NetworkMissing { networks: Vec<String> },
    #[error("routes reach beyond their targets, refused under strict egress: {}", gaps.iter().map(|g| format!("{} ({})", g.network, g.property)).collect::<Vec<_>>().join(", "))]
    NotContained { gaps: Vec<crate::checks::boundary::Gap> },
    #[error("with --private-routes each route's host must name a running service container; not running: {}", hosts.join(", "))]
    ServiceMissing { hosts: Vec<String> },
    #[error("no sandbox {id} on this engine")]
    NotFound { id: String },
    #[error("container {id} is not a sandbox of this host (not created by sbx here, or its sbx labels were changed); refusing to touch it")]
    Foreign { id: String },
    #[error("sandbox {id} has no route {kind:?} (its routes: {})", if routes.is_empty() { "none".to_string() } else { routes.join(", ") })]
    UnknownRoute { id: String, kind: String, routes: Vec<String> },
    #[error("sandbox {id} is {state}, not running")]
    NotRunning { id: String, state: String },
    #[error("sandbox {id} exited (code {code}{}) before binding its socket{}", if *code == 137 { ": SIGKILL, usually the OOM killer" } else { "" }, tail_suffix(logs))]
    DiedAtBoot { id: String, code: i32, logs: String },
    #[error("sandbox {id} did not bind {socket} within {waited}{}", tail_suffix(logs))]
    SocketTimeout { id: String, socket: String, waited: String, logs: String },
    #[error("audit of {id}: failed rules: {}", failed.join(", "))]
    AuditFailed { id: String, failed: Vec<String> },
    #[error("sandbox {id} has no sbx helper at /run/sbx/helper (made by an older sbx, or this sbx was built without a static libc)")]
    HelperMissing { id: String },
    /// The image moved a mount sbx made (issue 9 finding 1: a symlink in the
    /// image makes runc mount elsewhere, where the sandbox can replace it).
    #[error("image {image} redirects {path} (a symlink in the image?): {found}; sbx refuses it")]
    Redirected { image: String, path: String, found: String },
    /// The helper sbx would mount is not the one it embeds, or others could change it.
    #[error("the helper at {path} cannot be trusted: {reason}")]
    HelperUntrusted { path: PathBuf, reason: String },
    #[error("gc could not remove {count} item(s): {}", failed.join("; "))]
    GcIncomplete { failed: Vec<String>, count: usize },
    #[error("the image of sandbox {id} has no shell ({tried})")]
    NoShell { id: String, tried: String },
    #[error("{command} exited with {code}{}", if stderr.is_empty() { String::new() } else { format!(": {stderr}") })]
    CommandFailed { command: String, code: i32, stderr: String },
    #[error("the persistent state of session {session} is in use by running sandbox {id}")]
    VolumeInUse { session: String, id: String },
    #[error("{} is {found}, not a workspace directory; --clone never clones through it", path.display())]
    WorkspaceNotDirectory { path: PathBuf, found: String },
    #[error("setup command `{command}` failed (exit {code}){}", if output.is_empty() { String::new() } else { format!(": {output}") })]
    SetupFailed { command: String, code: i32, output: String },
    #[error("doctor: failed checks: {}", failed.join(", "))]
    DoctorFailed { failed: Vec<String> },
    #[error("interrupted by signal {signal}; what was made has been removed")]
    Interrupted { signal: i32 },
    #[error("image {image} carries the label {label:?} in sbx's namespace; a sandbox would inherit it as part of sbx's record")]
    ImageHasSbxLabel { image: String, label: String },
    #[error("route service {host:?} {why}; sbx never attaches a sandbox to another sandbox's route")]
    ServiceIsSandbox { host: String, why: String },
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
    /// JSON sbx writes (a record) or reads (the probe's report) that does not encode or parse.
    #[error("{context}: {source}")]
    Json {
        context: String,
        #[source]
        source: serde_json::Error,
    },
    /// sbx's seccomp profile file is not what sbx just wrote there.
    #[error("verifying {}: the profile changed after it was written (is the data dir shared?)", path.display())]
    SeccompChanged { path: PathBuf },
}

/// Text that may carry what a sandbox or its image wrote (log tails, a
/// command's stderr, file names), made safe to print as part of sbx's own
/// message: control characters other than newline and tab (ESC, CR, BEL,
/// C1) and bidi overrides are shown escaped, so nothing reaches the
/// terminal as a control sequence, and each line after the first starts
/// with "  | ", so no line from the sandbox can pass for an `sbx:` line.
pub fn for_terminal(s: &str) -> String {
    inert_chars(s.trim_end_matches('\n')).replace('\n', "\n  | ")
}

/// `s` with every control character but newline and tab, and every bidi
/// override, written as an escape: what a sandbox wrote, safe to show.
pub fn inert_chars(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            c if c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') => {
                out.extend(c.escape_default())
            }
            c => out.push(c),
        }
    }
    out
}

/// Every docker failure becomes an sbx error here: the daemon's known
/// answers get sbx's words and a hint (issue 10 item 5), the rest stays a
/// `DockerError` that names what sbx was doing.
impl From<DockerError> for Error {
    fn from(e: DockerError) -> Self {
        use crate::docker::explain::{classify, Known};
        if let DockerError::Status { stderr, .. } = &e {
            match classify(stderr) {
                Some(Known::NotRunning { container }) => return Explained::Stopped { id: container }.into(),
                Some(Known::NoSuchContainer { container }) => return Error::NotFound { id: container },
                Some(Known::CpuRange { max }) => return Explained::CpuRange { max }.into(),
                None => {}
            }
        }
        Error::Docker(e)
    }
}

fn tail_suffix(logs: &str) -> String {
    if logs.trim().is_empty() {
        String::from("; it logged nothing")
    } else {
        format!("; its last log lines:\n{}", logs.trim_end())
    }
}

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Invalid(_) => EXIT_INVALID,
            Error::Explained(e) => e.exit_code(),
            Error::Interrupted { signal } => 128u8.saturating_add(*signal as u8),
            Error::Docker(_)
            | Error::Socket(_)
            | Error::ImageMissing { .. }
            | Error::NetworkMissing { .. }
            | Error::NotContained { .. }
            | Error::ServiceMissing { .. }
            | Error::NotFound { .. }
            | Error::Foreign { .. }
            | Error::UnknownRoute { .. }
            | Error::NotRunning { .. }
            | Error::DiedAtBoot { .. }
            | Error::SocketTimeout { .. }
            | Error::DoctorFailed { .. }
            | Error::AuditFailed { .. }
            | Error::HelperMissing { .. }
            | Error::Redirected { .. }
            | Error::HelperUntrusted { .. }
            | Error::GcIncomplete { .. }
            | Error::NoShell { .. }
            | Error::CommandFailed { .. }
            | Error::VolumeInUse { .. }
            | Error::WorkspaceNotDirectory { .. }
            | Error::SetupFailed { .. }
            | Error::ImageHasSbxLabel { .. }
            | Error::ServiceIsSandbox { .. }
            | Error::Io { .. }
            | Error::NoStateDir { .. }
            | Error::BadKey { .. }
            | Error::Json { .. }
            | Error::SeccompChanged { .. } => EXIT_FAILED,
        }
    }

    /// A stable, machine-readable name for `--json` error objects.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Invalid(_) => "invalid_input",
            Error::Explained(e) => e.kind(),
            Error::Docker(DockerError::Spawn { .. }) => "docker_missing",
            Error::Docker(DockerError::Status { .. }) => "docker_failed",
            Error::Docker(DockerError::Parse { .. }) => "docker_output",
            Error::Docker(DockerError::Timeout { .. }) => "engine_timeout",
            Error::Socket(SocketError::Hostile { .. }) => "hostile_socket",
            Error::Socket(SocketError::PathTooLong { .. }) => "socket_path_too_long",
            Error::Socket(_) => "socket",
            Error::ImageMissing { .. } => "image_missing",
            Error::NetworkMissing { .. } => "network_missing",
            Error::NotContained { .. } => "not_contained",
            Error::ServiceMissing { .. } => "service_missing",
            Error::NotFound { .. } => "not_found",
            Error::Foreign { .. } => "foreign_container",
            Error::UnknownRoute { .. } => "unknown_route",
            Error::NotRunning { .. } => "not_running",
            Error::DiedAtBoot { .. } => "died_at_boot",
            Error::SocketTimeout { .. } => "socket_timeout",
            Error::Interrupted { .. } => "interrupted",
            Error::DoctorFailed { .. } => "doctor_failed",
            Error::AuditFailed { .. } => "audit_failed",
            Error::HelperMissing { .. } => "helper_missing",
            Error::Redirected { .. } => "image_redirects",
            Error::HelperUntrusted { .. } => "helper_untrusted",
            Error::GcIncomplete { .. } => "gc_incomplete",
            Error::NoShell { .. } => "no_shell",
            Error::CommandFailed { .. } => "command_failed",
            Error::VolumeInUse { .. } => "volume_in_use",
            Error::WorkspaceNotDirectory { .. } => "workspace_not_directory",
            Error::SetupFailed { .. } => "setup_failed",
            Error::ImageHasSbxLabel { .. } => "image_has_sbx_label",
            Error::ServiceIsSandbox { .. } => "service_is_sandbox",
            Error::Io { .. } => "io",
            // Once `Io` errors: scripts may match the kind.
            Error::NoStateDir { .. } | Error::BadKey { .. } | Error::Json { .. } | Error::SeccompChanged { .. } => "io",
        }
    }

    /// What the operator should do about it.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            Error::Invalid(i) => return i.hint.clone(),
            Error::Explained(e) => return e.hint(),
            Error::Docker(DockerError::Spawn { .. }) => {
                "install the docker CLI (or set SBX_DOCKER to its path) and check that `docker version` answers".into()
            }
            Error::Docker(DockerError::Status { stderr, .. }) if is_daemon_down(stderr) => {
                "start the docker daemon, or point DOCKER_HOST at one that runs; `docker version` must answer".into()
            }
            Error::Docker(DockerError::Timeout { .. }) => {
                "check the engine with `docker info` (engine 20.10 can deadlock in its network controller when many containers go at once; only restarting dockerd clears that), then retry; a slow but healthy engine: raise SBX_DOCKER_TIMEOUT (e.g. 2m)".into()
            }
            Error::Docker(_) => return None,
            Error::Socket(SocketError::NoRoot { .. }) => {
                "pass --socket-dir DIR (or SBX_SOCKET_DIR) naming a writable directory".into()
            }
            Error::Socket(SocketError::BadRoot { .. }) => {
                "pass --socket-dir DIR (or SBX_SOCKET_DIR) naming a directory you own".into()
            }
            Error::Socket(SocketError::PathTooLong { .. }) => {
                "use a shorter --socket-dir (or SBX_SOCKET_DIR), e.g. /run/sbx".into()
            }
            Error::Socket(SocketError::Hostile { .. }) => {
                "the sandbox must bind a unix socket itself at /run/sandbox/sandbox.sock; sbx never follows links there".into()
            }
            Error::Socket(SocketError::Io { .. }) => return None,
            Error::Socket(SocketError::NotYours { .. }) => {
                "create it with the relayed channel (`--channel exec`, the default when sbx is not root), or `--user` your own uid".into()
            }
            Error::Socket(SocketError::Relay { id, .. }) => {
                format!("`sbx inspect {id}` shows whether it runs; `sbx logs {id}` what its program said")
            }
            // An image id names content on one engine only: it cannot be pulled.
            Error::ImageMissing { image } if image.starts_with("sha256:") => {
                "an image id names an image on one engine only: build or load it here (`docker load -i IMAGE.tar`, `docker import`), then pass the id that engine reports".into()
            }
            Error::Socket(SocketError::NotAccepting { .. }) => {
                "the sandbox program is not accepting connections on its socket; see `sbx logs ID`, or retry with a longer `--timeout`".into()
            }
            Error::ImageMissing { image } => {
                format!("load it first (`docker pull {image}` or `docker load`), then retry")
            }
            Error::NetworkMissing { networks } => {
                format!("{}; or create the sandbox with --private-routes", missing_network_fix(networks))
            }
            Error::NotContained { gaps } => {
                let mut fixes: Vec<String> = gaps.iter().map(|g| format!("{}: {}", g.network, g.fix)).collect();
                fixes.dedup();
                format!("{}; or drop --strict-egress / SBX_STRICT_EGRESS to accept tier 1", fixes.join("; "))
            }
            Error::ServiceMissing { .. } => {
                "start the service as a container named after the route's host (`docker run -d --name HOST ...`), or create without --private-routes".into()
            }
            Error::NotFound { .. } => "`sbx ls` lists the sandboxes on this engine".into(),
            Error::Foreign { .. } => "remove it with docker itself if it is yours".into(),
            Error::UnknownRoute { id, .. } => format!("`sbx inspect {id}` shows its routes; `sbx revoke {id} all` destroys it"),
            Error::NotRunning { id, .. } => format!("`sbx destroy {id}` and create a new sandbox"),
            Error::DiedAtBoot { .. } => {
                "the sandbox program must start and bind /run/sandbox/sandbox.sock; run it with the same image by hand to see why it exits".into()
            }
            Error::SocketTimeout { .. } => {
                "make the sandbox bind /run/sandbox/sandbox.sock, raise --socket-wait, or pass --socket-wait 0 to skip the wait".into()
            }
            Error::Interrupted { .. } => return None,
            Error::DoctorFailed { .. } => "each failed check above says how to fix it".into(),
            Error::HelperMissing { id } => format!("recreate the sandbox with this sbx (`sbx destroy {id}`, then `sbx create ...`); build sbx where a static libc is installed (Debian: libc6-dev)"),
            Error::Redirected { .. } => {
                "use an image whose /run is a plain directory (no symlinks at /run, /run/sbx or /run/sandbox, and no VOLUME or --rw/--ro path that is a symlink to /run); nothing was left behind".into()
            }
            Error::HelperUntrusted { path, .. } => format!(
                "make {} and its parents owned by you or root and writable by nobody else, then retry (sbx reinstalls a helper whose content differs)",
                path.display()
            ),
            Error::GcIncomplete { .. } => {
                "everything else was removed; fix what is named (a mount inside a socket directory, a daemon error) and run `sbx gc` again".into()
            }
            Error::NoShell { id, .. } => format!("run a program directly: `sbx exec -i -t {id} -- PROGRAM`"),
            Error::CommandFailed { .. } => return None,
            Error::VolumeInUse { id, .. } => format!("one writer at a time: `sbx destroy {id}` first (the volume stays)"),
            Error::WorkspaceNotDirectory { path, .. } => format!("an earlier sandbox of this session left it; remove it (`rm {}` removes a link itself, not its target) or create without --clone", path.display()),
            Error::SetupFailed { .. } => "the sandbox was removed; fix the command and create again".into(),
            Error::AuditFailed { id, .. } => format!("`sbx destroy {id}`; a sandbox made by `sbx create` passes every rule, so look for a changed engine default"),
            Error::ImageHasSbxLabel { label, .. } => format!(
                "rebuild the image without the {label:?} label (labels starting with `sbx.` are sbx's own), then pass its new digest"
            ),
            Error::ServiceIsSandbox { .. } => {
                "route to a service container that is not a sandbox; to let sandboxes talk, use a shared route network you create".into()
            }
            Error::Io { .. } => return None,
            Error::NoStateDir { .. } | Error::BadKey { .. } | Error::Json { .. } | Error::SeccompChanged { .. } => {
                return None
            }
        })
    }
}

/// How to make missing route networks; `create`'s hint and `doctor
/// --route` say the same (issue 10, consistency).
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

fn is_daemon_down(stderr: &str) -> bool {
    stderr.contains("Cannot connect to the Docker daemon") || stderr.contains("Is the docker daemon running")
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_text_is_escaped_and_indented_for_the_terminal() {
        let forged = "\x1b]0;pwned\x07\r\x1b[2Ksbx: ok\nsbx: hint: fine\u{9b}31m\u{202e}x\tand a tab\n";
        let shown = for_terminal(forged);
        assert!(!shown.chars().any(|c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{202e}'), "{shown:?}");
        assert_eq!(shown.lines().nth(1), Some(r"  | sbx: hint: fine\u{9b}31m\u{202e}x	and a tab"));
        assert!(shown.starts_with(r"\u{1b}]0;pwned\u{7}\r\u{1b}[2Ksbx: ok"), "{shown}");
        assert_eq!(for_terminal("plain text"), "plain text");
    }
}

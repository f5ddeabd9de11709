//! Failures sbx says in its own words.

use super::EXIT_FAILED;

/// Failures sbx says in its own words: the daemon's known answers and the
/// in-sandbox helper's exit codes. Ids are the sandbox ids the user gave
/// (a workbench `Target`'s), never a container id.
#[derive(Debug, thiserror::Error)]
pub enum Explained {
    #[error("sandbox {id} is not running (it exited or was stopped)")]
    Stopped { id: String },
    /// `docker exec` on a frozen container ("is paused, unpause the container before exec").
    #[error("sandbox {id} is paused")]
    Paused { id: String },
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
    #[error("{path} already exists in sandbox {id}")]
    Exists { id: String, path: String },
    #[error("{path} in sandbox {id} is not a directory, or a part of it is not")]
    NotADirectory { id: String, path: String },
    #[error("cannot create {path} in sandbox {id}: its parent directory does not exist")]
    NoParent { id: String, path: String },
    #[error("sandbox {id} reached the inotify watch limit while watching {path}")]
    WatchLimit { id: String, path: String },
    /// A helper call that sent or took nothing within its deadline: a process in
    /// the sandbox (same user) can stop it with SIGSTOP.
    #[error("sbx's helper in sandbox {id} did not answer for {waited} while {doing}; sbx stopped waiting")]
    HelperTimeout { id: String, doing: String, waited: String },
    #[error("nothing listened on port {port} in sandbox {id} within {waited}")]
    PortTimeout { id: String, port: u16, waited: String },
    #[error("sandbox {id} cannot run {command:?}: {}", if *not_found { "no such file or command" } else { "it is not an executable file" })]
    /// `background`: from `exec -d`, which exits 1 (its command never had an exit code).
    CannotRun { id: String, command: String, not_found: bool, background: bool },
    /// Anything else the helper reports; `detail` is its own text, made
    /// printable: it comes from the sandbox and is labelled so.
    #[error("sbx's helper in sandbox {id} failed while {doing} (exit {code}){}", if detail.is_empty() { String::new() } else { format!("; the sandbox said: {detail}") })]
    Helper { id: String, doing: String, code: i32, detail: String },
}

impl Explained {
    pub(super) fn exit_code(&self) -> u8 {
        match self {
            // The shell's convention, which scripts expect of `sbx exec`.
            Explained::CannotRun { background: true, .. } => EXIT_FAILED,
            Explained::CannotRun { not_found: true, .. } => 127,
            Explained::CannotRun { .. } => 126,
            _ => EXIT_FAILED,
        }
    }

    pub(super) fn kind(&self) -> &'static str {
        match self {
            Explained::Stopped { .. } => "not_running",
            Explained::Paused { .. } => "paused",
            Explained::CpuRange { .. } => "engine_cpu_range",
            Explained::NoProcess { .. } => "no_such_process",
            Explained::ProcessExited { .. } => "process_exited",
            Explained::NoSuchPath { .. } => "no_such_path",
            Explained::ReadOnly { .. } => "read_only",
            Explained::Denied { .. } => "permission_denied",
            Explained::NoSpace { .. } => "no_space",
            Explained::Exists { .. } => "exists",
            Explained::NotADirectory { .. } => "not_a_directory",
            Explained::NoParent { .. } => "no_parent",
            Explained::WatchLimit { .. } => "watch_limit",
            Explained::PortTimeout { .. } => "port_timeout",
            Explained::HelperTimeout { .. } => "helper_timeout",
            Explained::CannotRun { not_found: true, .. } => "command_not_found",
            Explained::CannotRun { .. } => "command_not_executable",
            Explained::Helper { .. } => "helper_failed",
        }
    }

    pub(super) fn hint(&self) -> Option<String> {
        Some(match self {
            Explained::Stopped { id } => {
                format!("`sbx logs {id}` shows why it ended; `sbx start {id}` runs it again, `sbx destroy {id}` removes it")
            }
            Explained::Paused { id } => format!("`sbx resume {id}` thaws it, then try again"),
            Explained::CpuRange { max } => format!("pass --cpus between 0.01 and {max}"),
            Explained::NoProcess { id, .. } => format!("`sbx ps {id}` lists the background processes"),
            Explained::ProcessExited { id, handle } => {
                format!("`sbx ps {id}` shows its exit code, `sbx logs {id} {handle}` its output")
            }
            Explained::NoSuchPath { id, path } if path == "/state/workspace" => format!(
                "nothing made /state/workspace in this sandbox yet: `sbx mkdir -p {id} /state/workspace` makes it, `sbx cp DIR {id}:/state/workspace` copies a directory there, `create --clone URL` clones into it"
            ),
            Explained::NoSuchPath { id, .. } => format!("check the path with `sbx files {id} DIR`"),
            Explained::Exists { .. } => "pass -p to accept a directory that is already there".into(),
            Explained::NotADirectory { id, .. } => format!("`sbx files {id} DIR` shows what is there"),
            Explained::NoParent { .. } => "pass -p to create the missing parent directories too".into(),
            Explained::WatchLimit { .. } => "the host's fs.inotify.max_user_watches bounds the watches of a user (all sandboxes of that uid share it): raise it with sysctl on the host, or watch a smaller tree".into(),
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
            Explained::HelperTimeout { id, .. } => format!(
                "a process in the sandbox may have stopped it (it runs as the sandbox's user); SBX_DOCKER_TIMEOUT sets the wait; `sbx destroy {id}` if the sandbox is not to be trusted"
            ),
            Explained::Helper { .. } => return None,
        })
    }
}

//! Every way an sbx command can fail, one enum per concern, folded into
//! [`Error`] with `#[from]`; the one place that maps a failure to its exit
//! code, its machine-readable kind and the hint that says what to do next.
//!
//! Exit codes (scripts depend on them):
//!
//! | code | meaning                                                        |
//! |------|----------------------------------------------------------------|
//! | 0    | success                                                        |
//! | 1    | the operation failed (docker error, boot crash, timeout, ...)  |
//! | 2    | invalid input, caught before any docker call (or an image      |
//! |      | whose VOLUME or WORKDIR sbx refuses, before anything is made)  |
//! | 126  | `exec`: the command is not executable                          |
//! | 127  | `exec`: no such command                                        |
//! | 130  | interrupted by SIGINT (after cleaning up)                      |
//! | 143  | terminated by SIGTERM (after cleaning up)                      |

mod check;
mod egress;
mod explained;
mod host;
mod image;
mod route;
mod runtime;
mod sandbox;
mod session;
mod snapshot;
mod socket;
mod transfer;

pub use crate::docker::DockerError;
pub use crate::model::invalid::Invalid;
pub use check::CheckError;
pub use egress::EgressError;
pub use explained::Explained;
pub use host::HostError;
pub use image::ImageError;
pub use route::{missing_network_fix, RouteError};
pub use runtime::RuntimeError;
pub use sandbox::{SandboxError, NOT_TRIED};
pub use session::SessionError;
pub use snapshot::SnapshotError;
pub use socket::SocketError;
pub use transfer::TransferError;

pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_INVALID: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Refused before any docker call.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// A docker call sbx has no words of its own for.
    #[error(transparent)]
    Docker(DockerError),
    /// The daemon's known answers and the helper's exit codes, in sbx's words.
    #[error(transparent)]
    Explained(#[from] Explained),
    /// The host side of the socket channel.
    #[error(transparent)]
    Socket(#[from] SocketError),
    /// An image sbx will not run.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// Routes and their networks.
    #[error(transparent)]
    Route(#[from] RouteError),
    /// A sandbox's egress gate.
    #[error(transparent)]
    Egress(#[from] EgressError),
    /// The OCI runtime `--runtime` names.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A sandbox's lifecycle: lookup, boot, setup, teardown.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// Persistent sessions (`--persist`, `--clone`).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// Files moved in and out of a sandbox (`cp`, `backup`, `restore`).
    #[error(transparent)]
    Transfer(#[from] TransferError),
    /// Checkpoints, hibernation, fork.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// `audit` and `doctor` verdicts.
    #[error(transparent)]
    Check(#[from] CheckError),
    /// This machine: files sbx reads and writes, the helper it mounts.
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("interrupted by signal {signal}; what was made has been removed")]
    Interrupted { signal: i32 },
}

/// The state a stream cut by its sandbox's end reports (`not_running`).
pub const ENDED: &str = "stopped or removed";

/// Every docker failure becomes an sbx error here: the daemon's known
/// answers get sbx's words and a hint, the rest stays a
/// `DockerError` that names what sbx was doing.
impl From<DockerError> for Error {
    fn from(e: DockerError) -> Self {
        use crate::docker::explain::{classify, Known};
        if let DockerError::Ended { container } = e {
            return SandboxError::NotRunning { id: container, state: ENDED.into() }.into();
        }
        if let DockerError::Status { stderr, .. } = &e {
            match classify(stderr) {
                Some(Known::NotRunning { container }) => return Explained::Stopped { id: container }.into(),
                Some(Known::Paused { container }) => return Explained::Paused { id: container }.into(),
                Some(Known::NoSuchContainer { container }) => return SandboxError::NotFound { id: container }.into(),
                Some(Known::CpuRange { max }) => return Explained::CpuRange { max }.into(),
                Some(Known::UnknownRuntime { name }) => {
                    return RuntimeError::Missing { name, have: "(see `docker info`)".into() }.into()
                }
                None => {}
            }
        }
        Error::Docker(e)
    }
}

impl Error {
    /// An I/O failure on this machine; `context` says what sbx was doing.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        HostError::Io { context: context.into(), source }.into()
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Invalid(_) | Error::Image(ImageError::ConfigRefused { .. } | ImageError::UserInSbxRange { .. }) => {
                EXIT_INVALID
            }
            Error::Explained(e) => e.exit_code(),
            Error::Interrupted { signal } => 128u8.saturating_add(*signal as u8),
            Error::Docker(_)
            | Error::Socket(_)
            | Error::Image(_)
            | Error::Route(_)
            | Error::Egress(_)
            | Error::Runtime(_)
            | Error::Sandbox(_)
            | Error::Session(_)
            | Error::Transfer(_)
            | Error::Snapshot(_)
            | Error::Check(_)
            | Error::Host(_) => EXIT_FAILED,
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
            Error::Docker(DockerError::Ended { .. }) => "not_running",
            Error::Socket(e) => e.kind(),
            Error::Image(e) => e.kind(),
            Error::Route(e) => e.kind(),
            Error::Egress(e) => e.kind(),
            Error::Runtime(e) => e.kind(),
            Error::Sandbox(e) => e.kind(),
            Error::Session(e) => e.kind(),
            Error::Transfer(e) => e.kind(),
            Error::Snapshot(e) => e.kind(),
            Error::Check(e) => e.kind(),
            Error::Host(e) => e.kind(),
            Error::Interrupted { .. } => "interrupted",
        }
    }

    /// What the operator should do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Invalid(i) => i.hint.clone(),
            Error::Explained(e) => e.hint(),
            Error::Docker(DockerError::Spawn { .. }) => Some(
                "install the docker CLI (or set SBX_DOCKER to its path) and check that `docker version` answers".into(),
            ),
            Error::Docker(DockerError::Status { stderr, .. }) if crate::docker::explain::daemon_down(stderr) => Some(
                "start the docker daemon, or point DOCKER_HOST at one that runs; `docker version` must answer".into(),
            ),
            Error::Docker(DockerError::Timeout { .. }) => Some(
                "check the engine with `docker info` (engine 20.10 can deadlock in its network controller when many containers go at once; only restarting dockerd clears that), then retry; a slow but healthy engine: raise SBX_DOCKER_TIMEOUT (e.g. 2m)".into(),
            ),
            Error::Docker(_) => None,
            Error::Socket(e) => e.hint(),
            Error::Image(e) => e.hint(),
            Error::Route(e) => e.hint(),
            Error::Egress(e) => e.hint(),
            Error::Runtime(e) => e.hint(),
            Error::Sandbox(e) => e.hint(),
            Error::Session(e) => e.hint(),
            Error::Transfer(e) => e.hint(),
            Error::Snapshot(e) => e.hint(),
            Error::Check(e) => e.hint(),
            Error::Host(e) => e.hint(),
            Error::Interrupted { .. } => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod former_io;

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;
    use crate::docker::explain;

    #[test]
    fn known_answers_become_typed_errors_and_the_rest_names_the_step() {
        let args: Vec<OsString> = ["run", "-d", "--cpus", "64", "img"].iter().map(OsString::from).collect();
        let out = crate::docker::Output::fail(125, explain::tests::CPUS);
        let e = Error::from(crate::docker::status_error(&args, &out));
        assert_eq!(e.kind(), "engine_cpu_range");
        assert!(e.hint().unwrap().contains("0.01 and 2.00"), "{:?}", e.hint());
        let e = Error::from(crate::docker::status_error(
            &args,
            &crate::docker::Output::fail(1, explain::tests::NOT_RUNNING),
        ));
        assert_eq!(e.kind(), "not_running");
        // A runtime that was registered when create remembered it, gone since.
        let out =
            crate::docker::Output::fail(125, "docker: Error response from daemon: Unknown runtime specified runsc.\n");
        let e = Error::from(crate::docker::status_error(&args, &out));
        assert_eq!(e.kind(), "runtime_missing", "{e}");
        assert!(e.to_string().contains("no runtime \"runsc\""), "{e}");
        let out = crate::docker::Output::fail(
            125,
            "docker: Error response from daemon: something new.\nSee 'docker run --help'.",
        );
        let e = Error::from(crate::docker::status_error(&args, &out));
        assert!(matches!(e, Error::Docker(DockerError::Status { .. })));
        assert_eq!(e.to_string(), "docker failed while starting the sandbox (`docker run`) (exit 125): something new.");
    }
}

//! How a docker invocation fails: it could not start, it exited non-zero,
//! its output made no sense, or the engine did not answer in time.

/// A docker invocation that could not run or that failed.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    #[error("could not run `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// `command` says what sbx was doing (`explain::doing`), never the argv.
    #[error("docker failed while {command} (exit {status}): {}", crate::docker::explain::first_line(stderr))]
    Status { command: String, status: i32, stderr: String },
    #[error("could not parse the output of `{command}`: {reason}")]
    Parse { command: String, reason: String },
    /// The engine took longer than the call's deadline; sbx killed the CLI.
    #[error("the Docker engine did not answer `{command}` within {}", humantime::format_duration(*after))]
    Timeout { command: String, after: std::time::Duration },
    /// A `docker exec` stream cut because its container stopped or is gone
    /// (see `real::watch`): sbx says so as the sandbox's end.
    #[error("container {container} stopped or was removed while a `docker exec` in it ran")]
    Ended { container: String },
}

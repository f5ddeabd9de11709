//! SandboxError: its failures, each with its `--json` kind and its hint.
//! Every one exits 1 (see the table in the parent module).

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
                (_, "hibernated") => format!("`sbx resume {id}` restores it"),
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

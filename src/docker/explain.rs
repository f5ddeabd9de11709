//! The one place a failed docker call becomes sbx's words.
//!
//! Known daemon answers (container not running, no such container, the
//! engine's CPU range, ...) become typed errors with a hint (see
//! `Error::from(DockerError)`); anything else says what sbx was doing and
//! the first line of the daemon's answer. The full argv and the whole answer
//! are logged at debug level only (`-v`), never printed in an error.

use std::ffi::OsString;

/// A daemon answer sbx knows how to say in its own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Known {
    /// `Container <id> is not running` (exec, cp, logs on an exited sandbox).
    NotRunning { container: String },
    /// `Container <id> is paused, unpause the container before exec`.
    Paused { container: String },
    /// `No such container: <id>`.
    NoSuchContainer { container: String },
    /// "Range of CPUs is from 0.01 to 2.00, as there are only 2 CPUs available".
    CpuRange { max: String },
    /// "Unknown runtime specified NAME" (`docker run --runtime`): the
    /// engine lost a runtime create remembered it had.
    UnknownRuntime { name: String },
}

/// What `stderr` (a docker CLI's error output) says, if sbx knows it.
pub fn classify(stderr: &str) -> Option<Known> {
    for line in stderr.lines() {
        let l = strip_prefixes(line.trim());
        if let Some(rest) = l.strip_prefix("Container ") {
            if let Some(c) = rest.strip_suffix(" is not running") {
                return Some(Known::NotRunning { container: c.trim().to_string() });
            }
            if let Some((c, _)) = rest.split_once(" is paused, unpause the container") {
                return Some(Known::Paused { container: c.trim().to_string() });
            }
        }
        if let Some(c) = l.strip_prefix("No such container: ") {
            return Some(Known::NoSuchContainer { container: c.trim().to_string() });
        }
        if let Some(name) = l.strip_prefix("Unknown runtime specified ") {
            return Some(Known::UnknownRuntime { name: name.trim().trim_end_matches('.').to_string() });
        }
        if let Some(rest) = l.strip_prefix("Range of CPUs is from ") {
            let max = rest.split(" to ").nth(1).and_then(|t| t.split([',', ' ']).next()).unwrap_or("").to_string();
            return Some(Known::CpuRange { max });
        }
    }
    None
}

/// The CLI could not reach a daemon at all (none runs, or DOCKER_HOST
/// points nowhere): `Error::hint` tells the operator to start one.
pub fn daemon_down(stderr: &str) -> bool {
    stderr.contains("Cannot connect to the Docker daemon") || stderr.contains("Is the docker daemon running")
}

fn strip_prefixes(mut l: &str) -> &str {
    for p in ["docker: ", "Error response from daemon: ", "Error: "] {
        l = l.strip_prefix(p).unwrap_or(l);
    }
    l
}

/// The first meaningful line of docker's answer, without the CLI's
/// prefixes and trailers, control characters removed, at most 300 chars.
pub fn first_line(stderr: &str) -> String {
    let line = stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("See 'docker") && !l.starts_with("exit status "))
        .unwrap_or("");
    let line = strip_prefixes(line);
    if line.is_empty() {
        return "no message".to_string();
    }
    printable(line, 300)
}

/// `text` with control characters (escape sequences, CR, ...) replaced and
/// cut at `max` characters: for text that came from the engine or a sandbox.
pub fn printable(text: &str, max: usize) -> String {
    let mut s: String = text.chars().map(|c| if c.is_control() { '?' } else { c }).take(max).collect();
    if text.chars().count() > max {
        s.push_str("...");
    }
    s
}

/// What sbx was doing when it ran `docker ARGS`, for error messages.
pub fn doing(args: &[OsString]) -> String {
    let words: Vec<String> =
        args.iter().map(|a| a.to_string_lossy().into_owned()).take_while(|a| !a.starts_with('-')).take(2).collect();
    let w = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
    // Not every container sbx runs is the sandbox: its `--name` says which.
    let name = args.windows(2).find(|p| p[0] == "--name").map(|p| p[1].to_string_lossy().into_owned());
    let (running, creating) = match name.as_deref().unwrap_or("") {
        n if n.ends_with("-gate") => ("starting the egress gate", "creating the egress gate's container"),
        n if n.starts_with("sbx-fill-") => ("filling a volume", "creating a volume filler"),
        n if n.starts_with("sbx-audit-") => ("running audit's probe", "creating audit's probe"),
        _ => ("starting the sandbox", "creating the sandbox's container"),
    };
    let (what, cmd) = match (w(0), w(1)) {
        ("run", _) => (running, "docker run"),
        ("create", _) | ("container", "create") => (creating, "docker create"),
        ("start", _) | ("container", "start") => ("starting the sandbox", "docker start"),
        ("rm", _) | ("container", "rm") => ("removing a container", "docker rm"),
        ("exec", _) => ("running a command in the sandbox", "docker exec"),
        ("logs", _) => ("reading the sandbox's output", "docker logs"),
        ("stats", _) => ("reading the sandbox's figures", "docker stats"),
        ("events", _) => ("following the engine's events", "docker events"),
        ("ps", _) | ("container", "ls") => ("listing containers", "docker ps"),
        ("inspect", _) | ("container", "inspect") => ("looking up a container", "docker inspect"),
        ("image", "inspect") => ("looking up the image", "docker image inspect"),
        ("import", _) | ("image", "import") => ("importing an image", "docker import"),
        ("network", "create") => ("creating a route network", "docker network create"),
        ("network", "connect") => ("attaching a route network", "docker network connect"),
        ("network", "disconnect") => ("cutting a route", "docker network disconnect"),
        ("network", "rm") => ("removing a route network", "docker network rm"),
        ("network", _) => ("looking up route networks", "docker network inspect"),
        ("volume", "create") => ("creating the session volume", "docker volume create"),
        ("volume", "rm") => ("removing a session volume", "docker volume rm"),
        ("volume", _) => ("looking up session volumes", "docker volume"),
        ("version", _) | ("info", _) => ("asking the engine about itself", "docker info"),
        _ => ("talking to the Docker engine", ""),
    };
    if cmd.is_empty() {
        what.to_string()
    } else {
        format!("{what} (`{cmd}`)")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Captured from engine 20.10.
    pub(crate) const CPUS: &str = "docker: Error response from daemon: Range of CPUs is from 0.01 to 2.00, as there are only 2 CPUs available.\nSee 'docker run --help'.";
    pub(crate) const NOT_RUNNING: &str = "Error response from daemon: Container 53597ea0a2bf3e44b0ca572e43ff1138d92d9bba134d4caecd2c4cadb6a79deb is not running";
    pub(crate) const PAUSED: &str =
        "Error response from daemon: Container sbx-0123456789ab is paused, unpause the container before exec";

    /// Captured from CLI 28.2.2 with DOCKER_HOST naming no socket (exit 1).
    const DAEMON_DOWN: &str =
        "Cannot connect to the Docker daemon at unix:///nonexistent.sock. Is the docker daemon running?";

    #[test]
    fn a_missing_daemon_is_told_from_a_daemon_error() {
        assert!(daemon_down(DAEMON_DOWN));
        assert!(!daemon_down(CPUS) && !daemon_down(NOT_RUNNING));
    }

    #[test]
    fn known_daemon_answers() {
        assert_eq!(classify(CPUS), Some(Known::CpuRange { max: "2.00".into() }));
        assert_eq!(
            classify(NOT_RUNNING),
            Some(Known::NotRunning {
                container: "53597ea0a2bf3e44b0ca572e43ff1138d92d9bba134d4caecd2c4cadb6a79deb".into()
            })
        );
        assert_eq!(
            classify("Error response from daemon: No such container: sbx-0123"),
            Some(Known::NoSuchContainer { container: "sbx-0123".into() })
        );
        assert_eq!(classify(PAUSED), Some(Known::Paused { container: "sbx-0123456789ab".into() }));
        assert_eq!(classify("Error response from daemon: network x not found"), None);
    }

    #[test]
    fn first_line_is_the_daemons_words_only() {
        assert_eq!(first_line(CPUS), "Range of CPUs is from 0.01 to 2.00, as there are only 2 CPUs available.");
        assert_eq!(first_line("\n\x1b[31mboom\x1b[0m\r\nmore"), "?[31mboom?[0m");
        assert_eq!(first_line(""), "no message");
        assert_eq!(printable(&"x".repeat(400), 300).len(), 303);
    }

    #[test]
    fn doing_names_the_step_not_the_argv() {
        let a = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(doing(&a(&["run", "-d", "--cpus", "64", "img"])), "starting the sandbox (`docker run`)");
        assert_eq!(doing(&a(&["network", "rm", "x"])), "removing a route network (`docker network rm`)");
        assert_eq!(doing(&a(&["frobnicate"])), "talking to the Docker engine");
        let gate = a(&["create", "--name", "sbx-0123456789ab-gate", "img"]);
        assert_eq!(doing(&gate), "creating the egress gate's container (`docker create`)");
        let gate = a(&["run", "-d", "--name", "sbx-0123456789ab-gate", "img"]);
        assert_eq!(doing(&gate), "starting the egress gate (`docker run`)");
        assert_eq!(
            doing(&a(&["create", "--name", "sbx-fill-1f", "img"])),
            "creating a volume filler (`docker create`)"
        );
        assert_eq!(
            doing(&a(&["run", "--rm", "--name", "sbx-audit-1f", "img"])),
            "running audit's probe (`docker run`)"
        );
    }
}

//! The validated, typed form of what the operator asked for. Everything here
//! is checked before any docker call, so invalid input exits 2 with nothing
//! created.

pub mod egress;
mod events;
mod image;
mod mount;
mod persist;
mod remote;
mod request;
mod route;
pub mod seccomp;

use std::time::Duration;

pub use events::{parse_event_kind, parse_time, EventQuery};
pub use image::{ImageRef, PullPolicy};
pub use mount::{check_not_sbx_dirs, docker_socket_paths, MountSpec};
pub use persist::{persist_bound, PersistSize, DEFAULT_PERSIST_BYTES, UNBOUNDED};
pub use remote::refuse_host_paths;
pub use request::{parse_runtime, CreateRequest};
pub use route::{is_loopback, network_for, validate_kind, Route, EGRESS_KIND};

use crate::model::ids::Reserved;
use crate::model::invalid::Invalid;

/// Default pids limit: enough for a language runtime and a build, low enough
/// to stop a fork bomb long before the host notices.
pub const DEFAULT_PIDS: u32 = 512;
/// Default memory limit (MiB): CIS 5.10 wants every container limited, and
/// a runaway agent should meet the OOM killer before the host does.
pub const DEFAULT_MEMORY_MIB: u64 = 4096;
/// Default CPU limit: one CPU, which every host has (docker refuses more than
/// the host's count). CIS 5.12 / docker-bench 1.6 warn on an unlimited CPU.
pub const DEFAULT_CPUS: &str = "1";
pub const DEFAULT_SOCKET_WAIT: Duration = Duration::from_secs(90);
/// The conventional `nobody`: what a sandbox label that names no user (one
/// made before sbx chose uids) is read as.
pub const NOBODY: u32 = 65534;
/// The kernel's PID_MAX_LIMIT on 64-bit: runc fails to write a larger
/// pids.max at start, so larger values are refused here.
pub const MAX_PIDS: u32 = 4 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct SandboxSpec {
    pub image: ImageRef,
    pub session: Option<String>,
    pub routes: Vec<Route>,
    pub mounts: Vec<MountSpec>,
    pub state_dir: Option<MountSpec>,
    pub memory_mib: Option<u64>,
    pub cpus: Option<String>,
    pub pids: u32,
    pub env: Vec<(String, String)>,
    pub user: Option<UserSpec>,
    pub socket_wait: Duration,
    pub strict_egress: bool,
    pub labels: Vec<(String, String)>,
    pub ttl: Option<Duration>,
    /// Give each route its own network with only its service on it.
    pub private_routes: bool,
    /// Keep /state in the session's named volume across sandboxes.
    pub persist: bool,
    /// `--persist-size` as given (see `persist_bound` for what a create gets).
    pub persist_size: Option<PersistSize>,
    /// Clone into /state/workspace on the host before the sandbox starts.
    pub clone: Option<CloneSpec>,
    /// Commands run, in order, in the ready sandbox; argv each.
    pub setup: Vec<Vec<String>>,
    pub command: Vec<String>,
    /// The operator's own seccomp profile instead of sbx's (`--seccomp-profile`).
    pub seccomp_profile: Option<seccomp::CustomProfile>,
    /// How sbx reaches the sandbox's socket (`--channel`; see `channel`).
    pub channel: crate::model::channel::Choice,
    /// Named outside hosts through an egress gate (`--allow`, `--egress`).
    pub egress: Option<egress::EgressSpec>,
    /// The engine's OCI runtime (`--runtime`, default runc).
    pub runtime: String,
    /// Whether a pinned image the engine lacks is pulled (`--pull`).
    pub pull: PullPolicy,
    /// The warm pool this sandbox is a member of (`sbx.pool`): set only by
    /// the pool's filler, never from a flag.
    pub pool: Option<String>,
    /// The main process is sbx's helper idling (`helper idle`), never the
    /// image's ENTRYPOINT/CMD: for images that bind no socket and may not
    /// keep running (E2B templates, `sbx serve`). Never from a flag.
    pub idle: bool,
    /// A sandbox that can be checkpointed: its create request as checked
    /// (JSON), which `fork` makes children from (`sbx.remake`).
    pub remake: Option<String>,
    /// A fork's child: started from this checkpoint instead of booted.
    /// Never from a flag.
    pub restore: Option<Restore>,
}

/// The checkpoint a fork's child starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    pub sandbox: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneSpec {
    pub url: String,
    pub reference: Option<String>,
}

impl CloneSpec {
    /// `URL[#REF]`. The URL reaches `git clone` after `--`, and git's
    /// command-running transports (`ext::`, `fd::`) are refused here and
    /// disabled by GIT_ALLOW_PROTOCOL when git runs.
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        let bad = |r: &str| {
            Invalid::new("--clone", s, r)
                .hint("write --clone URL[#REF], e.g. https://host/repo.git#v1.2 or file:///srv/repo")
        };
        let (url, reference) = match s.rsplit_once('#') {
            Some((u, r)) => (u, Some(r)),
            None => (s, None),
        };
        if url.is_empty() || url.starts_with('-') || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("the URL is empty, starts with '-', or contains spaces or control characters"));
        }
        let lower = url.to_ascii_lowercase();
        if lower.starts_with("ext::") || lower.starts_with("fd::") {
            return Err(bad("git's ext:: and fd:: transports run commands on the host"));
        }
        if let Some(r) = reference {
            let ok = !r.is_empty()
                && !r.starts_with('-')
                && !r.contains("..")
                && r.bytes().all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b));
            if !ok {
                return Err(bad("the REF must be a branch, tag or commit: letters, digits, '.', '_', '/', '-'"));
            }
        }
        Ok(CloneSpec { url: url.to_string(), reference: reference.map(str::to_string) })
    }
}

/// A `--setup` command line split into argv like a shell would split words,
/// without expanding anything: no shell ever sees it.
pub fn parse_setup(s: &str) -> Result<Vec<String>, Invalid> {
    match shlex::split(s) {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(Invalid::new("--setup", s, "empty, or unbalanced quotes")
            .hint("e.g. --setup 'make deps' --setup \"python -m pip install -r req.txt\"")),
    }
}

/// What to do when a user is refused as reserved (see `model::ids`).
pub const RESERVED_HINT: &str =
    "pass --user UID:GID with ids that are neither yours, nor your groups', nor the docker \
    socket's, or no --user (sbx gives the sandbox a uid of its own and prints it); to let it write a --rw mount, \
    give that uid access (setfacl -m u:UID:rwX DIR)";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserSpec {
    pub uid: u32,
    pub gid: u32,
}

impl UserSpec {
    /// `UID[:GID]`, numeric only: a name would be resolved inside an image
    /// sbx does not trust. A missing GID defaults to the UID, never to 0.
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        let bad = || Invalid::new("--user", s, "it must be a numeric UID or UID:GID").hint("e.g. --user 1000:1000");
        let (u, g) = match s.split_once(':') {
            Some((u, g)) => (u, Some(g)),
            None => (s, None),
        };
        let num = |x: &str| -> Result<u32, Invalid> {
            if x.is_empty() || !x.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            // (uid_t)-1 means "no change" to setuid(2): runc fails on it at start.
            x.parse().ok().filter(|n| *n != u32::MAX).ok_or_else(bad)
        };
        let uid = num(u)?;
        let gid = match g {
            Some(g) => num(g)?,
            None => uid,
        };
        Ok(UserSpec { uid, gid })
    }

    /// `--user` (of `create`, or `exec -u`): exit 2 when it names a reserved
    /// id. Root is not reserved: `--user 0` is asked for by name (and warned of).
    pub fn not_reserved(self, reserved: &Reserved) -> Result<Self, Invalid> {
        match reserved.refuses(self.uid, self.gid) {
            None => Ok(self),
            Some(why) => Err(Invalid::new(
                "--user",
                format!("{}:{}", self.uid, self.gid),
                format!("{why}: a sandbox running as the user who runs sbx, or with that user's or the docker socket's group, owns their files in every mount and shares their kernel limits"),
            )
            .hint(RESERVED_HINT)),
        }
    }

    /// `--user` (or `exec -u`, as `what`): exit 2 when an id is in sbx's own
    /// range (`model::ids`): every id there is one sandbox's, whose kernel
    /// limits a second process of that uid would share.
    pub fn outside_sbx_range(self, what: &'static str) -> Result<Self, Invalid> {
        match [self.uid, self.gid].into_iter().find(|i| crate::model::ids::in_sbx_range(*i)) {
            None => Ok(self),
            Some(id) => Err(Invalid::new(
                what,
                format!("{}:{}", self.uid, self.gid),
                format!(
                    "{id} is in sbx's own range ({}), where every id is one sandbox's and its kernel limits with it",
                    crate::model::ids::sbx_range_text()
                ),
            )
            .hint("pass ids outside that range, or no --user: sbx gives each sandbox a uid of its own")),
        }
    }
}

/// Session keys group sandboxes of one agent session; they go into labels.
pub fn parse_session(s: &str) -> Result<String, Invalid> {
    let ok = !s.is_empty()
        && s.len() <= 128
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok && s.eq_ignore_ascii_case(crate::model::record::PROBE_SESSION) {
        Err(Invalid::new("session key", s, "it is sbx doctor's own (its probe sandbox's session)"))
    } else if ok {
        Ok(s.to_string())
    } else {
        Err(Invalid::new(
            "session key",
            s,
            "it must be 1-128 of A-Z, a-z, 0-9, '.', '_', '-', starting with a letter or digit",
        ))
    }
}

/// `K=V` for the sandbox environment. `SBX_*` is sbx's own namespace (the
/// tier and the socket path are set there and must not be overridable).
pub fn parse_env(s: &str) -> Result<(String, String), Invalid> {
    let (k, v) = s.split_once('=').ok_or_else(|| {
        Invalid::new("--env", s, "it must be K=V")
            .hint("sbx never passes host variables through by name; write the value")
    })?;
    let key_ok = k.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !key_ok {
        return Err(Invalid::new(
            "--env",
            s,
            format!("the name {k:?} must be letters, digits and '_', not starting with a digit"),
        ));
    }
    if k.starts_with("SBX_") {
        return Err(Invalid::new("--env", s, format!("{k} is in sbx's reserved SBX_ namespace")));
    }
    if v.contains('\0') {
        return Err(Invalid::new("--env", s.escape_debug().to_string(), format!("the value of {k} holds a NUL byte")));
    }
    Ok((k.to_string(), v.to_string()))
}

/// `K=V` labels added to the container. `sbx.*` is sbx's own record.
pub fn parse_label(s: &str) -> Result<(String, String), Invalid> {
    let (k, v) = s.split_once('=').ok_or_else(|| Invalid::new("--label", s, "it must be K=V"))?;
    let key_ok = !k.is_empty()
        && k.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b));
    if !key_ok {
        return Err(Invalid::new("--label", s, "the key must be letters, digits, '.', '_', '-', '/'"));
    }
    if crate::model::record::is_reserved_label(k) {
        return Err(Invalid::new("--label", s, "keys `sbx`, `sbx.*` and `sbx-probe.*` are sbx's own"));
    }
    if v.contains(['\n', '\0']) {
        return Err(Invalid::new("--label", s, "the value contains a newline or NUL"));
    }
    Ok((k.to_string(), v.to_string()))
}

/// Durations like `90s`, `30m`, `2h`, `1m30s`; a bare `0` means zero.
pub fn parse_duration(what: &'static str, s: &str) -> Result<Duration, Invalid> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(s).map_err(|e| {
        // humantime's own words ("expected number at 0") say nothing to an operator.
        use humantime::DurationError as E;
        let reason = match e {
            E::UnknownUnit { unit, .. } if unit.is_empty() => "a number lacks its unit (ms, s, m, h, d)".to_string(),
            E::UnknownUnit { unit, .. } => format!("{unit:?} is not a unit (ms, s, m, h, d)"),
            E::NumberOverflow => "it is too long".to_string(),
            E::Empty => "it is empty".to_string(),
            _ => "it is not a duration".to_string(),
        };
        Invalid::new(what, s, reason).hint("write a duration such as 500ms, 90s, 30m or 2h")
    })
}

/// A time to live: at least one second, at most a year.
pub fn parse_ttl(s: &str) -> Result<Duration, Invalid> {
    let d = parse_duration("--ttl", s)?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(366 * 86400) {
        return Err(Invalid::new("--ttl", s, "a TTL must be between 1s and 366 days"));
    }
    Ok(d)
}

/// `--cpus` as docker accepts it: docker turns it into
/// whole nano-CPUs ("value is too precise" past 9 decimals), the kernel's
/// smallest CFS quota is 0.01 CPU, and the engine refuses more CPUs than the
/// host has.
pub fn parse_cpus(s: &str) -> Result<String, Invalid> {
    parse_cpus_on(s, host_cpus())
}

/// The CPUs the engine counts (it runs on this host: see the README):
/// dockerd checks `--cpus` against Go's NumCPU, the affinity mask. Not
/// std's `available_parallelism`, which also reads the cgroup files (and
/// mountinfo) for a quota the engine does not apply: that was most of a
/// create's spec validation.
fn host_cpus() -> u64 {
    use nix::sched::{sched_getaffinity, CpuSet};
    let set = sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap_or_default();
    match (0..CpuSet::count()).filter(|&c| set.is_set(c).unwrap_or(false)).count() {
        0 => 1024,
        n => n as u64,
    }
}

fn parse_cpus_on(s: &str, host: u64) -> Result<String, Invalid> {
    let bad = |r: String| Invalid::new("--cpus", s, r).hint(format!("e.g. --cpus 1.5 (0.01 to {host} on this host)"));
    let Ok(v) = s.parse::<f64>() else {
        return Err(bad("it must be a number of CPUs, e.g. 1.5".into()));
    };
    if !s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(bad("it must be a plain decimal number, e.g. 1.5".into()));
    }
    let decimals = s.split_once('.').map_or(0, |(_, f)| f.trim_end_matches('0').len());
    if decimals > 9 {
        return Err(bad("docker takes at most 9 decimals (nano-CPUs)".into()));
    }
    if v < 0.01 || v > host as f64 {
        return Err(bad(format!("it must be between 0.01 and the host's {host} CPUs")));
    }
    Ok(s.to_string())
}

/// Sandbox ids are container names sbx generates: `sbx-` and 12 hex digits
/// (see [`SandboxId`](crate::model::names::SandboxId), which clap parses).
pub fn parse_id(s: &str) -> Result<String, Invalid> {
    s.parse::<crate::model::names::SandboxId>().map(String::from)
}

pub fn new_id() -> String {
    use rand::Rng;
    let n: u64 = rand::thread_rng().gen::<u64>() & 0xffff_ffff_ffff;
    format!("sbx-{n:012x}")
}

#[cfg(test)]
mod tests;

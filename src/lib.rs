//! sbx: disposable, hardened Docker sandboxes for AI-agent sessions.
//!
//! Flow: `run` parses the command line (`cli`, clap) and builds one
//! `commands::Context` (the driver on the real docker, the `output::Printer`,
//! the environment); `commands` (one file per subcommand) validates input
//! into a `spec`, calls the driver (`sandbox::Driver`), which runs
//! docker through `docker::DockerExec` (real CLI, or the recording fake in
//! tests), and prints through the printer. The container's labels are the
//! only state (`model::record`).
//!
//! Where things go, bottom layer first; a module imports only the ones
//! above it in this list (a unit test, `layering.rs`, checks it):
//!
//! | module      | owns                                                                   | a new ... goes here        |
//! |-------------|------------------------------------------------------------------------|----------------------------|
//! | `model`     | ids, label keys, the record, tokens, gaps, fixed paths; imports nothing | fact about a sandbox       |
//! | `spec`      | validated input: image, routes, mounts, the create request            | flag that needs checking   |
//! | `docker`    | the `Invocation` seam, the real CLI, the fake, every argv builder and every parser of docker output | docker call |
//! | `error`     | one error enum per concern, exit codes, kinds and hints               | failure mode               |
//! | `output`    | the printer: data on stdout, messages on stderr, `--json`             | message shape              |
//! | `host`      | this machine: state dir, socket dirs, persist, helper, channel, interrupts | host-side resource     |
//! | `gate`      | the programs of sbx's own image: the egress gate (`sbx __gate`), a private route's forwarder (`sbx __forward`) | gate behaviour     |
//! | `workbench` | working inside a sandbox: exec, ps, files and the transfer format, stats, ports | in-sandbox operation |
//! | `sandbox`   | the lifecycle, one file per operation (create, destroy, revoke, gc, ttl, volumes) | lifecycle step   |
//! | `checks`    | what sbx measures for the operator: audit rules, doctor, the probe    | check                      |
//! | `cli`       | clap's view of the command line (parsing only)                        | flag                       |
//! | `serve`     | `sbx serve`: the E2B API (control plane and envd) over the driver     | HTTP route                 |
//! | `commands`  | one file per subcommand, handed a `Context` by `dispatch`             | subcommand                 |

pub mod checks;
pub mod cli;
pub mod commands;
pub mod docker;
pub mod error;
pub mod gate;
pub mod host;
pub mod model;
pub mod output;
pub mod sandbox;
pub mod serve;
pub mod spec;
pub mod workbench;

#[cfg(test)]
mod layering;

use std::ffi::OsString;
use std::sync::Arc;

use clap::Parser;

use crate::error::{Error, EXIT_INVALID, EXIT_OK};
use crate::output::Printer;

/// What sbx reads from its environment, gathered once at the edge.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub strict_egress: bool,
    pub docker: Option<OsString>,
    pub docker_host: Option<String>,
    /// `SBX_CONTEXT`: `--context`'s default; `DOCKER_CONTEXT` and
    /// `DOCKER_CONFIG`, read to tell where the engine is (`host::engine`).
    pub context: Option<String>,
    pub docker_context: Option<String>,
    pub docker_config: Option<std::path::PathBuf>,
    pub xdg_runtime_dir: Option<std::path::PathBuf>,
    pub xdg_state_home: Option<std::path::PathBuf>,
    pub home: Option<std::path::PathBuf>,
    /// `SBX_DOCKER_TIMEOUT` as given; checked by `run` (see `docker::Deadlines`).
    pub docker_timeout: Option<String>,
    /// `SBX_SOCKET_DIR`, `SBX_DATA_DIR`, `SBX_SECCOMP_PROFILE`: the options'
    /// defaults (an option given on the command line wins; empty is unset).
    pub socket_dir: Option<std::path::PathBuf>,
    pub data_dir: Option<std::path::PathBuf>,
    pub seccomp_profile: Option<String>,
    /// `SBX_RUNTIME`: create's `--runtime` default.
    pub runtime: Option<String>,
    /// `SBX_PULL`: create's `--pull` default (checked by create).
    pub pull: Option<String>,
    /// `SBX_PULL_TIMEOUT`: how long a pull may take (see `docker::Deadlines`).
    pub pull_timeout: Option<String>,
}

impl Env {
    pub fn from_process() -> Self {
        let strict =
            std::env::var("SBX_STRICT_EGRESS").map(|v| matches!(v.as_str(), "1" | "true" | "yes")).unwrap_or(false);
        Env {
            strict_egress: strict,
            docker: std::env::var_os("SBX_DOCKER").filter(|v| !v.is_empty()),
            docker_host: std::env::var("DOCKER_HOST").ok(),
            context: std::env::var("SBX_CONTEXT").ok().filter(|v| !v.is_empty()),
            docker_context: std::env::var("DOCKER_CONTEXT").ok().filter(|v| !v.is_empty()),
            docker_config: std::env::var_os("DOCKER_CONFIG").filter(|v| !v.is_empty()).map(Into::into),
            xdg_runtime_dir: std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()).map(Into::into),
            xdg_state_home: std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()).map(Into::into),
            home: std::env::var_os("HOME").filter(|v| !v.is_empty()).map(Into::into),
            docker_timeout: std::env::var("SBX_DOCKER_TIMEOUT").ok().filter(|v| !v.is_empty()),
            socket_dir: std::env::var_os("SBX_SOCKET_DIR").filter(|v| !v.is_empty()).map(Into::into),
            data_dir: std::env::var_os("SBX_DATA_DIR").filter(|v| !v.is_empty()).map(Into::into),
            seccomp_profile: std::env::var("SBX_SECCOMP_PROFILE").ok().filter(|v| !v.is_empty()),
            runtime: std::env::var("SBX_RUNTIME").ok().filter(|v| !v.is_empty()),
            pull: std::env::var("SBX_PULL").ok().filter(|v| !v.is_empty()),
            pull_timeout: std::env::var("SBX_PULL_TIMEOUT").ok().filter(|v| !v.is_empty()),
        }
    }
}

/// Parse `args`, run the command, report any error on stderr; returns the
/// process exit code.
pub fn run(args: Vec<OsString>, env: Env) -> u8 {
    let wants_json = args.iter().skip(1).take_while(|a| *a != "--").any(|a| a == "--json");
    let cli = match cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return refuse(e, &args, &Printer::stdio(wants_json)),
    };
    let logging = init_tracing(cli.verbose);
    // Log lines would interleave with a progress line rewritten in place.
    let out = Printer::stdio(cli.json);
    let out = if logging { out.with_progress(false) } else { out };
    if let Err(e) = docker::Deadlines::from_env(env.docker_timeout.as_deref())
        .and_then(|d| d.with_pull(env.pull_timeout.as_deref()))
    {
        let e = Error::from(e);
        out.error(&e);
        return e.exit_code();
    }
    let dirs = Dirs::new(cli.socket_dir, cli.data_dir, &env).with_context(cli.context, &env);
    // `--context` with DOCKER_HOST, or a name docker would refuse: before any docker call.
    if let Err(e) = dirs.engine_choice(&env).check() {
        let e = Error::from(e);
        out.error(&e);
        return e.exit_code();
    }
    let driver = real_driver(&env, &dirs);
    let ctx = commands::Context {
        driver,
        out,
        env,
        dirs,
        catch_signals: host::interrupt::install,
        watch_signals: host::interrupt::Watch::install,
    };
    let code = commands::run(cli.command, &ctx);
    log_own_cpu();
    code
}

/// Answer a command line clap did not accept: help and version are
/// printed (exit 0), anything else is invalid input (exit 2).
fn refuse(e: clap::Error, args: &[OsString], out: &Printer) -> u8 {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return EXIT_OK;
    }
    if e.kind() == ErrorKind::UnknownArgument {
        if let Some(inv) = cli::missing_dashes(args) {
            let e = Error::from(inv);
            out.error(&e);
            return e.exit_code();
        }
    }
    if out.json() {
        let text = e.to_string();
        let mut lines = text.lines();
        let mut detail = lines.next().unwrap_or_default().trim_start_matches("error: ").to_string();
        // "the following required arguments were not provided:" names them on the lines below.
        if detail.ends_with(':') {
            let names: Vec<&str> = lines.take_while(|l| l.starts_with(' ')).map(str::trim).collect();
            detail = format!("{} {}", detail, names.join(", "));
        }
        // clap's first line says it all (prefixed with its kind it read
        // "unrecognized subcommand: unrecognized subcommand 'x'").
        out.json_error("invalid_input", &detail, Some(&clap_hint(&e)));
    } else {
        let _ = e.print();
    }
    EXIT_INVALID
}

/// The hint of a refused command line under --json: what clap says after
/// its first line (the possible values, a similar name, the usage), which
/// the text form shows too, and where the full help is.
fn clap_hint(e: &clap::Error) -> String {
    let text = e.to_string();
    let mut parts: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| l.trim().trim_start_matches('[').trim_end_matches(']'))
        .filter(|l| !l.is_empty() && !l.starts_with("For more information") && !l.starts_with('<'))
        .collect();
    parts.push("see `sbx --help`");
    parts.join("; ")
}

#[cfg(test)]
mod refuse_tests {
    use clap::Parser;

    #[test]
    fn json_hints_keep_what_clap_would_show() {
        let hint = |args: &[&str]| super::clap_hint(&super::cli::Cli::try_parse_from(args).unwrap_err());
        assert_eq!(hint(&["sbx", "completions", "powershell"]), "possible values: bash, zsh, fish; see `sbx --help`");
        assert_eq!(hint(&["sbx", "revoke", "sbx-0123456789ab"]), "Usage: sbx revoke <ID> <KIND>; see `sbx --help`");
    }

    /// clap's refusals under --json say what was wrong once.
    #[test]
    fn a_refused_command_line_is_said_once_under_json() {
        let message = |args: &[&str]| {
            let e = super::cli::Cli::try_parse_from(args).unwrap_err();
            let (out, c) = crate::output::capture(true);
            let os: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
            assert_eq!(super::refuse(e, &os, &out), super::EXIT_INVALID);
            let err = c.stderr();
            let v: serde_json::Value = serde_json::from_str(err.trim()).unwrap();
            v["error"]["message"].as_str().unwrap().to_string()
        };
        assert_eq!(message(&["sbx", "--json", "egress", "nope"]), "unrecognized subcommand 'nope'");
        let m = message(&["sbx", "--json", "create", "--pull", "often", "--image", "x"]);
        assert_eq!(m, "invalid value 'often' for '--pull <missing|never>'");
        let m = message(&["sbx", "--json", "revoke", "sbx-0123456789ab"]);
        assert_eq!(m, "the following required arguments were not provided: <KIND>");
    }
}

/// sbx's own CPU time, docker children excluded (`-v`; the benchmark reads it).
fn log_own_cpu() {
    if let Ok(u) = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
        let ms = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e3 + t.tv_usec() as f64 / 1e3;
        tracing::debug!(user_ms = ms(u.user_time()), sys_ms = ms(u.system_time()), "sbx cpu");
    }
}

/// Start the `-v` (or `RUST_LOG`) log on stderr; true when it logs.
fn init_tracing(verbose: u8) -> bool {
    use tracing_subscriber::EnvFilter;
    let filter = match verbose {
        0 => match EnvFilter::try_from_default_env() {
            Ok(f) => f,
            Err(_) => return false,
        },
        1 => EnvFilter::new("sbx=debug"),
        _ => EnvFilter::new("sbx=trace"),
    };
    // Colour only when stderr is a terminal.
    let ansi = nix::unistd::isatty(2).unwrap_or(false);
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(ansi)
        .try_init();
    true
}

/// Where sbx keeps things on the host, and which docker context it
/// drives, as the global options say (the detached watchdog and refiller
/// are started with the same options).
#[derive(Debug, Clone, Default)]
pub struct Dirs {
    pub socket_dir: Option<std::path::PathBuf>,
    pub state_dir: Option<std::path::PathBuf>,
    /// `--context`, else `SBX_CONTEXT`.
    pub context: Option<String>,
}

impl Dirs {
    /// `--socket-dir`/`--data-dir`, else `SBX_SOCKET_DIR`/`SBX_DATA_DIR`; an
    /// empty one means unset, as for most path variables.
    pub fn new(socket_dir: Option<std::path::PathBuf>, data_dir: Option<std::path::PathBuf>, env: &Env) -> Self {
        Dirs {
            socket_dir: socket_dir.filter(|d| !d.as_os_str().is_empty()).or_else(|| env.socket_dir.clone()),
            state_dir: data_dir.filter(|d| !d.as_os_str().is_empty()).or_else(|| env.data_dir.clone()),
            context: None,
        }
    }

    /// `--context NAME`, else `SBX_CONTEXT` (empty is unset).
    pub fn with_context(mut self, context: Option<String>, env: &Env) -> Self {
        self.context = context.filter(|c| !c.is_empty()).or_else(|| env.context.clone());
        self
    }

    /// What names the engine (see `host::engine`).
    pub fn engine_choice(&self, env: &Env) -> host::engine::EngineChoice {
        host::engine::EngineChoice {
            context: self.context.clone(),
            docker_host: env.docker_host.clone().filter(|h| !h.is_empty()),
            docker_context: env.docker_context.clone(),
            config_dir: env.docker_config.clone().or_else(|| env.home.as_ref().map(|h| h.join(".docker"))),
        }
    }
}
/// The real docker CLI as the environment configures it (`run` has already
/// refused a malformed `SBX_DOCKER_TIMEOUT` or `SBX_PULL_TIMEOUT`).
fn real_docker(env: &Env, dirs: &Dirs) -> docker::RealDocker {
    let deadlines = docker::Deadlines::from_env(env.docker_timeout.as_deref()).unwrap_or_default();
    let deadlines = deadlines.with_pull(env.pull_timeout.as_deref()).unwrap_or(deadlines);
    // Ctrl-C stops a long call (a pull) at once; sbx then cleans up.
    let stop = std::sync::Arc::new(|| host::interrupt::pending().is_some());
    docker::RealDocker::new(env.docker.clone())
        .with_deadlines(deadlines)
        .with_stop(stop)
        .with_context(dirs.context.as_deref())
}

/// The production driver: the real docker CLI and the process's signals.
pub fn real_driver(env: &Env, dirs: &Dirs) -> sandbox::Driver {
    let euid = nix::unistd::geteuid().as_raw();
    let roots = host::socket::RootChoice {
        explicit: dirs.socket_dir.clone(),
        xdg_runtime_dir: env.xdg_runtime_dir.clone(),
        temp_dir: std::env::temp_dir(),
        euid,
    };
    let states = host::state::StateChoice {
        explicit: dirs.state_dir.clone(),
        xdg_state_home: env.xdg_state_home.clone(),
        home: env.home.clone(),
        euid,
    };
    sandbox::Driver::new(Arc::new(real_docker(env, dirs)), roots, states)
        .with_interrupts(Arc::new(host::interrupt::pending))
        .with_engine(dirs.engine_choice(env))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::docker::argv::os as args;

    #[test]
    fn exec_without_dashes_exits_2_with_the_hint_before_any_docker_call() {
        // SBX_DOCKER points nowhere: a docker call would fail differently.
        let env = Env { docker: Some("/nonexistent/docker".into()), ..Env::default() };
        assert_eq!(run(args(&["sbx", "exec", "sbx-0123456789ab", "id"]), env), EXIT_INVALID);
    }

    #[test]
    fn a_context_with_docker_host_exits_2_before_any_docker_call() {
        let env = Env {
            docker: Some("/nonexistent/docker".into()),
            docker_host: Some("ssh://me@far".into()),
            ..Env::default()
        };
        assert_eq!(run(args(&["sbx", "--context", "far", "ls"]), env.clone()), EXIT_INVALID);
        let env = Env { context: Some("far".into()), ..env };
        assert_eq!(run(args(&["sbx", "ls"]), env.clone()), EXIT_INVALID);
        // A flag wins over SBX_CONTEXT, and an empty one means unset.
        let dirs = Dirs::default().with_context(Some(String::new()), &env);
        assert_eq!(dirs.context.as_deref(), Some("far"));
        let dirs = Dirs::default().with_context(Some("near".into()), &env);
        assert_eq!(dirs.engine_choice(&env).context.as_deref(), Some("near"));
    }
}

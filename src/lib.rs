//! sbx: disposable, hardened Docker sandboxes for AI-agent sessions.
//!
//! Flow: `cli` (clap) -> `spec` (validated, typed) -> `driver`
//! (`Driver`) -> `docker::argv` (pure argv builders) ->
//! `docker::DockerExec` (real CLI, or the recording fake in tests).
//! The container's labels are the only state (`record`).

pub mod checks;
pub mod cli;
pub mod commands;
pub mod docker;
pub mod error;
pub mod host;
pub mod messages;
pub mod model;
pub mod sandbox;
pub mod spec;
pub mod workbench;

use std::ffi::OsString;
use std::io::Write;
use std::sync::Arc;

use clap::Parser;

use crate::error::{Error, EXIT_INVALID, EXIT_OK};

/// What sbx reads from its environment, gathered once at the edge.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub strict_egress: bool,
    pub docker: Option<OsString>,
    pub docker_host: Option<String>,
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
}

impl Env {
    pub fn from_process() -> Self {
        let strict =
            std::env::var("SBX_STRICT_EGRESS").map(|v| matches!(v.as_str(), "1" | "true" | "yes")).unwrap_or(false);
        Env {
            strict_egress: strict,
            docker: std::env::var_os("SBX_DOCKER").filter(|v| !v.is_empty()),
            docker_host: std::env::var("DOCKER_HOST").ok(),
            xdg_runtime_dir: std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()).map(Into::into),
            xdg_state_home: std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()).map(Into::into),
            home: std::env::var_os("HOME").filter(|v| !v.is_empty()).map(Into::into),
            docker_timeout: std::env::var("SBX_DOCKER_TIMEOUT").ok().filter(|v| !v.is_empty()),
            socket_dir: std::env::var_os("SBX_SOCKET_DIR").filter(|v| !v.is_empty()).map(Into::into),
            data_dir: std::env::var_os("SBX_DATA_DIR").filter(|v| !v.is_empty()).map(Into::into),
            seccomp_profile: std::env::var("SBX_SECCOMP_PROFILE").ok().filter(|v| !v.is_empty()),
        }
    }
}

/// Parse `args`, run the command, report any error on stderr; returns the
/// process exit code.
pub fn run(args: Vec<OsString>, env: Env) -> u8 {
    let wants_json = args.iter().skip(1).take_while(|a| *a != "--").any(|a| a == "--json");
    let cli = match cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return EXIT_OK;
            }
            if e.kind() == ErrorKind::UnknownArgument {
                if let Some(inv) = missing_dashes(&args) {
                    let e = Error::from(inv);
                    report(&e, wants_json);
                    return e.exit_code();
                }
            }
            if wants_json {
                let msg = e.kind().as_str().map(str::to_string).unwrap_or_else(|| e.to_string());
                let detail = e.to_string().lines().next().unwrap_or_default().trim_start_matches("error: ").to_string();
                print_json_error("invalid_input", &format!("{msg}: {detail}"), Some("see `sbx --help`"));
            } else {
                let _ = e.print();
            }
            return EXIT_INVALID;
        }
    };
    init_tracing(cli.verbose);
    let json = cli.json;
    messages::set_json(json);
    if let Err(e) = docker::Deadlines::from_env(env.docker_timeout.as_deref()) {
        let e = Error::from(e);
        report(&e, json);
        return e.exit_code();
    }
    let code = match commands::dispatch(cli, &env) {
        Ok(code) => code,
        Err(e) => {
            report(&e, json);
            e.exit_code()
        }
    };
    log_own_cpu();
    code
}

/// `sbx exec ID id` (no `--`): clap only says "unexpected argument"; say
/// where the command goes (issue 10, help texts).
fn missing_dashes(args: &[OsString]) -> Option<error::Invalid> {
    let words: Vec<String> = args.iter().skip(1).map(|a| a.to_string_lossy().into_owned()).collect();
    if words.iter().any(|w| w == "--") {
        return None;
    }
    let at = words.iter().position(|w| w == "exec" || w == "create")?;
    let sub = words[at].as_str();
    // Options of exec that take a value; their values are not the command.
    let valued = ["-e", "--env", "-w", "--workdir", "-u", "--user"];
    let mut rest = Vec::new();
    let mut skip = false;
    for w in &words[at + 1..] {
        if skip {
            skip = false;
        } else if sub == "exec" && valued.contains(&w.as_str()) {
            skip = true;
        } else if !w.starts_with('-') {
            rest.push(w.clone());
        }
    }
    let hint = if sub == "exec" && rest.len() >= 2 {
        format!("put `--` before the command: sbx exec {} -- {}", rest[0], rest[1..].join(" "))
    } else if sub == "exec" {
        "put `--` before the command: sbx exec ID -- CMD [ARGS...]".to_string()
    } else {
        "put `--` before the sandbox's command: sbx create --image IMAGE -- CMD [ARGS...]".to_string()
    };
    let extra = if sub == "exec" { rest.get(1..).map(|r| r.join(" ")).unwrap_or_default() } else { rest.join(" ") };
    Some(error::Invalid::new("arguments", extra, format!("`sbx {sub}` takes its command after `--`")).hint(hint))
}

/// sbx's own CPU time, docker children excluded (`-v`; the benchmark reads it).
fn log_own_cpu() {
    if let Ok(u) = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
        let ms = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e3 + t.tv_usec() as f64 / 1e3;
        tracing::debug!(user_ms = ms(u.user_time()), sys_ms = ms(u.system_time()), "sbx cpu");
    }
}

fn report(e: &Error, json: bool) {
    let hint = e.hint();
    if json {
        print_json_error(e.kind(), &e.to_string(), hint.as_deref());
    } else {
        let mut err = std::io::stderr().lock();
        // Messages quote what the sandbox wrote: never raw to the terminal.
        let _ = writeln!(err, "sbx: error: {}", error::for_terminal(&e.to_string()));
        if let Some(h) = hint {
            let _ = writeln!(err, "sbx: hint: {}", error::for_terminal(&h));
        }
    }
}

fn print_json_error(kind: &str, message: &str, hint: Option<&str>) {
    let v = serde_json::json!({ "error": { "kind": kind, "message": message, "hint": hint } });
    let _ = writeln!(std::io::stderr().lock(), "{v}");
}

fn init_tracing(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let filter = match verbose {
        0 => match EnvFilter::try_from_default_env() {
            Ok(f) => f,
            Err(_) => return,
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
}

/// Where sbx keeps things on the host, as the global options say.
#[derive(Debug, Clone, Default)]
pub struct Dirs {
    pub socket_dir: Option<std::path::PathBuf>,
    pub state_dir: Option<std::path::PathBuf>,
}

/// The real docker CLI as the environment configures it (`run` has already
/// refused a malformed `SBX_DOCKER_TIMEOUT`).
pub fn real_docker(env: &Env) -> docker::RealDocker {
    let deadlines = docker::Deadlines::from_env(env.docker_timeout.as_deref()).unwrap_or_default();
    docker::RealDocker::new(env.docker.clone()).with_deadlines(deadlines)
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
    sandbox::Driver::new(Arc::new(real_docker(env)), roots, states).with_interrupts(Arc::new(host::interrupt::pending))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_command_without_dashes_gets_a_hint() {
        let inv = missing_dashes(&args(&["sbx", "exec", "-e", "A=1", "sbx-0123456789ab", "id", "-u"])).unwrap();
        assert_eq!(inv.hint.as_deref(), Some("put `--` before the command: sbx exec sbx-0123456789ab -- id"));
        assert!(missing_dashes(&args(&["sbx", "exec", "x", "--", "id"])).is_none());
        assert!(missing_dashes(&args(&["sbx", "ls", "x"])).is_none());
        let inv = missing_dashes(&args(&["sbx", "create", "--image", "i", "srv"])).unwrap();
        assert!(inv.hint.unwrap().contains("-- CMD"));
    }

    #[test]
    fn exec_without_dashes_exits_2_with_the_hint_before_any_docker_call() {
        // SBX_DOCKER points nowhere: a docker call would fail differently.
        let env = Env { docker: Some("/nonexistent/docker".into()), ..Env::default() };
        assert_eq!(run(args(&["sbx", "exec", "sbx-0123456789ab", "id"]), env), EXIT_INVALID);
    }
}

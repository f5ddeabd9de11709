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
//! above it in this list (a unit test, `layering/`, checks it):
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
//! | `sandbox`   | the lifecycle: `ops/`, one file per operation (create, destroy, gc, ...); `shared/`, what several use | lifecycle step |
//! | `checks`    | what sbx measures for the operator: audit rules, doctor, the probe    | check                      |
//! | `cli`       | clap's view of the command line (parsing only)                        | flag                       |
//! | `serve`     | `sbx serve`: the E2B API (control plane and envd) over the driver     | HTTP route                 |
//! | `mcp`       | `sbx mcp`: MCP tools on stdio over the driver and serve's create      | MCP tool                   |
//! | `commands`  | one file per subcommand, handed a `Context` by `dispatch`             | subcommand                 |

pub mod checks;
pub mod cli;
pub mod commands;
pub mod docker;
pub mod error;
pub mod gate;
pub mod host;
pub mod mcp;
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

use crate::error::{Error, EXIT_INVALID, EXIT_OK};
pub use crate::host::env::{Dirs, Env};
use crate::output::Printer;

/// Parse `args`, run the command, report any error on stderr; returns the
/// process exit code.
pub fn run(args: Vec<OsString>, env: Env) -> u8 {
    let cli::Cli { globals: g, command } = match cli::Cli::parse_line(&args) {
        Ok(cli) => cli,
        Err(e) => return refuse_line(e, &args, &env),
    };
    let (out, dirs) = match preflight(g.verbose, g.json, (g.socket_dir, g.data_dir, g.context), &env) {
        Ok(ready) => ready,
        Err(code) => return code,
    };
    let driver = real_driver(&env, &dirs);
    let ctx = commands::Context {
        driver,
        out,
        env,
        dirs,
        catch_signals: host::interrupt::install,
        watch_signals: host::interrupt::Watch::install,
    };
    let code = commands::run(command, &ctx);
    log_own_cpu();
    code
}

/// The log, the printer, the docker deadlines and the engine choice, checked
/// before any command (exit 2 before any docker call); Err: the exit code.
fn preflight(
    verbose: u8,
    json: bool,
    (socket_dir, data_dir, context): (Option<std::path::PathBuf>, Option<std::path::PathBuf>, Option<String>),
    env: &Env,
) -> std::result::Result<(Printer, Dirs), u8> {
    let logging = init_tracing(verbose);
    // Log lines would interleave with a progress line rewritten in place.
    let out = Printer::stdio(json);
    let out = if logging { out.with_progress(false) } else { out };
    if let Err(e) = docker::Deadlines::from_env(env.docker_timeout.as_deref())
        .and_then(|d| d.with_pull(env.pull_timeout.as_deref()))
    {
        let e = Error::from(e);
        out.error(&e);
        return Err(e.exit_code());
    }
    let dirs = Dirs::new(socket_dir, data_dir, env).with_context(context, env);
    // `--context` with DOCKER_HOST, or a name docker would refuse: before any docker call.
    if let Err(e) = dirs.engine_choice(env).check() {
        let e = Error::from(e);
        out.error(&e);
        return Err(e.exit_code());
    }
    Ok((out, dirs))
}

/// A line clap refused. One whose only fault is a malformed sandbox id or
/// pool name is refused where its command refused it before clap checked
/// names: after [`preflight`].
fn refuse_line(e: clap::Error, args: &[OsString], env: &Env) -> u8 {
    let names_only = e.kind() == clap::error::ErrorKind::ValueValidation
        && std::error::Error::source(&e).is_some_and(|s| s.is::<error::Invalid>());
    let Some(m) = names_only.then(|| cli::unchecked_names().try_get_matches_from(args).ok()).flatten() else {
        return refuse(e, args, &Printer::stdio(wants_json(args)));
    };
    let given = |k: &str| m.get_one::<std::path::PathBuf>(k).cloned();
    let place = (given("socket_dir"), given("data_dir"), m.get_one::<String>("context").cloned());
    let code = match preflight(m.get_count("verbose"), m.get_flag("json"), place, env) {
        Ok((out, _)) => refuse(e, args, &out),
        Err(code) => code,
    };
    log_own_cpu();
    code
}

/// `--json` before any `--`: how a line clap refused is answered.
fn wants_json(args: &[OsString]) -> bool {
    args.iter().skip(1).take_while(|a| *a != "--").any(|a| a == "--json")
}

/// Answer a command line clap did not accept: help and version are
/// printed (exit 0), anything else is invalid input (exit 2).
fn refuse(e: clap::Error, args: &[OsString], out: &Printer) -> u8 {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return EXIT_OK;
    }
    // An id or pool name clap's value parser refused: said as sbx says a
    // refused value (exit 2, `invalid_input`), not in clap's words, unless
    // clap refuses the line for something else too.
    if e.kind() == ErrorKind::ValueValidation {
        if let Some(inv) = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<error::Invalid>()) {
            if let Err(other) = cli::unchecked_names().try_get_matches_from(args) {
                return refuse(other, args, out);
            }
            let e = Error::from(inv.clone());
            out.error(&e);
            return e.exit_code();
        }
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

#[cfg(test)]
mod name_tests {
    /// clap checks sandbox ids and pool names (`model::names`) and sbx says
    /// a malformed one in its own words; whatever else clap refuses on the
    /// same line is said first, as before clap checked names.
    #[test]
    fn a_malformed_name_is_said_in_sbx_words_after_clap_own_refusals() {
        use clap::Parser;
        let said = |args: &[&str]| {
            let e = super::cli::Cli::try_parse_from(args).unwrap_err();
            let (out, c) = crate::output::capture(true);
            let os: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
            assert_eq!(super::refuse(e, &os, &out), super::EXIT_INVALID, "{args:?}");
            let v: serde_json::Value = serde_json::from_str(c.stderr().trim()).unwrap();
            (v["error"]["message"].as_str().unwrap().to_string(), v["error"]["hint"].as_str().unwrap_or("").to_string())
        };
        let (m, h) = said(&["sbx", "--json", "inspect", "sbx-0123456789AB"]);
        assert_eq!(m, "invalid sandbox id \"sbx-0123456789AB\": sandbox ids look like sbx-0123456789ab");
        assert_eq!(h, "`sbx ls` lists the sandboxes on this engine");
        let (m, _) = said(&["sbx", "--json", "pool", "rm", "a/b"]);
        assert!(m.starts_with("invalid pool name \"a/b\": it must be 1-40 of"), "{m}");
        let (m, h) = said(&["sbx", "--json", "revoke", "x"]);
        assert_eq!(m, "the following required arguments were not provided: <KIND>");
        assert_eq!(h, "Usage: sbx revoke <ID> <KIND>; see `sbx --help`");
        let (m, _) = said(&["sbx", "--json", "wait-port", "x", "80x"]);
        assert!(m.starts_with("invalid value '80x' for '<PORT>'"), "{m}");
    }
}

/// sbx's own CPU time, docker children excluded (`-v`; the benchmark reads it).
fn log_own_cpu() {
    if let Ok(u) = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
        let ms = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e3 + t.tv_usec() as f64 / 1e3;
        // A target of its own: `RUST_LOG=sbx::cpu=debug` reports this line
        // alone, so measuring sbx's CPU does not add the log's own cost.
        tracing::debug!(target: "sbx::cpu", user_ms = ms(u.user_time()), sys_ms = ms(u.system_time()), "sbx cpu");
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

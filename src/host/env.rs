//! What sbx reads from its process environment ([`Env`]) and where it keeps
//! things on this machine as the global options say ([`Dirs`]): gathered
//! once at the edge (`run`), handed to the commands in their `Context`.

use std::ffi::OsString;

use crate::host;

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

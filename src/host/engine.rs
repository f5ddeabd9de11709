//! Which engine sbx drives: [`EngineChoice`] gathers what the
//! environment and the command line say (DOCKER_HOST, `--context`/
//! `SBX_CONTEXT`, DOCKER_CONTEXT, the CLI's current context) and resolves it
//! to a `model::engine::Engine`, once per process. The default case (no
//! DOCKER_HOST, no context named anywhere) costs no docker call: only a
//! look at the CLI's config file.

use std::io::Read;
use std::path::PathBuf;

use crate::docker::{argv, parse, DockerExec};
use crate::error::{Error, Invalid, Result};
use crate::model::engine::{valid_context_name, Engine};

/// The CLI's config file is small; more than this is not one sbx reads.
const MAX_CONFIG: u64 = 1 << 20;

/// What names the engine, as the process was started.
#[derive(Debug, Clone, Default)]
pub struct EngineChoice {
    /// `--context` or `SBX_CONTEXT`: passed to every docker call.
    pub context: Option<String>,
    /// `DOCKER_HOST` (non-empty).
    pub docker_host: Option<String>,
    /// `DOCKER_CONTEXT` (non-empty): the CLI honours it itself.
    pub docker_context: Option<String>,
    /// `DOCKER_CONFIG`, else `$HOME/.docker`: where `config.json` is.
    pub config_dir: Option<PathBuf>,
}

impl EngineChoice {
    /// What can be refused without a docker call: a context name docker
    /// would not accept, and `--context` with DOCKER_HOST (two answers to
    /// one question; the CLI itself does not say which wins).
    pub fn check(&self) -> std::result::Result<(), Invalid> {
        if let Some(c) = &self.context {
            if !valid_context_name(c) {
                return Err(Invalid::new("context", c, "it is not a docker context name")
                    .hint("`docker context ls` lists them"));
            }
            if let Some(h) = &self.docker_host {
                return Err(Invalid::new(
                    "context",
                    c,
                    format!(
                        "DOCKER_HOST is set too ({}): sbx will not guess which engine you mean",
                        crate::model::engine::strip_credentials(h)
                    ),
                )
                .hint("unset DOCKER_HOST, or drop --context/SBX_CONTEXT"));
            }
        }
        Ok(())
    }

    /// Where the engine is. `exec` is asked only when a context other than
    /// `default` is named (by sbx, DOCKER_CONTEXT or the CLI's config).
    pub fn resolve(&self, exec: &dyn DockerExec) -> Result<Engine> {
        self.check()?;
        if let Some(h) = &self.docker_host {
            return Ok(Engine::at(h, None));
        }
        let name = match (&self.context, &self.docker_context) {
            (Some(c), _) => Some(c.clone()),
            (None, Some(c)) => Some(c.clone()),
            (None, None) => self.current_context(exec)?,
        };
        let Some(name) = name.filter(|n| n != "default") else { return Ok(Engine::default_local()) };
        if !valid_context_name(&name) {
            return Err(Invalid::new("context", name, "it is not a docker context name")
                .hint("`docker context ls` lists them")
                .into());
        }
        let args = argv::context_host(&name);
        let out = exec.run(&args)?;
        if out.status != 0 {
            let why = out.stderr_str();
            return Err(Invalid::new("context", &name, format!("docker cannot read it: {}", why.trim()))
                .hint("`docker context ls` lists the contexts; create one with `docker context create NAME --docker host=ssh://USER@HOST`")
                .into());
        }
        match parse::context_host(&out.stdout_str()) {
            Some(host) => Ok(Engine::at(&host, Some(name))),
            None => Err(Invalid::new("context", &name, "it has no docker endpoint sbx can read")
                .hint("`docker context inspect NAME` shows it")
                .into()),
        }
    }

    /// The CLI's `currentContext`, from its config file (no docker call);
    /// `docker context show` only when that file exists but sbx cannot read it.
    fn current_context(&self, exec: &dyn DockerExec) -> Result<Option<String>> {
        let Some(dir) = &self.config_dir else { return Ok(None) };
        let path = dir.join("config.json");
        let bytes = match std::fs::File::open(&path) {
            Ok(f) => {
                let mut buf = Vec::new();
                f.take(MAX_CONFIG).read_to_end(&mut buf).map(|_| buf)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => Err(e),
        };
        if let Some(current) = bytes.ok().and_then(|b| parse::current_context(&b).ok()) {
            return Ok(current);
        }
        let out = crate::docker::run_ok(exec, &argv::context_show()).map_err(Error::from)?;
        let name = out.stdout_str().trim().to_string();
        Ok((!name.is_empty()).then_some(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::fake::FakeDocker;
    use crate::docker::Output;
    use crate::model::engine::Location;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sbx-engine-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_default_engine_costs_no_docker_call() {
        let fake = FakeDocker::new();
        let dir = tmp("none");
        let choice = EngineChoice { config_dir: Some(dir.clone()), ..Default::default() };
        assert_eq!(choice.resolve(&fake).unwrap(), Engine::default_local());
        std::fs::write(dir.join("config.json"), br#"{"auths":{},"currentContext":"default"}"#).unwrap();
        assert_eq!(choice.resolve(&fake).unwrap(), Engine::default_local());
        assert!(fake.calls().is_empty());
    }

    #[test]
    fn docker_host_decides_without_a_docker_call() {
        let fake = FakeDocker::new();
        let choice = EngineChoice { docker_host: Some("ssh://me:pw@far:22".into()), ..Default::default() };
        let e = choice.resolve(&fake).unwrap();
        assert_eq!((e.location, e.endpoint.as_str()), (Location::Remote, "ssh://me@far:22"));
        let choice = EngineChoice { docker_host: Some("unix:///run/docker.sock".into()), ..Default::default() };
        let e = choice.resolve(&fake).unwrap();
        assert!(!e.is_remote() && !e.default);
        assert!(fake.calls().is_empty());
    }

    #[test]
    fn a_named_context_is_read_with_context_inspect() {
        let fake = FakeDocker::new();
        fake.push(Output::ok("\"ssh://root@127.0.0.1:2222\"\n"));
        let choice = EngineChoice { context: Some("far".into()), ..Default::default() };
        let e = choice.resolve(&fake).unwrap();
        assert_eq!(e, Engine::at("ssh://root@127.0.0.1:2222", Some("far".into())));
        assert_eq!(fake.calls()[0].join(" "), "context inspect --format {{json .Endpoints.docker.Host}} -- far");
    }

    #[test]
    fn the_config_s_current_context_is_followed() {
        let fake = FakeDocker::new();
        fake.push(Output::ok("\"unix:///var/run/docker.sock\"\n"));
        let dir = tmp("current");
        std::fs::write(dir.join("config.json"), br#"{"currentContext":"mine"}"#).unwrap();
        let choice = EngineChoice { config_dir: Some(dir), ..Default::default() };
        let e = choice.resolve(&fake).unwrap();
        assert!(!e.is_remote() && !e.default && e.context.as_deref() == Some("mine"));
        assert_eq!(fake.calls(), [["context", "inspect", "--format", "{{json .Endpoints.docker.Host}}", "--", "mine"]]);
    }

    #[test]
    fn context_with_docker_host_and_a_bad_name_are_refused_before_docker() {
        let fake = FakeDocker::new();
        let both = EngineChoice {
            context: Some("far".into()),
            docker_host: Some("tcp://u:p@h:2375".into()),
            ..Default::default()
        };
        let Err(Error::Invalid(i)) = both.resolve(&fake) else { panic!("accepted both") };
        assert!(i.reason.contains("DOCKER_HOST is set too (tcp://u@h:2375)"), "{}", i.reason);
        let bad = EngineChoice { context: Some("--host=x".into()), ..Default::default() };
        assert!(matches!(bad.check(), Err(Invalid { what: "context", .. })));
        assert!(fake.calls().is_empty());
    }

    #[test]
    fn a_missing_context_is_invalid_input() {
        let fake = FakeDocker::new();
        fake.push(Output::fail(1, "context \"gone\": context not found: open /root/.docker/contexts/meta/x/meta.json: no such file or directory\n"));
        let choice = EngineChoice { context: Some("gone".into()), ..Default::default() };
        let Err(Error::Invalid(i)) = choice.resolve(&fake) else { panic!("accepted") };
        assert!(i.reason.contains("context not found"), "{}", i.reason);
        assert_eq!(fake.calls(), [["context", "inspect", "--format", "{{json .Endpoints.docker.Host}}", "--", "gone"]]);
    }
}

//! Warm pools on a remote engine. A pool belongs to the engine
//! it was made on (`PoolSpec::engine`): sbx acts on it only while driving
//! that engine. A remote member's main process runs on the engine's
//! machine, so this machine's /proc and socket paths say nothing about it:
//! its liveness is the engine's answer to one `docker container inspect`
//! of its container id, checked against what the fill recorded.

use crate::docker::argv;
use crate::docker::parse::{self, RawContainer};
use crate::error::{DockerError, Error, Invalid, Result};
use crate::host::pool::{unix_now, Member, Pool, PoolSpec, RemoteProc};
use crate::model::engine::{location_of, Location, DEFAULT_ENDPOINT};
use crate::model::record;
use crate::sandbox::Driver;

/// The pool's engine is a remote one: its members are checked through docker.
pub fn is_remote(spec: &PoolSpec) -> bool {
    location_of(spec.endpoint()) == Location::Remote
}

/// A remote member as the engine reports it now is the one the fill
/// recorded, alive: the same container, sbx's (owner token) and of this
/// pool, running and not paused, with the same main process (pid and
/// start time: a restarted container has a new one).
pub fn verified(raw: &RawContainer, m: &Member, pool: &str, key: &[u8]) -> bool {
    let Some(r) = &m.remote else { return false };
    let s = &raw.full["State"];
    raw.name == m.id
        && raw.full["Id"].as_str() == Some(r.container.as_str())
        && raw.is_sbx(key)
        && raw.labels.get(record::POOL).map(String::as_str) == Some(pool)
        && s["Status"].as_str() == Some("running")
        && s["Running"].as_bool() == Some(true)
        && s["Paused"].as_bool() == Some(false)
        && s["Restarting"].as_bool() != Some(true)
        && m.pid > 0
        && s["Pid"].as_i64() == Some(i64::from(m.pid))
        && s["StartedAt"].as_str() == Some(r.started_at.as_str())
}

/// How to reach the engine at `endpoint` again, for the refusal's hint.
fn reach(endpoint: &str, context: Option<&str>) -> String {
    match context {
        Some(c) => format!("`--context {c}` (or DOCKER_HOST={endpoint})"),
        None if endpoint == DEFAULT_ENDPOINT => {
            "the default local engine (unset DOCKER_HOST, DOCKER_CONTEXT and SBX_CONTEXT, no --context)".into()
        }
        None => format!("DOCKER_HOST={endpoint}"),
    }
}

impl Driver {
    /// The pool's spec, once the engine sbx drives is the pool's; else
    /// exit 2 naming both (nothing is done to a pool whose members live
    /// where this command does not look).
    pub fn pool_spec(&self, pool: &Pool) -> Result<PoolSpec> {
        let spec = pool.spec()?;
        let engine = self.engine()?;
        if spec.endpoint() != engine.endpoint {
            return Err(Invalid::new(
                "pool",
                &pool.name,
                format!(
                    "it was made on the engine at {}, and sbx drives the engine at {} now",
                    spec.endpoint(),
                    engine.endpoint
                ),
            )
            .hint(format!(
                "use {} for this pool, as `sbx pool create` did",
                reach(spec.endpoint(), spec.context.as_deref())
            ))
            .into());
        }
        Ok(spec)
    }

    /// A new member of a remote pool, from one inspect: its container, main
    /// process and start as the engine reports them.
    pub(super) fn remote_member_of(&self, created: &crate::sandbox::Created) -> Result<Member> {
        let id = &created.record.id;
        let raw = self.inspect_one(id)?;
        let s = &raw.full["State"];
        let pid = s["Pid"].as_i64().and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 0);
        let started_at = s["StartedAt"].as_str().map(str::to_string);
        let (Some(pid), Some(started_at), Some(true)) = (pid, started_at, s["Running"].as_bool()) else {
            return Err(DockerError::Parse {
                command: crate::docker::render(&argv::inspect(&[id])),
                reason: format!("the new pool member is not running: {}", s),
            }
            .into());
        };
        let container = crate::sandbox::container_id(&raw)?;
        let uid = created.record.user.split(':').next().and_then(|u| u.parse().ok()).unwrap_or(crate::spec::NOBODY);
        let json = serde_json::to_value(created)
            .and_then(serde_json::from_value)
            .map_err(|e| Error::io("encoding the member's create result", std::io::Error::other(e)))?;
        Ok(Member {
            id: id.clone(),
            socket: None,
            uid,
            pid,
            start: 0,
            ready_at: unix_now(),
            created: json,
            remote: Some(RemoteProc { container, started_at }),
        })
    }

    /// Which of `members` (of pool `name`) the engine reports alive, from
    /// one `docker container inspect` of their containers. Err when the
    /// engine did not answer for all of them (unknown is not dead).
    pub(crate) fn remote_alive(&self, name: &str, members: &[Member]) -> Result<Vec<String>> {
        let containers: Vec<&str> =
            members.iter().filter_map(|m| m.remote.as_ref()).map(|r| r.container.as_str()).collect();
        if containers.is_empty() {
            return Ok(Vec::new());
        }
        let args = argv::inspect(&containers);
        let out = self.docker.run(&args)?;
        let raws = parse::parse_inspect(&out.stdout_str(), &crate::docker::render(&args))?;
        if out.status != 0 {
            let asked: Vec<String> = containers.iter().map(|c| c.to_string()).collect();
            let missing = parse::missing_containers(&asked, &out.stderr_str());
            if missing.len() + raws.len() != containers.len() {
                return Err(crate::docker::status_error(&args, &out).into());
            }
        }
        let key = &self.state()?.key;
        Ok(members.iter().filter(|m| raws.iter().any(|r| verified(r, m, name, key))).map(|m| m.id.clone()).collect())
    }
}

//! Warm pools on a remote engine. A pool belongs to the engine
//! it was made on (`PoolSpec::engine`): sbx acts on it only while driving
//! that engine. A remote member's main process runs on the engine's
//! machine, so this machine's /proc and socket paths say nothing about it:
//! its liveness is the engine's answer to one `docker container inspect`
//! of its container id, checked against what the fill recorded
//! (`shared::members::remote_alive`, which gc uses too).

use crate::docker::argv;
use crate::error::{DockerError, Error, Invalid, Result};
use crate::host::pool::{unix_now, Member, Pool, PoolSpec, RemoteProc};
use crate::model::engine::DEFAULT_ENDPOINT;
use crate::sandbox::Driver;

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
}

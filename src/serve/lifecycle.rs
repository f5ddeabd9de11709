//! A sandbox's life after create, as E2B's SDK drives it: set timeout
//! (`sbx ttl`), pause (`sbx pause`: memory kept while the host runs; of a
//! `--snapshots` sandbox, `sbx hibernate`: memory and files on disk) and
//! connect (resume a paused or hibernated one, extend the TTL, hand out
//! its token).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::answer::{response_of, sandbox_json};
use super::http::{self, Body, Refusal};
use super::index::Entry;
use super::{Ops, Shared};
use crate::error::Error;
use hyper::{Response, StatusCode};

/// The sandbox `id` names, when this server made it.
fn entry(id: &str, shared: &Shared) -> Result<Entry, Refusal> {
    crate::spec::parse_id(id)
        .ok()
        .and_then(|_| shared.index.get(id))
        .ok_or_else(|| Refusal(StatusCode::NOT_FOUND, format!("sandbox '{id}' not found")))
}

fn object(body: &[u8]) -> Result<serde_json::Map<String, Value>, Refusal> {
    if body.is_empty() {
        return Ok(Default::default());
    }
    let v: Value = serde_json::from_slice(body).map_err(|e| Refusal::bad(format!("the body is not JSON: {e}")))?;
    v.as_object().cloned().ok_or_else(|| Refusal::bad("the body must be a JSON object"))
}

/// `timeout` in whole seconds, as `--ttl` takes it.
fn timeout(o: &serde_json::Map<String, Value>) -> Result<Option<Duration>, Refusal> {
    match o.get("timeout") {
        None | Some(Value::Null) => Ok(None),
        Some(t) => {
            let secs = t.as_u64().ok_or_else(|| Refusal::bad("timeout must be a whole number of seconds"))?;
            crate::spec::parse_ttl(&format!("{secs}s")).map(Some).map_err(|e| Refusal::bad(format!("timeout: {e}")))
        }
    }
}

/// The error as sbx says it, with what to do when sbx knows.
fn failed(e: Error) -> Refusal {
    let said = match e.hint() {
        Some(h) => format!("{e} ({h})"),
        None => e.to_string(),
    };
    Refusal(super::answer::status_of(&e), said)
}

/// The TTL moved to `ttl` from now, its watchdog started when none is alive.
fn set_ttl(ops: &Ops, id: &str, ttl: Duration) -> Result<SystemTime, Refusal> {
    let (at, unwatched) = ops.driver.set_ttl(id, ttl).map_err(failed)?;
    if let Some(watched) = unwatched {
        (ops.watchdog)(id, &watched).map_err(failed)?;
    }
    Ok(at)
}

/// `POST /sandboxes/{id}/timeout {"timeout": SECONDS}`: 204.
pub async fn set_timeout(id: &str, body: &[u8], shared: Arc<Shared>) -> Response<Body> {
    let id = id.to_string();
    let ttl = match entry(&id, &shared).and_then(|_| object(body)).and_then(|o| timeout(&o)) {
        Ok(Some(t)) => t,
        Ok(None) => return Refusal::bad("timeout is required").response(),
        Err(r) => return r.response(),
    };
    let done = shared.blocking(move |ops| set_ttl(ops, &id, ttl).map(|_| ())).await;
    response_of(done, |()| http::empty(StatusCode::NO_CONTENT))
}

/// `POST /sandboxes/{id}/pause`: 204, 409 when it is paused already. A
/// `--snapshots` sandbox is hibernated (E2B's full pause, memory and
/// files saved to disk, or `memory: false`); any other is frozen in
/// place, which keeps its memory while the host runs, and a pause
/// without memory is refused for it.
pub async fn pause(id: &str, body: &[u8], shared: Arc<Shared>) -> Response<Body> {
    let id = id.to_string();
    let without_memory = match entry(&id, &shared).and_then(|_| object(body)) {
        Ok(o) => o.get("memory") == Some(&json!(false)),
        Err(r) => return r.response(),
    };
    let done = shared
        .blocking(move |ops| {
            let d = ops.driver;
            if d.can_snapshot(&id).map_err(failed)? {
                if d.inspect(&id).map_err(failed)?.state == "hibernated" {
                    return Ok(crate::sandbox::Changed::new(&id, "hibernated", true));
                }
                return d.hibernate(&id, Default::default()).map_err(failed);
            }
            if without_memory {
                return Err(Refusal::unsupported(
                    "pause without memory (a snapshot to disk) of a sandbox made without --snapshots",
                ));
            }
            d.pause(&id).map_err(failed)
        })
        .await;
    response_of(done, |c| match c.already {
        true => http::error(StatusCode::CONFLICT, &format!("sandbox '{}' is paused already", c.id)),
        false => http::empty(StatusCode::NO_CONTENT),
    })
}

/// `POST /v2/sandboxes/{id}/connect {"timeout": SECONDS}`: a paused sandbox
/// is resumed (201), a running one only connected to (200); the TTL is
/// moved to `timeout` from now when that is later than it is.
pub async fn connect(id: &str, body: &[u8], shared: Arc<Shared>) -> Response<Body> {
    let id = id.to_string();
    let checked = entry(&id, &shared).and_then(|e| Ok((e, object(body)?))).and_then(|(e, o)| {
        if o.get("memory") == Some(&json!(false)) {
            return Err(Refusal::unsupported("resuming without memory (a cold boot from disk)"));
        }
        Ok((e, timeout(&o)?))
    });
    let (entry, ttl) = match checked {
        Ok(x) => x,
        Err(r) => return r.response(),
    };
    let done = shared
        .blocking(move |ops| {
            let record = ops.driver.inspect(&id).map_err(failed)?;
            let resumed = match record.state.as_str() {
                "paused" | "hibernated" => {
                    let done = ops.driver.resume(&id).map_err(failed)?;
                    // Restored after an engine restart: its watchdog is gone.
                    if let Some(watched) = &done.unwatched {
                        (ops.watchdog)(&id, watched).map_err(failed)?;
                    }
                    !done.already
                }
                "running" => false,
                s => return Err(Refusal(StatusCode::NOT_FOUND, format!("sandbox '{id}' is {s}, not running"))),
            };
            if let Some(ttl) = ttl {
                let later = humantime::parse_rfc3339_weak(record.expires_at.as_deref().unwrap_or(""))
                    .map_or(true, |at| SystemTime::now() + ttl > at);
                if later {
                    set_ttl(ops, &id, ttl)?;
                }
            }
            Ok((resumed, sandbox_json(&id, &entry)))
        })
        .await;
    response_of(done, |(resumed, v)| http::json(if resumed { StatusCode::CREATED } else { StatusCode::OK }, &v))
}

/// The most children one E2B fork asks for (the SDK's own limit).
const MAX_FORKS: u64 = 20;

/// `POST /sandboxes/{id}/fork {"timeout": SECONDS, "count": N}`: 201 and
/// one `{"sandbox": ...}` per child (`sbx fork`, all or none), each with
/// a token of its own and its parent's template and metadata; `timeout`
/// is the children's TTL, else their parent's request's. Only a sandbox
/// of a server started with `--snapshots` can be forked.
pub async fn fork(id: &str, body: &[u8], shared: Arc<Shared>) -> Response<Body> {
    let id = id.to_string();
    let checked = entry(&id, &shared).and_then(|e| Ok((e, object(body)?))).and_then(|(e, o)| {
        let count = match o.get("count") {
            None | Some(Value::Null) => 1,
            Some(c) => c
                .as_u64()
                .filter(|n| (1..=MAX_FORKS).contains(n))
                .ok_or_else(|| Refusal::bad(format!("count must be a whole number from 1 to {MAX_FORKS}")))?,
        };
        Ok((e, timeout(&o)?, count as usize))
    });
    let (parent, ttl, count) = match checked {
        Ok(x) => x,
        Err(r) => return r.response(),
    };
    let s2 = shared.clone();
    let done = shared
        .blocking(move |ops| {
            let docker_host = s2.config.defaults.docker_host.clone();
            let kids = ops.driver.fork(&id, count, None, Default::default(), docker_host.as_deref()).map_err(failed)?;
            let each = |c: &crate::sandbox::Created| -> Result<Value, Refusal> {
                let child = &c.record.id;
                match ttl {
                    Some(t) => {
                        set_ttl(ops, child, t)?;
                    }
                    None if c.record.expires_at.is_some() => {
                        if let Err(e) = (ops.watchdog)(child, &c.watched) {
                            tracing::warn!(error = %e, %child, "no TTL watchdog; `sbx gc` still reaps it once expired");
                        }
                    }
                    None => {}
                }
                let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
                let entry = Entry { token: super::config::random_hex(32), started_at, ..parent.clone() };
                let answer = json!({ "sandbox": sandbox_json(child, &entry) });
                s2.index.insert(child, entry).map_err(failed)?;
                Ok(answer)
            };
            match kids.iter().map(each).collect::<Result<Vec<Value>, Refusal>>() {
                Ok(out) => Ok(Value::Array(out)),
                Err(r) => {
                    // All or none: children the API cannot reach or time are rolled back.
                    let ids: Vec<String> = kids.iter().map(|c| c.record.id.clone()).collect();
                    let _ = ops.driver.destroy(&ids);
                    Err(r)
                }
            }
        })
        .await;
    response_of(done, |v| http::json(StatusCode::CREATED, &v))
}

/// `POST /sandboxes/{id}/snapshots {"name": NAME}`: 201
/// `{"snapshotID", "names"}`. A checkpoint (`e2b-NAME`, or `e2b-SECONDS`)
/// of a `--snapshots` sandbox, left running; its id is a template id
/// (`Sandbox.create(snapshot_id)` is `sbx fork --from`) and outlives the
/// sandbox. A filesystem-only snapshot (`memory: false`) is refused.
pub async fn snapshot(id: &str, body: &[u8], shared: Arc<Shared>) -> Response<Body> {
    use super::make::{snapshot_id, SNAPSHOT_PREFIX};
    let id = id.to_string();
    let checked = entry(&id, &shared).and_then(|_| object(body)).and_then(|o| {
        if o.get("memory") == Some(&json!(false)) {
            return Err(Refusal::unsupported("a filesystem-only snapshot (mode=\"filesystem\")"));
        }
        let given = match o.get("name") {
            None | Some(Value::Null) => None,
            Some(Value::String(n)) => Some(n.clone()),
            Some(_) => return Err(Refusal::bad("name must be a string")),
        };
        let secs = SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let name = format!("{SNAPSHOT_PREFIX}{}", given.clone().unwrap_or_else(|| secs.to_string()));
        if !crate::host::checkpoints::valid_name(&name) {
            return Err(Refusal::bad(format!(
                "name must be 1 to {} letters, digits, '.', '_', '-'",
                64 - SNAPSHOT_PREFIX.len()
            )));
        }
        Ok((name, given))
    });
    let (name, given) = match checked {
        Ok(x) => x,
        Err(r) => return r.response(),
    };
    let done = shared
        .blocking(move |ops| {
            ops.driver.checkpoint(&id, &name, Default::default()).map_err(failed)?;
            let sid = snapshot_id(&id, &name);
            Ok(json!({ "snapshotID": sid, "names": [given.unwrap_or_else(|| sid.clone())] }))
        })
        .await;
    response_of(done, |v| http::json(StatusCode::CREATED, &v))
}

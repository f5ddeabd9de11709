//! A sandbox's life after create, as E2B's SDK drives it: set timeout
//! (`sbx ttl`), pause (`sbx pause`: memory kept while the host runs) and
//! connect (resume a paused one, extend the TTL, hand out its token).

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

fn failed(e: Error) -> Refusal {
    Refusal(super::answer::status_of(&e), e.to_string())
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

/// `POST /sandboxes/{id}/pause`: 204, 409 when it is paused already. Only
/// E2B's memory-keeping pause exists here (`memory: false`, a snapshot to
/// disk, does not).
pub async fn pause(id: &str, body: &[u8], shared: Arc<Shared>) -> Response<Body> {
    let id = id.to_string();
    let checked = entry(&id, &shared).and_then(|_| object(body)).and_then(|o| {
        if o.get("memory") == Some(&json!(false)) {
            return Err(Refusal::unsupported("pause without memory (a snapshot to disk)"));
        }
        Ok(())
    });
    if let Err(r) = checked {
        return r.response();
    }
    let done = shared.blocking(move |ops| ops.driver.pause(&id).map_err(failed)).await;
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
                "paused" => !ops.driver.resume(&id).map_err(failed)?.already,
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

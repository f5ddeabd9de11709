//! E2B's control plane, as the `e2b` Python SDK 2.63.0 calls it: create
//! (`POST /v2/sandboxes`, through `make`), get info (`GET /sandboxes/{id}`), list
//! (`GET /v2/sandboxes`), kill (`DELETE /sandboxes/{id}`); the lifecycle,
//! network and metrics routes are their modules'. The rest of E2B's routes
//! answer 501 in E2B's error shape, saying so.

use std::collections::BTreeMap;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use super::answer::{response_of, sandbox_json, status_of, ENVD_VERSION};
use super::http::{self, Body, Refusal};
use super::index::Entry;
use super::{Ops, Shared};
use crate::error::{Error, SandboxError};
use crate::model::record::Record;

/// E2B's default sandbox timeout when a create names none (its OpenAPI spec).
const DEFAULT_TIMEOUT_SECS: u64 = 15;
const MAX_METADATA: usize = 64;
const MAX_ENV: usize = 256;

pub async fn handle(req: Request<Incoming>, shared: Arc<Shared>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let method = req.method().clone();
    let idem = req.headers().get("idempotency-key").map(|v| v.to_str().map(str::to_string).map_err(drop));
    let body = match method {
        Method::POST | Method::PUT | Method::PATCH => match http::read_body(req.into_body()).await {
            Ok(b) => b,
            Err(r) => return r,
        },
        _ => Default::default(),
    };
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        (Method::POST, ["v2", "sandboxes"]) => match idem {
            Some(Ok(k)) if super::idempotency::valid(&k) => create(&body, Some(k), shared).await,
            Some(_) => http::error(StatusCode::BAD_REQUEST, "Idempotency-Key must be 1-255 of a-z, 0-9, '-'"),
            None => create(&body, None, shared).await,
        },
        (Method::POST, ["sandboxes"]) => http::unsupported("the v1 create (POST /sandboxes; use POST /v2/sandboxes)"),
        (Method::GET, ["v2", "sandboxes"] | ["sandboxes"]) => list(&query, shared).await,
        (Method::GET, ["sandboxes", "metrics"]) => super::metrics::many(&query, shared).await,
        (Method::GET, ["sandboxes", id, "metrics"]) => super::metrics::one(id, &query, shared).await,
        (Method::PUT, ["sandboxes", id, "network"]) => super::network::update(id, &body, shared).await,
        (Method::GET, ["sandboxes", id]) => info(id, shared).await,
        (Method::DELETE, ["sandboxes", id]) => kill(id, shared).await,
        (Method::POST, ["sandboxes", id, "timeout"]) => super::lifecycle::set_timeout(id, &body, shared).await,
        (Method::POST, ["sandboxes", id, "pause"]) => super::lifecycle::pause(id, &body, shared).await,
        (Method::POST, ["v2", "sandboxes", id, "connect"]) => super::lifecycle::connect(id, &body, shared).await,
        (Method::POST, ["sandboxes", id, "fork"]) => super::lifecycle::fork(id, &body, shared).await,
        (Method::POST, ["sandboxes", id, "snapshots"]) => super::lifecycle::snapshot(id, &body, shared).await,
        (_, ["sandboxes", _, what] | ["v2", "sandboxes", _, what]) => http::unsupported(&format!("/{what}")),
        (_, ["sandboxes", _, what, ..]) => http::unsupported(&format!("/{what}")),
        (_, ["templates", ..] | ["v2", "templates", ..] | ["v3", "templates", ..]) => {
            http::unsupported("building templates")
        }
        (_, ["snapshots", ..]) => http::unsupported("snapshots"),
        (_, ["volumes", ..]) => http::unsupported("volumes"),
        _ => http::error(StatusCode::NOT_FOUND, "no such route"),
    }
}

pub use super::make::NewSandbox;

fn bad(message: impl Into<String>) -> Refusal {
    Refusal::bad(message)
}

/// `NewSandboxV2` as the SDK sends it; what sbx cannot do yet is refused by name.
pub fn parse_new(body: &[u8]) -> Result<NewSandbox, Refusal> {
    let v: Value = serde_json::from_slice(body).map_err(|e| bad(format!("the body is not JSON: {e}")))?;
    let o = v.as_object().ok_or_else(|| bad("the body must be a JSON object"))?;
    let template = o.get("templateID").and_then(Value::as_str).ok_or_else(|| bad("templateID is required"))?;
    let set = |k: &str| o.get(k).is_some_and(|v| !v.is_null() && v != &json!(false) && v != &json!([]));
    for (field, what) in [
        ("autoPause", "autoPause"),
        ("autoResume", "autoResume"),
        ("mcp", "the MCP gateway"),
        ("iam", "iam"),
        ("volumeMounts", "volume mounts"),
    ] {
        if set(field) {
            return Err(Refusal::unsupported(what));
        }
    }
    let timeout_secs = match o.get("timeout") {
        None | Some(Value::Null) => DEFAULT_TIMEOUT_SECS,
        Some(t) => t.as_u64().ok_or_else(|| bad("timeout must be a whole number of seconds"))?,
    };
    crate::spec::parse_ttl(&format!("{timeout_secs}s")).map_err(|e| bad(format!("timeout: {e}")))?;
    let strings = |k: &str, max: usize| -> Result<Vec<(String, String)>, Refusal> {
        let Some(m) = o.get(k).filter(|v| !v.is_null()) else { return Ok(vec![]) };
        let m = m.as_object().ok_or_else(|| bad(format!("{k} must be an object of strings")))?;
        if m.len() > max {
            return Err(bad(format!("{k} has more than {max} entries")));
        }
        m.iter()
            .map(|(k2, v)| match v.as_str() {
                Some(s) => Ok((k2.clone(), s.to_string())),
                None => Err(bad(format!("{k}.{k2} must be a string"))),
            })
            .collect()
    };
    let env = strings("envVars", MAX_ENV)?;
    for (k, v) in &env {
        env_var(k, v).map_err(|e| bad(format!("envVars: {e}")))?;
    }
    let metadata: BTreeMap<String, String> = strings("metadata", MAX_METADATA)?.into_iter().collect();
    if metadata.iter().any(|(k, v)| k.len() > 256 || v.len() > 4096) {
        return Err(bad("a metadata key is over 256 bytes or a value over 4096"));
    }
    let network = super::network::NetworkAsk::parse(o, o.get("network"))?;
    Ok(NewSandbox { template: template.to_string(), timeout_secs, env, metadata, network })
}

/// The longest value of one variable: each is one argument of `docker
/// run` or `docker exec`, and Linux refuses an argument over 128 KiB.
const MAX_ENV_VALUE: usize = 32 * 1024;

/// One variable of a request, checked as `--env K=V` is; a name holding
/// `=` is refused, not split into another name and value.
pub fn env_var(k: &str, v: &str) -> Result<(String, String), crate::model::invalid::Invalid> {
    if v.len() > MAX_ENV_VALUE {
        let reason = format!("the value is {} bytes, over {MAX_ENV_VALUE}", v.len());
        return Err(crate::model::invalid::Invalid::new("--env", k.escape_debug().to_string(), reason));
    }
    match crate::spec::parse_env(&format!("{k}={v}"))? {
        (name, _) if name != k => Err(crate::model::invalid::Invalid::new(
            "--env",
            k.escape_debug().to_string(),
            "a name must be letters, digits and '_'",
        )),
        kv => Ok(kv),
    }
}

async fn create(body: &[u8], key: Option<String>, shared: Arc<Shared>) -> Response<Body> {
    use super::idempotency::{digest, Claim};
    let new = match parse_new(body) {
        Ok(n) => n,
        Err(r) => return r.response(),
    };
    let d = digest(body);
    if let Some(k) = &key {
        match shared.idempotency.claim(k, d) {
            Claim::New => {}
            Claim::Replay(v) => return http::json(StatusCode::CREATED, &v),
            Claim::Busy => return http::error(StatusCode::CONFLICT, "a create with this Idempotency-Key is in flight"),
            Claim::Mismatch => {
                return http::error(StatusCode::UNPROCESSABLE_ENTITY, "this Idempotency-Key came with another request")
            }
        }
    }
    let s2 = shared.clone();
    let made = shared.blocking(move |ops| made(ops, &s2, new)).await;
    if let Some(k) = &key {
        shared.idempotency.finish(k, d, made.as_ref().and_then(|r| r.as_ref().ok()));
    }
    response_of(made, |v| http::json(StatusCode::CREATED, &v))
}

/// The sandbox `new` asks for, made (`make`) and recorded in the index
/// with a token of its own; rolled back when it cannot be recorded.
pub(crate) fn made(ops: &Ops, shared: &Shared, new: NewSandbox) -> Result<Value, Refusal> {
    let template = super::make::template_for(ops, &shared.config.templates, &new.template)?;
    let made = super::make::make(ops, &shared.config.defaults, &template, &new)?;
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let entry = Entry {
        // Unguessable, one per sandbox: the only credential its envd API takes.
        token: super::config::random_hex(32),
        template: new.template.clone(),
        metadata: new.metadata,
        started_at,
        cpu_count: made.cpu_count,
        memory_mb: made.memory_mb,
    };
    let answer = sandbox_json(&made.id, &entry);
    if let Err(e) = shared.index.insert(&made.id, entry) {
        // A sandbox the API cannot reach is rolled back, not left behind.
        let _ = ops.driver.destroy(std::slice::from_ref(&made.id));
        return Err(Refusal(status_of(&e), e.to_string()));
    }
    Ok(answer)
}

/// E2B's view of one sandbox: `SandboxDetail` (with its token) or `ListedSandbox`.
pub fn describe(id: &str, e: &Entry, r: &Record, with_token: bool) -> Option<Value> {
    let state = match r.state.as_str() {
        "running" | "paused" => r.state.clone(),
        // E2B's pause of a --snapshots sandbox (memory and files on disk).
        "hibernated" => "paused".to_string(),
        _ => return None,
    };
    let mut v = json!({
        "templateID": e.template,
        "sandboxID": id,
        "clientID": "sbx",
        "startedAt": e.started_at,
        "endAt": r.expires_at.clone().unwrap_or_else(|| e.started_at.clone()),
        "envdVersion": ENVD_VERSION,
        "cpuCount": e.cpu_count,
        "memoryMB": e.memory_mb,
        "diskSizeMB": 0,
        "state": state,
        "metadata": e.metadata,
    });
    if with_token {
        v["envdAccessToken"] = json!(e.token);
        v["domain"] = Value::Null;
    }
    Some(v)
}

fn not_found(id: &str) -> Response<Body> {
    http::error(StatusCode::NOT_FOUND, &format!("sandbox '{id}' not found"))
}

async fn info(id: &str, shared: Arc<Shared>) -> Response<Body> {
    let id = id.to_string();
    let Some(entry) = crate::spec::parse_id(&id).ok().and_then(|_| shared.index.get(&id)) else {
        return not_found(&id);
    };
    let looked = {
        let id = id.clone();
        shared.blocking(move |ops| ops.driver.inspect(&id)).await
    };
    match looked {
        Some(Ok(r)) => match describe(&id, &entry, &r, true) {
            Some(v) => http::json(StatusCode::OK, &v),
            None => not_found(&id),
        },
        Some(Err(Error::Sandbox(SandboxError::NotFound { .. }))) => {
            let _ = shared.index.remove(std::slice::from_ref(&id));
            not_found(&id)
        }
        Some(Err(e)) => http::error(status_of(&e), &e.to_string()),
        None => http::error(StatusCode::SERVICE_UNAVAILABLE, "sbx serve is shutting down"),
    }
}

async fn kill(id: &str, shared: Arc<Shared>) -> Response<Body> {
    let id = id.to_string();
    if crate::spec::parse_id(&id).is_err() || shared.index.get(&id).is_none() {
        return not_found(&id);
    }
    let ids = vec![id.clone()];
    match shared.blocking(move |ops| ops.driver.destroy(&ids)).await {
        Some(Ok(d)) => {
            let _ = shared.index.remove(std::slice::from_ref(&id));
            if d.removed.is_empty() {
                not_found(&id)
            } else {
                http::empty(StatusCode::NO_CONTENT)
            }
        }
        Some(Err(e)) => http::error(status_of(&e), &e.to_string()),
        None => http::error(StatusCode::SERVICE_UNAVAILABLE, "sbx serve is shutting down"),
    }
}

async fn list(query: &str, shared: Arc<Shared>) -> Response<Body> {
    let q = match super::query::ListQuery::parse(query) {
        Ok(q) => q,
        Err(m) => return bad(m).response(),
    };
    let records = match shared.blocking(|ops| ops.driver.list()).await {
        Some(Ok(r)) => r,
        Some(Err(e)) => return http::error(status_of(&e), &e.to_string()),
        None => return http::error(StatusCode::SERVICE_UNAVAILABLE, "sbx serve is shutting down"),
    };
    let entries = shared.index.all();
    let live: BTreeMap<&str, &Record> = records.iter().map(|r| (r.id.as_str(), r)).collect();
    let gone: Vec<String> = entries.keys().filter(|id| !live.contains_key(id.as_str())).cloned().collect();
    let _ = shared.index.remove(&gone);
    let mut rows: Vec<(String, Value)> = entries
        .iter()
        .filter_map(|(id, e)| Some((e, describe(id, e, live.get(id.as_str())?, false)?)))
        .filter(|(e, v)| q.wants(v["state"].as_str().unwrap_or(""), &e.metadata))
        .map(|(e, v)| (format!("{} {}", e.started_at, v["sandboxID"].as_str().unwrap_or("")), v))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let (page, next) = q.page(rows);
    let mut r = http::json(StatusCode::OK, &Value::Array(page));
    if let Some(n) = next {
        r.headers_mut().insert("x-next-token", n.parse().expect("a hex token is a header value"));
    }
    r
}

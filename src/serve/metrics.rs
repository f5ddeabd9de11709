//! `get_metrics` (`GET /sandboxes/{id}/metrics`) and the many-sandbox
//! form (`GET /sandboxes/metrics?sandbox_ids=A,B`), from `sbx stats`'
//! figures (docker's), in E2B's `SandboxMetric` fields. sbx keeps no
//! history: the answer is one sample, taken now (none when `start`..`end`
//! excludes now). A sandbox has no disk of its own (its root is read-only,
//! every writable place a tmpfs counted in its memory): disk is 0 of 0;
//! docker reports memory without its page cache, so `memCache` is 0.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use super::answer::{response_of, status_of};
use super::http::{self, Body, Refusal};
use super::{Ops, Shared};
use crate::workbench::Stats;

/// The most sandboxes one many-sandbox request may name.
const MAX_IDS: usize = 100;

/// One sample in E2B's shape. `cpu_count` is E2B's (whole CPUs); docker's
/// CPU percent is of one CPU, E2B's of all the sandbox's.
pub fn metric(s: &Stats, cpu_count: u32, at: SystemTime) -> Value {
    let pct = (s.cpu_percent / f64::from(cpu_count.max(1))).clamp(0.0, 100.0);
    let pct = if pct.is_finite() { pct } else { 0.0 };
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    json!({
        "timestamp": humantime::format_rfc3339_seconds(at).to_string(),
        "timestampUnix": secs,
        "cpuCount": cpu_count,
        "cpuUsedPct": (pct * 100.0).round() / 100.0,
        "memUsed": s.memory_bytes,
        "memTotal": s.memory_limit_bytes,
        "memCache": 0,
        "diskUsed": 0,
        "diskTotal": 0,
    })
}

/// `start` and `end` (unix seconds), each optional.
fn window(query: &str) -> Result<(Option<u64>, Option<u64>), Refusal> {
    let mut w = (None, None);
    for (k, v) in url_pairs(query)? {
        let n = || v.parse::<u64>().map_err(|_| Refusal::bad(format!("{k} must be unix seconds")));
        match k.as_str() {
            "start" => w.0 = Some(n()?),
            "end" => w.1 = Some(n()?),
            _ => {}
        }
    }
    Ok(w)
}

/// The query's pairs; a malformed one is a 400.
fn url_pairs(query: &str) -> Result<Vec<(String, String)>, Refusal> {
    super::query::pairs(query).ok_or_else(|| Refusal::bad("the query is not valid percent-encoded UTF-8"))
}

/// docker's figures for `ids` (sandboxes this server made), by id; the
/// missing ones left out.
fn sample(ops: &Ops, ids: &[String]) -> Result<BTreeMap<String, Stats>, Refusal> {
    let mut containers = Vec::new();
    for id in ids {
        match ops.open(id) {
            Ok(t) => containers.push(t.container.to_string()),
            Err(crate::error::Error::Sandbox(crate::error::SandboxError::NotFound { .. })) => {}
            Err(e) => return Err(Refusal(status_of(&e), e.to_string())),
        }
    }
    if containers.is_empty() {
        return Ok(BTreeMap::new());
    }
    let (stats, _gone) = crate::workbench::stats_present(ops.driver.docker(), &containers)
        .map_err(|e| Refusal(status_of(&e), e.to_string()))?;
    // docker names each by its container's name, the sandbox id.
    Ok(stats.into_iter().filter(|s| ids.contains(&s.id)).map(|s| (s.id.clone(), s)).collect())
}

/// `GET /sandboxes/{id}/metrics[?start=&end=]`: a list of one sample.
pub async fn one(id: &str, query: &str, shared: Arc<Shared>) -> Response<Body> {
    let id = id.to_string();
    let Some(entry) = crate::spec::parse_id(&id).ok().and_then(|_| shared.index.get(&id)) else {
        return http::error(StatusCode::NOT_FOUND, &format!("sandbox '{id}' not found"));
    };
    let (start, end) = match window(query) {
        Ok(w) => w,
        Err(r) => return r.response(),
    };
    let done = shared
        .blocking(move |ops| {
            let now = SystemTime::now();
            let got = sample(ops, std::slice::from_ref(&id))?;
            let s = got.get(&id).ok_or_else(|| Refusal(StatusCode::NOT_FOUND, format!("sandbox '{id}' not found")))?;
            let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let within = start.is_none_or(|t| t <= secs) && end.is_none_or(|t| secs <= t);
            Ok(if within { vec![metric(s, entry.cpu_count, now)] } else { Vec::new() })
        })
        .await;
    response_of(done, |v| http::json(StatusCode::OK, &Value::Array(v)))
}

/// `GET /sandboxes/metrics?sandbox_ids=A,B`: `{"sandboxes": {ID: sample}}`
/// for those of them this server made that run.
pub async fn many(query: &str, shared: Arc<Shared>) -> Response<Body> {
    let pairs = match url_pairs(query) {
        Ok(p) => p,
        Err(r) => return r.response(),
    };
    let ids: Vec<String> = pairs
        .into_iter()
        .filter(|(k, _)| k == "sandbox_ids")
        .flat_map(|(_, v)| v.split(',').map(str::to_string).collect::<Vec<_>>())
        .filter(|id| !id.is_empty())
        .collect();
    if ids.is_empty() {
        return Refusal::bad("sandbox_ids is required: a comma-separated list of sandbox ids").response();
    }
    if ids.len() > MAX_IDS {
        return Refusal::bad(format!("sandbox_ids names more than {MAX_IDS} sandboxes")).response();
    }
    let known: Vec<(String, u32)> = ids
        .iter()
        .filter(|id| crate::spec::parse_id(id).is_ok())
        .filter_map(|id| shared.index.get(id).map(|e| (id.clone(), e.cpu_count)))
        .collect();
    let done = shared
        .blocking(move |ops| {
            let now = SystemTime::now();
            let asked: Vec<String> = known.iter().map(|(id, _)| id.clone()).collect();
            let got = sample(ops, &asked)?;
            let mut out = serde_json::Map::new();
            for (id, cpus) in &known {
                if let Some(s) = got.get(id) {
                    out.insert(id.clone(), metric(s, *cpus, now));
                }
            }
            Ok(json!({ "sandboxes": out }))
        })
        .await;
    response_of(done, |v| http::json(StatusCode::OK, &v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_in_e2b_fields_and_its_cpu_of_all_the_sandbox_cpus() {
        let s = Stats {
            id: "sbx-0123456789ab".into(),
            cpu_percent: 150.0,
            memory_bytes: 3 << 20,
            memory_limit_bytes: 512 << 20,
            net_rx_bytes: 0,
            net_tx_bytes: 0,
            pids: 2,
        };
        let at = UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let m = metric(&s, 2, at);
        assert_eq!(m["cpuUsedPct"], 75.0);
        assert_eq!((m["memUsed"].as_u64(), m["memTotal"].as_u64()), (Some(3 << 20), Some(512 << 20)));
        assert_eq!((m["cpuCount"].as_u64(), m["timestampUnix"].as_u64()), (Some(2), Some(1_700_000_000)));
        assert_eq!(m["timestamp"], "2023-11-14T22:13:20Z");
        for k in ["memCache", "diskUsed", "diskTotal"] {
            assert_eq!(m[k], 0, "{k}");
        }
        let hostile = Stats { cpu_percent: f64::NAN, ..s.clone() };
        assert_eq!(metric(&hostile, 1, at)["cpuUsedPct"], 0.0, "always a number");
        assert_eq!(metric(&Stats { cpu_percent: 900.0, ..s }, 1, at)["cpuUsedPct"], 100.0, "never over 100");
    }

    #[test]
    fn the_window_is_unix_seconds() {
        assert_eq!(window("start=10&end=20").unwrap(), (Some(10), Some(20)));
        assert_eq!(window("").unwrap(), (None, None));
        assert_eq!(window("start=x").unwrap_err().0, StatusCode::BAD_REQUEST);
        assert_eq!(url_pairs("sandbox_ids=a%2Cb").unwrap(), vec![("sandbox_ids".to_string(), "a,b".to_string())]);
    }
}

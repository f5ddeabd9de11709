//! `sbx ls`: this tool's sandboxes, from one `docker ps`.

use std::time::SystemTime;

use super::Context;
use crate::error::Result;
use crate::model::record::Record;

pub fn exec(ctx: &Context) -> Result<()> {
    let mut records = ctx.driver.list()?;
    let total = crate::host::memory::engine_mem_total_mib(ctx.driver.engine()?);
    if let Some(w) = overcommit(&records, total) {
        ctx.out.warn("memory_overcommitted", &w);
    }
    if ctx.json() {
        ctx.driver.read_allowlists(&mut records)?;
        let e2b = crate::serve::e2b_records(&ctx.driver.state()?.state.dir)?;
        return ctx.out.json_line(&with_e2b(&records, &e2b));
    }
    ctx.out.data(&table(&records, SystemTime::now()))
}

/// The records as `--json` says them; one `sbx serve` made also carries
/// its E2B template and metadata (`e2b`), which labels cannot hold.
pub fn with_e2b(records: &[Record], e2b: &std::collections::BTreeMap<String, serde_json::Value>) -> serde_json::Value {
    let rows = records.iter().map(|r| {
        let mut v = serde_json::to_value(r).expect("a record serializes");
        if let Some(x) = e2b.get(&r.id) {
            v["e2b"] = x.clone();
        }
        v
    });
    serde_json::Value::Array(rows.collect())
}

/// The running and paused sandboxes' memory limits add up to more than the
/// host has (known on a local engine only): each keeps its own, but
/// together they can drive the host to its OOM killer.
pub fn overcommit(records: &[Record], host_mib: Option<u64>) -> Option<String> {
    let host = host_mib?;
    let live = records.iter().filter(|r| r.state == "running" || r.state == "paused");
    let (n, sum) = live.fold((0, 0), |(n, s), r| (n + 1, s + r.memory_mib.unwrap_or(0)));
    (sum > host).then(|| {
        format!(
            "the memory limits of {n} live sandboxes add up to {sum} MiB, more than this host's {host} MiB; give --memory for the workload, or destroy idle sandboxes"
        )
    })
}

pub fn table(records: &[Record], now: SystemTime) -> String {
    let mut rows = vec![["ID", "SESSION", "TIER", "RUNTIME", "ROUTES", "STATE", "AGE", "EXPIRES"].map(String::from)];
    for r in records {
        let routes = if r.routes.is_empty() {
            "-".to_string()
        } else {
            r.routes.keys().map(|k| route_cell(k, r)).collect::<Vec<_>>().join(",")
        };
        let state = if r.expired { "expired".to_string() } else { r.state.clone() };
        let expires = match (&r.expires_at, &r.time_left) {
            (Some(at), Some(left)) => format!("{at} ({left} left)"),
            _ => "-".into(),
        };
        rows.push([
            r.id.clone(),
            r.session.clone(),
            r.tier.to_string(),
            r.runtime.clone(),
            routes,
            state,
            age(&r.created_at, now),
            expires,
        ]);
    }
    let widths: Vec<usize> = (0..8).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut s = String::new();
    for row in rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        s.push_str(cells.join("  ").trim_end());
        s.push('\n');
    }
    s
}

/// A route's name in the table; the gate's (the reserved kind `egress`,
/// there while the gate is not revoked) says its mode: `egress(enforce)`.
fn route_cell(kind: &str, r: &Record) -> String {
    match &r.egress {
        Some(e) if kind == crate::spec::EGRESS_KIND => format!("{kind}({})", e.mode),
        _ => kind.to_string(),
    }
}

fn age(created: &str, now: SystemTime) -> String {
    let Ok(t) = humantime::parse_rfc3339(created) else { return "?".into() };
    let secs = now.duration_since(t).map(|d| d.as_secs()).unwrap_or(0);
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    #[test]
    fn table_lines_up() {
        let created = humantime::parse_rfc3339("2026-11-29T09:00:00Z").unwrap();
        let r = sample();
        let expired = Record {
            expires_at: Some("2026-11-29T09:01:00.000Z".into()),
            time_left: Some("0s".into()),
            expired: true,
            ..r.clone()
        };
        let t = table(&[r, expired], created + Duration::from_secs(150));
        assert_eq!(
            t,
            "ID                SESSION  TIER  RUNTIME  ROUTES  STATE    AGE  EXPIRES\n\
             sbx-0123456789ab  s        2     runc     a,b     running  2m   -\n\
             sbx-0123456789ab  s        2     runc     a,b     expired  2m   2026-11-29T09:01:00.000Z (0s left)\n"
        );
    }

    fn sample() -> Record {
        Record {
            id: "sbx-0123456789ab".into(),
            session: "s".into(),
            image: "i".into(),
            tier: 2,
            socket: "/x".into(),
            runtime: "runc".into(),
            channel: crate::host::channel::Kind::Direct,
            routes: BTreeMap::from([("a".into(), "sbx-a".into()), ("b".into(), "sbx-b".into())]),
            created_at: "2026-11-29T09:00:00Z".into(),
            state: "running".into(),
            user: "65534:65534".into(),
            expires_at: None,
            time_left: None,
            expired: false,
            exit_code: None,
            oom_killed: false,
            reason: None,
            targets: BTreeMap::new(),
            memory_mib: Some(3000),
            networks: Vec::new(),
            gaps: Vec::new(),
            persist_size: None,
            egress: None,
        }
    }

    #[test]
    fn limits_past_the_hosts_ram_are_a_warning() {
        let r = |state: &str, m: u64| Record { state: state.into(), memory_mib: Some(m), ..sample() };
        let live = [r("running", 3000), r("paused", 3000), r("exited", 3000)];
        assert_eq!(overcommit(&live, Some(8000)), None, "a stopped sandbox holds nothing");
        assert_eq!(
            overcommit(&live, Some(5000)).unwrap(),
            "the memory limits of 2 live sandboxes add up to 6000 MiB, more than this host's 5000 MiB; give --memory for the workload, or destroy idle sandboxes"
        );
        assert_eq!(overcommit(&live, None), None, "a remote engine's size is not known");
    }
}

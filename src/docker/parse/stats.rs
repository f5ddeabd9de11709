//! `docker stats` figures as numbers.

/// Per-sandbox figures, as numbers.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Stats {
    pub id: String,
    pub cpu_percent: f64,
    /// Excluding page cache, as docker reports it.
    pub memory_bytes: u64,
    pub memory_limit_bytes: u64,
    pub net_rx_bytes: u64,
    pub net_tx_bytes: u64,
    pub pids: u64,
}

/// "1.5MiB", "12kB", "0B" -> bytes.
pub fn size(s: &str) -> u64 {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().unwrap_or(0.0);
    let mult: f64 = match unit.trim() {
        "B" | "" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024f64.powi(4),
        _ => 1.0,
    };
    (n * mult) as u64
}

/// `docker stats --format '{{json .}}'` (see `argv::stats`), one sandbox per line.
pub fn stats(stdout: &str) -> Vec<Stats> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            let pair = |k: &str| {
                let t = s(k);
                let (a, b) = t.split_once('/').unwrap_or((&t, "0B"));
                (size(a), size(b))
            };
            let (mem, limit) = pair("MemUsage");
            let (rx, tx) = pair("NetIO");
            Stats {
                id: s("Name"),
                cpu_percent: s("CPUPerc").trim_end_matches('%').parse().unwrap_or(0.0),
                memory_bytes: mem,
                memory_limit_bytes: limit,
                net_rx_bytes: rx,
                net_tx_bytes: tx,
                pids: s("PIDs").parse().unwrap_or(0),
            }
        })
        .collect()
}

/// Whether docker's stderr says exactly `id` does not exist (`docker stats`:
/// the whole name, where [`super::missing_containers`] takes a suffix).
pub fn names_missing(stderr: &str, id: &str) -> bool {
    stderr.lines().any(|l| l.split_once("No such container: ").is_some_and(|(_, rest)| rest.trim() == id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_from_captured_output() {
        // Captured from `docker stats --no-stream --format '{{json .}}'` on engine 20.10.
        let line = r#"{"BlockIO":"0B / 0B","CPUPerc":"1.25%","Container":"abc","ID":"abc","MemPerc":"5.47%","MemUsage":"1.75MiB / 32MiB","Name":"sbx-0123456789ab","NetIO":"1.2kB / 648B","PIDs":"3"}"#;
        let s = stats(line);
        assert_eq!(s[0].id, "sbx-0123456789ab");
        assert_eq!(s[0].cpu_percent, 1.25);
        assert_eq!((s[0].memory_bytes, s[0].memory_limit_bytes), (1835008, 33554432));
        assert_eq!((s[0].net_rx_bytes, s[0].net_tx_bytes, s[0].pids), (1200, 648, 3));
        assert_eq!(size("0B"), 0);
        assert_eq!(size("2GiB"), 2 * 1024 * 1024 * 1024);
        let gone = "Error response from daemon: No such container: sbx-000000000002";
        assert!(names_missing(gone, "sbx-000000000002") && !names_missing(gone, "000000000002"));
    }
}

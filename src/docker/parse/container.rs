//! `docker container inspect` and `docker ps` as sbx reads them: the raw
//! container, whether sbx made it, the [`Record`] it means, and the state of
//! its main process.

use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::docker::DockerError;
use crate::model::record::*;
use crate::model::{channel, paths, token};

/// A container as docker reports it, before sbx interprets it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawContainer {
    pub name: String,
    pub state: String,
    pub networks: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// Everything `docker container inspect` said (Null when from `docker ps`).
    pub full: serde_json::Value,
}

impl RawContainer {
    /// sbx created this container. Labels alone prove nothing (an image can
    /// carry any label and containers inherit them), so the owner label must
    /// be the HMAC of the container's name under this host's key.
    ///
    /// The token covers every sbx label value too (`state::record_token`),
    /// so a label the image added (`sbx.private`, `sbx.volume`, ...) or a
    /// changed one fails the check. From a full inspect,
    /// an sbx-namespace label sbx never writes fails it as well.
    pub fn is_sbx(&self, key: &[u8]) -> bool {
        let foreign_key = |k: &String| k.starts_with("sbx.") && !ALL.contains(&k.as_str());
        self.labels.get(MANAGED).map(String::as_str) == Some("1")
            && self.labels.get(ID) == Some(&self.name)
            && self.labels.get(OWNER).is_some_and(|t| *t == token::record_token(key, &self.name, &self.labels))
            && !self.labels.keys().any(foreign_key)
    }

    /// The expiry: the state dir's (moved by `sbx ttl`) over the label's.
    pub fn expiry(&self, moved: Option<SystemTime>) -> Option<SystemTime> {
        moved.or_else(|| humantime::parse_rfc3339(self.labels.get(EXPIRES)?).ok())
    }

    pub fn record(&self, expiry: Option<SystemTime>, now: SystemTime) -> Record {
        let l = |k: &str| self.labels.get(k).cloned().unwrap_or_default();
        let declared: BTreeMap<String, String> = serde_json::from_str(&l(ROUTES)).unwrap_or_default();
        // sbx puts a sandbox on its route networks, or on `none` without routes.
        let ours = |n: &String| declared.values().any(|d| d == n) || (declared.is_empty() && n == "none");
        let networks: Vec<AttachedNetwork> =
            self.networks.iter().map(|n| AttachedNetwork { name: n.clone(), by_sbx: ours(n) }).collect();
        let gaps: Vec<String> = networks
            .iter()
            .filter(|n| !n.by_sbx)
            .map(|n| format!("network {} attached outside sbx: the sandbox reaches whatever is on it", n.name))
            .collect();
        let mut tier = l(TIER).parse().unwrap_or(0);
        if !gaps.is_empty() {
            tier = tier.min(1);
        }
        let routes = declared.into_iter().filter(|(_, net)| self.networks.contains(net)).collect();
        let egress = self.labels.get(EGRESS).map(|mode| Egress {
            mode: mode.clone(),
            network: l(EGRESS_NETWORK),
            active: self.networks.contains(&crate::model::gate::network(&self.name)),
            allow: None,
            secrets: self.labels.get(crate::model::record::SECRETS).and_then(|s| serde_json::from_str(s).ok()),
        });
        Record {
            id: self.name.clone(),
            session: l(SESSION),
            image: l(IMAGE),
            tier,
            runtime: self.labels.get(RUNTIME).cloned().unwrap_or_else(|| crate::model::runtime::DEFAULT.into()),
            channel: channel::Kind::from_label(self.labels.get(CHANNEL).map(String::as_str)),
            // The label keeps the host directory (gc, the watchdog); a relayed
            // sandbox's socket is only inside it.
            socket: match self.labels.get(CHANNEL).map(String::as_str) {
                Some("exec") => paths::SANDBOX_SOCKET.to_string(),
                _ => l(SOCKET),
            },
            routes,
            created_at: l(CREATED),
            state: self.state.clone(),
            user: l(USER),
            expires_at: expiry.map(|e| humantime::format_rfc3339_millis(e).to_string()),
            time_left: expiry.map(|e| {
                let left = e.duration_since(now).unwrap_or_default();
                humantime::format_duration(std::time::Duration::from_secs(left.as_secs())).to_string()
            }),
            expired: expiry.is_some_and(|e| e <= now),
            exit_code: self.exit_code(),
            oom_killed: self.full["State"]["OOMKilled"] == true,
            reason: self.stop_reason(),
            targets: serde_json::from_str(&l(TARGETS)).unwrap_or_default(),
            memory_mib: self.labels.get(MEMORY).and_then(|m| m.parse().ok()),
            networks,
            gaps,
            persist_size: self.labels.get(PERSIST_SIZE).cloned(),
            egress,
        }
    }

    fn exit_code(&self) -> Option<i64> {
        let st = &self.full["State"];
        (st["Status"] == "exited" || st["Status"] == "dead").then(|| st["ExitCode"].as_i64()).flatten()
    }

    /// Why a stopped sandbox stopped; exit 137 is SIGKILL, usually the OOM killer.
    fn stop_reason(&self) -> Option<String> {
        let code = self.exit_code()?;
        let mem = self.full["HostConfig"]["Memory"].as_i64().unwrap_or(0) / (1024 * 1024);
        Some(if self.full["State"]["OOMKilled"] == true {
            format!("killed by the OOM killer at its memory limit ({mem} MiB); raise --memory")
        } else if code == 137 && mem > 0 {
            // containerd can deliver the OOM event after the exit, or lose
            // it (containerd#8893, gVisor#12838): docker then records no
            // OOM kill for one. Said, so the operator does not rule it out.
            format!(
                "killed by SIGKILL; docker recorded no OOM kill, but it can miss one: \
                 if it may have used its {mem} MiB, raise --memory"
            )
        } else if code == 137 {
            "killed by SIGKILL".to_string()
        } else if code > 128 {
            format!("killed by signal {}", code - 128)
        } else {
            format!("exited with code {code}")
        })
    }

    /// Routes as declared at create time, revoked or not.
    pub fn declared_routes(&self) -> BTreeMap<String, String> {
        self.labels.get(ROUTES).and_then(|r| serde_json::from_str(r).ok()).unwrap_or_default()
    }
}

/// `docker container inspect --format '{{json .}}'`: one JSON object per line.
pub fn parse_inspect(stdout: &str, command: &str) -> Result<Vec<RawContainer>, DockerError> {
    let mut out = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| DockerError::Parse { command: command.into(), reason: e.to_string() })?;
        let labels = v["Config"]["Labels"]
            .as_object()
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
            .unwrap_or_default();
        let networks =
            v["NetworkSettings"]["Networks"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
        out.push(RawContainer {
            name: v["Name"].as_str().unwrap_or_default().trim_start_matches('/').to_string(),
            state: v["State"]["Status"].as_str().unwrap_or_default().to_string(),
            networks,
            labels,
            full: v,
        });
    }
    Ok(out)
}

/// The `docker ps --format` template: one JSON object per container with
/// exactly the labels sbx reads, each JSON-escaped by docker itself.
pub fn ps_template() -> String {
    let labels: Vec<String> = ALL.iter().map(|k| format!("{k:?}:{{{{json (.Label {k:?})}}}}")).collect();
    format!(
        "{{\"name\":{{{{json .Names}}}},\"state\":{{{{json .State}}}},\"networks\":{{{{json .Networks}}}},\"labels\":{{{}}}}}",
        labels.join(",")
    )
}

/// Parse the lines `docker ps --format <ps_template()>` prints.
pub fn parse_ps(stdout: &str, command: &str) -> Result<Vec<RawContainer>, DockerError> {
    #[derive(serde::Deserialize)]
    struct Line {
        name: String,
        state: String,
        networks: String,
        labels: BTreeMap<String, String>,
    }
    let mut out = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let l: Line = serde_json::from_str(line)
            .map_err(|e| DockerError::Parse { command: command.into(), reason: e.to_string() })?;
        out.push(RawContainer {
            name: l.name,
            state: l.state,
            networks: l.networks.split(',').filter(|n| !n.is_empty()).map(str::to_string).collect(),
            labels: l.labels.into_iter().filter(|(_, v)| !v.is_empty()).collect(),
            full: serde_json::Value::Null,
        });
    }
    Ok(out)
}

/// A sandbox's main process, from `argv::running_pid` (`PID STATUS EXITCODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MainState {
    Running(i32),
    /// Neither running nor created: its exit code, -1 when unreadable.
    Stopped(i32),
    /// Not that shape, or not started yet.
    Unknown,
}

pub fn main_state(stdout: &str) -> MainState {
    let mut words = stdout.split_whitespace();
    let (pid, status, code) = (words.next().and_then(|p| p.parse::<i32>().ok()), words.next(), words.next());
    match (pid, status) {
        (Some(pid), Some("running")) if pid > 0 => MainState::Running(pid),
        (_, Some(s)) if s != "running" && s != "created" => {
            MainState::Stopped(code.and_then(|c| c.parse().ok()).unwrap_or(-1))
        }
        _ => MainState::Unknown,
    }
}

/// From `argv::state` (`STATUS EXITCODE`): the exit code (-1 when
/// unreadable) once the container is neither running nor created.
pub fn stopped(stdout: &str) -> Option<i32> {
    let mut words = stdout.split_whitespace();
    match (words.next(), words.next()) {
        (Some(status), Some(code)) if status != "running" && status != "created" => Some(code.parse().unwrap_or(-1)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from `docker container inspect --format '{{json .}}'` on engine 20.10 (trimmed).
    const INSPECT: &str = r#"{"Id":"7a4c","Name":"/sbx-0123456789ab","State":{"Status":"running","Running":true},"Config":{"Labels":{"sbx.managed":"1","sbx.id":"sbx-0123456789ab","sbx.owner":"OWNER","sbx.session":"s1","sbx.tier":"2","sbx.socket":"/run/sbx/sandboxes/sbx-0123456789ab/sandbox.sock","sbx.routes":"{\"inference\":\"sbx-proxy\",\"tools\":\"sbx-tools\"}","sbx.user":"65534:65534","sbx.created":"2026-11-29T09:00:00Z","sbx.image":"sha256:ab"}},"NetworkSettings":{"Networks":{"sbx-proxy":{"IPAddress":"172.18.0.2"}}}}"#;

    const KEY: &[u8] = &[9u8; 32];

    fn inspected() -> Vec<RawContainer> {
        let mut raw = parse_inspect(INSPECT, "x").unwrap();
        seal(&mut raw[0]);
        raw
    }

    /// Write the token sbx would have written for these labels.
    fn seal(r: &mut RawContainer) {
        let token = token::record_token(KEY, &r.name, &r.labels);
        r.labels.insert(OWNER.into(), token);
    }

    #[test]
    fn a_label_the_image_added_or_changed_is_not_ownership() {
        let raw = inspected().remove(0);
        assert!(raw.is_sbx(KEY));
        // An image's `LABEL sbx.private=...` or `sbx.volume=...`.
        for (k, v) in [(PRIVATE, r#"{"sbx-rtsvc":"rtsvc"}"#), (VOLUME, "sbx-state-victim"), (TIER, "1")] {
            let mut r = raw.clone();
            r.labels.insert(k.into(), v.into());
            assert!(!r.is_sbx(KEY), "{k} added or changed after the token was made");
        }
        let mut r = raw.clone();
        r.labels.insert("sbx.some-later-key".into(), "x".into());
        assert!(!r.is_sbx(KEY), "an sbx label sbx never writes");
        let mut r = raw.clone();
        r.labels.insert("org.opencontainers.image.title".into(), "x".into());
        assert!(r.is_sbx(KEY), "labels outside sbx's namespace do not matter");
        // Through `docker ps`, which reads only sbx's labels, the same holds.
        let mut r = raw.clone();
        r.full = serde_json::Value::Null;
        r.labels.insert(VOLUME.into(), "sbx-state-victim".into());
        assert!(!r.is_sbx(KEY));
    }

    #[test]
    fn inspect_round_trip_filters_revoked_routes() {
        let raw = inspected();
        assert_eq!(raw.len(), 1);
        assert!(raw[0].is_sbx(KEY));
        let r = raw[0].record(None, SystemTime::now());
        assert_eq!(r.id, "sbx-0123456789ab");
        assert_eq!(r.tier, 2);
        assert_eq!(r.routes, BTreeMap::from([("inference".to_string(), "sbx-proxy".to_string())]));
        assert_eq!(raw[0].declared_routes().len(), 2);
    }

    #[test]
    fn a_label_copied_from_an_image_is_not_ownership() {
        let raw = inspected().remove(0);
        assert!(!raw.is_sbx(&[8u8; 32]), "a token made under another key");
        let mut renamed = raw.clone();
        renamed.name = "sbx-0123456789ac".into();
        renamed.labels.insert(ID.into(), renamed.name.clone());
        assert!(!renamed.is_sbx(KEY), "a token copied to another name");
        let mut unowned = raw.clone();
        unowned.labels.remove(OWNER);
        assert!(!unowned.is_sbx(KEY));
    }

    #[test]
    fn a_network_sbx_did_not_attach_is_reported_and_lowers_the_tier() {
        let mut raw = inspected().remove(0);
        let r = raw.record(None, SystemTime::now());
        assert_eq!(r.networks, vec![AttachedNetwork { name: "sbx-proxy".into(), by_sbx: true }]);
        assert_eq!((r.tier, r.gaps.len()), (2, 0));
        // Another create attached it to its private network.
        raw.networks.push("sbx-0000000000aa-pivot".into());
        let r = raw.record(None, SystemTime::now());
        assert_eq!(r.networks[1], AttachedNetwork { name: "sbx-0000000000aa-pivot".into(), by_sbx: false });
        assert_eq!(r.tier, 1);
        assert!(r.gaps[0].contains("sbx-0000000000aa-pivot attached outside sbx"), "{:?}", r.gaps);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["networks"][1]["by_sbx"], false);
        // Without routes sbx puts a sandbox on `none`, and only there.
        raw.labels.remove(ROUTES);
        raw.networks = vec!["none".into()];
        let r = raw.record(None, SystemTime::now());
        assert_eq!((r.tier, r.networks[0].by_sbx), (2, true));
        raw.networks.push("bridge".into());
        assert_eq!(raw.record(None, SystemTime::now()).tier, 1);
    }

    #[test]
    fn expiry_moved_by_ttl_wins_and_expired_shows() {
        let mut raw = inspected().remove(0);
        let now = humantime::parse_rfc3339("2026-11-29T10:00:00Z").unwrap();
        assert_eq!(raw.expiry(None), None);
        let r = raw.record(None, now);
        assert!(r.expires_at.is_none() && !r.expired);
        raw.labels.insert(EXPIRES.into(), "2026-11-29T10:30:00Z".into());
        let r = raw.record(raw.expiry(None), now);
        assert_eq!(
            (r.expires_at.as_deref(), r.time_left.as_deref(), r.expired),
            (Some("2026-11-29T10:30:00.000Z"), Some("30m"), false)
        );
        let moved = humantime::parse_rfc3339("2026-11-29T09:59:00Z").unwrap();
        let r = raw.record(raw.expiry(Some(moved)), now);
        assert_eq!((r.time_left.as_deref(), r.expired), (Some("0s"), true));
    }

    #[test]
    fn a_stopped_sandbox_says_why() {
        let mut raw = inspected().remove(0);
        assert_eq!(raw.record(None, SystemTime::now()).reason, None, "running");
        raw.full["State"] = serde_json::json!({"Status": "exited", "ExitCode": 137, "OOMKilled": true});
        raw.full["HostConfig"] = serde_json::json!({"Memory": 33554432});
        let r = raw.record(None, SystemTime::now());
        assert_eq!((r.exit_code, r.oom_killed), (Some(137), true));
        assert!(r.reason.unwrap().contains("OOM killer at its memory limit (32 MiB)"));
        // A SIGKILL docker did not record as an OOM kill, which it can miss.
        raw.full["State"] = serde_json::json!({"Status": "exited", "ExitCode": 137, "OOMKilled": false});
        let why = raw.record(None, SystemTime::now()).reason.unwrap();
        assert!(
            why.starts_with("killed by SIGKILL; docker recorded no OOM kill") && why.contains("its 32 MiB"),
            "{why}"
        );
        raw.full["HostConfig"] = serde_json::json!({});
        assert_eq!(raw.record(None, SystemTime::now()).reason.as_deref(), Some("killed by SIGKILL"));
        raw.full["HostConfig"] = serde_json::json!({"Memory": 33554432});
        raw.full["State"] = serde_json::json!({"Status": "exited", "ExitCode": 143, "OOMKilled": false});
        assert_eq!(raw.record(None, SystemTime::now()).reason.as_deref(), Some("killed by signal 15"));
        raw.full["State"] = serde_json::json!({"Status": "exited", "ExitCode": 3});
        assert_eq!(raw.record(None, SystemTime::now()).reason.as_deref(), Some("exited with code 3"));
    }

    #[test]
    fn ps_lines_parse() {
        let line = r#"{"name":"sbx-0123456789ab","state":"running","networks":"sbx-a,sbx-b","labels":{"sbx.managed":"1","sbx.id":"sbx-0123456789ab","sbx.routes":"{\"a\":\"sbx-a\",\"c\":\"sbx-c\"}","sbx.session":""}}"#;
        let raw = parse_ps(&format!("{line}\n\n"), "x").unwrap();
        assert_eq!(raw[0].networks, vec!["sbx-a", "sbx-b"]);
        assert!(!raw[0].labels.contains_key(SESSION));
        assert_eq!(raw[0].record(None, SystemTime::now()).routes.keys().collect::<Vec<_>>(), vec!["a"]);
        assert!(parse_ps("not json", "x").is_err());
    }

    #[test]
    fn ps_template_asks_for_every_label() {
        let t = ps_template();
        for k in ALL {
            assert!(t.contains(&format!("(.Label \"{k}\")")), "{k}");
        }
        assert!(t.starts_with("{\"name\":{{json .Names}}"));
    }

    #[test]
    fn container_states_from_captured_output() {
        assert_eq!(main_state("4242 running 0\n"), MainState::Running(4242));
        assert_eq!(main_state("0 exited 3\n"), MainState::Stopped(3));
        assert_eq!(main_state("0 dead x\n"), MainState::Stopped(-1));
        assert_eq!(main_state("0 created 0\n"), MainState::Unknown);
        assert_eq!(main_state("0 running 0\n"), MainState::Unknown, "running without a pid yet");
        assert_eq!(main_state(""), MainState::Unknown);
        assert_eq!(stopped("exited 137\n"), Some(137));
        assert_eq!(stopped("exited ?\n"), Some(-1));
        assert_eq!(stopped("running 0\n"), None);
        assert_eq!(stopped("created 0\n"), None);
        assert_eq!(stopped("exited"), None, "both words or nothing");
    }
}

//! Pure parsers for docker's output, tested on text captured from the
//! engine this project runs on (20.10, with a 28.x CLI).
//!
//! One file per area: `container` (inspect, ps, state), `network`, `image`,
//! `volume`, `engine` (version, info, image ids), `events` (the event stream), `exec`,
//! `stats`, `pull`, and
//! `stderr` (what docker's error messages mean). Callers use the flat
//! `parse::NAME` paths re-exported here.

mod container;
mod engine;
mod events;
mod exec;
mod image;
mod network;
mod pull;
mod stats;
mod stderr;
mod volume;

pub use container::{main_state, parse_inspect, parse_ps, ps_template, stopped, MainState, RawContainer};
pub use engine::{
    context_host, current_context, docker_time, engine_id, engine_time, engine_version, imported_id, operating_system,
    runtimes, EngineVersion,
};
pub use events::{container_state, parse_event, DockerEvent, EventMapper, ExitState, ACTIONS, MAX_EVENT_LINE};
pub use exec::exec_status;
pub use image::{image_config, image_user, ImageConfig, IMAGE_FORMAT};
pub use network::{networks, Gate, NetInfo, NetworkReport, PrivateNetwork, NETWORK_FORMAT};
pub use pull::{pull_failure, repo_digests, PullFailure, PullProgress};
pub use stats::{names_missing, size, stats, Stats};
pub use stderr::{
    image_missing_at_run, is_trailer, missing_containers, network_rm_failed, no_such_container, no_such_image,
    no_such_network, no_such_volume, not_connected, removal_in_progress, removal_races, rmi_kept,
};
pub use volume::{SessionVolume, VolumeUser};

/// Audit's status probes gc reaps (`argv::audit_probes` rows): those
/// whose owner token is `key`'s and whose `sbx.expires` has passed (or is
/// unreadable), as (name, container id).
pub fn expired_probes(rows: &str, key: &[u8], now: std::time::SystemTime) -> Vec<(String, String)> {
    self::rows::<[String; 4]>(rows)
        .into_iter()
        .filter(|[name, owner, _, _]| *owner == crate::model::token::owner_token(key, name))
        .filter(|[_, _, expires, _]| humantime::parse_rfc3339(expires).map_or(true, |e| e <= now))
        .map(|[name, _, _, cid]| (name, cid))
        .collect()
}

/// One JSON row per line, as the `--format '[...]'` argv above print them;
/// a line of another shape is skipped.
pub fn rows<T: serde::de::DeserializeOwned>(stdout: &str) -> Vec<T> {
    stdout.lines().filter_map(|l| serde_json::from_str(l.trim()).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_from_captured_output() {
        let users: Vec<VolumeUser> = rows("[\"sbx-000000000001\",\"sbx-vol-k\"]\nnot json\n");
        assert_eq!(users, [VolumeUser { container: "sbx-000000000001".into(), volume: "sbx-vol-k".into() }]);
        let vols: Vec<SessionVolume> = rows(" [\"sbx-vol-k\",\"k\",\"tok\"]\n[\"short\",\"row\"]\n");
        assert_eq!(vols, [SessionVolume { name: "sbx-vol-k".into(), session: "k".into(), owner: "tok".into() }]);
        let nets: Vec<PrivateNetwork> = rows("[\"sbx-0123456789ab-inference\",\"sbx-0123456789ab\",\"proxy\",\"t\"]\n");
        assert_eq!((nets[0].sandbox.as_str(), nets[0].service.as_str()), ("sbx-0123456789ab", "proxy"));
        let gates: Vec<Gate> = rows("[\"sbx-0123456789ab-gate\",\"sbx-0123456789ab\",\"t\",\"ab12\"]\n");
        assert_eq!((gates[0].sandbox.as_str(), gates[0].container.as_str()), ("sbx-0123456789ab", "ab12"));
    }
}

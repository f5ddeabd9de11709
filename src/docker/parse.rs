//! Pure parsers for docker's output, tested on text captured from the
//! engine this project runs on (20.10, with a 28.x CLI).

use std::collections::BTreeMap;

/// What sbx needs to know about one network to judge a route's boundary.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetInfo {
    pub internal: bool,
    pub driver: String,
    /// `com.docker.network.bridge.inhibit_ipv4=true`: the bridge has no host
    /// address, so the host cannot be reached through it.
    pub inhibit_ipv4: bool,
    /// The sandbox id, for a private route network sbx made.
    pub private_for: Option<String>,
}

/// The format for `docker network inspect`: one JSON array per network.
pub const NETWORK_FORMAT: &str =
    "[{{json .Name}},{{json .Internal}},{{json .Driver}},{{json .Options}},{{json .Labels}}]";

/// `docker network inspect --format NETWORK_FORMAT` prints one line per
/// network it found; the missing ones are named on stderr as `network NAME
/// not found` (20.10) or `No such network: NAME`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetworkReport {
    pub nets: BTreeMap<String, NetInfo>,
    pub missing: Vec<String>,
}

pub fn networks(asked: &[String], stdout: &str, stderr: &str) -> NetworkReport {
    type Line = (String, bool, String, Option<BTreeMap<String, String>>, Option<BTreeMap<String, String>>);
    let mut nets = BTreeMap::new();
    for line in stdout.lines() {
        let Ok((name, internal, driver, options, labels)) = serde_json::from_str::<Line>(line.trim()) else { continue };
        let options = options.unwrap_or_default();
        let labels = labels.unwrap_or_default();
        let info = NetInfo {
            internal,
            inhibit_ipv4: options.get("com.docker.network.bridge.inhibit_ipv4").map(String::as_str) == Some("true"),
            driver,
            private_for: labels.get(crate::model::record::PRIVATE_FOR).cloned(),
        };
        nets.insert(name, info);
    }
    let missing = asked
        .iter()
        .filter(|n| !nets.contains_key(*n))
        .filter(|n| {
            stderr.contains(&format!("network {n} not found")) || stderr.contains(&format!("No such network: {n}"))
        })
        .cloned()
        .collect();
    NetworkReport { nets, missing }
}

/// `docker image inspect --format '{{json .Config.User}}'` prints `"1000:1000"`.
pub fn image_user(stdout: &str) -> String {
    serde_json::from_str::<String>(stdout.trim()).unwrap_or_default()
}

/// The format for `docker image inspect`: `["1000:1000",{"label":"value"}]`
/// (labels `null` when the image has none).
pub const IMAGE_FORMAT: &str = "[{{json .Config.User}},{{json .Config.Labels}}]";

/// What sbx reads from an image: its USER, and the first label in sbx's
/// namespace, if any (issue 9 finding 5: containers inherit image labels,
/// so an image must never supply one of sbx's).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImageConfig {
    pub user: String,
    pub sbx_label: Option<String>,
}

/// Parse a line printed with `IMAGE_FORMAT`; `None` when it is not one.
pub fn image_config(stdout: &str) -> Option<ImageConfig> {
    let (user, labels): (Option<String>, Option<BTreeMap<String, String>>) =
        serde_json::from_str(stdout.trim()).ok()?;
    // Case-insensitively: refusing `SBX.x` too costs nothing.
    let sbx_label = labels.unwrap_or_default().into_keys().find(|k| k.to_ascii_lowercase().starts_with("sbx."));
    Some(ImageConfig { user: user.unwrap_or_default(), sbx_label })
}

pub fn no_such_image(stderr: &str) -> bool {
    stderr.contains("No such image") || stderr.contains("no such image")
}

pub fn no_such_container(stderr: &str) -> bool {
    stderr.contains("No such container") || stderr.contains("No such object")
}

/// The CLI's own trailer after a daemon error (CLI 28 prints `exit status 1`).
pub fn is_trailer(line: &str) -> bool {
    let l = line.trim();
    l.is_empty() || l.starts_with("exit status ")
}

pub fn no_such_network(line: &str) -> bool {
    line.contains("No such network") || (line.contains("network ") && line.contains(" not found"))
}

/// Another client is already removing this container (engine 20.10:
/// "removal of container NAME is already in progress").
pub fn removal_in_progress(line: &str, id: &str) -> bool {
    line.contains("is already in progress") && line.contains(&format!("container {id} "))
}

/// Container names docker says are missing, e.g. from `docker container
/// inspect a b` when only `a` exists.
pub fn missing_containers(asked: &[String], stderr: &str) -> Vec<String> {
    asked
        .iter()
        .filter(|id| stderr.lines().any(|l| no_such_container(l) && l.trim_end().ends_with(id.as_str())))
        .cloned()
        .collect()
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

/// A running container using a session volume (`persist::users_argv`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct VolumeUser {
    pub container: String,
    pub volume: String,
}

/// A session volume (`persist::list_argv`), with the owner token on its label.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct SessionVolume {
    pub name: String,
    pub session: String,
    pub owner: String,
}

/// A private route network (`argv::private_networks`), with the sandbox it
/// serves, its service container and the owner token on its label.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct PrivateNetwork {
    pub name: String,
    pub sandbox: String,
    pub service: String,
    pub owner: String,
}

/// One JSON row per line, as the `--format '[...]'` argv above print them;
/// a line of another shape is skipped.
pub fn rows<T: serde::de::DeserializeOwned>(stdout: &str) -> Vec<T> {
    stdout.lines().filter_map(|l| serde_json::from_str(l.trim()).ok()).collect()
}

/// `docker network rm` stderr with an error other than "already gone".
pub fn network_rm_failed(stderr: &str) -> bool {
    stderr.lines().any(|l| !is_trailer(l) && !no_such_network(l))
}

/// After a failed `docker rm -f` of `ids`: the ids another client is
/// already removing, or None when a line is a real failure ("no such
/// container" is done, not a failure).
pub fn removal_races(stderr: &str, ids: &[String]) -> Option<Vec<String>> {
    let mut racing = Vec::new();
    for line in stderr.lines().filter(|l| !is_trailer(l)) {
        if no_such_container(line) {
            continue;
        }
        racing.push(ids.iter().find(|id| removal_in_progress(line, id))?.clone());
    }
    Some(racing)
}

pub fn no_such_volume(stderr: &str) -> bool {
    stderr.contains("No such volume") || stderr.contains("no such volume")
}

/// `docker network disconnect` of a container already off the network.
pub fn not_connected(stderr: &str) -> bool {
    stderr.contains("is not connected")
}

/// `docker run`/`create` of an image that is not there (it is never pulled).
pub fn image_missing_at_run(stderr: &str) -> bool {
    stderr.contains("Unable to find image") || no_such_image(stderr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_report_from_captured_output() {
        let asked: Vec<String> = ["sbx-exp1", "sbx-exp2", "sbx-missing"].map(String::from).to_vec();
        // Captured from engine 20.10.24 with CLI 28.2.2 (exit status 1).
        let stdout = concat!(
            r#"["sbx-exp1",true,"bridge",{"com.docker.network.bridge.inhibit_ipv4":"true"},{"sbx.private-for":"sbx-0123456789ab"}]"#,
            "\n",
            r#"["sbx-exp2",false,"bridge",{},{}]"#,
            "\n",
        );
        let stderr = "Error response from daemon: network sbx-missing not found\n";
        let r = networks(&asked, stdout, stderr);
        let one = &r.nets["sbx-exp1"];
        assert!(one.internal && one.inhibit_ipv4 && one.driver == "bridge");
        assert_eq!(one.private_for.as_deref(), Some("sbx-0123456789ab"));
        let two = &r.nets["sbx-exp2"];
        assert!(!two.internal && !two.inhibit_ipv4 && two.private_for.is_none());
        assert_eq!(r.missing, vec!["sbx-missing"]);
        let r = networks(&asked[..1], r#"["sbx-exp1",true,"bridge",null,null]"#, "");
        assert!(r.nets["sbx-exp1"].internal);
        let r = networks(&asked[2..], "", "Error: No such network: sbx-missing");
        assert_eq!(r.missing, vec!["sbx-missing"]);
    }

    #[test]
    fn image_and_container_errors() {
        assert_eq!(image_user("\"1000:1000\"\n"), "1000:1000");
        assert_eq!(image_user("\"\"\n"), "");
        let c = image_config("[\"1000\",null]\n").unwrap();
        assert_eq!((c.user.as_str(), c.sbx_label), ("1000", None));
        let c = image_config(r#"["",{"a":"1","sbx.private":"{\"n\":\"svc\"}"}]"#).unwrap();
        assert_eq!(c.sbx_label.as_deref(), Some("sbx.private"));
        assert_eq!(image_config(r#"[null,{"SBX.Volume":"x"}]"#).unwrap().sbx_label.as_deref(), Some("SBX.Volume"));
        assert_eq!(image_config(r#"[null,{"sbx-test.fixture":"x"}]"#).unwrap().sbx_label, None);
        assert_eq!(image_config("\"1000\""), None, "not the expected shape");
        assert!(no_such_image("Error response from daemon: no such image: sha256:00: No such image: sha256:00"));
        let asked = vec!["sbx-000000000001".to_string(), "sbx-000000000002".to_string()];
        let stderr = "Error: No such container: sbx-000000000002\n";
        assert_eq!(missing_containers(&asked, stderr), vec!["sbx-000000000002"]);
        assert!(no_such_network("Error response from daemon: network sbx-0123456789ab-inference not found"));
        assert!(is_trailer("exit status 1") && is_trailer("  ") && !is_trailer("Error: x"));
        let racing = "Error response from daemon: removal of container sbx-000000000001 is already in progress";
        assert!(removal_in_progress(racing, "sbx-000000000001"));
        assert!(!removal_in_progress(racing, "sbx-000000000002"));
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

    #[test]
    fn rows_from_captured_output() {
        let users: Vec<VolumeUser> = rows("[\"sbx-000000000001\",\"sbx-vol-k\"]\nnot json\n");
        assert_eq!(users, [VolumeUser { container: "sbx-000000000001".into(), volume: "sbx-vol-k".into() }]);
        let vols: Vec<SessionVolume> = rows(" [\"sbx-vol-k\",\"k\",\"tok\"]\n[\"short\",\"row\"]\n");
        assert_eq!(vols, [SessionVolume { name: "sbx-vol-k".into(), session: "k".into(), owner: "tok".into() }]);
        let nets: Vec<PrivateNetwork> = rows("[\"sbx-0123456789ab-inference\",\"sbx-0123456789ab\",\"proxy\",\"t\"]\n");
        assert_eq!((nets[0].sandbox.as_str(), nets[0].service.as_str()), ("sbx-0123456789ab", "proxy"));
    }

    #[test]
    fn removal_and_network_errors() {
        let ids = vec!["sbx-000000000001".to_string(), "sbx-000000000002".to_string()];
        let racing = "Error response from daemon: removal of container sbx-000000000002 is already in progress\n\
                      Error: No such container: sbx-000000000001\nexit status 1\n";
        assert_eq!(removal_races(racing, &ids), Some(vec!["sbx-000000000002".to_string()]));
        assert_eq!(removal_races("Error response from daemon: cannot remove\n", &ids), None);
        assert!(!network_rm_failed("Error response from daemon: network sbx-x not found\nexit status 1\n"));
        assert!(network_rm_failed("Error response from daemon: error while removing network: has active endpoints\n"));
        assert!(no_such_volume("Error response from daemon: get sbx-vol-k: no such volume"));
        assert!(not_connected("Error response from daemon: container abc is not connected to network sbx-proxy"));
        assert!(image_missing_at_run("Unable to find image 'sha256:00' locally"));
    }
}

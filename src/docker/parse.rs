//! Pure parsers for docker's output, tested on text captured from the
//! engine this project runs on (20.10, with a 28.x CLI).

mod container;

use std::collections::BTreeMap;

pub use container::{parse_inspect, parse_ps, ps_template, RawContainer};

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

/// What `docker version --format '{{json .}}'` says (see `argv::version`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EngineVersion {
    /// The engine's version; empty when no server answered (`"Server":null`).
    pub server: String,
    pub api: Option<String>,
    pub client: Option<String>,
    /// The runc version the engine reports among its components.
    pub runc: Option<String>,
}

pub fn engine_version(stdout: &[u8]) -> EngineVersion {
    let v: serde_json::Value = serde_json::from_slice(stdout).unwrap_or_default();
    let s = |v: &serde_json::Value| v.as_str().map(str::to_string);
    EngineVersion {
        server: s(&v["Server"]["Version"]).unwrap_or_default(),
        api: s(&v["Server"]["ApiVersion"]),
        client: s(&v["Client"]["Version"]),
        runc: v["Server"]["Components"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["Name"] == "runc"))
            .and_then(|c| s(&c["Version"])),
    }
}

/// `docker info --format '{{json .OperatingSystem}}'` (see `argv::info_os`).
pub fn operating_system(stdout: &str) -> String {
    stdout.trim().trim_matches('"').to_string()
}

/// `docker images -q --no-trunc` (see `argv::images_labelled`): the image ids, one a line.
pub fn image_ids(stdout: &str) -> Vec<String> {
    stdout.lines().map(str::trim).filter(|l| l.starts_with("sha256:")).map(str::to_string).collect()
}

/// docker exec answers 126 both for "not executable" and "not found"; the
/// shell convention, which scripts expect, is 127 for "not found".
pub fn exec_status(code: i32, docker_stderr: &str) -> i32 {
    let oci = docker_stderr.contains("OCI runtime exec failed") || docker_stderr.contains("exec failed");
    let not_found =
        docker_stderr.contains("no such file or directory") || docker_stderr.contains("executable file not found");
    if code == 126 && oci && not_found {
        127
    } else {
        code
    }
}

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
/// the whole name, where [`missing_containers`] takes a suffix).
pub fn names_missing(stderr: &str, id: &str) -> bool {
    stderr.lines().any(|l| l.split_once("No such container: ").is_some_and(|(_, rest)| rest.trim() == id))
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

    /// Captured from engine 20.10.24 with CLI 28.2.2.
    const VERSION: &str = r#"{"Client":{"Version":"28.2.2","ApiVersion":"1.41","DefaultAPIVersion":"1.50","GitCommit":"e6534b4","GoVersion":"go1.24.3","Os":"linux","Arch":"amd64","BuildTime":"Fri May 30 12:07:14 2025","Context":"default"},"Server":{"Platform":{"Name":""},"Components":[{"Name":"Engine","Version":"20.10.24+dfsg1","Details":{"ApiVersion":"1.41","Arch":"amd64","BuildTime":"Thu May  7 21:09:36 2026","Experimental":"false","GitCommit":"5d6db84","GoVersion":"go1.19.8","KernelVersion":"6.18.44-fc-v857","MinAPIVersion":"1.12","Os":"linux"}},{"Name":"containerd","Version":"1.6.20~ds1","Details":{"GitCommit":"1.6.20~ds1-1+deb12u3"}},{"Name":"runc","Version":"1.1.5+ds1","Details":{"GitCommit":"1.1.5+ds1-1+deb12u1"}},{"Name":"docker-init","Version":"0.19.0","Details":{"GitCommit":""}}],"Version":"20.10.24+dfsg1","ApiVersion":"1.41","MinAPIVersion":"1.12","GitCommit":"5d6db84","GoVersion":"go1.19.8","Os":"linux","Arch":"amd64","KernelVersion":"6.18.44-fc-v857","BuildTime":"2026-05-07T21:09:36.000000000+00:00"}}"#;
    /// The same CLI with no daemon behind DOCKER_HOST (exit status 1).
    const VERSION_NO_DAEMON: &str = r#"{"Client":{"Version":"28.2.2","ApiVersion":"1.50","DefaultAPIVersion":"1.50","GitCommit":"e6534b4","GoVersion":"go1.24.3","Os":"linux","Arch":"amd64","BuildTime":"Fri May 30 12:07:14 2025","Context":"default"},"Server":null}"#;

    #[test]
    fn engine_version_from_captured_output() {
        let v = engine_version(VERSION.as_bytes());
        assert_eq!(v.server, "20.10.24+dfsg1");
        assert_eq!((v.api.as_deref(), v.client.as_deref()), (Some("1.41"), Some("28.2.2")));
        assert_eq!(v.runc.as_deref(), Some("1.1.5+ds1"));
        let down = engine_version(VERSION_NO_DAEMON.as_bytes());
        assert_eq!(down, EngineVersion { client: Some("28.2.2".into()), ..Default::default() });
        assert_eq!(engine_version(b""), EngineVersion::default());
    }

    #[test]
    fn info_and_image_ids_from_captured_output() {
        assert_eq!(operating_system("\"Debian GNU/Linux 12 (bookworm)\"\n"), "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(operating_system(""), "");
        let a = format!("sha256:{}", "a".repeat(64));
        let b = format!("sha256:{}", "b".repeat(64));
        assert_eq!(image_ids(&format!("{a}\n{b}\n")), [a.clone(), b]);
        assert_eq!(image_ids(""), Vec::<String>::new());
        assert_eq!(image_ids("WARNING: something\n"), Vec::<String>::new());
    }

    #[test]
    fn not_found_is_127_and_other_codes_pass_through() {
        let oci = "OCI runtime exec failed: exec failed: unable to start container process: exec: \"/x\": stat /x: no such file or directory: unknown";
        assert_eq!(exec_status(126, oci), 127);
        assert_eq!(
            exec_status(126, "OCI runtime exec failed: exec failed: exec: \"/tmp\": permission denied: unknown"),
            126
        );
        assert_eq!(exec_status(126, "my program said no such file or directory"), 126);
        assert_eq!(exec_status(3, ""), 3);
        assert_eq!(exec_status(0, ""), 0);
    }

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

//! The sandbox's `docker run`/`create` argv, pinned.

use super::super::strs;
use super::*;
use crate::spec::CreateRequest;

const IMG: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn spec(req: CreateRequest) -> SandboxSpec {
    SandboxSpec::from_request(&CreateRequest { image: IMG.into(), ..req }, None).unwrap()
}

fn plan(s: &SandboxSpec) -> RunPlan<'_> {
    let networks: Vec<RouteNetwork> =
        s.routes.iter().map(|r| RouteNetwork { kind: r.kind.clone(), network: r.network() }).collect();
    RunPlan {
        id: "sbx-0123456789ab",
        spec: s,
        uid: 65534,
        gid: 65534,
        tier: 2,
        socket_dir: Path::new("/run/sbx/sandboxes/sbx-0123456789ab"),
        socket_path: Path::new("/run/sbx/sandboxes/sbx-0123456789ab/sandbox.sock"),
        created_at: "2026-11-29T09:00:00Z",
        owner: "0123",
        expires_at: None,
        networks: Box::leak(networks.into_boxed_slice()),
        private: &[],
        dns: None,
        channel: channel::Kind::Direct,
        helper: None,
        helper_volume: None,
        volume: None,
        persist_size: None,
        seccomp: Path::new("/var/lib/sbx/seccomp/sbx-seccomp-0123.json"),
        hosts: &[],
        family: crate::model::runtime::Family::Runc,
        image_volumes: &[],
        trust: None,
    }
}

#[test]
fn run_argv_no_routes() {
    let s = spec(CreateRequest { command: vec!["serve".into(), "--x".into()], ..Default::default() });
    let got = strs(container(&plan(&s), true));
    let labels: Vec<String> = got.windows(2).filter(|w| w[0] == "--label").map(|w| w[1].clone()).collect();
    assert_eq!(
        labels.len(),
        record::ALL.len() - 10,
        "every label but sbx.expires, sbx.private, sbx.volume, sbx.persist-size, sbx.channel (direct), sbx.egress, sbx.egress-network, sbx.secrets (no gate), sbx.pool (no pool) and sbx.remake (no --snapshots)"
    );
    assert!(labels.contains(&"sbx.session=sbx-0123456789ab".to_string()));
    assert!(labels.contains(&"sbx.routes={}".to_string()));
    assert_eq!(
        got[..8],
        ["run", "-d", "--name", "sbx-0123456789ab", "--pull", "never", "--runtime", "runc"],
        "never docker's own pull; the runtime is always named"
    );
    assert!(labels.contains(&"sbx.runtime=runc".to_string()));
    assert!(labels.contains(&"sbx.memory=4096".to_string()), "ls sums the limits from it");
    let rest: Vec<&str> = got.iter().skip_while(|a| *a != "--restart").map(String::as_str).collect();
    assert_eq!(
        rest,
        vec![
            "--restart",
            "no",
            "--no-healthcheck",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--security-opt",
            "seccomp=/var/lib/sbx/seccomp/sbx-seccomp-0123.json",
            "--log-driver",
            "json-file",
            "--log-opt",
            "max-size=10m",
            "--log-opt",
            "max-file=2",
            "--shm-size",
            "262144k",
            "--user",
            "65534:65534",
            "--pids-limit",
            "512",
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "core=0:0",
            "--memory",
            "4096m",
            "--memory-swap",
            "4096m",
            "--cpus",
            "1",
            "--network",
            "none",
            "--read-only",
            "--tmpfs",
            "/dev/shm:rw,nosuid,nodev,noexec,size=262144k,nr_inodes=32768,mode=1777",
            "--tmpfs",
            "/tmp:rw,exec,nosuid,size=1048576k,nr_inodes=131072,mode=1777,uid=65534,gid=65534",
            "--tmpfs",
            "/state:rw,exec,nosuid,size=524288k,nr_inodes=65536,mode=1777,uid=65534,gid=65534",
            "--mount",
            "type=bind,src=/run/sbx/sandboxes/sbx-0123456789ab,dst=/run/sandbox",
            "--env",
            "SBX_SANDBOX_ID=sbx-0123456789ab",
            "--env",
            "SBX_SOCKET=/run/sandbox/sandbox.sock",
            "--env",
            "SBX_SANDBOX_RUNTIME=runc",
            "--env",
            "SBX_SANDBOX_TIER=2",
            "--",
            IMG,
            "serve",
            "--x",
        ]
    );
    assert_eq!(&got[..4], &["run", "-d", "--name", "sbx-0123456789ab"]);
    assert!(!got.iter().any(|a| a == "--rm" || a == "--privileged"));
}

#[test]
fn create_argv_with_routes_limits_env_and_mounts() {
    let dir = std::env::temp_dir().canonicalize().unwrap();
    let s = spec(CreateRequest {
        routes: vec!["inference:proxy:8080".into(), "tools:http://toolhost:9000/v1".into()],
        memory_mib: Some(256),
        cpus: Some("1.5".into()),
        env: vec!["A=1".into()],
        ro: vec![format!("{}:/data", dir.display())],
        session: Some("s1".into()),
        labels: vec!["ci.job=7".into()],
        ..Default::default()
    });
    let got = strs(container(&plan(&s), false));
    assert_eq!(got[0], "create");
    let has = |k: &str, v: &str| got.windows(2).any(|w| w[0] == k && w[1] == v);
    assert!(has("--network", "sbx-proxy"));
    assert!(!has("--network", "sbx-toolhost"), "later routes are attached, not passed to create");
    assert!(has("--memory", "256m") && has("--memory-swap", "256m") && has("--cpus", "1.5"));
    assert!(has("--mount", &format!("type=bind,src={},dst=/data,readonly", dir.display())));
    assert!(has("--label", r#"sbx.routes={"inference":"sbx-proxy","tools":"sbx-toolhost"}"#));
    assert!(has("--label", r#"sbx.targets={"inference":"proxy:8080","tools":"http://toolhost:9000/v1"}"#));
    assert!(has("--label", "sbx.session=s1") && has("--label", "ci.job=7"));
    let envs: Vec<&String> = got.windows(2).filter(|w| w[0] == "--env").map(|w| &w[1]).collect();
    assert_eq!(envs.first().unwrap().as_str(), "A=1");
    assert_eq!(envs.last().unwrap().as_str(), "SBX_SANDBOX_TIER=2");
}

#[test]
fn state_dir_replaces_the_state_tmpfs() {
    let dir = std::env::temp_dir().canonicalize().unwrap();
    let s = spec(CreateRequest { state_dir: Some(dir.display().to_string()), ..Default::default() });
    let got = strs(container(&plan(&s), true));
    assert!(got.contains(&format!("type=bind,src={},dst=/state", dir.display())));
    assert!(!got.iter().any(|a| a.starts_with("/state:")));
}

#[test]
fn a_session_volume_takes_nothing_from_the_image() {
    let s = spec(CreateRequest { persist: true, session: Some("s".into()), ..Default::default() });
    let got =
        strs(container(&RunPlan { volume: Some("sbx-state-s"), persist_size: Some("67108864"), ..plan(&s) }, true));
    assert!(got.contains(&"type=volume,src=sbx-state-s,dst=/state,volume-nocopy".to_string()), "{got:?}");
    // The bound is on the record audit reads.
    assert!(got.windows(2).any(|w| w == ["--label", "sbx.persist-size=67108864"]), "{got:?}");
}

/// Docker's own handling of an image VOLUME is an anonymous volume: host
/// disk without bound. Each gets a bounded tmpfs of sbx's instead.
#[test]
fn image_volumes_get_a_bounded_tmpfs_owned_by_the_sandbox_user() {
    let s = spec(CreateRequest::default());
    let vols = ["/data".to_string(), "/var/lib/db".into()];
    let got = strs(container(&RunPlan { image_volumes: &vols, uid: 1000, gid: 1000, ..plan(&s) }, true));
    let tmpfs: Vec<&str> = got.windows(2).filter(|w| w[0] == "--tmpfs").map(|w| w[1].as_str()).collect();
    assert_eq!(
        tmpfs[3..],
        [
            "/data:rw,exec,nosuid,nodev,size=262144k,nr_inodes=32768,mode=0755,uid=1000,gid=1000",
            "/var/lib/db:rw,exec,nosuid,nodev,size=262144k,nr_inodes=32768,mode=0755,uid=1000,gid=1000"
        ],
        "{got:?}"
    );
}

/// Each tmpfs and /dev/shm is a share of --memory with a finite inode
/// count, so together they fit inside the limit with room for processes.
#[test]
fn every_tmpfs_is_sized_inside_the_memory_limit() {
    let s = spec(CreateRequest { memory_mib: Some(64), ..Default::default() });
    let helper = Path::new("/usr/lib/sbx/helper");
    let vols = ["/data".to_string()];
    let got = strs(container(&RunPlan { helper: Some(helper), image_volumes: &vols, ..plan(&s) }, true));
    let has = |k: &str, v: &str| got.windows(2).any(|w| w[0] == k && w[1] == v);
    assert!(has("--shm-size", "4096k"), "{got:?}");
    let tmpfs: Vec<&str> = got.windows(2).filter(|w| w[0] == "--tmpfs").map(|w| w[1].as_str()).collect();
    assert_eq!(
        tmpfs,
        [
            "/dev/shm:rw,nosuid,nodev,noexec,size=4096k,nr_inodes=512,mode=1777",
            "/tmp:rw,exec,nosuid,size=16384k,nr_inodes=2048,mode=1777,uid=65534,gid=65534",
            "/state:rw,exec,nosuid,size=8192k,nr_inodes=1024,mode=1777,uid=65534,gid=65534",
            "/run/sbx-bg:rw,noexec,nosuid,nodev,size=2048k,nr_inodes=256,mode=1777,uid=65534,gid=65534",
            "/data:rw,exec,nosuid,nodev,size=8192k,nr_inodes=1024,mode=0755,uid=65534,gid=65534",
        ]
    );
    let kib: u64 =
        tmpfs.iter().map(|t| t.split("size=").nth(1).unwrap().split('k').next().unwrap().parse::<u64>().unwrap()).sum();
    assert!(kib <= 64 * 1024 * 5 / 8, "{kib} KiB of tmpfs for a 64 MiB sandbox");
    assert!(tmpfs.iter().all(|t| !t.contains("nr_inodes=0")));
}

#[test]
fn egress_gives_proxy_variables_and_labels() {
    let s = spec(CreateRequest {
        routes: vec!["inference:proxy:8080".into()],
        allow: vec!["pypi.org".into()],
        ..Default::default()
    });
    let got = strs(container(&plan(&s), true));
    let has = |k: &str, v: &str| got.windows(2).any(|w| w[0] == k && w[1] == v);
    assert!(has("--label", "sbx.egress=enforce") && has("--label", "sbx.egress-network=sbx-egress-net"));
    let envs: Vec<&str> = got.windows(2).filter(|w| w[0] == "--env").map(|w| w[1].as_str()).collect();
    assert_eq!(
        envs,
        [
            "SBX_SANDBOX_ID=sbx-0123456789ab",
            "SBX_SOCKET=/run/sandbox/sandbox.sock",
            "HTTP_PROXY=http://sbx-egress:3128",
            "http_proxy=http://sbx-egress:3128",
            "HTTPS_PROXY=http://sbx-egress:3128",
            "https_proxy=http://sbx-egress:3128",
            "ALL_PROXY=http://sbx-egress:3128",
            "all_proxy=http://sbx-egress:3128",
            "NO_PROXY=proxy,localhost,127.0.0.1",
            "no_proxy=proxy,localhost,127.0.0.1",
            "SBX_SANDBOX_EGRESS=enforce",
            "SBX_SANDBOX_RUNTIME=runc",
            "SBX_SANDBOX_TIER=2",
        ]
    );
    let s = spec(CreateRequest {
        egress: Some(Mode::Observe),
        egress_network: Some("corp-out".into()),
        ..Default::default()
    });
    let got = strs(container(&plan(&s), true));
    let has = |k: &str, v: &str| got.windows(2).any(|w| w[0] == k && w[1] == v);
    assert!(has("--label", "sbx.egress=observe") && has("--label", "sbx.egress-network=corp-out"));
    assert!(has("--env", "NO_PROXY=localhost,127.0.0.1") && has("--env", "SBX_SANDBOX_EGRESS=observe"));
}

/// An idle sandbox (`sbx serve`'s templates) runs sbx's helper, never the image's program.
#[test]
fn an_idle_sandbox_runs_the_helper_not_the_image() {
    let mut s = spec(CreateRequest { command: vec!["serve".into()], ..Default::default() });
    s.idle = true;
    let got = strs(container(&plan(&s), true));
    let dashes = got.iter().position(|a| a == "--").unwrap();
    assert_eq!(got[dashes - 2..], ["--entrypoint", "/run/sbx/helper", "--", IMG, "idle"]);
    let s = spec(CreateRequest::default());
    assert!(!strs(container(&plan(&s), true)).contains(&"--entrypoint".to_string()));
}

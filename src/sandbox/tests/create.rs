//! Create through the fake: the calls it makes, the tier it reaches, and what it refuses before anything exists
//! (the user and the image's config: `create_image`).

use super::*;
use crate::error::{ImageError, RouteError};

#[test]
fn create_without_routes_is_three_calls() {
    let rig = Rig::new();
    rig.image("");
    rig.starts_and_binds();
    let c = rig.driver().create(&spec(CreateRequest::default())).unwrap();
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect"]);
    let calls = rig.fake.calls();
    assert_eq!(
        calls[2],
        ["container", "inspect", "--format", "{{.State.Pid}} {{.State.Status}} {{.State.ExitCode}}", "--", ID]
    );
    // The helper's directory is mounted AT /run/sbx (a mount point), read-only.
    assert!(calls[1].iter().any(|a| a.starts_with("type=bind,src=") && a.ends_with(",dst=/run/sbx,readonly")));
    assert_eq!(calls[0], ["image", "inspect", "--format", crate::docker::parse::IMAGE_FORMAT, "--", IMG]);
    assert_eq!((c.record.id.as_str(), c.record.tier, c.record.user.as_str()), (ID, 2, USER));
    assert_eq!(c.record.socket, rig.sock_dir().join("sandbox.sock").display().to_string());
    assert!(c.warnings.is_empty());
    let run = &calls[1];
    assert!(run.windows(2).any(|w| w[0] == "--network" && w[1] == "none"));
}

/// Under runc the mount-placement check finds the sandbox's init in this
/// machine's /proc (its cgroup names the container, its parent is outside
/// it), so a create is two docker calls; a redirected mount there is still
/// refused. Without such a process, docker is asked (the test above).
#[test]
fn create_under_runc_reads_the_main_pid_from_proc_not_docker() {
    let cid = "c1".repeat(32);
    let run = |rig: &Rig, mountinfo: &str, after: &[Output]| {
        let driver = rig.driver();
        let proc = rig.root.with_extension("proc");
        std::fs::write(proc.join("4242/cgroup"), format!("12:pids:/docker/{cid}\n")).unwrap();
        std::fs::write(proc.join("4242/stat"), "4242 (fixture) S 4000 4242 4242 0 -1\n").unwrap();
        std::fs::write(proc.join("4242/mountinfo"), mountinfo).unwrap();
        rig.image("");
        let dir = rig.sock_dir();
        rig.fake.push_with(Output::ok(&format!("{cid}\n")), move |_| {
            std::mem::forget(UnixListener::bind(dir.join("sandbox.sock")).unwrap());
        });
        for o in after {
            rig.fake.push(o.clone());
        }
        driver.create(&spec(CreateRequest::default()))
    };
    let rig = Rig::new();
    run(&rig, MOUNTINFO, &[]).unwrap();
    assert_eq!(rig.fake.verbs(), ["image inspect", "run"]);

    // The same process, its helper mount moved by the image: refused, rolled back.
    let rig = Rig::new();
    let moved = MOUNTINFO.replace(" /run/sbx ", " /tmp/a/sbx ");
    assert_ne!(moved, MOUNTINFO, "the fixture's table names /run/sbx");
    let err = run(&rig, &moved, &[Output::ok("")]).unwrap_err();
    assert!(err.to_string().contains("/run/sbx"), "{err}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "rm"]);
}

#[test]
fn create_with_routes_attaches_the_rest_before_start() {
    let rig = Rig::new();
    rig.image("1000");
    rig.fake.push(Output::ok(&(net_line("sbx-proxy", true, true) + &net_line("sbx-tools", true, false))));
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.fake.push(Output::ok(""));
    rig.starts_and_binds();
    let s = spec(routes(&["inference:proxy:8080", "tools:tools:9000", "more:proxy:8081"]));
    let c = rig.driver().create(&s).unwrap();
    assert_eq!(
        rig.fake.verbs(),
        ["image inspect", "network inspect", "create", "network connect", "start", "container inspect"]
    );
    let calls = rig.fake.calls();
    assert_eq!(calls[1][5..], ["sbx-proxy", "sbx-tools"]);
    assert_eq!(calls[3], ["network", "connect", "--", "sbx-tools", ID]);
    assert_eq!(calls[4], ["start", "--", ID]);
    assert!(calls[2].windows(2).any(|w| w[0] == "--user" && w[1] == USER));
    assert!(
        calls[2].windows(2).any(|w| w[0] == "--dns" && w[1] == "127.0.0.1"),
        "internal routes get the contained resolver"
    );
    assert_eq!(c.record.routes.len(), 3);
    // Shared operator networks: the sandbox is not alone on them, and
    // sbx-tools still has a host address. Tier 1, and each gap said.
    assert_eq!(c.record.tier, 1);
    let gaps: Vec<(&str, &str)> = c.gaps.iter().map(|g| (g.network.as_str(), g.property)).collect();
    assert_eq!(
        gaps,
        [
            ("sbx-proxy", "shared"),
            ("sbx-proxy", "ports"),
            ("sbx-tools", "host"),
            ("sbx-tools", "shared"),
            ("sbx-tools", "ports")
        ]
    );
    assert_eq!(c.gaps[0].routes, ["inference", "more"]);
    assert_eq!(c.warnings.len(), 6);
    assert!(c.warnings[5].contains("\"1000\" is not used"), "the image's user: {}", c.warnings[5]);
    assert!(
        c.warnings[1].contains("every port of the service answers through sbx-proxy, not only proxy:8080, proxy:8081"),
        "{}",
        c.warnings[1]
    );
    assert!(c.warnings[2].contains("inhibit_ipv4=true sbx-tools"), "{}", c.warnings[2]);
}

#[test]
fn missing_network_names_the_command_and_creates_nothing() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output {
        status: 1,
        stdout: net_line("sbx-proxy", true, true).into_bytes(),
        stderr: b"Error response from daemon: network sbx-tools not found\n".to_vec(),
    });
    let err = rig.driver().create(&spec(routes(&["a:proxy:1", "b:tools:2"]))).unwrap_err();
    match &err {
        Error::Route(RouteError::NetworkMissing { networks }) => assert_eq!(networks, &["sbx-tools"]),
        other => panic!("{other:?}"),
    }
    assert!(err.hint().unwrap().contains("docker network create --internal sbx-tools"));
    assert_eq!(err.exit_code(), 1);
    assert_eq!(rig.fake.verbs(), ["image inspect", "network inspect"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn open_network_lowers_the_tier_or_is_refused_when_strict() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(&net_line("sbx-proxy", false, false)));
    rig.starts_and_binds();
    let c = rig.driver().create(&spec(routes(&["a:proxy:1"]))).unwrap();
    assert_eq!(c.record.tier, 1);
    assert!(c.warnings[0].contains("sbx-proxy is not internal"));
    let run = &rig.fake.calls()[2];
    assert!(run.contains(&"SBX_SANDBOX_TIER=1".to_string()) && run.contains(&"sbx.tier=1".to_string()));
    assert!(!run.contains(&"--dns".to_string()), "a sandbox with egress keeps its resolver");

    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(&net_line("sbx-proxy", true, true)));
    let err = rig.driver().create(&spec(CreateRequest { strict_egress: true, ..routes(&["a:proxy:1"]) })).unwrap_err();
    match &err {
        Error::Route(RouteError::NotContained { gaps }) => {
            assert_eq!(gaps.iter().map(|g| g.property).collect::<Vec<_>>(), ["shared", "ports"])
        }
        other => panic!("{other:?}"),
    }
    assert!(err.hint().unwrap().contains("--private-routes"));
    assert_eq!(rig.fake.verbs(), ["image inspect", "network inspect"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn missing_image_and_missing_docker() {
    let rig = Rig::new();
    rig.fake.push(Output::fail(1, "Error response from daemon: no such image: x: No such image: x"));
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(err, Error::Image(ImageError::Missing { .. })));
    rig.fake.push_spawn_failure();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert_eq!(err.kind(), "docker_missing");
    assert!(err.hint().unwrap().contains("docker CLI"));
    assert_eq!(rig.fake.verbs(), ["image inspect", "image inspect"], "nothing is run after either");
    assert_eq!(rig.fake.calls()[0].last().unwrap(), IMG);
    let rig = Rig::new();
    rig.fake.push(Output::fail(
        1,
        "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
    ));
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(err.hint().unwrap().contains("start the docker daemon"), "{:?}", err.hint());
    assert_eq!(rig.fake.verbs(), ["image inspect"]);
}

#[test]
fn too_long_socket_path_is_refused_before_docker() {
    let mut rig = Rig::new();
    rig.root = std::env::temp_dir().join("x".repeat(100));
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(err, Error::Socket(SocketError::PathTooLong { .. })));
    assert!(err.hint().unwrap().contains("shorter --socket-dir"));
    assert!(rig.fake.calls().is_empty());
}

/// `create --json` prints `Created`: its bytes are part of the CLI.
fn created_json(c: &Created) -> String {
    serde_json::to_string(c).unwrap()
}

const CREATED_JSON: &str = concat!(
    r#"{"id":"sbx-00000000000f","session":"s1","image":"img@sha256:00","tier":1,"#,
    r#""runtime":"runc","socket":"/run/u/sbx-00000000000f/sandbox.sock","channel":"direct","#,
    r#""routes":{"inference":"sbx-proxy","tools":"sbx-proxy"},"created_at":"2026-01-02T03:04:05Z","#,
    r#""user":"1000:1000","expires_at":"2026-01-02T03:34:05.000Z","#,
    r#""gaps":[{"routes":["inference","tools"],"network":"sbx-proxy","property":"shared","#,
    r#""detail":"d","fix":"f"}],"warnings":["w"]}"#
);

#[test]
fn created_json_is_byte_for_byte_the_cli_output() {
    let record = record::Record {
        id: ID.into(),
        session: "s1".into(),
        image: "img@sha256:00".into(),
        tier: 1,
        socket: format!("/run/u/{ID}/sandbox.sock"),
        runtime: "runc".into(),
        channel: crate::host::channel::Kind::Direct,
        routes: [("inference", "sbx-proxy"), ("tools", "sbx-proxy")]
            .map(|(k, n)| (k.to_string(), n.to_string()))
            .into(),
        created_at: "2026-01-02T03:04:05Z".into(),
        user: "1000:1000".into(),
        expires_at: Some("2026-01-02T03:34:05.000Z".into()),
        // What `inspect` adds: none of it is create's output.
        state: "running".into(),
        time_left: Some("29m 59s".into()),
        expired: false,
        exit_code: None,
        oom_killed: false,
        reason: None,
        targets: Default::default(),
        memory_mib: None,
        networks: vec![record::AttachedNetwork { name: "sbx-proxy".into(), by_sbx: true }],
        gaps: vec!["not create's".into()],
        persist_size: None,
        egress: None,
    };
    let c = Created {
        record,
        watched: PathBuf::from(format!("/run/u/{ID}")),
        gaps: vec![crate::model::boundary::Gap {
            routes: vec!["inference".into(), "tools".into()],
            network: "sbx-proxy".into(),
            property: "shared",
            detail: "d".into(),
            fix: "f".into(),
        }],
        warnings: vec!["w".into()],
    };
    assert_eq!(created_json(&c), CREATED_JSON);
}

/// Created's record is read from the labels the sandbox was given, so it
/// says what create decided (and what `inspect` will read back).
#[test]
fn created_reports_what_create_decided() {
    let rig = Rig::new();
    rig.image("1000");
    rig.fake.push(Output::ok(&net_line("sbx-proxy", true, true)));
    rig.starts_and_binds();
    let req = CreateRequest { ttl: Some("30m".into()), ..routes(&["inference:proxy:8080"]) };
    let c = rig.driver().create(&spec(req)).unwrap();
    let r = &c.record;
    assert_eq!((r.id.as_str(), r.session.as_str(), r.image.as_str()), (ID, ID, IMG), "the session defaults to the id");
    assert_eq!(r.routes, [("inference".to_string(), "sbx-proxy".to_string())].into());
    // A shared operator network, every port of the service: two gaps, tier 1
    // in the record as in the label.
    assert_eq!((r.tier, c.gaps.len()), (1, 2));
    assert_eq!((r.user.as_str(), r.channel), (USER, crate::host::channel::Kind::Direct));
    let expires = r.expires_at.as_deref().unwrap();
    let at = humantime::parse_rfc3339(expires).unwrap();
    let left = at.duration_since(humantime::parse_rfc3339(&r.created_at).unwrap()).unwrap();
    assert!(left.as_secs().abs_diff(30 * 60) <= 1, "{expires} vs {}", r.created_at);
    assert!(expires.ends_with('Z') && expires.contains('.'), "milliseconds, as before: {expires}");
    let run = &rig.fake.calls()[2];
    assert!(run.contains(&format!("sbx.expires={expires}")), "the label and the output agree");
    assert_eq!(c.watched, rig.sock_dir());
}

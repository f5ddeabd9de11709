//! The egress lifecycle: the policy changes on a running sandbox
//! (`sbx allow`/`deny`, `revoke ID egress`), every decision is logged, observe
//! mode learns an allowlist, and nothing made for a gate outlives its sandbox
//! (destroy, a failed or killed create plus `gc`, a TTL). Bad input exits 2
//! before any docker call. The stage is `support::internet`, as in `egress`.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::egress::*;
use crate::support::internet::{BIG, EVIL, FILES, PYPI, REBIND};
use crate::support::*;

#[test]
fn allow_and_deny_change_a_running_sandbox_and_deny_cuts_established_connections() {
    let w = World::new();
    let inet = Internet::start();
    let sb = create(&w, &inet.create_args(&[&format!("{FILES}:80")]));
    assert_eq!(fetch(&sb, &format!("https://{PYPI}/small.txt"), &[]).connect, 403);

    let out = w.sbx(&["allow", &sb.id, PYPI]);
    assert_success(&out, "sbx allow");
    assert!(stdout(&out).contains(PYPI), "sbx allow does not print the new allowlist: {}", stdout(&out));
    let allowed = Instant::now();
    until(Duration::from_secs(5), || fetch(&sb, &format!("https://{PYPI}/small.txt"), &[]).code == 200)
        .expect("sbx allow never took effect");
    eprintln!("allow took effect within {:?}", allowed.elapsed());
    assert!(allowed.elapsed() < Duration::from_secs(3), "allow took {:?}", allowed.elapsed());

    // A slow download (160 KiB/s), cut by `sbx deny` while it runs.
    let total = 4 << 20;
    let mut child = Command::new("docker")
        .args(["exec", &sb.id, "/usr/bin/curl", "-sS", "--max-time", "60"])
        .arg(format!("http://{FILES}/slow/{total}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut so = child.stdout.take().unwrap();
    let mut first = vec![0u8; 64 << 10];
    so.read_exact(&mut first).expect("the slow download never started");
    let reader = std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = so.read_to_end(&mut rest);
        rest.len()
    });
    let out = w.sbx(&["deny", &sb.id, &format!("{FILES}:80")]);
    assert_success(&out, "sbx deny");
    let denied = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if denied.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("the established download went on 10 s after deny");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let got = first.len() + reader.join().unwrap();
    eprintln!("deny cut the download after {:?}", denied.elapsed());
    assert!(!status.success() && got < total, "the download finished ({got} of {total} bytes) despite deny");
    assert!(denied.elapsed() < Duration::from_secs(3), "deny took {:?} to cut", denied.elapsed());
    assert_eq!(fetch(&sb, &format!("http://{FILES}/small.txt"), &[]).code, 403, "a new request after deny");
    assert_eq!(fetch(&sb, &format!("https://{PYPI}/small.txt"), &[]).code, 200, "deny removed more than its rule");
}

#[test]
fn revoke_egress_removes_the_gate_at_once() {
    let w = World::new();
    let inet = Internet::start();
    let sb = create(&w, &inet.create_args(&[&format!("{FILES}:80")]));
    assert_eq!(fetch(&sb, &format!("http://{FILES}/small.txt"), &[]).code, 200);
    assert_success(&w.sbx(&["revoke", &sb.id, "egress"]), "sbx revoke ID egress");
    assert_no_egress_left(&w, &sb.id);
    let got = fetch(&sb, &format!("http://{FILES}/small.txt"), &[]);
    assert_ne!(got.exit, 0, "egress after revoke: {got:?}");
    assert_eq!(sb.inspect("{{.State.Running}}"), "true", "revoke egress stopped the sandbox");
}

#[test]
fn every_decision_is_logged() {
    let w = World::new();
    let inet = Internet::start();
    let sb = create(&w, &inet.create_args(&[&format!("{FILES}:80"), PYPI]));
    assert_eq!(fetch(&sb, &format!("http://{FILES}/big.bin"), &[]).code, 200);
    assert_eq!(fetch(&sb, &format!("https://{PYPI}/small.txt"), &[]).code, 200);
    assert_eq!(fetch(&sb, &format!("http://{EVIL}/small.txt"), &[]).code, 403);
    let lines = log_until(&w, &sb.id, |l| {
        line_for(l, FILES, "allow").is_some()
            && line_for(l, PYPI, "allow").is_some()
            && line_for(l, EVIL, "deny").is_some()
    });
    for l in &lines {
        for key in ["time", "sandbox", "host", "port", "decision", "bytes_up", "bytes_down", "duration_ms"] {
            assert!(!l[key].is_null(), "a log line without {key}: {l}");
        }
        assert_eq!(l["sandbox"], sb.id.as_str(), "{l}");
    }
    let files = line_for(&lines, FILES, "allow").unwrap();
    assert_eq!((files["port"].as_u64(), files["addr"].as_str()), (Some(80), Some(inet.web_ip.as_str())), "{files}");
    assert!(files["bytes_down"].as_u64().unwrap() >= BIG as u64, "{files}");
    assert!(files["rule"].as_str().is_some_and(|r| r.contains(FILES)), "{files}");
    let pypi = line_for(&lines, PYPI, "allow").unwrap();
    assert_eq!((pypi["port"].as_u64(), pypi["addr"].as_str()), (Some(443), Some(inet.tls_ip.as_str())), "{pypi}");
    let evil = line_for(&lines, EVIL, "deny").unwrap();
    assert!(evil["addr"].is_null(), "a refused name has no address (it was never resolved): {evil}");
    assert!(evil["reason"].as_str().is_some_and(|r| !r.is_empty()), "{evil}");
    // The table form names them too.
    let table = stdout(&w.sbx(&["egress", "log", &sb.id]));
    assert!(table.contains(FILES) && table.contains(EVIL) && table.contains("deny"), "{table}");
    // The decisions outlive the gate: kept by sbx under the data dir.
    assert_success(&w.sbx(&["destroy", &sb.id]), "sbx destroy");
    let kept = w.state_dir.join("egress-logs").join(format!("{}.jsonl", sb.id));
    let mode = std::fs::metadata(&kept).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777);
    assert_eq!(mode.ok(), Some(0o600), "{} is kept, private", kept.display());
    let out = w.sbx(&["egress", "log", &sb.id, "--json"]);
    assert_success(&out, "sbx egress log of a destroyed sandbox");
    let after: Vec<serde_json::Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(line_for(&after, FILES, "allow").is_some() && line_for(&after, EVIL, "deny").is_some(), "{after:#?}");
    let policy = stdout(&w.sbx(&["egress", "policy", &sb.id]));
    assert!(policy.contains(&format!("--allow {FILES}:80")), "{policy}");
}

#[test]
fn observe_mode_allows_and_logs_and_egress_policy_prints_the_allowlist() {
    let w = World::new();
    let inet = Internet::start();
    let mut args = inet.create_args(&[]);
    args.extend(strings(&["--egress", "observe"]));
    let sb = create(&w, &args);
    assert_eq!(sb.inspect("{{index .Config.Labels \"sbx.egress\"}}"), "observe");
    assert_eq!(fetch(&sb, &format!("http://{FILES}/small.txt"), &[]).code, 200);
    assert_eq!(fetch(&sb, &format!("https://{PYPI}/small.txt"), &[]).code, 200);
    // Observing allows every name, never the refused address classes.
    assert_eq!(fetch(&sb, &format!("http://{REBIND}/small.txt"), &[]).code, 403);
    log_until(&w, &sb.id, |l| {
        line_for(l, FILES, "allow").is_some()
            && line_for(l, PYPI, "allow").is_some()
            && line_for(l, REBIND, "deny").is_some()
    });
    let out = w.sbx(&["egress", "policy", &sb.id]);
    assert_success(&out, "sbx egress policy");
    let text = stdout(&out);
    assert!(text.contains("--allow") && text.contains(&format!("{FILES}:80")) && text.contains(PYPI), "{text}");
    assert!(!text.contains(&format!("{PYPI}:443")), "port 443 is the default, left out: {text}");
    assert!(!text.contains(REBIND), "a refused connection is not suggested: {text}");
}

#[test]
fn a_failed_create_leaves_no_gate_network_or_policy_behind() {
    let w = World::new();
    let net = Network::with_prefix(false, "inet-");
    let mut args = strings(&["--egress-network", &net.name, "--allow", "files.example:80"]);
    args.extend(strings(&["--socket-wait", "20s", "--", "crash"]));
    let out = try_create(&w, &args);
    assert_exit(&out, 1, "create of a sandbox that crashes");
    let err = stderr(&out);
    let id = err.split(|c: char| !c.is_ascii_alphanumeric() && c != '-').find(|t| t.starts_with("sbx-")).expect(&err);
    assert_no_egress_left(&w, id);
    w.assert_nothing_left();
    assert_success(&docker(&["network", "inspect", &net.name]), "the operator's egress network must stay");
}

#[test]
fn create_killed_at_each_egress_step_leaves_nothing_after_gc() {
    let _load = loading_the_engine();
    let net = Network::with_prefix(false, "inet-");
    for (verb, after) in [("network", true), ("run", false), ("run", true)] {
        let w = World::new();
        let shim = Shim::new(&w, verb, after);
        let label = w.case_label();
        let mut child = Command::new(SBX)
            .args(w.dir_args())
            .args(["create", "--image", tools_image(), "--label", &label])
            .args(["--egress-network", &net.name, "--allow", "files.example:80"])
            .env("SBX_DOCKER", shim.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        until(Duration::from_secs(20), || shim.reached()).unwrap_or_else(|| panic!("create never reached {verb}"));
        child.kill().unwrap();
        child.wait().unwrap();
        shim.release();
        // Docker commands released after their creator died finish on their own.
        until(Duration::from_secs(30), || !shim.busy()).expect("the released docker calls never finished");
        let ids = shim.ids();
        eprintln!("killed at {verb} (after={after}); sandbox ids in its docker calls: {ids:?}");
        let out = w.sbx(&["gc"]);
        assert_success(&out, &format!("gc after kill -9 at {verb} (after={after})"));
        for id in &ids {
            assert_no_egress_left(&w, id);
        }
        w.assert_nothing_left();
        assert_success(&docker(&["network", "inspect", &net.name]), "gc removed the operator's egress network");
    }
}

/// Another sbx build on the engine drops sbx's image (each keeps its own
/// only) between create's look-up and the gate's `docker run`: the gate
/// imports it again and runs once more, as audit and doctor do.
#[test]
fn the_gate_starts_when_another_sbx_build_dropped_its_image_meanwhile() {
    let w = World::new();
    let net = Network::with_prefix(false, "inet-");
    let shim = Shim::dropping_the_gate_s_image(&w);
    let label = w.case_label();
    let args = ["create", "--image", tools_image(), "--label", &label, "--egress-network", &net.name];
    let args: Vec<&str> = args.into_iter().chain(["--allow", "files.example:80"]).collect();
    let out = w.sbx_env(&args, &[("SBX_DOCKER", shim.path().to_str().unwrap())]);
    let dropped = shim.dropped().expect("the shim never saw the gate's run");
    assert!(dropped.contains("Deleted: sha256:"), "the image was not dropped, so this proves nothing: {dropped}");
    assert_success(&out, "create --allow with sbx's image dropped before the gate's run");
    let id = stdout(&out).trim().to_string();
    let sb = w.adopt(&id);
    let gates = docker_ok(&["ps", "-q", "--filter", &format!("label=sbx.gate-of={id}")]);
    assert_eq!(gates.lines().count(), 1, "the gate is not running");
    drop(sb);
    assert_no_egress_left(&w, &id);
}

#[test]
fn ttl_expiry_removes_the_gate() {
    let w = World::new();
    let net = Network::with_prefix(false, "inet-");
    let sb = create(&w, &strings(&["--egress-network", &net.name, "--allow", "files.example:80", "--ttl", "3s"]));
    until(Duration::from_secs(20), || w.containers().is_empty()).expect("the TTL never fired");
    until(Duration::from_secs(5), || {
        docker_ok(&["ps", "-aq", "--filter", &format!("label=sbx.gate-of={}", sb.id)]).is_empty()
    })
    .expect("the gate outlived its sandbox's TTL");
    // The watchdog removes the gate, then the network, then the policy dir:
    // give it the moment the rest of its destroy takes.
    let dir = w.state_dir.join("egress").join(&sb.id);
    until(Duration::from_secs(10), || !dir.exists()).expect("the policy dir outlived its sandbox's TTL");
    assert_no_egress_left(&w, &sb.id);
}

#[test]
fn the_gate_is_hardened_and_audit_passes() {
    let w = World::new();
    let net = Network::with_prefix(false, "inet-");
    let sb = create(&w, &strings(&["--egress-network", &net.name, "--allow", "files.example:80"]));
    let out = w.sbx(&["audit", &sb.id]);
    assert_success(&out, "sbx audit of a sandbox with egress");
    let gate = format!("{}-gate", sb.id);
    let get = |f: &str| docker_ok(&["inspect", "--format", f, &gate]);
    assert_eq!(get("{{json .HostConfig.CapDrop}}"), "[\"ALL\"]");
    assert!(matches!(get("{{json .HostConfig.CapAdd}}").as_str(), "null" | "[]"));
    assert_eq!(get("{{.HostConfig.Privileged}} {{.HostConfig.ReadonlyRootfs}}"), "false true");
    // A uid of sbx's range, its own: not the sandbox's, not nobody's.
    let user = get("{{.Config.User}}");
    let gate_uid: u32 = user.split(':').next().unwrap().parse().unwrap();
    assert!((0x7000_0000..0x7100_0000).contains(&gate_uid), "the gate runs as {user}");
    assert_ne!(gate_uid, sb.uid(), "the gate shares the sandbox's uid");
    let secopt = get("{{json .HostConfig.SecurityOpt}}");
    assert!(secopt.contains("no-new-privileges") && secopt.contains("seccomp"), "{secopt}");
    assert!(get("{{.HostConfig.Memory}}").parse::<u64>().unwrap() > 0);
    assert!(get("{{.HostConfig.PidsLimit}}").parse::<u64>().unwrap() > 0);
    // CIS 5.12: its work runs outside the sandbox's --cpus.
    assert_eq!(get("{{.HostConfig.NanoCpus}}"), "1000000000");
    assert_eq!(get("{{json .Config.Healthcheck.Test}}"), r#"["NONE"]"#);
    assert!(get("{{json .HostConfig.Ulimits}}").contains("nofile"));
    let log = get("{{json .HostConfig.LogConfig.Config}}");
    assert!(log.contains("\"max-size\":\"8m\"") && log.contains("\"max-file\":\"2\""), "{log}");
    assert_eq!(get("{{index .Config.Labels \"sbx.gate-of\"}}"), sb.id);
    assert_eq!(get("{{index .Config.Labels \"sbx.managed\"}}"), "", "ls and gc would take the gate for a sandbox");
    let nets = get("{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}");
    let mut nets: Vec<String> = nets.split_whitespace().map(str::to_string).collect();
    nets.sort();
    let mut want = vec![net.name.clone(), format!("{}-egress", sb.id)];
    want.sort();
    assert_eq!(nets, want);
    let internal = docker_ok(&["network", "inspect", "--format", "{{.Internal}}", &format!("{}-egress", sb.id)]);
    assert_eq!(internal, "true", "the sandbox's side of the gate must be an internal network");
}

#[test]
fn bad_egress_input_exits_2_before_any_docker_call() {
    let w = World::new();
    // A docker stand-in that records being called at all.
    let dir = std::path::Path::new("/tmp").join(format!("sbxt-{}-rec", w.case));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("called");
    let script = dir.join("docker");
    std::fs::write(&script, format!("#!/bin/sh\necho \"$@\" >> '{}'\nexec docker \"$@\"\n", rec.display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let img = tools_image();
    fn create<'a>(img: &'a str, more: &[&'a str]) -> Vec<&'a str> {
        let mut v = vec!["create", "--image", img];
        v.extend_from_slice(more);
        v
    }
    let cases: Vec<Vec<&str>> = vec![
        create(img, &["--allow", "*"]),
        create(img, &["--allow", "*.example.*"]),
        create(img, &["--allow", "fi*les.example"]),
        create(img, &["--allow", "files.example:0"]),
        create(img, &["--allow", "files.example:65536"]),
        create(img, &["--allow", "files.example:http"]),
        create(img, &["--allow", "pypi.org:443:1"]),
        create(img, &["--allow", "http://pypi.org"]),
        create(img, &["--allow", "bad host.example"]),
        create(img, &["--allow", "b\u{fc}cher.example"]),
        create(img, &["--allow", ""]),
        create(img, &["--allow=--network=host"]),
        create(img, &["--allow", "10.0.0.1/8:80"]),
        create(img, &["--allow", "127.0.0.0/8:80"]),
        create(img, &["--allow", "169.254.169.254/32:80"]),
        create(img, &["--allow", "pypi.org", "--egress", "open"]),
        create(img, &["--allow", "pypi.org", "--egress-dns", "resolver.example"]),
        create(img, &["--route", "egress:files.example:80"]),
        vec!["allow", "sbx-0123456789ab", "*"],
        vec!["deny", "sbx-0123456789ab", "10.0.0.1/8:80"],
        vec!["allow", "../etc", "pypi.org"],
        vec!["egress", "log", "../etc"],
        vec!["egress", "policy", "-x"],
    ];
    for case in &cases {
        let out = w.sbx_env(case, &[("SBX_DOCKER", script.to_str().unwrap())]);
        assert_exit(&out, 2, &format!("{case:?}"));
        assert!(!stderr(&out).trim().is_empty(), "{case:?}: no message");
        let mut json_case = case.clone();
        json_case.push("--json");
        let out = w.sbx_env(&json_case, &[("SBX_DOCKER", script.to_str().unwrap())]);
        assert_exit(&out, 2, &format!("{case:?} --json"));
        let err: serde_json::Value =
            serde_json::from_slice(&out.stderr).unwrap_or_else(|e| panic!("{case:?}: {e}: {}", stderr(&out)));
        assert_eq!(err["error"]["kind"], "invalid_input", "{case:?}");
    }
    let called = std::fs::read_to_string(&rec).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(called, "", "docker was called for bad input");
    w.assert_nothing_left();
    assert!(
        !w.state_dir.join("egress").exists() || std::fs::read_dir(w.state_dir.join("egress")).unwrap().next().is_none()
    );
}

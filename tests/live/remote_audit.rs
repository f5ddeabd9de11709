//! `sbx audit` and `sbx doctor` against a remote engine: the
//! sandbox's process is read by a probe container of sbx's own in its pid
//! namespace. The engine here is one, reached through ssh on loopback
//! (`support::Remote`), so a remote audit and a local one of the same
//! sandbox must agree exactly. The sandbox side of the attack is
//! `remote_audit/probeatk.c`.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::remote::{doctor_check, local_paths, sbx, with};
use crate::support::*;

/// The audit probes of sandbox `id` on the engine (any state).
fn probes_of(id: &str) -> Vec<String> {
    let out = docker_ok(&[
        "ps",
        "-a",
        "--no-trunc",
        "--filter",
        &format!("label=sbx.audit-of={id}"),
        "--format",
        "{{.Names}}",
    ]);
    out.lines().map(str::to_string).collect()
}

fn rule<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["rules"].as_array().unwrap().iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no {id}: {report}"))
}

#[test]
fn a_remote_audit_reads_the_process_through_a_probe_and_agrees_with_a_local_one() {
    let remote = Remote::start();
    let w = World::new();
    let shim = Shim::logging(&w);
    let env = with(remote.env(), &[("SBX_DOCKER", shim.path().to_str().unwrap())]);
    let sb = w.create(&[]);
    let cid = sb.inspect("{{.Id}}");

    let local = w.sbx(&["--json", "audit", &sb.id]);
    assert_success(&local, "local audit");
    let far = sbx(&w, &["--json", "audit", &sb.id], &env);
    assert_success(&far, "remote audit");
    let (local, far) = (json(&local), json(&far));
    assert_eq!(far, local, "a remote audit of the same sandbox on the same engine differs");
    let uid = rule(&far, "4.1")["detail"].as_str().unwrap().to_string();
    assert!(uid.contains("; process uid ") && !uid.contains("config alone"), "{uid}");

    let argvs = shim.argvs();
    let probe = argvs.iter().find(|a| a.iter().any(|x| x == "__audit-probe")).expect("no probe ran");
    assert!(probe.windows(2).any(|p| p[0] == "--pid" && p[1] == format!("container:{cid}")), "{probe:?}");
    assert!(probe.windows(2).any(|p| p[0] == "--cap-drop" && p[1] == "ALL"), "{probe:?}");
    assert_eq!(local_paths(&argvs), Vec::<String>::new(), "paths of this machine sent to a remote engine: {argvs:?}");
    assert_eq!(probes_of(&sb.id), Vec::<String>::new(), "a probe was left on the engine");

    // Paused: read frozen, and said so.
    assert_success(&w.sbx(&["pause", &sb.id]), "pause");
    let far = sbx(&w, &["--json", "audit", &sb.id], &env);
    assert_success(&far, "remote audit of a paused sandbox");
    let v = json(&far);
    assert!(v["note"].as_str().unwrap().starts_with("the sandbox is paused"), "{v}");
    assert_eq!(rule(&v, "4.1")["detail"], uid.as_str());
    let text = sbx(&w, &["audit", &sb.id], &env);
    assert!(stderr(&text).contains("the sandbox is paused"), "{}", stderr(&text));
    assert_success(&w.sbx(&["resume", &sb.id]), "resume");

    // Stopped: no process, no probe, and the rules say why.
    assert_success(&w.sbx(&["stop", &sb.id]), "stop");
    let far = sbx(&w, &["--json", "audit", &sb.id], &env);
    assert_success(&far, "remote audit of a stopped sandbox");
    let d = rule(&json(&far), "4.1")["detail"].as_str().unwrap().to_string();
    assert!(d.contains("established from the config alone: the sandbox is not running (exited)"), "{d}");
    assert_eq!(probes_of(&sb.id), Vec::<String>::new());
}

/// Remotely: a container made by hand with a sandbox's
/// labels copied is refused as it is locally, and no probe joins it.
#[test]
fn a_remote_audit_refuses_an_impostor_as_a_local_one_does() {
    let remote = Remote::start();
    let w = World::new();
    let shim = Shim::logging(&w);
    let env = with(remote.env(), &[("SBX_DOCKER", shim.path().to_str().unwrap())]);
    let real = w.create(&[]);
    let labels: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&real.inspect("{{json .Config.Labels}}")).unwrap();
    let name = format!("sbx-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
    let mut run =
        vec!["run".to_string(), "-d".into(), "--name".into(), name.clone(), "--network".into(), "none".into()];
    run.extend(["--label".to_string(), w.case_label()]);
    for (k, v) in &labels {
        let v = if k == "sbx.id" { name.clone() } else { v.clone() };
        run.extend(["--label".to_string(), format!("{k}={v}")]);
    }
    run.extend([w.image.clone(), "sleep".into()]);
    docker_ok(&run.iter().map(String::as_str).collect::<Vec<_>>());
    let local = w.sbx(&["--json", "audit", &name]);
    let far = sbx(&w, &["--json", "audit", &name], &env);
    for out in [&local, &far] {
        assert_exit(out, 1, "audit of an impostor");
        assert!(stderr(out).contains("foreign_container"), "{}", stderr(out));
    }
    assert!(!shim.argvs().iter().any(|a| a.iter().any(|x| x == "__audit-probe")), "a probe joined an impostor");
    let _ = docker(&["rm", "-f", &name]);
}

/// The sandbox shares the probe's pid namespace: from inside it, stop,
/// trace or write to anything that is not its own user's while audits run.
/// It sees the probe and can do nothing to it; every audit reads the truth.
#[test]
fn a_sandbox_cannot_touch_or_forge_the_probe_in_its_pid_namespace() {
    let tally = under_attack(&[], &[]);
    assert_eq!(tally["stopped"] + tally["traced"] + tally["stdout"] + tally["mem"], 0, "{tally:?}");
}

/// A sandbox running as root (which fails 4.1, and would gain by forging)
/// shares the probe's uid: it may stop it for a moment, but neither trace
/// it, nor write to its stdout, nor open its memory (the probe holds
/// CAP_SYS_PTRACE, which the sandbox lacks); the audit still fails 4.1.
#[test]
fn a_root_sandbox_cannot_trace_or_forge_the_probe_either() {
    let tally = under_attack(&["--user", "0:0"], &["new"]);
    assert_eq!(tally["traced"] + tally["stdout"] + tally["mem"], 0, "{tally:?}");
}

/// Audits over ssh for 30 s while the attacker runs in the sandbox made
/// with `create`; each must report exactly what a local audit did before.
/// The attacker's tally, which must show it saw the probe.
fn under_attack(create: &[&str], atk: &[&str]) -> std::collections::BTreeMap<String, u32> {
    let remote = Remote::start();
    let w = World::new();
    let env = remote.env();
    let sb = armed_with(&w, create, "remote_audit/probeatk.c", "/tmp/atk");
    let before = w.sbx(&["--json", "audit", &sb.id]);
    let code = before.status.code();
    let truth = json(&before);
    // Once first, so sbx's image is on the engine before the attack's clock runs.
    assert_eq!(sbx(&w, &["--json", "audit", &sb.id], &env).status.code(), code, "remote audit");
    let attack = {
        let mut cmd = Command::new(SBX);
        cmd.args(w.dir_args()).args(["exec", &sb.id, "--", "/tmp/atk", "40"]).args(atk);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.spawn().expect("spawn the attacker")
    };
    std::thread::sleep(Duration::from_secs(1));
    let mut audits = 0;
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let far = sbx(&w, &["--json", "audit", &sb.id], &env);
        assert_eq!(far.status.code(), code, "remote audit under attack: {}", stderr(&far));
        assert_eq!(json(&far), truth, "the attacker changed what audit read");
        audits += 1;
    }
    let out = attack.wait_with_output().unwrap();
    assert_success(&out, "the attacker");
    let line = stdout(&out);
    let tally: std::collections::BTreeMap<String, u32> = line
        .split_whitespace()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect();
    eprintln!("attacker after {audits} audits: {line}");
    assert_eq!(tally.len(), 5, "{line}");
    assert!(tally["seen"] >= 1, "the attacker never saw a probe in {audits} audits: the test proves nothing: {line}");
    assert_eq!(probes_of(&sb.id), Vec::<String>::new());
    tally
}

/// sbx SIGKILLed with its probe made but not run (the shim stops docker
/// between create and start, as a kill at that moment would): the probe
/// stays until its expiry, then gc reaps it.
#[test]
fn a_probe_left_by_a_killed_sbx_is_reaped_by_gc_once_expired() {
    let remote = Remote::start();
    let w = World::new();
    let sb = w.create(&[]);
    let dir = std::path::Path::new("/tmp").join(format!("sbxt-{}-probeshim", w.case));
    std::fs::create_dir_all(&dir).unwrap();
    let shim = dir.join("docker");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\ncase \"$*\" in *__audit-probe*) shift; echo $$ > '{d}/pid'; docker create \"$@\"; exec sleep 600 ;; esac\nexec docker \"$@\"\n",
            d = dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let env = with(remote.env(), &[("SBX_DOCKER", shim.to_str().unwrap())]);
    let mut cmd = Command::new(SBX);
    cmd.args(w.dir_args()).args(["audit", &sb.id]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    cmd.env_remove("DOCKER_HOST").envs(env.iter().map(|(k, v)| (k, v)));
    let mut audit = cmd.spawn().expect("spawn sbx audit");
    let made = until(Duration::from_secs(60), || !probes_of(&sb.id).is_empty());
    audit.kill().unwrap();
    let _ = audit.wait();
    if let Ok(pid) = std::fs::read_to_string(dir.join("pid")) {
        let _ = Command::new("kill").args(["-9", pid.trim()]).status();
    }
    let _ = std::fs::remove_dir_all(&dir);
    made.expect("the probe was never made");
    let left = probes_of(&sb.id);
    assert_eq!(left.len(), 1, "{left:?}");
    let env = remote.env();
    // Not yet expired: a live audit's probe is never taken.
    let gc = json(&sbx(&w, &["--json", "gc"], &env));
    assert!(gc.get("probes").is_none(), "{gc}");
    assert_eq!(probes_of(&sb.id), left);
    let expires = docker_ok(&["inspect", "--format", "{{index .Config.Labels \"sbx.expires\"}}", &left[0]]);
    let at = humantime::parse_rfc3339(expires.trim()).unwrap();
    if let Ok(wait) = at.duration_since(std::time::SystemTime::now()) {
        assert!(wait <= Duration::from_secs(46), "{expires}");
        std::thread::sleep(wait + Duration::from_secs(1));
    }
    let gc = json(&sbx(&w, &["--json", "gc"], &env));
    assert_eq!(gc["probes"], serde_json::json!(left), "{gc}");
    assert_eq!(probes_of(&sb.id), Vec::<String>::new(), "gc left the probe");
}

#[test]
fn doctor_runs_its_probe_sandbox_on_the_remote_engine_and_leaves_nothing() {
    let remote = Remote::start();
    let w = World::new();
    let shim = Shim::logging(&w);
    let env = with(remote.env(), &[("SBX_DOCKER", shim.path().to_str().unwrap())]);
    let out = sbx(&w, &["--json", "doctor"], &env);
    let v = json(&out);
    assert!(out.status.success(), "doctor: {v}\n{}", stderr(&out));
    let probe = doctor_check(&v, "probe");
    assert_eq!(probe["status"], "ok", "{v}");
    assert!(
        probe["detail"].as_str().unwrap().contains("the relayed channel (docker exec; the engine is remote)"),
        "{v}"
    );
    for name in ["channel", "kernel", "no-new-privileges", "seccomp", "capabilities", "user", "scratch", "network"] {
        let c = v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {v}"));
        {
            assert_eq!(c["status"], "ok", "{name}: {c}");
        }
    }
    assert!(!v["checks"].as_array().unwrap().iter().any(|c| c["status"] == "fail"), "{v}");
    let argvs = shim.argvs();
    assert_eq!(local_paths(&argvs), Vec::<String>::new(), "paths of this machine sent to a remote engine: {argvs:?}");
    // What it made is gone: the probe sandbox and its audit probe.
    let made: Vec<String> =
        argvs.iter().filter_map(|a| Some(a.windows(2).find(|p| p[0] == "--name")?[1].clone())).collect();
    assert!(made.iter().any(|n| n.starts_with("sbx-audit-")), "{made:?}");
    for name in &made {
        let out = docker(&["container", "inspect", name]);
        assert!(!out.status.success(), "doctor left {name}");
    }
    let ls = json(&sbx(&w, &["--json", "ls"], &remote.env()));
    assert_eq!(ls, serde_json::json!([]), "doctor left a sandbox");

    // Under gVisor: gVisor's kernel inside, and the Sentry read by audit's probe.
    let out = sbx(&w, &["--json", "doctor", "--runtime", "runsc"], &remote.env());
    let v = json(&out);
    assert!(out.status.success(), "doctor --runtime runsc: {v}\n{}", stderr(&out));
    assert!(doctor_check(&v, "kernel")["detail"].as_str().unwrap().starts_with("gVisor's kernel"), "{v}");
    let nnp = doctor_check(&v, "no-new-privileges")["detail"].as_str().unwrap().to_string();
    assert!(nnp.contains("on gVisor's Sentry (NoNewPrivs 1)"), "the Sentry was not read: {nnp}");
    let ls = json(&sbx(&w, &["--json", "ls"], &remote.env()));
    assert_eq!(ls, serde_json::json!([]), "doctor left a sandbox");
}

/// Under gVisor the container's host process is gVisor's Sentry, which
/// `--pid container:` of a runsc container finds in the host's pid
/// namespace (where pid 1 is the host's init, not the sandbox): the probe
/// takes the process in the container's cgroup, the Sentry, as a local
/// audit does, so the two reports agree, `runtime` included.
#[test]
fn under_gvisor_the_probe_reads_the_sentry_as_a_local_audit_does() {
    let remote = Remote::start();
    let w = World::new();
    let sb = w.create(&["--runtime", "runsc"]);
    let local = w.sbx(&["--json", "audit", &sb.id]);
    assert_success(&local, "local audit under gVisor");
    let far = sbx(&w, &["--json", "audit", &sb.id], &remote.env());
    assert_success(&far, "remote audit under gVisor");
    let (local, far) = (json(&local), json(&far));
    assert_eq!(far, local, "a remote audit under gVisor differs from a local one");
    assert_eq!(far["runtime"]["kernel_isolation"], true, "{far}");
    let k = rule(&far, "sbx.runtime")["detail"].as_str().unwrap().to_string();
    assert!(k.contains("gVisor's Sentry, the container's host process"), "{k}");
    assert!(rule(&far, "5.22")["detail"].as_str().unwrap().ends_with("gVisor's Sentry: Seccomp 2"), "{far}");
    assert_eq!(probes_of(&sb.id), Vec::<String>::new());
}

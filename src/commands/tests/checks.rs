//! audit, doctor and volumes: their reports in text and JSON, the failure
//! each ends with, bad input refused before any docker call.
//!
//! A passing audit cannot be scripted: it reads the sandbox's process from
//! the host's real /proc and AppArmor from the host. A passing doctor needs
//! the probe run (a dozen scripted answers and the sbx binary): the live
//! suite covers both.

use super::*;

/// Sandbox ID as inspect shows it, run privileged: audit rule 5.5 fails
/// whatever the host.
fn privileged(rig: &Rig) -> String {
    let mut v: serde_json::Value = serde_json::from_str(&rig.record_line(&[])).unwrap();
    v["Image"] = IMG.into();
    v["HostConfig"] = serde_json::json!({"Privileged": true});
    v.to_string()
}

#[test]
fn audit_prints_each_rule_then_fails_in_text_and_json() {
    let rig = Rig::new();
    rig.fake.push(Output::ok(&privileged(&rig)));
    rig.fake.push(Output::ok("{\"org.opencontainers.image.title\":\"agent\"}\n"));
    let r = rig.sbx(&["audit", ID]);
    assert_eq!(r.code, 1);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 32, "{}", r.stdout);
    assert!(lines.iter().all(|l| l.starts_with("PASS  ") || l.starts_with("FAIL  ")), "{}", r.stdout);
    assert!(lines.iter().any(|l| l.starts_with("FAIL  5.5          ")), "{}", r.stdout);
    assert_eq!(rig.fake.verbs(), ["container inspect", "image inspect"]);
    assert_eq!(rig.fake.calls()[1].last().unwrap(), IMG);
    assert!(r.stderr.starts_with("sbx: error: audit of sbx-00000000000f: failed rules: "), "{}", r.stderr);
    assert!(r.stderr.contains(", 5.5 not privileged, "), "{}", r.stderr);
    assert!(r.stderr.contains(&format!("sbx: hint: `sbx destroy {ID}`")), "{}", r.stderr);

    rig.fake.push(Output::ok(&privileged(&rig)));
    rig.fake.push(Output::ok("{}\n"));
    let r = rig.sbx(&["--json", "audit", ID]);
    assert_eq!(r.code, 1);
    let v = json(&r.stdout);
    assert_eq!((&v["id"], &v["passed"]), (&ID.into(), &false.into()));
    let rule = v["rules"].as_array().unwrap().iter().find(|r| r["id"] == "5.5").unwrap();
    assert_eq!(rule["pass"], false);
    assert_eq!(json(&r.stderr)["error"]["kind"], "audit_failed");
    assert_eq!(
        v["runtime"],
        serde_json::json!({"name": "runc", "family": "runc", "registered": true, "kernel_isolation": false})
    );
}

/// Audit asks the engine what a runtime other than runc is, and
/// says when the engine no longer has it.
#[test]
fn audit_learns_the_runtime_from_the_engine() {
    let rig = Rig::new();
    // The engine's own field (the sbx.runtime label is sealed with the record).
    let under = |runtime: &str| {
        let mut v: serde_json::Value = serde_json::from_str(&privileged(&rig)).unwrap();
        v["HostConfig"]["Runtime"] = runtime.into();
        v.to_string()
    };
    let runtimes = r#"{"runc":{"path":"runc"},"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=host","--host-uds=create"]}}"#;
    rig.fake.push(Output::ok(&under("runsc")));
    rig.fake.push(Output::ok("{}\n"));
    rig.fake.push(Output::ok(&format!("{runtimes}\n")));
    let r = rig.sbx(&["--json", "audit", ID]);
    assert_eq!(r.code, 1, "5.5 still fails: {}", r.stderr);
    assert_eq!(rig.fake.verbs(), ["container inspect", "image inspect", "info"]);
    let v = json(&r.stdout);
    assert_eq!(
        v["runtime"],
        serde_json::json!({"name": "runsc", "family": "gvisor", "registered": true, "kernel_isolation": true})
    );
    let rule = |id: &str| v["rules"].as_array().unwrap().iter().find(|r| r["id"] == id).unwrap().clone();
    assert_eq!(rule("sbx.runtime")["pass"], true);
    assert!(rule("sbx.runtime")["detail"]
        .as_str()
        .unwrap()
        .starts_with("kernel isolation: yes; runsc (/usr/bin/runsc)"));

    rig.fake.push(Output::ok(&under("runsc")));
    rig.fake.push(Output::ok("{}\n"));
    rig.fake.push(Output::ok("{\"runc\":{\"path\":\"runc\"}}\n"));
    let r = rig.sbx(&["audit", ID]);
    assert_eq!(r.code, 1);
    let line = r.stdout.lines().find(|l| l.starts_with("FAIL  sbx.runtime")).expect("sbx.runtime fails");
    assert!(line.contains("the Docker engine has no runtime \"runsc\" (it has: runc)"), "{line}");
    assert!(line.contains("/etc/docker/daemon.json"), "{line}");
    assert!(r.stderr.contains("sbx.runtime kernel isolation"), "{}", r.stderr);
}

#[test]
fn audit_of_a_missing_sandbox_and_of_a_bad_id() {
    let rig = Rig::new();
    rig.fake.push(Output::fail(1, MISSING));
    let r = rig.sbx(&["audit", ID]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert!(r.stderr.starts_with("sbx: error: no sandbox sbx-00000000000f on this engine\n"), "{}", r.stderr);
    rig.fake.push(Output::fail(1, MISSING));
    let r = rig.sbx(&["--json", "audit", ID]);
    assert_eq!((r.code, json(&r.stderr)["error"]["kind"].as_str()), (1, Some("not_found")));

    rig.refused(&["audit", "nope"]);
    assert_eq!(json(&rig.refused(&["--json", "audit", "nope"]))["error"]["kind"], "invalid_input");
}

#[test]
fn doctor_without_docker_says_how_to_fix_it_and_fails() {
    let rig = Rig::new();
    rig.fake.push_spawn_failure();
    let r = rig.sbx(&["doctor"]);
    assert_eq!(r.code, 1);
    let lines: Vec<&str> = r.stdout.lines().collect();
    // Where the engine is needs no docker call in the default case.
    assert_eq!(lines[0], "ok    engine-location    local: unix:///var/run/docker.sock");
    assert_eq!(lines[1], "FAIL  docker             could not run `docker`: No such file or directory");
    assert_eq!(lines[2], format!("{:<24} fix: install the docker CLI (or set SBX_DOCKER to its path)", ""));
    assert!(lines[3].starts_with("ok    sockets            "), "{}", r.stdout);
    assert!(lines[4].starts_with("ok    state              "), "{}", r.stdout);
    assert_eq!(lines[5], "skip  probe              needs a Docker engine that answers");
    assert_eq!(lines[6], "sbx doctor: some checks failed (see FAIL above)");
    assert_eq!(lines.len(), 7);
    assert_eq!(
        r.stderr,
        "sbx: error: doctor: failed checks: docker\nsbx: hint: each failed check above says how to fix it\n"
    );

    rig.fake.push_spawn_failure();
    let r = rig.sbx(&["--json", "doctor"]);
    assert_eq!(r.code, 1);
    let v = json(&r.stdout);
    assert_eq!(v["ok"], false);
    assert_eq!((&v["checks"][1]["name"], &v["checks"][1]["status"]), (&"docker".into(), &"fail".into()));
    assert_eq!(json(&r.stderr)["error"]["kind"], "doctor_failed");
    assert_eq!(rig.fake.verbs(), ["version", "version"], "one docker check a run, no probe after it");
}

/// `doctor --runtime` lists the engine's runtimes and fails on
/// one it does not have, naming the daemon.json fragment, without a probe.
#[test]
fn doctor_with_a_missing_runtime_names_the_fragment_and_skips_the_probe() {
    let rig = Rig::new();
    let engine = |rig: &Rig| {
        let version = r#"{"Client":{"Version":"28.2.2"},"Server":{"Version":"26.1.0","ApiVersion":"1.45","Components":[{"Name":"runc","Version":"1.2.8"}]}}"#;
        rig.fake.push(Output::ok(version));
        rig.fake.push(Output::ok("\"Debian GNU/Linux 12 (bookworm)\"\n"));
        rig.fake.push(Output::ok(""));
        rig.fake.push(Output::ok(r#"{"runc":{"path":"runc"},"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=host","--host-uds=create"]}}"#));
    };
    engine(&rig);
    let r = rig.sbx(&["doctor", "--runtime", "nosuch"]);
    assert_eq!(r.code, 1);
    assert_eq!(rig.fake.verbs(), ["version", "info", "ps", "info"]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines.contains(&"ok    runtimes           runc (host kernel), runsc (gVisor)"), "{}", r.stdout);
    let at = lines.iter().position(|l| l.starts_with("FAIL  runtime ")).expect("runtime fails");
    assert_eq!(lines[at], "FAIL  runtime            the Docker engine has no runtime \"nosuch\" (it has: runc, runsc)");
    assert!(
        lines[at + 1].contains(
            r#"fix: install it, merge {"runtimes":{"nosuch":{"path":"/usr/bin/nosuch"}}} into /etc/docker/daemon.json"#
        ),
        "{}",
        r.stdout
    );
    assert_eq!(lines[at + 2], "skip  probe              needs runtime nosuch registered as sbx needs it");
    assert_eq!(
        r.stderr,
        "sbx: error: doctor: failed checks: runtime\nsbx: hint: each failed check above says how to fix it\n"
    );

    engine(&rig);
    let r = rig.sbx(&["--json", "doctor", "--runtime", "nosuch"]);
    assert_eq!(r.code, 1);
    let v = json(&r.stdout);
    let c = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == "runtime").unwrap().clone();
    assert_eq!(c["status"], "fail");
    assert!(c["fix"].as_str().unwrap().contains("sudo kill -HUP $(pidof dockerd)"), "{c}");
}

#[test]
fn doctor_refuses_bad_routes_before_any_docker_call() {
    let rig = Rig::new();
    rig.refused(&["doctor", "--route", "nope"]);
    let e = rig.refused(&["doctor", "--route", "inference:proxy:8080", "--route", "inference:docs:80"]);
    assert_eq!(e, "sbx: error: invalid route \"inference:docs:80\": the kind is given twice\n");
}

/// `docker volume ls` rows: ours (sealed for this host) and one whose
/// token is not (left out).
fn volume_rows(rig: &Rig) -> String {
    let ours = serde_json::json!(["sbx-state-task-1", "task-1", rig.token("sbx-state-task-1")]);
    let foreign = serde_json::json!(["sbx-state-task-2", "task-2", rig.token("sbx-state-task-1")]);
    format!("{ours}\n{foreign}\n")
}

#[test]
fn volumes_lists_this_hosts_volumes_and_their_users() {
    let rig = Rig::new();
    rig.fake.push(Output::ok(&volume_rows(&rig)));
    rig.fake.push(Output::ok(&format!("{}\n", serde_json::json!([ID, "sbx-state-task-1"]))));
    let r = rig.sbx(&["volumes"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(
        r.stdout,
        "VOLUME                  SESSION         SIZE        LIMIT       IN USE BY\n\
         sbx-state-task-1        task-1          0           unbounded   sbx-00000000000f\n"
    );
    assert_eq!(rig.fake.verbs(), ["volume", "ps"]);

    rig.fake.push(Output::ok(&volume_rows(&rig)));
    rig.fake.push(Output::ok(""));
    let r = rig.sbx(&["--json", "volumes"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let v = json(&r.stdout);
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!((&v[0]["name"], &v[0]["session"]), (&"sbx-state-task-1".into(), &"task-1".into()));
    assert_eq!(v[0]["in_use_by"], serde_json::json!([]));

    rig.fake.push_spawn_failure();
    let r = rig.sbx(&["--json", "volumes"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(json(&r.stderr)["error"]["kind"], "docker_missing");
}

#[test]
fn volumes_rm_prints_what_it_removed_and_refuses_a_volume_in_use() {
    let rig = Rig::new();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&volume_rows(&rig)));
    rig.fake.push(Output::ok("sbx-state-task-1\n"));
    let r = rig.sbx(&["volumes", "rm", "task-1"]);
    assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (0, "sbx-state-task-1\n", ""));
    assert_eq!(rig.fake.verbs(), ["ps", "volume", "volume"]);

    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&volume_rows(&rig)));
    rig.fake.push(Output::ok("sbx-state-task-1\n"));
    let r = rig.sbx(&["--json", "volumes", "rm", "task-1"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(r.stdout, "{\"removed\":\"sbx-state-task-1\",\"session\":\"task-1\"}\n");

    rig.fake.push(Output::ok(&format!("{}\n", serde_json::json!([ID, "sbx-state-task-1"]))));
    let r = rig.sbx(&["volumes", "rm", "task-1"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(
        r.stderr,
        "sbx: error: the persistent state of session task-1 is in use by running sandbox sbx-00000000000f\n\
         sbx: hint: one writer at a time: `sbx destroy sbx-00000000000f` first (the volume stays)\n"
    );
    rig.fake.push(Output::ok(&format!("{}\n", serde_json::json!([ID, "sbx-state-task-1"]))));
    let r = rig.sbx(&["--json", "volumes", "rm", "task-1"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(json(&r.stderr)["error"]["kind"], "volume_in_use");

    let e = rig.refused(&["volumes", "rm", "../x"]);
    assert!(e.starts_with("sbx: error: invalid "), "{e}");
}

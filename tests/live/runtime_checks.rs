//! `sbx audit` and `sbx doctor` under a runtime: doctor lists the
//! engine's runtimes and probes under gVisor end to end; audit of a gVisor
//! sandbox reads the config, not gVisor's root Sentry, for the rules about
//! the workload, and says whether the workload has a kernel of its own.
//!
//! These need gVisor's runsc registered as runtime `runsc`
//! (`.ci/register-runsc`); without it they fail, never skip.

use crate::support::*;

/// Fails (never skips) when the engine has no runtime `runsc`.
pub(crate) fn require_runsc() {
    let runtimes = docker_ok(&["info", "--format", "{{json .Runtimes}}"]);
    let v: serde_json::Value = serde_json::from_str(&runtimes).expect("docker info's runtimes are JSON");
    assert!(
        v.get("runsc").is_some(),
        "these tests need gVisor's runsc registered with the engine as runtime `runsc` (see .ci/register-runsc); \
         the engine has: {runtimes}"
    );
}

fn rule(report: &serde_json::Value, id: &str) -> serde_json::Value {
    report["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no rule {id}: {report}"))
        .clone()
}

#[test]
fn doctor_under_runsc_passes_and_names_gvisor() {
    require_runsc();
    let w = World::new();
    let out = w.sbx(&["doctor", "--runtime", "runsc"]);
    assert_success(&out, "sbx doctor --runtime runsc");
    let text = stdout(&out);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.get(6..).is_some_and(|r| r.starts_with(&format!("{name:<18} "))))
            .unwrap_or_else(|| panic!("no check {name}: {text}"))
            .to_string()
    };
    assert!(line("runtime").starts_with("ok    runtime            the probe runs under runsc (gVisor, "), "{text}");
    assert!(line("kernel").starts_with("ok    kernel             gVisor's kernel, not the host's"), "{text}");
    assert!(
        line("no-new-privileges").contains(
            "not reported inside gVisor; set on the container (SecurityOpt) and on gVisor's Sentry (NoNewPrivs 1)"
        ),
        "{text}"
    );
    assert!(line("seccomp").starts_with("ok    seccomp            Seccomp 0 inside gVisor: "), "{text}");
    assert!(line("seccomp").ends_with("gVisor's Sentry: Seccomp 2"), "{text}");
    assert!(line("probe").contains("(runtime runsc)"), "{text}");
    w.assert_nothing_left();
}

#[test]
fn doctor_lists_runsc_among_the_engines_runtimes() {
    require_runsc();
    let w = World::new();
    let out = w.sbx(&["--json", "doctor"]);
    assert_success(&out, "sbx doctor");
    let report = json(&out);
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {report}"))
            .clone()
    };
    let listed = check("runtimes");
    assert_eq!(listed["status"], "ok");
    let detail = listed["detail"].as_str().unwrap();
    assert!(detail.contains("runc (host kernel)") && detail.contains("runsc (gVisor)"), "{detail}");
    assert!(
        check("kernel")["detail"].as_str().unwrap().starts_with("the host's kernel, shared (no kernel isolation)"),
        "{report}"
    );
    w.assert_nothing_left();
}

#[test]
fn doctor_with_a_runtime_the_engine_lacks_fails_naming_the_fragment() {
    let w = World::new();
    let out = w.sbx(&["doctor", "--runtime", "nosuch"]);
    assert_exit(&out, 1, "sbx doctor --runtime nosuch");
    let text = stdout(&out);
    assert!(text.contains("FAIL  runtime            the Docker engine has no runtime \"nosuch\""), "{text}");
    assert!(
        text.contains(r#"merge {"runtimes":{"nosuch":{"path":"/usr/bin/nosuch"}}} into /etc/docker/daemon.json"#),
        "{text}"
    );
    assert!(text.contains("skip  probe"), "{text}");
    assert!(stderr(&out).contains("failed checks: runtime"), "{}", stderr(&out));
}

#[test]
fn audit_of_a_gvisor_sandbox_passes_and_says_how_each_rule_was_established() {
    require_runsc();
    let w = World::new();
    let sb = w.create(&["--runtime", "runsc"]);
    let out = w.sbx(&["--json", "audit", &sb.id]);
    assert_success(&out, "sbx audit of a runsc sandbox");
    let report = json(&out);
    assert_eq!(report["passed"], true, "{report}");
    assert_eq!(
        report["runtime"],
        serde_json::json!({"name": "runsc", "family": "gvisor", "registered": true, "kernel_isolation": true})
    );
    let detail = |id: &str| rule(&report, id)["detail"].as_str().unwrap().to_string();
    assert!(detail("sbx.runtime").starts_with("kernel isolation: yes; runsc ("), "{report}");
    for id in ["4.1", "5.4"] {
        let d = detail(id);
        assert!(d.contains("established from the config") && d.contains("gVisor's kernel"), "{id}: {d}");
        assert!(d.contains("not read from the host process (gVisor's Sentry"), "{id}: {d}");
    }
    assert!(detail("4.1").ends_with("host uid 0)"), "the Sentry is root on the host, and audit says so");
    assert!(detail("5.22").ends_with("gVisor's Sentry: Seccomp 2"), "{report}");
    assert!(detail("5.26").ends_with("gVisor's Sentry: NoNewPrivs 1"), "{report}");
    assert!(detail("sbx.seccomp").contains("sbx's OCI profile is not applied inside"), "{report}");

    let text = stdout(&w.sbx(&["audit", &sb.id]));
    assert!(
        text.lines()
            .any(|l| l.starts_with("PASS  sbx.runtime  kernel isolation") && l.contains("kernel isolation: yes")),
        "{text}"
    );
}

#[test]
fn audit_of_a_runc_sandbox_reports_no_kernel_isolation() {
    let w = World::new();
    let sb = w.create(&[]);
    let out = w.sbx(&["--json", "audit", &sb.id]);
    assert_success(&out, "sbx audit of a runc sandbox");
    let report = json(&out);
    assert_eq!(report["runtime"]["kernel_isolation"], false, "{report}");
    assert_eq!(report["runtime"]["family"], "runc", "{report}");
    let r = rule(&report, "sbx.runtime");
    assert_eq!(r["pass"], true, "runc is the default, not a failure");
    assert!(
        r["detail"].as_str().unwrap().starts_with("kernel isolation: no; runc: the workload shares the host kernel"),
        "{r}"
    );
    assert!(
        rule(&report, "4.1")["detail"].as_str().unwrap().ends_with(&format!("process uid {}", sb.uid())),
        "runc: read from the process"
    );
}

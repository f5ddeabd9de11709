use super::*;
use crate::docker::Output;
use crate::sandbox::testing::Rig;

const RUNTIMES: &str = r#"{"runc":{"path":"runc"},"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=host","--host-uds=create"]}}"#;

/// Doctor's runtime checks for `--runtime name` against the engine's answer.
fn checked(name: &str, answer: Output, routes: &[Route]) -> (Option<Registered>, Vec<Check>) {
    let rig = Rig::new();
    rig.fake.push(answer);
    let driver = rig.driver();
    let doctor =
        Doctor { driver: &driver, exec: driver.docker(), exe: std::path::Path::new("/nonexistent"), runtime: name };
    let mut checks = Vec::new();
    let reg = doctor.runtimes(routes, &mut checks);
    assert_eq!(
        rig.fake.calls(),
        [argv::runtimes().iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>()]
    );
    (reg, checks)
}

#[test]
fn lists_every_runtime_with_its_family_and_checks_the_one_asked_for() {
    let (reg, checks) = checked("runsc", Output::ok(RUNTIMES), &[]);
    assert_eq!(reg.unwrap().family(), Family::Gvisor);
    assert_eq!(
        (checks[0].name.as_str(), checks[0].detail.as_str()),
        ("runtimes", "runc (host kernel), runsc (gVisor)")
    );
    assert_eq!((checks[1].name.as_str(), checks[1].status), ("runtime", Status::Ok));
    assert!(checks[1].detail.starts_with("the probe runs under runsc (gVisor, /usr/bin/runsc --network=host --host-uds=create): gVisor's Sentry serves"), "{}", checks[1].detail);
    let (reg, checks) = checked("runc", Output::ok(RUNTIMES), &[]);
    assert_eq!(reg.unwrap().family(), Family::Runc);
    assert!(checks.iter().all(|c| c.status == Status::Ok), "{checks:?}");
}

#[test]
fn a_missing_runtime_says_how_to_install_and_register_it() {
    let (reg, checks) = checked("nosuch", Output::ok(RUNTIMES), &[]);
    assert!(reg.is_none());
    let c = &checks[1];
    assert_eq!((c.name.as_str(), c.status), ("runtime", Status::Fail));
    assert_eq!(c.detail, "the Docker engine has no runtime \"nosuch\" (it has: runc, runsc)");
    let fix = c.fix.as_deref().unwrap();
    assert!(
        fix.contains(r#"{"runtimes":{"nosuch":{"path":"/usr/bin/nosuch"}}}"#)
            && fix.contains(crate::model::runtime::RELOAD),
        "{fix}"
    );
}

#[test]
fn a_wrong_registration_fails_with_the_fragment_that_fixes_it() {
    let bare = r#"{"runc":{"path":"runc"},"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none","--oci-seccomp"]}}"#;
    // Without routes, --network=none is fine; --oci-seccomp is not.
    let (reg, checks) = checked("runsc", Output::ok(bare), &[]);
    assert!(reg.is_none());
    let c = &checks[1];
    assert_eq!(c.status, Status::Fail);
    assert!(c.detail.contains("--oci-seccomp") && !c.detail.contains("--network=none"), "{}", c.detail);
    let fix = c.fix.as_deref().unwrap();
    assert!(fix.contains(&crate::model::runtime::fragment("runsc", Some("/usr/bin/runsc"))), "{fix}");
    assert!(fix.contains(crate::model::runtime::RELOAD), "{fix}");
    // With a route, the sandbox needs a network too.
    let route = Route::parse("inference:proxy:8080").unwrap();
    let (_, checks) = checked("runsc", Output::ok(bare), &[route]);
    assert!(checks[1].detail.contains("--network=none"), "{}", checks[1].detail);
}

#[test]
fn unreadable_runtimes_fail_only_a_runtime_that_was_asked_for() {
    let (reg, checks) = checked("runc", Output::ok("null"), &[]);
    assert_eq!((reg.map(|r| r.name), checks[0].status), (Some("runc".into()), Status::Warn));
    let (reg, checks) = checked("runsc", Output::fail(1, "boom"), &[]);
    assert!(reg.is_none());
    assert_eq!(checks[0].status, Status::Fail);
    assert!(checks[0].detail.starts_with("could not read the engine's runtimes"), "{}", checks[0].detail);
}

/// Doctor's runtime checks for `--runtime runsc-snap`, each docker answer in turn.
fn snap_checked(answers: Vec<Output>) -> (Option<Registered>, Vec<Check>) {
    let rig = Rig::new();
    for a in answers {
        rig.fake.push(a);
    }
    let driver = rig.driver();
    let doctor = Doctor {
        driver: &driver,
        exec: driver.docker(),
        exe: std::path::Path::new("/nonexistent"),
        runtime: crate::model::runtime::SNAPSHOTS,
    };
    let mut checks = Vec::new();
    let reg = doctor.runtimes(&[], &mut checks);
    (reg, checks)
}

#[test]
fn runsc_snap_needs_its_registration_and_the_engines_experimental_features() {
    let listed = r#"{"runc":{"path":"runc"},"runsc-snap":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none"]}}"#;
    let wrong = r#"{"runc":{"path":"runc"},"runsc-snap":{"path":"/usr/bin/runsc","runtimeArgs":["--network=host","--host-uds=create"]}}"#;
    let (reg, checks) = snap_checked(vec![Output::ok(wrong)]);
    assert!(reg.is_none());
    let c = checks.iter().find(|c| c.name == "snapshots").expect("a snapshots check");
    assert_eq!(c.status, Status::Fail);
    assert!(c.fix.as_deref().unwrap().contains(r#""experimental":true"#), "{:?}", c.fix);

    let (reg, checks) = snap_checked(vec![Output::ok(listed), Output::ok("false\n")]);
    assert!(reg.is_none());
    let c = checks.iter().find(|c| c.name == "snapshots").unwrap();
    assert!(c.detail.contains("experimental"), "{}", c.detail);

    let (reg, checks) = snap_checked(vec![Output::ok(listed), Output::ok("true\n")]);
    assert_eq!(reg.map(|r| r.name), Some("runsc-snap".into()));
    assert!(checks.iter().all(|c| c.status == Status::Ok), "{checks:?}");
}

use super::*;

fn good() -> Report {
    let z = "0000000000000000".to_string();
    Report {
        echo: "n".into(),
        uid: "65534".into(),
        gid: "65534".into(),
        cap_eff: z.clone(),
        cap_prm: z.clone(),
        cap_bnd: z.clone(),
        cap_amb: z,
        no_new_privs: "1".into(),
        seccomp: "2".into(),
        read_only_root: true,
        tmp_writable: true,
        state_writable: true,
        interfaces: vec!["lo".into()],
        routes: vec![],
        kernel: HOST.into(),
    }
}

const HOST: &str = "Linux version 6.18.44 (builder@host) #1 SMP PREEMPT_DYNAMIC";
const GVISOR: &str = "Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016";

fn runc() -> Seen {
    Seen {
        runtime: Registered { name: "runc".into(), path: "runc".into(), args: vec![] },
        host_kernel: HOST.into(),
        security_opt: vec!["no-new-privileges".into(), "seccomp={}".into()],
        host_process: None,
    }
}

fn sentry() -> ProcStatus {
    ProcStatus {
        uid: "0".into(),
        no_new_privs: "1".into(),
        seccomp: "2".into(),
        program: "runsc".into(),
        ..Default::default()
    }
}

/// runsc as sbx registers it, its Sentry visible.
fn gvisor() -> Seen {
    let args = crate::model::runtime::RUNSC_ARGS.iter().map(|s| s.to_string()).collect();
    Seen {
        runtime: Registered { name: "runsc".into(), path: "/usr/bin/runsc".into(), args },
        host_process: Some(sentry()),
        ..runc()
    }
}

/// What the probe reads inside gVisor (runsc 20221219): no NoNewPrivs or CapAmb line, Seccomp 0.
fn inside_gvisor() -> Report {
    Report { kernel: GVISOR.into(), no_new_privs: String::new(), cap_amb: String::new(), seccomp: "0".into(), ..good() }
}

fn judged(r: &Report, seen: &Seen) -> Vec<Check> {
    let mut checks = Vec::new();
    evaluate(r, "n", &[], &[], seen, &mut checks);
    checks
}

fn find<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks.iter().find(|c| c.name == name).unwrap()
}

#[test]
fn a_hardened_probe_passes_and_each_weakness_fails() {
    let checks = judged(&good(), &runc());
    assert!(checks.iter().all(|c| c.status == Status::Ok), "{checks:?}");
    assert!(find(&checks, "kernel").detail.starts_with("the host's kernel, shared (no kernel isolation)"));
    let weak = [
        Report { cap_eff: "00000000a80425fb".into(), ..good() },
        Report { no_new_privs: "0".into(), ..good() },
        Report { seccomp: "0".into(), ..good() },
        Report { read_only_root: false, ..good() },
        Report { uid: "0".into(), ..good() },
        Report { tmp_writable: false, ..good() },
        Report { interfaces: vec!["lo".into(), "eth0".into()], ..good() },
        Report { echo: "other".into(), ..good() },
    ];
    for r in weak {
        let checks = judged(&r, &runc());
        assert_eq!(checks.iter().filter(|c| c.status == Status::Fail).count(), 1, "{r:?}");
    }
}

/// Consistency: doctor's fix for a missing route network is create's.
#[test]
fn a_missing_network_is_fixed_as_create_says() {
    let fix = crate::error::missing_network_fix(&["sbx-proxy".to_string()]);
    assert!(fix.contains("docker network connect --alias proxy sbx-proxy SERVICE"), "{fix}");
    assert!(fix.contains("com.docker.network.bridge.inhibit_ipv4=true"), "{fix}");
    let e = crate::error::Error::Route(crate::error::RouteError::NetworkMissing { networks: vec!["sbx-proxy".into()] });
    assert!(e.hint().unwrap().starts_with(&fix));
}

#[test]
fn routes_are_judged_by_what_the_probe_reached() {
    let route = Route::parse("inference:proxy:8080").unwrap();
    let mut r = good();
    r.interfaces = vec!["lo".into(), "eth0".into()];
    r.routes = vec![crate::checks::probe::RouteCheck {
        target: "proxy:8080".into(),
        reached: false,
        detail: "refused".into(),
    }];
    let mut checks = Vec::new();
    evaluate(&r, "n", std::slice::from_ref(&route), &["proxy:8080".into()], &runc(), &mut checks);
    let c = checks.iter().find(|c| c.name == "route inference").unwrap();
    assert_eq!(c.status, Status::Fail);
    assert!(c.fix.as_deref().unwrap().contains("docker network connect sbx-proxy proxy"));
    assert_eq!(route_port(&Route::parse("docs:https://docs").unwrap()), Some(443));
    assert_eq!(route_port(&Route::parse("docs:docs").unwrap()), None);
}

#[test]
fn under_gvisor_what_the_probe_cannot_see_is_established_not_assumed() {
    let checks = judged(&inside_gvisor(), &gvisor());
    assert!(checks.iter().all(|c| c.status == Status::Ok), "{checks:#?}");
    assert!(find(&checks, "kernel").detail.starts_with("gVisor's kernel, not the host's: Linux version 4.4.0"));
    assert_eq!(
        find(&checks, "no-new-privileges").detail,
        "not reported inside gVisor; set on the container (SecurityOpt) and on gVisor's Sentry (NoNewPrivs 1)"
    );
    let sc = &find(&checks, "seccomp").detail;
    assert!(
        sc.starts_with("Seccomp 0 inside gVisor: gVisor's Sentry serves") && sc.ends_with("gVisor's Sentry: Seccomp 2"),
        "{sc}"
    );
    assert!(find(&checks, "capabilities").detail.contains("CapAmb not reported inside gVisor"));

    // Not blindly: each missing piece of evidence fails or warns.
    let status = |r: &Report, seen: &Seen, name: &str| find(&judged(r, seen), name).status;
    let no_opt = Seen { security_opt: vec![], ..gvisor() };
    assert_eq!(status(&inside_gvisor(), &no_opt, "no-new-privileges"), Status::Fail);
    let loose = Seen {
        host_process: Some(ProcStatus { seccomp: "0".into(), no_new_privs: "0".into(), ..sentry() }),
        ..gvisor()
    };
    assert_eq!(status(&inside_gvisor(), &loose, "seccomp"), Status::Fail);
    assert_eq!(status(&inside_gvisor(), &loose, "no-new-privileges"), Status::Fail);
    let other = Seen { host_process: Some(ProcStatus { program: "sleep".into(), ..sentry() }), ..gvisor() };
    assert_eq!(status(&inside_gvisor(), &other, "seccomp"), Status::Fail);
    let hidden = Seen { host_process: None, ..gvisor() };
    assert_eq!(status(&inside_gvisor(), &hidden, "seccomp"), Status::Warn);
    assert_eq!(status(&inside_gvisor(), &hidden, "no-new-privileges"), Status::Ok);
    // A capability inside gVisor still fails.
    let capped = Report { cap_eff: "0000000000000400".into(), ..inside_gvisor() };
    assert_eq!(status(&capped, &gvisor(), "capabilities"), Status::Fail);
}

#[test]
fn gvisor_claimed_but_the_host_kernel_seen_fails() {
    // The probe saw the host's banner: the runc rules apply, and they fail.
    let r = Report { kernel: HOST.into(), ..inside_gvisor() };
    let checks = judged(&r, &gvisor());
    let failed: Vec<&str> = checks.iter().filter(|c| c.status == Status::Fail).map(|c| c.name.as_str()).collect();
    assert_eq!(failed, ["kernel", "capabilities", "no-new-privileges", "seccomp"]);
    let k = find(&checks, "kernel");
    assert!(k.detail.starts_with("runsc is registered as gVisor, but the probe saw the host's kernel"), "{k:?}");
    assert!(k.fix.as_deref().unwrap().contains("\"runtimeArgs\""), "{k:?}");
    // With no host banner to compare, gVisor's own banner decides.
    let blind = Seen { host_kernel: String::new(), ..gvisor() };
    assert_eq!(find(&judged(&r, &blind), "kernel").status, Status::Fail);
    assert_eq!(find(&judged(&inside_gvisor(), &blind), "kernel").status, Status::Ok);
    assert_eq!(find(&judged(&Report { kernel: String::new(), ..good() }, &runc()), "kernel").status, Status::Fail);
}

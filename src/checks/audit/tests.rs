use super::*;

pub(super) fn good() -> serde_json::Value {
    let profile: serde_json::Value = serde_json::from_str(crate::host::seccomp::PROFILE).unwrap();
    serde_json::json!({
        "AppArmorProfile": "docker-default",
        "Config": {
            "User": "65534:65534",
            "Labels": {"sbx.routes": "{\"inference\":\"sbx-proxy\"}", "sbx.volume": "sbx-state-s", "sbx.persist-size": "2147483648"},
            "Healthcheck": {"Test": ["NONE"], "Interval": 1000000}
        },
        "Mounts": [
            {"Type": "bind", "Source": "/run/sbx/sandboxes/sbx-1", "Destination": "/run/sandbox", "Propagation": "rprivate"},
            {"Type": "volume", "Name": "sbx-state-s", "Source": "/v/sbx-state-s/_data", "Destination": "/state", "RW": true},
            {"Type": "volume", "Name": "sbx-helper-0f", "Source": "/v/sbx-helper-0f/_data", "Destination": "/run/sbx", "RW": false}
        ],
        "NetworkSettings": {"Networks": {"sbx-proxy": {}}},
        "HostConfig": {
            "CapDrop": ["ALL"], "CapAdd": null, "Privileged": false, "PortBindings": {}, "NetworkMode": "sbx-proxy",
            "Memory": 4294967296i64, "ReadonlyRootfs": true, "RestartPolicy": {"Name": "no", "MaximumRetryCount": 0},
            "PidMode": "", "IpcMode": "private", "Devices": [], "UTSMode": "", "CgroupParent": "",
            "Ulimits": [{"Name": "nofile"}, {"Name": "core"}],
            "SecurityOpt": ["no-new-privileges", format!("seccomp={profile}")],
            "PidsLimit": 512, "UsernsMode": "", "NanoCpus": 1000000000i64, "CpuQuota": 0,
            "LogConfig": {"Type": "json-file", "Config": {"max-size": "10m", "max-file": "3"}}
        }
    })
}

fn facts() -> Facts {
    Facts {
        apparmor: true,
        image_labels: Ok(serde_json::json!({"org.opencontainers.image.title": "agent"})),
        runtime: RuntimeFacts::runc(),
        unread: "the sandbox is not running: it has no process to read".into(),
        forwarded: Vec::new(),
    }
}

fn proc_ok() -> ProcStatus {
    ProcStatus::parse("Uid:\t65534\t65534\t65534\t65534\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n")
}

fn failing(c: &serde_json::Value, p: Option<&ProcStatus>) -> Vec<&'static str> {
    audit(c, p, &facts()).into_iter().filter(|r| !r.pass).map(|r| r.id).collect()
}

#[test]
fn a_hardened_sandbox_passes_every_rule() {
    let rules = audit(&good(), Some(&proc_ok()), &facts());
    assert!(rules.iter().all(|r| r.pass), "{rules:#?}");
    assert_eq!(rules.len(), 32);
    let mut bare = good();
    bare["Config"].as_object_mut().unwrap().remove("Healthcheck");
    bare["Mounts"] = serde_json::json!([]);
    assert!(failing(&bare, Some(&proc_ok())).is_empty(), "no healthcheck and no volume at all");
    let mut none = good();
    none["Config"]["Labels"]["sbx.routes"] = "{}".into();
    none["HostConfig"]["NetworkMode"] = "none".into();
    none["NetworkSettings"]["Networks"] = serde_json::json!({"none": {}});
    assert!(failing(&none, Some(&proc_ok())).is_empty(), "no routes: only `none`");
}

#[test]
fn each_weakness_fails_its_rule() {
    type Weaken = fn(&mut serde_json::Value);
    let cases: Vec<(&str, Weaken)> = vec![
        ("5.2", |c| c["AppArmorProfile"] = "unconfined".into()),
        ("5.4", |c| c["HostConfig"]["CapAdd"] = serde_json::json!(["NET_ADMIN"])),
        ("5.5", |c| c["HostConfig"]["Privileged"] = true.into()),
        ("5.6", |c| c["Mounts"] = serde_json::json!([{"Source": "/etc", "Destination": "/x"}])),
        ("5.9", |c| c["HostConfig"]["PortBindings"] = serde_json::json!({"80/tcp": [{}]})),
        ("5.10", |c| c["HostConfig"]["NetworkMode"] = "host".into()),
        ("5.11", |c| c["HostConfig"]["Memory"] = 0.into()),
        ("5.12", |c| c["HostConfig"]["NanoCpus"] = 0.into()),
        ("5.13", |c| c["HostConfig"]["ReadonlyRootfs"] = false.into()),
        ("5.15", |c| c["HostConfig"]["RestartPolicy"]["Name"] = "always".into()),
        ("5.16", |c| c["HostConfig"]["PidMode"] = "host".into()),
        ("5.17", |c| c["HostConfig"]["IpcMode"] = "host".into()),
        ("5.18", |c| c["HostConfig"]["Devices"] = serde_json::json!([{"PathOnHost": "/dev/kvm"}])),
        ("5.19", |c| c["HostConfig"]["Ulimits"] = serde_json::json!([])),
        ("5.20", |c| c["Mounts"][0]["Propagation"] = "rshared".into()),
        ("5.21", |c| c["HostConfig"]["UTSMode"] = "host".into()),
        ("5.25", |c| c["HostConfig"]["CgroupParent"] = "/custom".into()),
        ("5.26", |c| {
            c["HostConfig"]["SecurityOpt"].as_array_mut().unwrap().remove(0);
        }),
        ("5.29", |c| c["HostConfig"]["PidsLimit"] = 0.into()),
        ("5.30", |c| {
            c["HostConfig"]["NetworkMode"] = "default".into();
            c["NetworkSettings"]["Networks"] = serde_json::json!({"sbx-proxy": {}});
        }),
        ("5.31", |c| c["HostConfig"]["UsernsMode"] = "host".into()),
        ("5.32", |c| c["Mounts"] = serde_json::json!([{"Source": "/var/run/docker.sock", "Destination": "/x.sock"}])),
        ("4.1", |c| c["Config"]["User"] = "".into()),
        ("sbx.seccomp", |c| c["HostConfig"]["SecurityOpt"] = serde_json::json!(["no-new-privileges"])),
        ("sbx.log", |c| c["HostConfig"]["LogConfig"] = serde_json::json!({"Type": "json-file", "Config": {}})),
        ("sbx.log", |c| {
            c["HostConfig"]["LogConfig"] = serde_json::json!({"Type": "journald", "Config": {"max-size": "10m"}})
        }),
        ("sbx.networks", |c| c["NetworkSettings"]["Networks"]["bridge"] = serde_json::json!({})),
        // The image's HEALTHCHECK, run by the engine outside --cpus.
        ("sbx.health", |c| {
            c["Config"]["Healthcheck"] = serde_json::json!({"Test": ["CMD", "/x"], "Interval": 1000000})
        }),
        ("sbx.health", |c| c["Config"]["Healthcheck"] = serde_json::json!({"Test": ["CMD-SHELL", "true"]})),
        // An image VOLUME's anonymous volume: host disk without bound.
        ("sbx.volumes", |c| {
            let anon =
                serde_json::json!({"Type": "volume", "Name": "4f1d".repeat(16), "Destination": "/data", "RW": true});
            c["Mounts"].as_array_mut().unwrap().push(anon)
        }),
        ("sbx.volumes", |c| c["Mounts"][1]["Destination"] = "/data".into()),
        ("sbx.volumes", |c| c["Config"]["Labels"]["sbx.volume"] = "sbx-state-other".into()),
        ("sbx.volumes", |c| c["Mounts"][2]["RW"] = true.into()),
        // `--persist-size unbounded`, or an older sbx's session volume: host disk without bound.
        ("sbx.persist", |c| c["Config"]["Labels"]["sbx.persist-size"] = "unbounded".into()),
        ("sbx.persist", |c| {
            c["Config"]["Labels"].as_object_mut().unwrap().remove("sbx.persist-size");
        }),
    ];
    for (id, weaken) in cases {
        let mut c = good();
        weaken(&mut c);
        assert_eq!(failing(&c, Some(&proc_ok())), vec![id], "weakening {id}");
    }
    let mut c = good();
    c["HostConfig"]["SecurityOpt"] = serde_json::json!(["no-new-privileges", "seccomp:unconfined"]);
    assert_eq!(failing(&c, Some(&proc_ok())), vec!["5.22", "sbx.seccomp"]);
}

#[test]
fn what_the_process_has_counts_too() {
    let mut p = proc_ok();
    p.cap_eff = "00000000a80425fb".into();
    assert_eq!(failing(&good(), Some(&p)), vec!["5.4"]);
    let p = ProcStatus { seccomp: "0".into(), no_new_privs: "0".into(), uid: "0".into(), ..proc_ok() };
    assert_eq!(failing(&good(), Some(&p)), vec!["5.22", "5.26", "4.1"]);
    assert!(failing(&good(), None).is_empty(), "config alone when the process is not visible");
    let no_apparmor = Facts { apparmor: false, ..facts() };
    assert!(audit(&good(), Some(&proc_ok()), &no_apparmor)[0].detail.contains("not applicable"));
}

#[test]
fn labels_the_image_carries_under_sbx_fail() {
    let hostile = Facts { image_labels: Ok(serde_json::json!({"sbx.private": "{}", "a": "b"})), ..facts() };
    let rules = audit(&good(), Some(&proc_ok()), &hostile);
    let bad: Vec<&Rule> = rules.iter().filter(|r| !r.pass).collect();
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].id, "sbx.labels");
    assert!(bad[0].detail.contains("sbx.private"));
    let unknown = Facts { image_labels: Err("No such image".into()), ..facts() };
    assert_eq!(
        audit(&good(), Some(&proc_ok()), &unknown).iter().filter(|r| !r.pass).map(|r| r.id).collect::<Vec<_>>(),
        ["sbx.labels"]
    );
}

fn runsc() -> RuntimeFacts {
    let reg = crate::model::runtime::Registered {
        name: "runsc".into(),
        path: "/usr/bin/runsc".into(),
        args: crate::model::runtime::RUNSC_ARGS.iter().map(|s| s.to_string()).collect(),
    };
    RuntimeFacts {
        name: "runsc".into(),
        label_disagrees: None,
        registered: Some(reg),
        listed: vec!["runc".into(), "runsc".into()],
    }
}

/// gVisor's Sentry as measured (runsc 20221219): root on the host, CAP_SYS_PTRACE, its own filter.
fn sentry() -> ProcStatus {
    let mut p = ProcStatus::parse("Name:\texe\nUid:\t0\t0\t0\t0\nCapPrm:\t0000000000080000\nCapEff:\t0000000000080000\nCapBnd:\t0000000000080000\nNoNewPrivs:\t1\nSeccomp:\t2\n");
    p.program = "runsc".into();
    p
}

fn rule<'a>(rules: &'a [Rule], id: &str) -> &'a Rule {
    rules.iter().find(|r| r.id == id).unwrap()
}

#[test]
fn runc_passes_and_says_it_shares_the_host_kernel() {
    let rules = audit(&good(), Some(&proc_ok()), &facts());
    let r = rule(&rules, "sbx.runtime");
    assert!(r.pass && r.detail.starts_with("kernel isolation: no; runc: the workload shares the host kernel"), "{r:?}");
    assert!(r.detail.contains("shares the host kernel"), "{r:?}");
    assert!(!runtime_summary(Some(&proc_ok()), &facts()).kernel_isolation);
}

#[test]
fn under_gvisor_the_sentry_is_not_read_as_the_workload() {
    let gv = Facts { runtime: runsc(), ..facts() };
    let rules = audit(&good(), Some(&sentry()), &gv);
    assert!(rules.iter().all(|r| r.pass), "{rules:#?}");
    for id in ["4.1", "5.4"] {
        let d = &rule(&rules, id).detail;
        assert!(d.contains("established from the config") && d.contains("inside gVisor's kernel"), "{id}: {d}");
        assert!(d.contains("gVisor's Sentry"), "{id}: {d}");
    }
    assert!(rule(&rules, "5.22").detail.ends_with("gVisor's Sentry: Seccomp 2"));
    assert!(rule(&rules, "5.26").detail.ends_with("gVisor's Sentry: NoNewPrivs 1"));
    let s = &rule(&rules, "sbx.seccomp").detail;
    assert!(s.contains("sbx's OCI profile is not applied inside") && s.ends_with("gVisor's Sentry: Seccomp 2"), "{s}");
    let k = &rule(&rules, "sbx.runtime").detail;
    assert!(k.starts_with("kernel isolation: yes; runsc (/usr/bin/runsc)"), "{k}");
    let sum = runtime_summary(Some(&sentry()), &gv);
    assert_eq!(
        (sum.kernel_isolation, sum.registered, sum.family),
        (true, true, Some(crate::model::runtime::Family::Gvisor))
    );

    // The config still counts: a root user or an added capability fails.
    let mut root = good();
    root["Config"]["User"] = "0".into();
    assert_eq!(
        audit(&root, Some(&sentry()), &gv).iter().filter(|r| !r.pass).map(|r| r.id).collect::<Vec<_>>(),
        ["4.1"]
    );
    let mut cap = good();
    cap["HostConfig"]["CapAdd"] = serde_json::json!(["SYS_ADMIN"]);
    assert_eq!(audit(&cap, Some(&sentry()), &gv).iter().filter(|r| !r.pass).map(|r| r.id).collect::<Vec<_>>(), ["5.4"]);
    // An unfiltered Sentry fails the rules that are about its filter.
    let bare = ProcStatus { seccomp: "0".into(), ..sentry() };
    let bad: Vec<&str> = audit(&good(), Some(&bare), &gv).into_iter().filter(|r| !r.pass).map(|r| r.id).collect();
    assert_eq!(bad, ["5.22", "sbx.seccomp"]);
}

#[test]
fn gvisor_claimed_but_not_seen_and_a_runtime_gone_fail_kernel_isolation() {
    let gv = Facts { runtime: runsc(), ..facts() };
    // A host process that is not the Sentry is read as the workload, and the claim fails.
    let bad: Vec<&str> = audit(&good(), Some(&proc_ok()), &gv).into_iter().filter(|r| !r.pass).map(|r| r.id).collect();
    assert_eq!(bad, ["sbx.seccomp", "sbx.runtime"]);
    assert!(!runtime_summary(Some(&proc_ok()), &gv).kernel_isolation);

    let gone = Facts { runtime: RuntimeFacts { registered: None, listed: vec!["runc".into()], ..runsc() }, ..facts() };
    let rules = audit(&good(), Some(&sentry()), &gone);
    let bad: Vec<&Rule> = rules.iter().filter(|r| !r.pass).collect();
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0].id, "sbx.runtime");
    assert!(bad[0].detail.contains("no runtime \"runsc\" (it has: runc)"), "{}", bad[0].detail);
    assert!(bad[0].detail.contains("\"runtimeArgs\":[\"--network=host\",\"--host-uds=create\"]"), "{}", bad[0].detail);
    assert!(runtime_summary(Some(&sentry()), &gone).kernel_isolation, "the Sentry itself shows gVisor");

    let lying = Facts { runtime: RuntimeFacts { label_disagrees: Some("runc".into()), ..runsc() }, ..facts() };
    let r = audit(&good(), Some(&sentry()), &lying);
    assert!(
        !rule(&r, "sbx.runtime").pass && rule(&r, "sbx.runtime").detail.contains("sbx's record says runtime \"runc\"")
    );
}

#[test]
fn a_private_route_network_holds_only_the_sandbox_and_its_forwarder() {
    let mut c = good();
    c["Name"] = serde_json::json!("/sbx-000000000001");
    let id = "sbx-000000000001".to_string();
    let net = format!("{id}-svc");
    let ok = vec![(net.clone(), vec![id.clone(), crate::model::forward::container(&net)])];
    let rules = audit(&c, None, &Facts { forwarded: ok, ..facts() });
    let r = rules.iter().find(|r| r.id == "sbx.forwarders").expect("the rule, with a forwarded route");
    assert!(r.pass, "{}", r.detail);
    let leak = vec![(net.clone(), vec![id.clone(), "svc".to_string()])];
    let rules = audit(&c, None, &Facts { forwarded: leak, ..facts() });
    let r = rules.iter().find(|r| r.id == "sbx.forwarders").unwrap();
    assert!(!r.pass && r.detail.contains(&format!("svc on {net}")), "{}", r.detail);
    assert!(!audit(&c, None, &facts()).iter().any(|r| r.id == "sbx.forwarders"), "no forwarded route, no rule");
}

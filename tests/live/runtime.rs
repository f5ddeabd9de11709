//! Everything sbx promises, under gVisor (`--runtime runsc`): what
//! the workload sees, the hardening, the socket channel and its refusals,
//! routes by name and revoke, the egress gate, TTL and gc, cleanup after a
//! failed create, the workbench, persistent sessions and the exec channel.
//!
//! runsc must be registered with the engine (`.ci/register-runsc`); without
//! it these tests fail (they never skip). Sandboxes are shared across the
//! assertions of one test where that loses nothing: a runsc start is ~0.5 s.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::connect_and_ports::Forward;
use crate::support::egress::{self, fetch};
use crate::support::internet::{EVIL, FILES};
use crate::support::*;

const RUNSC: &str = "runsc";

/// The engine lists runsc, registered as sbx needs it; a test fails here
/// (it never skips) when it is not.
fn require_runsc() {
    let out = docker_ok(&["info", "--format", "{{json .Runtimes}}"]);
    let runtimes: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        runtimes.get(RUNSC).is_some(),
        "the engine has no runtime {RUNSC:?} (it lists {out}); register it with `sudo .ci/register-runsc`"
    );
}

/// `sbx create --runtime runsc ARGS` on the fixture image.
fn create(w: &World, args: &[&str]) -> Sandbox {
    require_runsc();
    let mut full = vec!["--runtime", RUNSC];
    full.extend_from_slice(args);
    w.create(&full)
}

fn try_create(w: &World, args: &[&str]) -> std::process::Output {
    require_runsc();
    let mut full = vec!["--runtime", RUNSC];
    full.extend_from_slice(args);
    w.try_create(&full)
}

/// `sbx create --runtime runsc` on the tools image (curl, the fixture).
fn create_tools(w: &World, args: &[&str]) -> Sandbox {
    require_runsc();
    let mut full = egress::strings(&["--runtime", RUNSC]);
    full.extend(egress::strings(args));
    egress::create(w, &full)
}

#[test]
fn the_workload_sees_gvisor_and_the_hardening_holds() {
    let w = World::new();
    let sb = create(&w, &[]);
    // gVisor's Sentry answers, not the host's kernel.
    let version = stdout(&sb.exec(&["read", "/proc/version"]));
    let host = std::fs::read_to_string("/proc/version").unwrap();
    assert!(version.starts_with("Linux version 4.4.0"), "not gVisor's banner: {version}");
    assert_ne!(version, host);
    let env = stdout(&w.sbx(&["exec", &sb.id, "--", "/bin/fixture", "read", "/proc/self/environ"]));
    assert!(env.split('\0').any(|v| v == "SBX_SANDBOX_RUNTIME=runsc"), "{env:?}");
    assert_eq!(json(&w.sbx(&["inspect", &sb.id]))["runtime"], RUNSC);
    let ls = json(&w.sbx(&["ls", "--json"]));
    let mine = ls.as_array().unwrap().iter().find(|r| r["id"] == sb.id.as_str()).expect("ls lists it");
    assert_eq!(mine["runtime"], RUNSC, "{mine}");

    // What docker was told: the same hardening as under runc.
    let hc = |f: &str| sb.inspect(&format!("{{{{json .HostConfig.{f}}}}}"));
    assert_eq!(hc("Runtime"), r#""runsc""#);
    assert_eq!(hc("CapDrop"), r#"["ALL"]"#);
    assert_eq!(hc("ReadonlyRootfs"), "true");
    assert_eq!(hc("NetworkMode"), r#""none""#);
    let sec: Vec<String> = serde_json::from_str(&hc("SecurityOpt")).unwrap();
    assert_eq!(sec[0], "no-new-privileges");

    // What the process got. gVisor shows no NoNewPrivs line and reports
    // Seccomp 0 (sbx's profile is not applied inside: the Sentry serves the
    // calls); capabilities and the user are as under runc.
    let st = stdout(&sb.exec(&["status"]));
    let uid = format!("Uid:\t{}", sb.uid());
    for want in ["CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", &uid] {
        assert!(st.contains(want), "missing {want:?} in:\n{st}");
    }
    assert!(st.contains("Interfaces:\tlo\n"), "no network but loopback: {st}");
    assert_success(&sb.exec(&["write", "/tmp/x"]), "write /tmp");
    assert_success(&sb.exec(&["write", "/state/x"]), "write /state");
    assert_exit(&sb.exec(&["write", "/bin/x"]), 1, "write to the read-only root");
    assert_exit(&sb.exec(&["write", "/run/x"]), 1, "write /run");
    // Root in the sandbox (docker exec -u 0, no capabilities) still cannot
    // write the read-only root: the mount, not the permissions, refuses.
    let out = docker(&["exec", "-u", "0", &sb.id, "/bin/fixture", "write", "/bin/x"]);
    assert_exit(&out, 1, "root writing the read-only root");
    assert!(stdout(&out).contains("Read-only file system"), "{}", stdout(&out));

    // The direct channel: several MiB through `sbx connect`, byte for byte
    // (the host end of the socket is gVisor's gofer, accepted by cgroup).
    let data = blob(5 << 20);
    let out = w.sbx_stdin(&["connect", &sb.id], &data);
    assert_success(&out, "connect (5 MiB)");
    assert!(out.stdout == data, "5 MiB did not come back byte for byte ({} bytes)", out.stdout.len());
    line_by_line(
        {
            let mut c = Command::new(SBX);
            c.args(w.dir_args()).args(["connect", &sb.id]);
            c
        },
        &["alpha", "beta"],
        str::to_string,
    );
}

#[test]
fn hostile_sockets_and_failed_creates_leave_nothing() {
    let w = World::new();
    for (args, why) in
        [(vec!["--", "symlink", "/var/run/docker.sock"], "symlink"), (vec!["--", "regular"], "regular file")]
    {
        let out = try_create(&w, &args);
        assert_exit(&out, 1, "hostile socket");
        assert!(stderr(&out).contains("hostile") && stderr(&out).contains(why), "{why}: {}", stderr(&out));
        w.assert_nothing_left();
    }
    // gVisor keeps a FIFO made in the bind mount to itself (only sockets
    // reach the host, --host-uds=create): sbx sees nothing bound, never a FIFO.
    let out = try_create(&w, &["--socket-wait", "3s", "--", "fifo"]);
    assert_exit(&out, 1, "a FIFO for a socket");
    let err = stderr(&out);
    assert!(err.contains("did not bind") || (err.contains("hostile") && err.contains("FIFO")), "{err}");
    w.assert_nothing_left();
    let out = try_create(&w, &["--", "crash"]);
    assert_exit(&out, 1, "boot crash");
    assert!(stderr(&out).contains("crashing on purpose"), "{}", stderr(&out));
    w.assert_nothing_left();
    let host = unique("missing");
    let out = try_create(&w, &["--route", &format!("inference:{host}:8080")]);
    assert_exit(&out, 1, "missing route network");
    assert!(stderr(&out).contains(&format!("docker network create --internal sbx-{host}")), "{}", stderr(&out));
    w.assert_nothing_left();
    // A private route to a service that is not there: the private network
    // sbx had begun to make goes too.
    let out = try_create(&w, &["--private-routes", "--route", &format!("inference:{}:8080", unique("nosvc"))]);
    assert_exit(&out, 1, "private route to a missing service");
    w.assert_nothing_left();
}

#[test]
fn a_fork_bomb_stays_within_the_pids_limit_and_the_host_is_fine() {
    let _load = loading_the_engine();
    let w = World::new();
    let sb = create(&w, &[]);
    let bystander = create(&w, &[]);
    let cid = sb.inspect("{{.Id}}");
    let cg = std::path::PathBuf::from("/sys/fs/cgroup/pids/docker").join(&cid);
    let read = |f: &str| std::fs::read_to_string(cg.join(f)).ok().map(|s| s.trim().to_string());
    let limit: u64 = read("pids.max").expect("the container's pids cgroup (cgroup v1)").parse().unwrap();
    assert_eq!(limit, 512);
    // gVisor's own threads (Sentry, gofer) count against the limit.
    let idle: u64 = read("pids.current").unwrap().parse().unwrap();
    eprintln!("runsc sandbox at rest: {idle} host tasks of {limit}");
    // Under runsc the bomb takes the Sentry with it and `docker exec` then
    // never returns: run it in the background and watch from the host.
    let mut bomb = Command::new("docker")
        .args(["exec", &sb.id, "/bin/fixture", "forkbomb"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut peak = 0u64;
    let ended = until(Duration::from_secs(60), || {
        if let Some(n) = read("pids.current").and_then(|n| n.parse().ok()) {
            peak = peak.max(n);
        }
        bomb.try_wait().unwrap().is_some() || sb.inspect("{{.State.Running}}") == "false"
    });
    let _ = bomb.kill();
    let out = bomb.wait_with_output().unwrap();
    assert!(ended.is_some(), "the fork bomb neither was refused nor ended the sandbox within 60 s");
    eprintln!("fork bomb: peak {peak} host tasks; said {:?}; {}", stdout(&out), sb.inspect("{{.State.Status}}"));
    assert!(peak <= limit, "{peak} tasks in a cgroup limited to {limit}");
    let text = stdout(&out);
    // Either refused inside (the sandbox lives on) or the whole sandbox
    // ended at the limit (what runsc 20221219 does): never beyond it.
    if sb.inspect("{{.State.Running}}") == "true" {
        assert!(text.contains("refused"), "{text}");
    } else {
        let rec = json(&w.sbx(&["inspect", &sb.id]));
        assert_eq!(rec["state"], "exited", "{rec}");
    }
    // The host and the sandbox beside it are fine.
    assert_success(&w.sbx(&["ls"]), "sbx ls after the bomb");
    let out = w.sbx_stdin(&["connect", &bystander.id], b"still here");
    assert_success(&out, "connect to the sandbox beside it");
    assert_eq!(out.stdout, b"still here");
}

#[test]
fn a_memory_hog_is_killed_at_the_limit_and_the_reason_is_reported() {
    let _load = loading_the_engine();
    let w = World::new();
    let sb = create(&w, &["--memory", "64", "--", "hog"]);
    let mut rec = serde_json::Value::Null;
    // Docker records the OOM from containerd's event, which can land after
    // the exit under load: wait for both, then check what was recorded.
    until(Duration::from_secs(20), || {
        rec = json(&w.sbx(&["inspect", &sb.id]));
        rec["state"] == "exited" && rec["oom_killed"] == true
    });
    // The whole sandbox (Sentry and workload) is one cgroup: the kernel's
    // OOM killer ends it, and docker records it as under runc, unless
    // containerd lost the OOM event (gVisor#12838; a full CI run under load
    // saw it): then sbx says docker may have missed it, never "exited".
    assert_eq!(rec["state"], "exited", "{rec}");
    assert_eq!(rec["exit_code"], 137);
    let reason = rec["reason"].as_str().unwrap();
    if rec["oom_killed"] == true {
        assert!(reason.contains("OOM killer at its memory limit (64 MiB)"), "{rec}");
    } else {
        eprintln!("docker recorded no OOM kill: {rec}");
        assert!(reason.contains("docker recorded no OOM kill") && reason.contains("its 64 MiB"), "{rec}");
    }
}

#[test]
fn routes_resolve_by_name_revoke_cuts_them_and_outside_names_stay_unresolved() {
    let w = World::new();
    let shared = Network::new(true);
    let svc = Service::start(&shared, &w.image);
    let route = format!("inference:{}:8080", svc.name);
    // curl resolves the route host through the /etc/hosts entry sbx wrote
    // (gVisor's sandboxes get no answer from the embedded resolver); the
    // echo service sends curl's own request back, read as HTTP/0.9.
    let by_name = |sb: &Sandbox| {
        let url = format!("http://{}:8080/by-name", svc.name);
        curl(sb, &["--http0.9", "--max-time", "3", &url])
    };
    let sb = create_tools(&w, &["--route", &route]);
    let hosts = stdout(&exec_in(&sb, "/bin/fixture", &["read", "/etc/hosts"]));
    assert!(hosts.lines().any(|l| l.split_whitespace().eq([svc.ip.as_str(), svc.name.as_str()])), "{hosts}");
    let got = stdout(&by_name(&sb));
    assert!(got.contains("GET /by-name HTTP/1.1") && got.contains(&format!("Host: {}:8080", svc.name)), "{got}");
    assert_success(&exec_in(&sb, "/bin/fixture", &["dial", &svc.addr()]), "dial the service by IP");
    // DNS contained: no outside name resolves, and the resolver is sbx's.
    assert_eq!(sb.inspect("{{json .HostConfig.Dns}}"), r#"["127.0.0.1"]"#);
    // Refused (6) or never answered (28, "Resolving timed out"): the
    // contained resolver at 127.0.0.1 has nothing listening.
    let out = curl(&sb, &["--max-time", "3", "http://example.com/"]);
    let code = out.status.code();
    assert!(
        code == Some(6) || (code == Some(28) && stderr(&out).contains("Resolving")),
        "an outside name resolved: {code:?} {}",
        stderr(&out)
    );

    assert_success(&w.sbx(&["revoke", &sb.id, "inference"]), "revoke");
    let out = by_name(&sb);
    assert!(!stdout(&out).contains("GET /by-name"), "reached after revoke: {}", stdout(&out));
    assert_exit(&exec_in(&sb, "/bin/fixture", &["dial", &svc.addr()]), 1, "dial after revoke");

    // Private routes: the service by name over the sandbox's own network.
    let p = create_tools(&w, &["--private-routes", "--route", &route]);
    assert_eq!(p.inspect("{{index .Config.Labels \"sbx.tier\"}}"), "2");
    let got = stdout(&by_name(&p));
    assert!(got.contains("GET /by-name HTTP/1.1"), "private route by name: {got}");
    assert_success(&w.sbx(&["revoke", &p.id, "inference"]), "revoke a private route");
    assert!(!stdout(&by_name(&p)).contains("GET /by-name"), "private route reached after revoke");
}

#[test]
fn the_egress_gate_admits_allowed_names_only() {
    let w = World::new();
    let inet = Internet::start();
    let mut args = inet.create_args(&[&format!("{FILES}:80")]);
    args.splice(0..0, egress::strings(&["--runtime", RUNSC]));
    require_runsc();
    let sb = egress::create(&w, &args);
    let hosts = stdout(&exec_in(&sb, "/bin/fixture", &["read", "/etc/hosts"]));
    assert!(hosts.contains("sbx-egress"), "{hosts}");
    let got = fetch(&sb, &format!("http://{FILES}/big.bin"), &[]);
    assert_eq!((got.exit, got.code), (0, 200), "{got:?}");
    assert!(got.body == inet.big(), "payload through the gate differs: {} bytes", got.body.len());
    let got = fetch(&sb, &format!("http://{EVIL}/small.txt"), &[]);
    assert_eq!(got.code, 403, "{got:?}");
    assert_eq!(inet.queries(EVIL), 0, "a refused name was looked up");
    for addr in [format!("{}:80", inet.web_ip), format!("{}:53", inet.dns_ip)] {
        let out = sb.exec(&["dial", &addr]);
        assert!(stdout(&out).starts_with("unreachable"), "dial {addr} past the gate: {}", stdout(&out));
    }
    let got = fetch(&sb, &format!("http://{FILES}/small.txt"), &["--noproxy", "*"]);
    assert_ne!(got.exit, 0, "curl --noproxy reached the stand-in: {got:?}");
    let id = sb.id.clone();
    drop(sb);
    egress::assert_no_egress_left(&w, &id);
    w.assert_nothing_left();
}

#[test]
fn ttl_expiry_and_gc_remove_a_runsc_sandbox() {
    let w = World::new();
    let sb = create(&w, &["--ttl", "2s"]);
    until(Duration::from_secs(15), || w.containers().is_empty()).expect("the TTL never fired");
    w.assert_nothing_left();
    drop(sb);
    // A killed watchdog: gc reaps the expired sandbox.
    let sb = create(&w, &["--ttl", "2s"]);
    kill_watchdog_until_expired(&w, &sb.id);
    let out = w.sbx(&["gc", "--json"]);
    assert_success(&out, "gc");
    assert_eq!(json(&out)["containers"][0]["id"], sb.id.as_str());
    w.assert_nothing_left();
}

#[test]
fn the_workbench_works_on_a_runsc_sandbox() {
    let w = World::new();
    let sb = create(&w, &["--memory", "256"]);
    // exec: exit codes and streams.
    let out = w.sbx(&["exec", &sb.id, "--", "/bin/fixture", "both"]);
    assert_exit(&out, 5, "the command's own exit code");
    assert_eq!((stdout(&out).as_str(), stderr(&out).as_str()), ("to stdout\n", "to stderr\n"));
    let data = blob(2 << 20);
    let out = w.sbx_stdin(&["exec", "-i", &sb.id, "--", "/bin/fixture", "cat"], &data);
    assert!(out.stdout == data, "exec -i changed the bytes ({} of {})", out.stdout.len(), data.len());

    // Background processes: exec -d, logs, ps, kill (children too). These
    // run sbx's helper, which gVisor cannot exec while it is execute-only.
    let out = w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", "spawn-children"]);
    assert_success(&out, "exec -d");
    let handle = stdout(&out).trim().to_string();
    until(Duration::from_secs(5), || stdout(&w.sbx(&["logs", &sb.id, &handle])).contains("started"))
        .expect("the background process's output never showed");
    let ps = json(&w.sbx(&["ps", "--json", &sb.id]));
    let me = ps.as_array().unwrap().iter().find(|p| p["handle"] == handle.as_str()).expect("ps lists it");
    assert_eq!(me["running"], true);
    assert_success(&w.sbx(&["kill", &sb.id, &handle]), "kill");
    until(Duration::from_secs(5), || {
        stdout(&w.sbx(&["ps", &sb.id])).lines().any(|l| l.contains(&handle) && l.contains("killed by TERM"))
    })
    .expect("ps never showed it killed");
    assert!(stderr(&w.sbx(&["logs", &sb.id])).contains("listening on /run/sandbox/sandbox.sock"));

    // cp in and out, both writable places.
    let src = w.socket_root.join("src");
    std::fs::create_dir_all(src.join("workspace/sub")).unwrap();
    std::fs::write(src.join("workspace/sub/data.bin"), &data).unwrap();
    for dest in ["/tmp", "/state"] {
        assert_success(&w.sbx(&["cp", src.join("workspace").to_str().unwrap(), &format!("{}:{dest}", sb.id)]), "cp in");
        let back = w.socket_root.join(format!("back{}", dest.replace('/', "-")));
        assert_success(&w.sbx(&["cp", &format!("{}:{dest}/workspace", sb.id), back.to_str().unwrap()]), "cp out");
        assert!(std::fs::read(back.join("sub/data.bin")).unwrap() == data, "cp round trip via {dest}");
    }
    // backup, then restore into a second runsc sandbox.
    let tar = w.sbx(&["backup", &sb.id]);
    assert_success(&tar, "backup");
    let other = create(&w, &[]);
    assert_success(&w.sbx_stdin(&["restore", &other.id], &tar.stdout), "restore");
    assert!(other.exec(&["read", "/state/workspace/sub/data.bin"]).stdout == data, "restored bytes");

    // wait-port and port-forward, driven by curl.
    assert_exit(&w.sbx(&["wait-port", &sb.id, "7101", "--timeout", "300ms"]), 1, "nothing listens yet");
    assert_success(&w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", "http", "7101"]), "start a server");
    assert_success(&w.sbx(&["wait-port", &sb.id, "7101", "--timeout", "10s"]), "wait-port");
    let fwd = Forward::start(&w, &sb.id, "7101");
    let out = Command::new("curl")
        .args(["-sS", "-m", "15", &format!("http://{}/one", fwd.local), &format!("http://{}/two", fwd.local)])
        .output()
        .expect("spawn curl");
    assert_success(&out, "curl through port-forward");
    assert_eq!(stdout(&out), "/one/two");
    drop(fwd);

    // stats move when the sandbox allocates.
    let read = || json(&w.sbx(&["stats", "--json", &sb.id]))[0].clone();
    let before = read();
    assert_eq!(before["memory_limit_bytes"], 256u64 << 20);
    assert_success(&w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", "alloc", "100"]), "allocate");
    let grew = |v: &serde_json::Value| {
        v["memory_bytes"].as_u64().unwrap() > before["memory_bytes"].as_u64().unwrap() + (80 << 20)
    };
    let mut after = before.clone();
    until(Duration::from_secs(10), || {
        after = read();
        grew(&after)
    });
    assert!(grew(&after), "{before} -> {after}");
}

#[test]
fn persist_setup_and_the_exec_channel_under_runsc() {
    let w = World::new();
    let session = format!("{}-s", w.case);
    let a = create(&w, &["--session", &session, "--persist", "--setup", "/bin/fixture write /state/setup-ran"]);
    assert_success(&a.exec(&["exists", "/state/setup-ran"]), "--setup ran");
    assert_success(&a.exec(&["write", "/state/kept"]), "write to the persistent /state");
    assert_success(&w.sbx(&["destroy", &a.id]), "destroy keeps the volume");
    let b = create(&w, &["--session", &session, "--persist"]);
    assert_success(&b.exec(&["exists", "/state/kept"]), "the next sandbox continues where the last left off");
    assert_success(&w.sbx(&["destroy", "--purge", &b.id]), "destroy --purge");
    assert!(!docker(&["volume", "inspect", &format!("sbx-state-{session}")]).status.success());

    // The relayed channel: connect goes through docker exec and the helper.
    let sb = create(&w, &["--channel", "exec"]);
    assert_eq!(json(&w.sbx(&["inspect", &sb.id]))["channel"], "exec");
    let data = blob(3 << 20);
    let out = w.sbx_stdin(&["connect", &sb.id], &data);
    assert_success(&out, "connect over the exec channel");
    assert!(out.stdout == data, "the exec channel changed the bytes ({} of {})", out.stdout.len(), data.len());
}

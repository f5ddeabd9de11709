//! Egress on a remote engine: the gate cannot bind this
//! machine's policy directory, so it gets the policy through `docker cp`
//! into a volume of its own, at create and on every `sbx allow`/`deny`.
//! The engine is the one here, reached through sshd on loopback, with the
//! stand-in internet of `support::internet`.

use std::time::Duration;

use crate::remote::{local_paths, sbx, with};
use crate::support::egress::*;
use crate::support::internet::{EVIL, FILES, PYPI};
use crate::support::*;

/// The anonymous volume at the gate's /policy (empty when there is none).
fn policy_volume(gate: &str) -> String {
    docker_ok(&[
        "inspect",
        "--format",
        "{{range .Mounts}}{{if eq .Destination \"/policy\"}}{{.Type}} {{.Name}} {{.RW}}{{end}}{{end}}",
        gate,
    ])
}

/// A sandbox reaches only what its policy allows through a remote gate,
/// byte-exact; allow and deny reach the gate within seconds; the gate's
/// policy is root's (it runs as its own uid and cannot change it); destroy and gc
/// leave no gate, volume or policy here; no argv names a path of this machine.
#[test]
fn a_remote_gate_enforces_the_policy_sbx_copies_in_and_leaves_nothing() {
    let remote = Remote::start();
    let w = World::new();
    let inet = Internet::start();
    let shim = Shim::logging(&w);
    let env = with(remote.env(), &[("SBX_DOCKER", shim.path().to_str().unwrap())]);
    let label = w.case_label();
    let mut args = vec!["create", "--image", tools_image(), "--label", &label];
    let rules = inet.create_args(&[&format!("{FILES}:80")]);
    args.extend(rules.iter().map(String::as_str));
    let out = sbx(&w, &args, &env);
    assert_success(&out, "create --allow over ssh");
    let sb = w.adopt(stdout(&out).trim());
    let gate = format!("{}-gate", sb.id);

    let got = fetch(&sb, &format!("http://{FILES}/big.bin"), &[]);
    assert_eq!((got.exit, got.code), (0, 200), "{got:?}");
    assert!(got.body == inet.big(), "the payload through the remote gate differs ({} bytes)", got.body.len());
    assert_eq!(fetch(&sb, &format!("https://{PYPI}/small.txt"), &[]).connect, 403, "a name not allowed yet");
    assert_eq!(fetch(&sb, &format!("http://{EVIL}/small.txt"), &[]).code, 403);

    // The gate's /policy: a volume of its own (no bind of this machine's
    // files), holding one root-owned 0644 file.
    let vol = policy_volume(&gate);
    assert!(vol.starts_with("volume ") && vol.ends_with(" true"), "{vol}");
    let listing = docker(&["cp", &format!("{gate}:/policy/policy.json"), "-"]);
    assert_success(&listing, "docker cp of the gate's policy");
    let mut tar = tar::Archive::new(&listing.stdout[..]);
    let entry = tar.entries().unwrap().next().unwrap().unwrap();
    let h = entry.header();
    assert_eq!((h.uid().unwrap(), h.mode().unwrap() & 0o7777), (0, 0o644));
    let user = docker_ok(&["inspect", "--format", "{{.Config.User}}", &gate]);
    let uid: u32 = user.split(':').next().unwrap().parse().unwrap();
    assert!((0x7000_0000..0x7100_0000).contains(&uid) && user == format!("{uid}:{uid}"), "the gate runs as {user}");

    let out = sbx(&w, &["allow", &sb.id, PYPI], &env);
    assert_success(&out, "sbx allow over ssh");
    let took = until(Duration::from_secs(5), || fetch(&sb, &format!("https://{PYPI}/small.txt"), &[]).code == 200);
    assert!(took.is_some(), "sbx allow never reached the remote gate");
    assert!(stdout(&out).contains(PYPI), "sbx allow does not print the new allowlist: {}", stdout(&out));
    let out = sbx(&w, &["inspect", &sb.id, "--json"], &env);
    assert!(stdout(&out).contains(PYPI), "inspect does not show the new allowlist: {}", stdout(&out));
    let out = sbx(&w, &["deny", &sb.id, &format!("{FILES}:80")], &env);
    assert_success(&out, "sbx deny over ssh");
    let took = until(Duration::from_secs(5), || fetch(&sb, &format!("http://{FILES}/small.txt"), &[]).code == 403);
    assert!(took.is_some(), "sbx deny never reached the remote gate");
    let lines = log_until_with(&w, &sb.id, &env);
    assert!(lines.contains(PYPI), "the remote gate's decision log: {lines}");

    let vol_name = vol.split_whitespace().nth(1).unwrap().to_string();
    assert_success(&sbx(&w, &["destroy", &sb.id], &env), "destroy over ssh");
    assert_no_egress_left(&w, &sb.id);
    assert_eq!(
        docker(&["volume", "inspect", &vol_name]).status.code(),
        Some(1),
        "the gate's volume {vol_name} outlived it"
    );

    // gc: a sandbox removed behind sbx's back leaves its gate; a remote gc reaps
    // it with its volume and the policy here.
    let out = sbx(&w, &args, &env);
    assert_success(&out, "a second create --allow over ssh");
    let second = w.adopt(stdout(&out).trim());
    let vol = policy_volume(&format!("{}-gate", second.id));
    let vol_name = vol.split_whitespace().nth(1).unwrap().to_string();
    docker_ok(&["rm", "-f", &second.id]);
    assert_success(&sbx(&w, &["gc"], &env), "gc over ssh");
    assert_no_egress_left(&w, &second.id);
    assert_eq!(
        docker(&["volume", "inspect", &vol_name]).status.code(),
        Some(1),
        "gc left the gate's volume {vol_name}"
    );

    let argvs = shim.argvs();
    assert_eq!(local_paths(&argvs), Vec::<String>::new(), "paths of this machine sent to a remote engine: {argvs:?}");
}

/// `sbx egress log ID` over ssh, polled until it shows a line.
fn log_until_with(w: &World, id: &str, env: &[(String, String)]) -> String {
    let mut last = String::new();
    until(Duration::from_secs(10), || {
        let out = sbx(w, &["egress", "log", id, "--json"], env);
        last = stdout(&out);
        out.status.success() && last.contains(PYPI)
    });
    last
}

/// A remote engine's gate refuses that engine host's own address too: sbx
/// learns it by running its own image once on the host's network there
/// (`/sbx __host-addrs`), and keeps the answer per endpoint in the data dir.
#[test]
fn a_remote_gate_refuses_the_engine_host_s_own_address() {
    let remote = Remote::start();
    let w = World::new();
    let svc = HostService::start();
    let net = Network::with_prefix(false, "inet-");
    let shim = Shim::logging(&w);
    let env = with(remote.env(), &[("SBX_DOCKER", shim.path().to_str().unwrap())]);
    let label = w.case_label();
    let args =
        ["create", "--image", tools_image(), "--label", &label, "--egress", "observe", "--egress-network", &net.name];
    let out = sbx(&w, &args, &env);
    assert_success(&out, "create --egress observe over ssh");
    let sb = w.adopt(stdout(&out).trim());
    let got = svc.fetch_from(&sb, &svc.ip);
    assert_eq!(got.connect, 403, "the remote gate reached its host's own address {}: {got:?}", svc.ip);
    assert_eq!(svc.hits(), 0, "a connection reached the host's service");
    let runs: Vec<_> = shim.argvs().into_iter().filter(|a| a.iter().any(|x| x == "__host-addrs")).collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs[0].windows(2).any(|p| p == ["--network", "host"]), "{:?}", runs[0]);
    let cache = std::fs::read_to_string(w.state_dir.join("engine-addrs.json")).unwrap();
    assert!(cache.contains(&format!("\"{}\"", svc.ip)), "{cache}");
    let argvs = shim.argvs();
    assert_eq!(local_paths(&argvs), Vec::<String>::new(), "paths of this machine sent to a remote engine: {argvs:?}");
}

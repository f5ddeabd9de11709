//! The sandbox attacks its own gate (promise 1), live, with the
//! tools a sandbox has (curl, openssl) and the stand-in internet only. The
//! byte-level attacks (smuggling heads, host spellings, ECH, trickled or
//! oversize hellos) are in-process in `src/gate/tests/attack.rs`; here are
//! the ones that need the real networks, mounts and `sbx egress log`.

use crate::support::egress::*;
use crate::support::internet::{exec_in, EVIL, FILES, PYPI};
use crate::support::*;

/// `{{(index .NetworkSettings.Networks NET).IPAddress}}` of a container.
fn ip_on(container: &str, net: &str) -> String {
    docker_ok(&[
        "inspect",
        "--format",
        &format!("{{{{(index .NetworkSettings.Networks \"{net}\").IPAddress}}}}"),
        container,
    ])
}

#[test]
fn the_gate_and_the_egress_network_stay_out_of_reach() {
    let w = World::new();
    let inet = Internet::start();
    let sb = create(&w, &inet.create_args(&[&format!("{FILES}:80")]));
    let gate = format!("{}-gate", sb.id);
    let gate_out = ip_on(&gate, &inet.net.name);
    assert!(!gate_out.is_empty(), "the gate is not on the egress network");
    // Through the gate (`--noproxy ""`: even what NO_PROXY lists): its own
    // egress-side address, the resolver stand-in, the engine's DNS, the
    // metadata address, loopback spelled as a number: no rule covers them.
    for url in [
        format!("http://{gate_out}:3128/"),
        format!("http://{gate_out}/"),
        format!("http://{}/small.txt", inet.dns_ip),
        "http://127.0.0.11/".to_string(),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[::ffff:169.254.169.254]/".to_string(),
        "http://2130706433/".to_string(),
    ] {
        let got = fetch(&sb, &url, &["--noproxy", ""]);
        assert_eq!(got.code, 403, "{url}: {got:?}");
    }
    // A userinfo or another host in the request target (curl sends it as
    // given): refused before any lookup.
    let got =
        fetch(&sb, &format!("http://{FILES}/small.txt"), &["--request-target", &format!("http://{FILES}@{EVIL}/")]);
    assert_eq!(got.code, 400, "{got:?}");
    // Around the gate: the sandbox is not on the egress network, so neither
    // the gate's egress side nor anything there answers it directly.
    for addr in [format!("{gate_out}:3128"), format!("{}:80", inet.web_ip)] {
        let out = sb.exec(&["dial", &addr]);
        assert!(stdout(&out).starts_with("unreachable"), "dial {addr}: {}", stdout(&out));
    }
    assert_eq!(inet.queries(EVIL), 0, "a refused name was looked up");
    // The allowed name still works (the refusals were the gate's, not a broken stage).
    assert_eq!(fetch(&sb, &format!("http://{FILES}/small.txt"), &[]).code, 200);
    // The policy reaches the gate read-only, and the gate cannot write it.
    let mounts = docker_ok(&["inspect", "--format", "{{range .Mounts}}{{.Destination}}={{.RW}} {{end}}", &gate]);
    assert_eq!(mounts.trim(), "/policy=false", "{mounts}");
    let user = docker_ok(&["inspect", "--format", "{{.Config.User}}", &gate]);
    let uid: u32 = user.split(':').next().unwrap().parse().unwrap();
    assert!((0x7000_0000..0x7100_0000).contains(&uid), "the gate runs as {user:?}, not a uid of its own");
    assert_ne!(uid, sb.uid(), "the gate's uid is not the sandbox's");
}

#[test]
fn a_hostile_server_name_cannot_forge_or_hide_a_decision_log_line() {
    let w = World::new();
    let inet = Internet::start();
    let sb = create(&w, &inet.create_args(&[PYPI]));
    // SNIs a sandbox picks: quotes and braces that would close the JSON, a
    // terminal escape, and a fake second record. openssl sends them as given.
    let forged = "x\",\"decision\":\"allow\",\"host\":\"evil.example";
    let escape = "evil.example\u{1b}[2J\u{1b}]0;pwned\u{7}";
    for sni in [forged, escape, "PYPI.ORG."] {
        let out = exec_in(
            &sb,
            "/usr/bin/openssl",
            &["s_client", "-proxy", "sbx-egress:3128", "-connect", &format!("{PYPI}:443"), "-servername", sni],
        );
        let text = stdout(&out);
        if sni == "PYPI.ORG." {
            assert!(text.contains("BEGIN CERTIFICATE") || text.contains("Server certificate"), "{text}");
        }
    }
    let lines = log_until(&w, &sb.id, |l| l.iter().filter(|x| x["host"] == PYPI).count() >= 3);
    let pypi: Vec<_> = lines.iter().filter(|l| l["host"] == PYPI).collect();
    assert_eq!(pypi.iter().filter(|l| l["decision"] == "deny").count(), 2, "{lines:#?}");
    assert_eq!(pypi.iter().filter(|l| l["decision"] == "allow").count(), 1, "case and a trailing dot: {lines:#?}");
    assert!(lines.iter().all(|l| l["host"] != EVIL), "a line the gate never decided: {lines:#?}");
    // The text form: one row per decision, nothing a terminal would act on.
    let out = w.sbx(&["egress", "log", &sb.id]);
    assert_success(&out, "sbx egress log");
    let text = stdout(&out);
    assert!(!text.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "{text:?}");
    assert_eq!(text.lines().count(), 1 + lines.len(), "{text}");
    assert!(!stderr(&out).contains("skipped"), "a decision line was dropped: {}", stderr(&out));
}

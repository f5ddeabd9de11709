//! `allow`, `deny`, `egress log`, `egress policy` and `revoke ID egress`
//! through the fake: output, bad input (exit 2, nothing changed), and a
//! gate's log that is not what sbx expects.

use super::*;
use crate::model::gate;

impl Rig {
    /// Sandbox ID with a gate (enforce) on its internal network, and its policy on the host.
    fn gated(&self, attached: bool) {
        let labels = serde_json::json!({
            "sbx.managed": "1",
            "sbx.id": ID,
            "sbx.routes": format!("{{\"egress\":\"{}\"}}", gate::network(ID)),
            "sbx.user": "65534:65534",
            "sbx.egress": "enforce",
            "sbx.egress-network": "sbx-egress-net",
        });
        let net = gate::network(ID);
        let nets: &[&str] = if attached { &[&net] } else { &[] };
        self.fake.push(Output::ok(&self.container_line(ID, labels, nets)));
    }

    fn policy_has(&self, rules: &[&str]) {
        let mut p = crate::spec::egress::Policy::default();
        let rules: Vec<_> = rules.iter().map(|r| crate::spec::egress::AllowRule::parse(r, false).unwrap()).collect();
        p.allow(&rules);
        crate::host::egress::write(&self.state, ID, &p).unwrap();
    }

    fn rules_now(&self) -> Vec<String> {
        crate::host::egress::read(&self.state, ID).unwrap().rules.iter().map(ToString::to_string).collect()
    }
}

#[test]
fn allow_and_deny_rewrite_the_policy_and_print_the_allowlist() {
    let rig = Rig::new();
    rig.policy_has(&["pypi.org"]);
    rig.gated(true);
    let r = rig.sbx(&["allow", ID, "github.com", "files.example:8080"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "files.example:8080\ngithub.com:443\npypi.org:443\n"), "{}", r.stderr);
    rig.gated(true);
    let r = rig.sbx(&["--json", "deny", ID, "pypi.org", "nothere.example"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["allow"], serde_json::json!(["files.example:8080", "github.com:443"]));
    assert_eq!(v["mode"], "enforce");
    assert!(r.stderr.contains("nothere.example:443"), "{}", r.stderr);
    assert_eq!(rig.rules_now(), ["files.example:8080", "github.com:443"]);
    assert_eq!(rig.fake.verbs(), ["container inspect", "container inspect"], "an inspect each, no other call");
    assert!(rig.fake.calls().iter().all(|c| c.last().unwrap() == ID), "{:?}", rig.fake.calls());
}

#[test]
fn bad_rules_change_nothing_and_a_revoked_gate_is_said() {
    let rig = Rig::new();
    rig.policy_has(&["pypi.org"]);
    for args in [
        &["allow", ID, "pypi.org", "exa mple.com"][..],
        &["allow", ID, "127.0.0.0/8:80"],
        &["deny", ID, "x:99999"],
        &["allow", "sbx-nope", "pypi.org"],
        &["deny", ID],
    ] {
        assert!(rig.refused_or_usage(args), "{args:?}");
    }
    assert_eq!(rig.rules_now(), ["pypi.org:443"]);
    rig.gated(false);
    let r = rig.sbx(&["allow", ID, "github.com"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("was revoked"), "{}", r.stderr);
    assert_eq!(rig.rules_now(), ["pypi.org:443"]);
}

#[test]
fn egress_log_prints_parsed_records_only_and_policy_suggests_allows() {
    let allowed = r#"{"time":"2026-11-29T09:00:00Z","sandbox":"sbx-00000000000f","host":"pypi.org","port":443,"addr":"10.0.0.5","decision":"allow","rule":"pypi.org:443","reason":null,"bytes_up":10,"bytes_down":2000,"duration_ms":12}"#;
    let denied = r#"{"time":"2026-11-29T09:00:01Z","sandbox":"sbx-00000000000f","host":"evil\u001b[2J.example","port":8080,"addr":null,"decision":"deny","rule":null,"reason":"not on the allowlist","bytes_up":0,"bytes_down":0,"duration_ms":0}"#;
    let other = r#"{"time":"t","sandbox":"s","host":"files.example","port":8080,"addr":null,"decision":"allow","rule":"r","reason":null,"bytes_up":0,"bytes_down":0,"duration_ms":1}"#;
    let log = format!("{allowed}\n\u{1b}]52;c;AAAA\u{7} not json\n{denied}\n{other}\n");
    let rig = Rig::new();
    rig.gated(true);
    rig.fake.push(Output::ok(&log));
    let r = rig.sbx(&["egress", "log", ID]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(rig.fake.calls()[1], ["logs", "--", &gate::container(ID)]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", r.stdout);
    assert_eq!(
        lines[0],
        "TIME                      DECISION  HOST:PORT                                 ADDRESS                  UP        DOWN       MS  RULE/REASON"
    );
    assert_eq!(
        lines[1],
        "2026-11-29T09:00:00Z      allow     pypi.org:443                              10.0.0.5                 10        2000       12  pypi.org:443"
    );
    // Every row lines up (fixed widths: `-f` prints a row as it comes).
    let at = |l: &str| l.find("RULE/REASON").or_else(|| l.rfind("  ").map(|i| i + 2));
    assert!(lines.iter().all(|l| at(l) == at(lines[0])), "{}", r.stdout);
    assert!(!r.stdout.contains('\u{1b}') && !r.stdout.contains("AAAA"), "{:?}", r.stdout);
    assert!(r.stderr.contains("1 line(s)"), "{}", r.stderr);

    rig.gated(true);
    rig.fake.push(Output::ok(&log));
    let r = rig.sbx(&["--json", "egress", "log", "-f", ID]);
    assert_eq!(rig.fake.calls()[3], ["logs", "--follow", "--", &gate::container(ID)]);
    let json: Vec<LogLine> = r.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(json.len(), 3);
    assert_eq!(json[0].host, "pypi.org");

    // Its gate gone under `-f` (the runner cut `docker logs`): the log is over, exit 0.
    rig.gated(true);
    rig.fake.push_ended("", &gate::container(ID));
    let r = rig.sbx(&["egress", "log", "-f", ID]);
    assert_eq!(r.code, 0, "{}", r.stderr);

    rig.gated(true);
    rig.fake.push(Output::ok(&log));
    let r = rig.sbx(&["egress", "policy", ID]);
    assert_eq!(r.stdout, "--allow files.example:8080\n--allow pypi.org\n");
}

#[test]
fn revoke_egress_is_not_refused_as_a_reserved_kind() {
    let rig = Rig::new();
    rig.policy_has(&[]);
    rig.gated(true);
    rig.fake.push(Output::ok("")); // the sandbox off its gate network
    rig.fake.push(Output::ok("")); // the gate's log, kept on the host: empty
    rig.fake.push(Output::ok("")); // the gate listing: none left
    let r = rig.sbx(&["revoke", ID, "egress"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!crate::host::egress::dir(&rig.state, ID).exists());
    assert!(rig.refused(&["revoke", ID, "Egress"]).contains("KIND"));
}

#[test]
fn ls_shows_the_egress_mode_and_json_the_allowlist() {
    let rig = Rig::new();
    rig.policy_has(&["pypi.org", "files.example:80"]);
    let net = gate::network(ID);
    let line = |mode: &str| {
        let labels = serde_json::json!({
            "sbx.managed": "1", "sbx.id": ID, "sbx.tier": "2", "sbx.session": "task-1",
            "sbx.created": "2026-11-29T09:00:00Z", "sbx.routes": format!("{{\"egress\":\"{net}\"}}"),
            "sbx.egress": mode, "sbx.egress-network": "sbx-egress-net",
        });
        let labels = rig.seal(labels);
        format!("{}\n", serde_json::json!({"name": ID, "state": "running", "networks": net, "labels": labels}))
    };
    rig.fake.push(Output::ok(&line("observe")));
    let r = rig.sbx(&["ls"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "ID                SESSION  TIER  RUNTIME  ROUTES           STATE    AGE  EXPIRES");
    assert!(
        lines[1].starts_with("sbx-00000000000f  task-1   2     runc     egress(observe)  running  "),
        "{}",
        lines[1]
    );

    rig.fake.push(Output::ok(&line("enforce")));
    let r = rig.sbx(&["--json", "ls"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(
        v[0]["egress"],
        serde_json::json!({"mode": "enforce", "network": "sbx-egress-net", "active": true,
            "allow": ["files.example:80", "pypi.org:443"]})
    );
    assert_eq!(rig.fake.verbs(), ["ps", "ps"], "the allowlist is read on the host");
}

use crate::spec::egress::LogLine;

impl Rig {
    /// Refused with exit 2 before any docker call, whether by clap (usage) or by sbx.
    fn refused_or_usage(&self, args: &[&str]) -> bool {
        match crate::cli::Cli::try_parse_from(std::iter::once("sbx").chain(args.iter().copied())) {
            Err(e) => e.exit_code() == 2,
            Ok(_) => {
                self.refused(args);
                true
            }
        }
    }
}

/// Every refusal of a secret is exit 2 before any docker call, and no
/// message repeats a value given where a SOURCE belongs.
#[test]
fn secret_flags_are_refused_before_docker_without_their_value() {
    let rig = Rig::new();
    for args in [
        &["create", "--image", "img", "--secret", "K@api.example.com=ghp_LITERAL"][..],
        &["create", "--image", "img", "--secret", "K@*.example.com=env:V"],
        &["create", "--image", "img", "--secret", "K@api.example.com:80=env:V"],
        &["create", "--image", "img", "--secret", "K@api.example.com/Bad:H=env:V"],
        &["create", "--image", "img", "--allow", "a b"],
        &["secret", "set", ID, "K", "ghp_LITERAL"],
        &["pool", "create", "p", "--size", "1", "--image", "img", "--secret", "K@api.example.com=env:V"],
    ] {
        let r = rig.sbx(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(!r.stderr.contains("ghp_LITERAL") && !r.stdout.contains("ghp_LITERAL"), "{}", r.stderr);
    }
    assert!(rig.fake.calls().is_empty());
}

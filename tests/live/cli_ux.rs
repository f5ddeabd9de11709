//! What the command line says: every error in sbx's
//! own words with a hint (no docker argv, no raw daemon answer, no helper
//! text), under `--json` every sbx message on stderr is one JSON object per
//! line, and invalid input (the hostile corpus included) exits 2 and creates
//! nothing.

use crate::support::*;

/// sbx's words only: none of docker's, the helper's or the runtime's.
fn assert_sbx_words(out: &std::process::Output, what: &str) {
    let err = stderr(out);
    for leak in
        ["docker exec", "docker run", "Error response from daemon", "sbx-helper", "OCI runtime", "/run/sbx/helper"]
    {
        assert!(!err.contains(leak), "{what}: stderr leaks {leak:?}:\n{err}");
    }
    assert!(err.contains("sbx: error: ") && err.contains("sbx: hint: "), "{what}: no error and hint:\n{err}");
}

/// Every stderr line is one JSON object; returns them.
fn json_lines(out: &std::process::Output, what: &str) -> Vec<serde_json::Value> {
    let err = stderr(out);
    err.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{what}: {l:?} is not JSON ({e})"))
        })
        .collect()
}

fn json_error(out: &std::process::Output, what: &str) -> serde_json::Value {
    let lines = json_lines(out, what);
    assert_eq!(lines.len(), 1, "{what}: {lines:?}");
    let e = lines[0]["error"].clone();
    assert!(e["kind"].is_string() && e["message"].is_string() && e["hint"].is_string(), "{what}: {e}");
    e
}

#[test]
fn errors_in_a_running_sandbox_say_what_happened_and_what_to_do() {
    let w = World::new();
    let sb = w.create(&[]);
    let f = w.socket_root.join("f.txt");
    std::fs::write(&f, "x").unwrap();

    let out = w.sbx(&["cp", f.to_str().unwrap(), &format!("{}:/etc/a.txt", sb.id)]);
    assert_exit(&out, 1, "cp onto the read-only root");
    assert_sbx_words(&out, "cp onto the read-only root");
    assert!(stderr(&out).contains("read-only") && stderr(&out).contains("/tmp"), "{}", stderr(&out));

    let h = stdout(&w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", "write", "/tmp/y"]));
    let h = h.trim();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = w.sbx(&["kill", &sb.id, h]);
    assert_exit(&out, 1, "kill of an exited process");
    assert_sbx_words(&out, "kill of an exited process");
    assert!(stderr(&out).contains("has already exited"), "{}", stderr(&out));
    let e = json_error(&w.sbx(&["--json", "kill", &sb.id, "p00000000"]), "--json kill of no process");
    assert_eq!(e["kind"], "no_such_process");

    let out = w.sbx_stdin(&["backup", &sb.id], b"");
    assert_exit(&out, 1, "backup with no workspace");
    assert_sbx_words(&out, "backup with no workspace");
    assert!(stderr(&out).contains("has no /state/workspace"), "{}", stderr(&out));

    let out = w.sbx(&["wait-port", "--timeout", "1s", &sb.id, "8000"]);
    assert_exit(&out, 1, "wait-port timeout");
    assert_sbx_words(&out, "wait-port timeout");
    assert!(stderr(&out).contains("nothing listened on port 8000") && !stderr(&out).contains("exited with"));

    // Item 6: no helper prose under --json.
    let out = w.sbx(&["--json", "logs", &sb.id, "p00000000"]);
    assert_exit(&out, 1, "--json logs of no process");
    assert_eq!(json_error(&out, "--json logs")["kind"], "no_such_process");
    let out = w.sbx(&["logs", &sb.id, "p00000000"]);
    assert_sbx_words(&out, "logs of no process");

    let out = w.sbx(&["--json", "exec", &sb.id, "--", "/nonexistent"]);
    assert_exit(&out, 127, "--json exec of a missing program");
    assert_eq!(stdout(&out), "", "docker's OCI message must not reach stdout");
    assert_eq!(json_error(&out, "--json exec")["kind"], "command_not_found");
    let out = w.sbx(&["exec", &sb.id, "--", "/tmp"]);
    assert_exit(&out, 126, "exec of a directory");
    assert_sbx_words(&out, "exec of a directory");
    // The command's own output, even one that looks like docker's, is the command's.
    let out = w.sbx(&["exec", &sb.id, "--", "/bin/fixture", "both"]);
    assert_exit(&out, 5, "the command's own streams");
    assert_eq!((stdout(&out).as_str(), stderr(&out).as_str()), ("to stdout\n", "to stderr\n"));

    // --cpus beyond this host: refused before any docker call.
    let out = w.try_create(&["--cpus", "64"]);
    assert_exit(&out, 2, "--cpus 64");
    assert_sbx_words(&out, "--cpus 64");
}

#[test]
fn exec_and_cp_on_an_exited_sandbox_say_it_is_not_running() {
    let w = World::new();
    let sb = w.create(&[]);
    let f = w.socket_root.join("f.txt");
    std::fs::write(&f, "x").unwrap();
    docker_ok(&["stop", "-t", "0", &sb.id]);
    for args in [
        vec!["exec", sb.id.as_str(), "--", "/bin/fixture", "status"],
        vec!["cp", f.to_str().unwrap(), &format!("{}:/tmp/a.txt", sb.id)],
        vec!["logs", sb.id.as_str(), "p00000000"],
    ] {
        let args: Vec<&str> = args.iter().map(|s| &**s).collect();
        let out = w.sbx(&args);
        assert_exit(&out, 1, &args.join(" "));
        assert_sbx_words(&out, &args.join(" "));
        assert!(stderr(&out).contains(&format!("sandbox {} is not running", sb.id)), "{}", stderr(&out));
        let mut j = vec!["--json"];
        j.extend(&args);
        assert_eq!(json_error(&w.sbx(&j), &j.join(" "))["kind"], "not_running");
    }
}

#[test]
fn json_create_on_a_tier_1_route_prints_no_prose() {
    let w = World::new();
    let net = Network::new(false);
    let route = format!("inference:{}:8080", net.host);
    let out = w.try_create(&["--json", "--route", &route]);
    assert_success(&out, "--json create on a tier-1 route");
    let rec = json(&out);
    let _sb = w.adopt(rec["id"].as_str().unwrap());
    assert_eq!(rec["tier"], 1);
    assert!(!rec["warnings"].as_array().unwrap().is_empty(), "{rec}");
    // The warnings are in the result object: not repeated, and no prose.
    assert_eq!(json_lines(&out, "--json create"), Vec::<serde_json::Value>::new());
    // Without --json they are said in prose.
    let out = w.try_create(&["--route", &route]);
    assert_success(&out, "create on a tier-1 route");
    let _sb2 = w.adopt(stdout(&out).trim());
    assert!(stderr(&out).contains("sbx: warning: route inference"), "{}", stderr(&out));
}

#[test]
fn invalid_input_exits_2_and_creates_nothing() {
    let w = World::new();
    let img = w.image.clone();
    let cases: Vec<Vec<String>> = vec![
        vec!["--image".into(), "fixture:latest".into()],
        vec!["--image".into(), img[..19].to_string()],
        vec!["--image".into(), img.to_uppercase()],
        vec!["--image".into(), format!("-{img}")],
        vec!["--image".into(), img.clone(), "--route".into(), "a:localhost:80".into()],
        vec!["--image".into(), img.clone(), "--route".into(), "a:[::1]:80".into()],
        vec!["--image".into(), img.clone(), "--route".into(), "a:0x7f.1:80".into()],
        vec!["--image".into(), img.clone(), "--route".into(), "a:x;reboot:80".into()],
        vec!["--image".into(), img.clone(), "--route".into(), "a:x:1".into(), "--route".into(), "a:y:2".into()],
        vec!["--image".into(), img.clone(), "--ro".into(), "/nonexistent-sbx:/x".into()],
        vec!["--image".into(), img.clone(), "--rw".into(), "/tmp:/proc".into()],
        vec!["--image".into(), img.clone(), "--rw".into(), "/tmp:/x,readonly=false".into()],
        vec!["--image".into(), img.clone(), "--ro".into(), "/var/run:/x".into()],
        vec!["--image".into(), img.clone(), "--env".into(), "SBX_SANDBOX_TIER=3".into()],
        vec!["--image".into(), img.clone(), "--user".into(), "root".into()],
        vec!["--image".into(), img.clone(), "--session".into(), "a\nb".into()],
        vec!["--image".into(), img.clone(), "--socket-wait".into(), "soon".into()],
        vec!["--image".into(), img.clone(), "--bogus".into()],
    ];
    for case in cases {
        let mut args = vec!["create".to_string(), "--label".into(), w.case_label()];
        args.extend(case.clone());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = w.sbx(&refs);
        assert_exit(&out, 2, &format!("{case:?}"));
        assert!(!stderr(&out).trim().is_empty());
        let mut json_args = refs.clone();
        json_args.push("--json");
        let out = w.sbx(&json_args);
        assert_exit(&out, 2, &format!("{case:?} --json"));
        let err: serde_json::Value =
            serde_json::from_slice(&out.stderr).unwrap_or_else(|e| panic!("{case:?}: {e}: {}", stderr(&out)));
        assert_eq!(err["error"]["kind"], "invalid_input", "{case:?}");
    }
    for bad in [vec!["destroy", "../etc"], vec!["revoke", "sbx-0123", "x"], vec!["connect", "-x"]] {
        assert_exit(&w.sbx(&bad), 2, &format!("{bad:?}"));
    }
    w.assert_nothing_left();
}

#[test]
fn the_hostile_corpus_exits_2_at_the_cli_and_creates_nothing() {
    let w = World::new();
    let corpus = include_str!("../corpus/hostile_inputs.txt");
    let mut ran = 0;
    for line in corpus.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (what, raw) = line.split_once('\t').unwrap();
        let input = raw.replace("\\n", "\n").replace("\\r", "\r").replace("\\t", "\t").replace("\\\\", "\\");
        if input.contains("\\0") {
            continue; // a NUL cannot be passed in argv at all
        }
        let img = w.image.clone();
        let label = w.case_label();
        let mut args: Vec<String> = match what {
            "id" => vec!["destroy".into(), input.clone()],
            _ => vec!["create".into(), "--label".into(), label, "--image".into()],
        };
        if what != "id" {
            if what == "image" {
                args.push(input.clone());
            } else {
                args.push(img);
                let flag = match what {
                    "route" => "--route",
                    "mount" => "--ro",
                    "env" => "--env",
                    "session" => "--session",
                    "label" => "--label",
                    "user" => "--user",
                    "duration" => "--socket-wait",
                    "ttl" => "--ttl",
                    "pids" => "--pids",
                    "cpus" => "--cpus",
                    "memory" => "--memory",
                    other => panic!("unknown corpus kind {other}"),
                };
                args.push(format!("{flag}={input}"));
            }
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = w.sbx(&refs);
        assert_exit(&out, 2, &format!("{what} {input:?}"));
        assert!(
            stderr(&out).contains("invalid") || stderr(&out).contains("error:"),
            "{what} {input:?}: {}",
            stderr(&out)
        );
        ran += 1;
    }
    assert!(ran > 100);
    w.assert_nothing_left();
}

//! The workbench commands (ps, kill, logs, stats, exec, cp): what they
//! print and how they exit, errors naming the sandbox id (never the
//! container id sbx acted on), bad input refused before any docker call.

use super::*;
use crate::docker::{Attach, ModeKind};

const PS: &str = "\
{\"handle\":\"p0000abcd\",\"pid\":42,\"command\":[\"srv\",\"--port\",\"80\"],\"running\":true,\"exit_code\":null}
{\"handle\":\"p0000abce\",\"pid\":43,\"command\":[\"x\"],\"running\":false,\"exit_code\":null,\"signal\":15}
";
/// What `docker exec` says when the helper is not in the sandbox.
const NO_HELPER: &str =
    "OCI runtime exec failed: exec failed: unable to start container process: exec: \"/run/sbx/helper\": \
     stat /run/sbx/helper: no such file or directory: unknown";
const STOPPED: &str = "Error response from daemon: Container abababababab is not running";

#[test]
fn ps_prints_a_table_or_json_lines() {
    let rig = Rig::new();
    rig.owns();
    rig.fake.push(Output::ok(PS));
    let r = rig.sbx(&["ps", ID]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(
        r.stdout,
        "HANDLE     PID     STATUS          COMMAND\n\
         p0000abcd  42      running         srv --port 80\n\
         p0000abce  43      killed by TERM  x\n"
    );
    assert_eq!(rig.fake.calls()[1], ["exec", "--", CID, "/run/sbx/helper", "ps"]);

    rig.owns();
    rig.fake.push(Output::ok(PS));
    let r = rig.sbx(&["--json", "ps", ID]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(r.stdout.lines().count(), 1);
    let v = json(&r.stdout);
    assert_eq!((&v[0]["handle"], &v[0]["pid"], &v[0]["running"]), (&"p0000abcd".into(), &42.into(), &true.into()));
    assert_eq!((&v[1]["signal"], &v[1]["exit_code"]), (&15.into(), &serde_json::Value::Null));
}

/// The handle is a directory name in the sandbox's /run/sbx-bg: one that is
/// not of sbx's shape (here a terminal title, a line erased and a forged
/// row) is no process `exec -d` started, left out of the table and JSON.
#[test]
fn ps_leaves_out_records_whose_handle_sbx_did_not_make() {
    let hostile = format!(
        "{PS}{{\"handle\":\"\\u001b]0;owned\\u0007\\u001b[2K\\r\\np0000dead  1       running         innocent\",\
         \"pid\":7,\"command\":[\"x\"],\"running\":true,\"exit_code\":null}}\n\
         {{\"handle\":\"p0000beef\\n\",\"pid\":8,\"command\":[\"y\"],\"running\":true,\"exit_code\":null}}\n"
    );
    let rig = Rig::new();
    rig.owns();
    rig.fake.push(Output::ok(&hostile));
    let r = rig.sbx(&["ps", ID]);
    assert_eq!(r.code, 0);
    assert_eq!(
        r.stdout,
        "HANDLE     PID     STATUS          COMMAND\n\
         p0000abcd  42      running         srv --port 80\n\
         p0000abce  43      killed by TERM  x\n"
    );
    assert_eq!(
        r.stderr,
        "sbx: warning: left out 2 record(s) in sbx-00000000000f's /run/sbx-bg that `sbx exec -d` did not make \
         (not a handle of its shape)\n"
    );
    rig.owns();
    rig.fake.push(Output::ok(&hostile));
    let r = rig.sbx(&["--json", "ps", ID]);
    let v = json(&r.stdout);
    let handles: Vec<&str> = v.as_array().unwrap().iter().map(|p| p["handle"].as_str().unwrap()).collect();
    assert_eq!(handles, ["p0000abcd", "p0000abce"]);
    assert_eq!(json(&r.stderr)["warning"]["kind"], "foreign_records", "{}", r.stderr);
    assert_eq!(rig.fake.verbs(), ["container inspect", "exec", "container inspect", "exec"]);
    assert_eq!(rig.fake.calls()[1], ["exec", "--", CID, "/run/sbx/helper", "ps"]);
    assert_eq!(rig.fake.calls()[3], rig.fake.calls()[1]);
}

#[test]
fn ps_errors_name_the_sandbox_and_bad_ids_are_refused() {
    let rig = Rig::new();
    rig.owns();
    rig.fake.push(Output::fail(126, NO_HELPER));
    let r = rig.sbx(&["ps", ID]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(
        r.stderr,
        "sbx: error: sandbox sbx-00000000000f has no sbx helper at /run/sbx/helper (made by an older sbx, \
         or this sbx was built without a static libc)\nsbx: hint: recreate the sandbox with this sbx \
         (`sbx destroy sbx-00000000000f`, then `sbx create ...`); build sbx where a static libc is installed \
         (Debian: libc6-dev)\n"
    );

    rig.fake.push(Output::fail(1, MISSING));
    let r = rig.sbx(&["--json", "ps", ID]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    let v = json(&r.stderr);
    assert_eq!(
        (&v["error"]["kind"], &v["error"]["message"]),
        (&"not_found".into(), &"no sandbox sbx-00000000000f on this engine".into())
    );

    let e = rig.refused(&["ps", "nope"]);
    assert!(e.starts_with("sbx: error: invalid sandbox id \"nope\""), "{e}");
    let e = rig.refused(&["--json", "ps", "nope"]);
    assert_eq!(json(&e)["error"]["kind"], "invalid_input");
}

#[test]
fn kill_is_silent_and_says_when_the_process_is_unknown() {
    let rig = Rig::new();
    rig.owns();
    rig.fake.push(Output::ok(""));
    let r = rig.sbx(&["kill", ID, "p0000abcd", "-s", "KILL"]);
    assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (0, "", ""));
    assert_eq!(rig.fake.calls()[1], ["exec", "--", CID, "/run/sbx/helper", "kill", "p0000abcd", "9"]);

    // The helper's exit 3: no such process.
    rig.owns();
    rig.fake.push(Output::fail(3, "sbx-helper: no process p0000abcd"));
    let r = rig.sbx(&["kill", ID, "p0000abcd"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    // The helper's own text is not relayed.
    assert_eq!(
        r.stderr,
        "sbx: error: sandbox sbx-00000000000f has no background process p0000abcd\n\
         sbx: hint: `sbx ps sbx-00000000000f` lists the background processes\n"
    );
    rig.owns();
    rig.fake.push(Output::fail(3, ""));
    let r = rig.sbx(&["--json", "kill", ID, "p0000abcd"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(json(&r.stderr)["error"]["kind"], "no_such_process");

    for args in
        [&["kill", "nope", "p0000abcd"][..], &["kill", ID, "../p0000ab"], &["kill", ID, "p0000abcd", "-s", "NOPE"]]
    {
        let e = rig.refused(args);
        assert!(e.starts_with("sbx: error: invalid "), "{args:?}: {e}");
    }
}

#[test]
fn logs_pass_the_exit_code_on_and_name_what_is_missing() {
    let rig = Rig::new();
    rig.owns();
    rig.fake.push(Output::ok("hello\n"));
    let r = rig.sbx(&["logs", ID, "--tail", "5"]);
    // The output itself goes straight to sbx's own streams, not the printer.
    assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (0, "", ""));
    let call = rig.fake.invocations().pop().unwrap();
    assert_eq!(call.args[0], "logs");
    assert!(call.args.contains(&"5".to_string()) && call.args.last().unwrap() == CID, "{:?}", call.args);

    // A process's log: its handle through the helper; exit 1 on a failure.
    rig.owns();
    rig.fake.push(Output::fail(4, ""));
    let r = rig.sbx(&["logs", ID, "p0000abcd"]);
    assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (1, "", ""));
    assert_eq!(rig.fake.calls().last().unwrap(), &["exec", "--", CID, "/run/sbx/helper", "logs", "p0000abcd", "-1"]);

    rig.owns();
    rig.fake.push(Output::fail(3, ""));
    let r = rig.sbx(&["--json", "logs", ID, "p0000abcd"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(json(&r.stderr)["error"]["kind"], "no_such_process");

    rig.owns();
    rig.fake.push(Output::fail(1, STOPPED));
    let r = rig.sbx(&["logs", ID, "p0000abcd"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert!(r.stderr.starts_with("sbx: error: ") && r.stderr.contains(ID), "{}", r.stderr);

    rig.refused(&["logs", "nope"]);
    rig.refused(&["logs", ID, "nope"]);
}

const STATS: &str = "{\"Name\":\"sbx-00000000000f\",\"CPUPerc\":\"1.50%\",\"MemUsage\":\"2MiB / 4GiB\",\
                     \"NetIO\":\"1kB / 2kB\",\"PIDs\":\"3\"}\n";

#[test]
fn stats_prints_a_table_or_json_and_names_the_missing() {
    let rig = Rig::new();
    rig.owns();
    rig.fake.push(Output::ok(STATS));
    let r = rig.sbx(&["stats", ID]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "ID                CPU%    MEM        LIMIT      NET RX     NET TX     PIDS");
    assert_eq!(lines[1], "sbx-00000000000f  1.50    2.0MiB     4096.0MiB  1000       2000       3");
    assert_eq!(lines.len(), 2);
    assert_eq!(rig.fake.calls()[1], ["stats", "--no-stream", "--format", "{{json .}}", "--", CID]);

    rig.owns();
    rig.fake.push(Output::ok(STATS));
    let r = rig.sbx(&["--json", "stats", ID]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let v = json(&r.stdout);
    assert_eq!((&v[0]["id"], &v[0]["pids"], &v[0]["net_tx_bytes"]), (&ID.into(), &3.into(), &2000.into()));

    // A sandbox that is gone is reported after the others are shown.
    rig.owns();
    rig.fake.push(Output::fail(1, MISSING));
    rig.fake.push(Output::ok(STATS));
    let r = rig.sbx(&["stats", ID, "sbx-0000000000aa"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stdout.lines().count(), 2, "{}", r.stdout);
    assert!(r.stderr.starts_with("sbx: error: no sandbox sbx-0000000000aa"), "{}", r.stderr);
    rig.fake.push(Output::fail(1, MISSING));
    let r = rig.sbx(&["--json", "stats", ID]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(json(&r.stderr)["error"]["kind"], "not_found");

    rig.refused(&["stats", ID, "nope"]);
}

#[test]
fn exec_exits_with_the_commands_code_or_says_why_it_could_not_run() {
    let rig = Rig::new();
    rig.owns();
    rig.fake.push(Output { status: 3, stdout: Vec::new(), stderr: Vec::new() });
    let r = rig.sbx(&["exec", ID, "--", "false"]);
    assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (3, "", ""));
    let call = rig.fake.invocations().pop().unwrap();
    assert_eq!(call.mode, ModeKind::Terminal(Attach { stdin: false, capture_stderr: true }));
    assert!(call.args.windows(2).any(|w| w[0] == "--" && w[1] == CID), "{:?}", call.args);

    // docker says 126 for both; the helper's `which` tells not found (127).
    let oci = "OCI runtime exec failed: exec failed: unable to start container process: exec: \"nope\": \
               executable file not found in $PATH: unknown";
    rig.owns();
    rig.fake.push(Output::fail(126, oci));
    rig.fake.push(Output::fail(1, ""));
    let r = rig.sbx(&["exec", ID, "--", "nope"]);
    assert_eq!((r.code, r.stdout.as_str()), (127, ""));
    assert!(
        r.stderr.starts_with("sbx: error: sandbox sbx-00000000000f cannot run \"nope\": no such file or command\n"),
        "{}",
        r.stderr
    );
    assert_eq!(rig.fake.calls().last().unwrap(), &["exec", "--", CID, "/run/sbx/helper", "which", "nope"]);
    rig.owns();
    rig.fake.push(Output::fail(126, oci));
    rig.fake.push(Output::ok("/bin/nope\n"));
    let r = rig.sbx(&["--json", "exec", ID, "--", "nope"]);
    assert_eq!((r.code, r.stdout.as_str()), (126, ""));
    assert_eq!(json(&r.stderr)["error"]["kind"], "command_not_executable");

    // In the background the same failure exits 1.
    rig.owns();
    rig.fake.push(Output::fail(127, "sbx-helper: cannot run \"nope\": No such file or directory"));
    let r = rig.sbx(&["--json", "exec", "-d", ID, "--", "nope"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(json(&r.stderr)["error"]["kind"], "command_not_found");

    rig.owns();
    rig.fake.push(Output::fail(1, STOPPED));
    let r = rig.sbx(&["exec", ID, "--", "true"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(
        r.stderr,
        "sbx: error: sandbox sbx-00000000000f is not running (it exited or was stopped)\n\
         sbx: hint: `sbx logs sbx-00000000000f` shows why it ended; `sbx start sbx-00000000000f` runs it again, \
         `sbx destroy sbx-00000000000f` removes it\n"
    );
    // Frozen by `sbx pause`: docker's answer in sbx's words (engine 20.10's text).
    rig.owns();
    rig.fake.push(Output::fail(
        1,
        "Error response from daemon: Container sbx-00000000000f is paused, unpause the container before exec",
    ));
    let r = rig.sbx(&["exec", ID, "--", "true"]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            1,
            "sbx: error: sandbox sbx-00000000000f is paused\n\
             sbx: hint: `sbx resume sbx-00000000000f` thaws it, then try again\n"
        )
    );
    rig.owns();
    rig.fake.push(Output::fail(1, STOPPED));
    let r = rig.sbx(&["--json", "exec", ID, "--", "true"]);
    assert_eq!((r.code, json(&r.stderr)["error"]["kind"].as_str()), (1, Some("not_running")));

    rig.fake.push(Output::fail(1, MISSING));
    let r = rig.sbx(&["--json", "exec", ID, "--", "true"]);
    assert_eq!((r.code, json(&r.stderr)["error"]["kind"].as_str()), (1, Some("not_found")));
}

#[test]
fn exec_detached_prints_the_handle() {
    let rig = Rig::new();
    rig.owns();
    rig.fake.push(Output::ok("42\n"));
    let r = rig.sbx(&["exec", "-d", ID, "--", "srv"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let handle = r.stdout.trim_end();
    assert!(crate::workbench::validate_handle(handle).is_ok(), "{}", r.stdout);
    assert_eq!(rig.fake.calls()[1], ["exec", "--", CID, "/run/sbx/helper", "bg", handle, "--", "srv"]);
}

#[test]
fn exec_refuses_bad_input_before_any_docker_call() {
    let rig = Rig::new();
    for args in [
        &["exec", "nope", "--", "true"][..],
        &["exec", "-e", "=x", ID, "--", "true"],
        &["exec", "-w", "relative", ID, "--", "true"],
        &["exec", "-u", "root:", ID, "--", "true"],
        &["exec", "-d", "-i", ID, "--", "true"],
    ] {
        let e = rig.refused(args);
        assert!(e.starts_with("sbx: error: invalid "), "{args:?}: {e}");
    }
    // The caller's uid, or the docker socket's group (the rig's: 4321, 4999).
    for user in ["4321", "1000:4999"] {
        let e = rig.refused(&["exec", "-u", user, ID, "--", "true"]);
        assert!(e.contains("a sandbox running as the user who runs sbx"), "{user}: {e}");
    }
}

/// Root's links in a writable host mount are the ones `sbx cp` follows, so
/// `exec -u 0` there is refused as `create --user 0 --rw` is.
#[test]
fn exec_as_root_is_refused_where_the_sandbox_has_a_writable_host_mount() {
    let rig = Rig::new();
    rig.owns();
    let mut v: serde_json::Value = serde_json::from_str(&rig.record_line(&[])).unwrap();
    v["Id"] = CID.into();
    v["Mounts"] = serde_json::json!([
        {"Type": "bind", "Source": "/tmp/sock", "Destination": "/run/sandbox", "RW": true},
        {"Type": "bind", "Source": "/srv/data", "Destination": "/data", "RW": false},
        {"Type": "bind", "Source": "/home/u/project", "Destination": "/work", "RW": true},
    ]);
    rig.fake.push(Output::ok(&v.to_string()));
    let r = rig.sbx(&["exec", "-u", "0", ID, "--", "ln", "-s", "/etc", "/work/build"]);
    assert_eq!((r.code, r.stdout.as_str()), (2, ""), "{}", r.stderr);
    assert!(r.stderr.contains("/home/u/project mounted writable at /work"), "{}", r.stderr);
    assert_eq!(rig.fake.calls().len(), 2, "no exec");
}

#[test]
fn cp_names_the_sandbox_in_its_errors_and_refuses_bad_input() {
    let rig = Rig::new();
    std::fs::create_dir_all(&rig.root).unwrap();
    let host = rig.root.join("file");
    std::fs::write(&host, "x").unwrap();
    let host_s = host.display().to_string();
    rig.fake.push(Output::fail(1, MISSING));
    let r = rig.sbx(&["cp", &host_s, &format!("{ID}:/tmp/x")]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(
        r.stderr,
        "sbx: error: no sandbox sbx-00000000000f on this engine\n\
         sbx: hint: `sbx ls` lists the sandboxes on this engine\n"
    );

    rig.owns();
    rig.fake.push(Output::fail(5, ""));
    let r = rig.sbx(&["--json", "cp", &format!("{ID}:/nope"), &host_s]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    let v = json(&r.stderr);
    assert_eq!(
        (&v["error"]["kind"], &v["error"]["message"]),
        (&"no_such_path".into(), &"sandbox sbx-00000000000f has no /nope".into())
    );

    rig.refused(&["cp", &host_s, "nope:/x"]);
    rig.refused(&["cp", &host_s, &format!("{ID}:/x"), "--max-bytes", "lots"]);
}

/// A refusal about the sandbox side names the sandbox id the user gave,
/// never the container id sbx acts on (it once said `<64 hex>:/`).
#[test]
fn a_cp_of_the_sandboxs_root_is_refused_naming_the_sandbox() {
    let rig = Rig::new();
    rig.owns();
    let r = rig.sbx(&["--json", "cp", &format!("{ID}:/"), "/tmp/sbx-never-written"]);
    assert_eq!((r.code, r.stdout.as_str()), (2, ""), "{}", r.stderr);
    assert_eq!(
        json(&r.stderr)["error"]["message"],
        "invalid cp path \"sbx-00000000000f:/\": name a file or directory, not the sandbox's /"
    );
    assert!(!r.stderr.contains(CID), "{}", r.stderr);
}

//! What each command prints, in text and JSON, on success and on error:
//! the real command line parsed by clap, run by `commands::run` against
//! the recording fake, stdout and stderr captured by the printer.

use clap::Parser;

use super::*;
use crate::docker::Output;
use crate::output;
use crate::sandbox::testing::{Rig, ID, IMG};

/// What one `sbx ...` printed and how it exited.
#[derive(Debug)]
struct Ran {
    code: u8,
    stdout: String,
    stderr: String,
}

/// The full container id of sandbox ID, as its inspect shows it.
const CID: &str = "abababababababababababababababababababababababababababababababab";

/// What only the commands' tests script.
impl Rig {
    /// The inspect that proves sandbox ID this host's (`Driver::open`):
    /// commands then act on [`CID`].
    fn owns(&self) {
        let mut v: serde_json::Value = serde_json::from_str(&self.record_line(&[])).unwrap();
        v["Id"] = CID.into();
        self.fake.push(Output::ok(&v.to_string()));
    }

    /// `sbx ARGS...` is refused as invalid input: exit 2, nothing on stdout,
    /// no docker call (the fake has no answer and records none); returns stderr.
    fn refused(&self, args: &[&str]) -> String {
        let before = self.fake.calls().len();
        let r = self.sbx(args);
        assert_eq!((r.code, r.stdout.as_str()), (2, ""), "{args:?}: {}", r.stderr);
        assert_eq!(self.fake.calls().len(), before, "{args:?} called docker");
        r.stderr
    }

    /// `sbx ARGS...` against the fake; every scripted answer must be used.
    fn sbx(&self, args: &[&str]) -> Ran {
        self.sbx_with(args, Env::default())
    }

    /// `sbx ARGS...` with the environment `env` (SBX_RUNTIME, ...).
    fn sbx_with(&self, args: &[&str], env: Env) -> Ran {
        self.sbx_on(args, env, self.driver())
    }

    /// `sbx ARGS...` with `driver` (a remote engine's, say).
    fn sbx_on(&self, args: &[&str], env: Env, driver: Driver) -> Ran {
        let argv: Vec<std::ffi::OsString> =
            std::iter::once("sbx").chain(args.iter().copied()).map(Into::into).collect();
        let cli = match crate::cli::Cli::parse_line(&argv) {
            Ok(cli) => cli,
            // A malformed id or pool name: refused as `sbx` refuses it.
            Err(e) => {
                let (out, captured) = output::capture(crate::wants_json(&argv));
                let code = crate::refuse(e, &argv, &out);
                assert_eq!(self.fake.remaining(), 0, "unused answers after {args:?}");
                return Ran { code, stdout: captured.stdout(), stderr: captured.stderr() };
            }
        };
        let (out, captured) = output::capture(cli.globals.json);
        let ctx = Context {
            driver,
            out,
            env,
            dirs: Dirs::default(),
            catch_signals: || {},
            watch_signals: crate::host::interrupt::Watch::manual,
        };
        let code = run(cli.command, &ctx);
        assert_eq!(self.fake.remaining(), 0, "unused answers after {args:?}");
        Ran { code, stdout: captured.stdout(), stderr: captured.stderr() }
    }

    /// `docker container inspect` of sandbox ID on `networks`, no socket label.
    fn record_line(&self, networks: &[&str]) -> String {
        let labels = serde_json::json!({
            "sbx.managed": "1",
            "sbx.id": ID,
            "sbx.routes": "{\"inference\":\"sbx-proxy\",\"tools\":\"sbx-proxy\",\"docs\":\"sbx-docs\"}",
            "sbx.user": "65534:65534",
            "sbx.created": "2026-11-29T09:00:00Z",
        });
        self.container_line(ID, labels, networks)
    }

    /// `docker ps` line of sandbox ID, as `ls` and `gc` read it.
    fn ps_line(&self, extra: serde_json::Value) -> String {
        let mut labels = serde_json::json!({"sbx.managed": "1", "sbx.id": ID, "sbx.tier": "2",
            "sbx.session": "task-1", "sbx.created": "2026-11-29T09:00:00Z"});
        for (k, v) in extra.as_object().unwrap() {
            labels[k] = v.clone();
        }
        serde_json::json!({"name": ID, "state": "running", "networks": "", "labels": self.seal(labels)}).to_string()
    }

    /// `image inspect` (user `user`), `run`, the sandbox binds its socket and runs.
    fn creates(&self, user: &str) {
        self.fake.push(Output::ok(&format!("[{user:?},{{}},null,\"\"]\n")));
        self.starts_and_binds();
    }
}

fn json(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

const MISSING: &str = "Error: No such container: sbx-00000000000f";

#[test]
fn create_prints_the_id_and_its_warnings_on_stderr() {
    let rig = Rig::new();
    rig.creates("node");
    let r = rig.sbx(&["create", "--image", IMG]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "sbx-00000000000f\n"));
    assert!(r.stderr.starts_with("sbx: warning: ") && r.stderr.contains("\"node\" is not used"), "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1);
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect"]);
    assert_eq!(rig.fake.calls()[0].last().unwrap(), IMG);
}

#[test]
fn create_under_json_prints_one_object_with_the_warnings_in_it() {
    let rig = Rig::new();
    rig.creates("node");
    let r = rig.sbx(&["--json", "create", "--image", IMG]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(r.stdout.lines().count(), 1);
    let v = json(&r.stdout);
    assert_eq!(v["id"], ID);
    assert_eq!(v["tier"], 2);
    assert!(v["warnings"][0].as_str().unwrap().contains("\"node\" is not used"), "{v}");
    assert_eq!(v["user"], crate::sandbox::testing::USER, "the uid sbx chose is in the result");
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect"]);
    assert_eq!(rig.fake.calls()[0].last().unwrap(), IMG);
}

#[test]
fn create_errors_in_text_and_json() {
    let rig = Rig::new();
    // Invalid input: exit 2 before any docker call (the fake has no answer).
    let r = rig.sbx(&["create", "--image", "bad"]);
    assert_eq!((r.code, r.stdout.as_str()), (2, ""));
    assert!(r
        .stderr
        .starts_with("sbx: error: invalid image \"bad\": it is not pinned to a sha256 digest\nsbx: hint: "));
    let r = rig.sbx(&["--json", "create", "--image", "bad"]);
    assert_eq!(r.code, 2);
    assert_eq!(json(&r.stderr)["error"]["kind"], "invalid_input");

    rig.fake.push(Output::fail(1, "Error response from daemon: no such image: x: No such image: x"));
    let r = rig.sbx(&["create", "--image", IMG]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert!(r.stderr.starts_with("sbx: error: "), "{}", r.stderr);
    rig.fake.push(Output::fail(1, "Error response from daemon: no such image: x: No such image: x"));
    let r = rig.sbx(&["--json", "create", "--image", IMG]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(r.stderr.lines().count(), 1);
    assert_eq!(json(&r.stderr)["error"]["kind"], "image_missing");
    assert_eq!(rig.fake.verbs(), ["image inspect", "image inspect"], "one inspect a valid create, none an invalid one");
}

#[test]
fn the_drivers_cleanup_warnings_reach_the_commands_printer() {
    let rig = Rig::new();
    rig.fake.push(Output::ok("[\"\",{},null,\"\"]\n"));
    rig.fake.push(Output::fail(125, "docker: Error response from daemon: OCI runtime create failed"));
    rig.fake.push(Output::fail(1, "Error response from daemon: engine busy"));
    let r = rig.sbx(&["--json", "create", "--image", IMG]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    let lines: Vec<serde_json::Value> = r.stderr.lines().map(json).collect();
    assert_eq!(lines.len(), 2, "{}", r.stderr);
    assert_eq!(lines[0]["warning"]["kind"], "cleanup");
    assert!(lines[0]["warning"]["message"].as_str().unwrap().contains("`sbx gc` will"));
    assert_eq!(lines[1]["error"]["kind"], "docker_failed");
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "rm"]);
    assert_eq!(rig.fake.calls()[2], ["rm", "-f", "-v", "--", ID], "the failed run is cleaned up");
}

#[test]
fn ls_prints_a_table_or_json() {
    let rig = Rig::new();
    rig.fake.push(Output::ok(&format!("{}\n", rig.ps_line(serde_json::json!({})))));
    let r = rig.sbx(&["ls"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "ID                SESSION  TIER  RUNTIME  ROUTES  STATE    AGE  EXPIRES");
    assert!(lines[1].starts_with("sbx-00000000000f  task-1   2     runc     -       running  "), "{}", lines[1]);
    assert_eq!(lines.len(), 2);

    rig.fake.push(Output::ok(&format!("{}\n", rig.ps_line(serde_json::json!({})))));
    let r = rig.sbx(&["--json", "ls"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let v = json(&r.stdout);
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!((&v[0]["id"], &v[0]["session"]), (&ID.into(), &"task-1".into()));
    assert_eq!(rig.fake.verbs(), ["ps", "ps"]);
}

#[test]
fn ls_without_docker_fails_in_text_and_json() {
    let rig = Rig::new();
    rig.fake.push_spawn_failure();
    let r = rig.sbx(&["ls"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(
        r.stderr,
        "sbx: error: could not run `docker`: No such file or directory\n\
         sbx: hint: install the docker CLI (or set SBX_DOCKER to its path) and check that `docker version` answers\n"
    );
    rig.fake.push_spawn_failure();
    let r = rig.sbx(&["--json", "ls"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    let v = json(&r.stderr);
    assert_eq!(v["error"]["kind"], "docker_missing");
    assert_eq!(v["error"]["message"], "could not run `docker`: No such file or directory");
    assert!(v["error"]["hint"].as_str().unwrap().contains("SBX_DOCKER"));
    assert_eq!(rig.fake.verbs(), ["ps", "ps"]);
}

#[test]
fn inspect_prints_the_record_as_pretty_json() {
    let rig = Rig::new();
    rig.fake.push(Output::ok(&rig.record_line(&["sbx-proxy"])));
    let r = rig.sbx(&["inspect", ID]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert!(r.stdout.starts_with("{\n  \"id\": \"sbx-00000000000f\",\n") && r.stdout.ends_with("}\n"), "{}", r.stdout);
    let v = json(&r.stdout);
    assert_eq!(v["routes"]["inference"], "sbx-proxy");
    assert_eq!(v["networks"], serde_json::json!([{"name": "sbx-proxy", "by_sbx": true}]));

    rig.fake.push(Output::fail(1, MISSING));
    let r = rig.sbx(&["inspect", ID]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert!(r.stderr.starts_with("sbx: error: no sandbox sbx-00000000000f"), "{}", r.stderr);
    rig.fake.push(Output::fail(1, MISSING));
    let r = rig.sbx(&["--json", "inspect", ID]);
    assert_eq!((r.code, json(&r.stderr)["error"]["kind"].as_str()), (1, Some("not_found")));
    assert_eq!(rig.fake.verbs(), ["container inspect"; 3]);
    assert!(rig.fake.calls().iter().all(|c| c.last().unwrap() == ID), "{:?}", rig.fake.calls());
}

#[test]
fn destroy_is_silent_in_text_and_reports_in_json() {
    let rig = Rig::new();
    rig.fake.push(Output::ok(&rig.record_line(&[])));
    rig.fake.push(Output::ok(&format!("{ID}\n")));
    let r = rig.sbx(&["destroy", ID]);
    assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (0, "", ""));

    rig.fake.push(Output::fail(1, MISSING));
    let r = rig.sbx(&["--json", "destroy", ID]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(r.stdout, "{\"removed\":[],\"already_gone\":[\"sbx-00000000000f\"]}\n");

    let r = rig.sbx(&["destroy", "nope"]);
    assert_eq!((r.code, r.stdout.as_str()), (2, ""));
    assert_eq!(
        r.stderr,
        "sbx: error: invalid sandbox id \"nope\": sandbox ids look like sbx-0123456789ab\n\
         sbx: hint: `sbx ls` lists the sandboxes on this engine\n"
    );
    assert_eq!(rig.fake.verbs(), ["container inspect", "rm", "container inspect"], "no call for an invalid id");
    assert_eq!(rig.fake.calls()[1], ["rm", "-f", "-v", "--", ID]);
    assert_eq!(rig.fake.calls()[2].last().unwrap(), ID);
}

#[test]
fn revoke_notes_shared_networks_on_stderr_and_prints_json() {
    let rig = Rig::new();
    rig.fake.push(Output::ok(&rig.record_line(&["sbx-proxy", "sbx-docs"])));
    rig.fake.push(Output::ok(""));
    let r = rig.sbx(&["revoke", ID, "inference"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""));
    assert_eq!(r.stderr, "sbx: revoked inference (network sbx-proxy, shared with routes inference, tools)\n");

    rig.fake.push(Output::ok(&rig.record_line(&["sbx-docs"])));
    let r = rig.sbx(&["--json", "revoke", ID, "tools"]);
    assert_eq!(r.code, 0);
    let note = json(&r.stderr);
    assert_eq!(note["note"]["kind"], "already_revoked");
    assert_eq!(note["note"]["message"], "route tools of sbx-00000000000f was already revoked");
    let v = json(&r.stdout);
    assert_eq!((&v["kind"], &v["already"]), (&"tools".into(), &true.into()));

    rig.fake.push(Output::ok(&rig.record_line(&["sbx-docs"])));
    let r = rig.sbx(&["revoke", ID, "nope"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert!(r.stderr.starts_with("sbx: error: ") && r.stderr.contains("its routes: docs"), "{}", r.stderr);
    let verbs = ["container inspect", "network disconnect", "container inspect", "container inspect"];
    assert_eq!(rig.fake.verbs(), verbs, "an already revoked or unknown route disconnects nothing");
    assert_eq!(rig.fake.calls()[1], ["network", "disconnect", "--force", "--", "sbx-proxy", ID]);
}

#[test]
fn gc_says_what_it_would_remove_and_fails_when_it_cannot() {
    let rig = Rig::new();
    let expired = rig.ps_line(serde_json::json!({"sbx.expires": "2000-01-01T00:00:00Z",
        "sbx.socket": rig.root.join(ID).join("sandbox.sock").display().to_string()}));
    std::fs::create_dir_all(rig.root.join(ID)).unwrap();
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&format!("{expired}\n")));
    let r = rig.sbx(&["gc", "--dry-run"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let dir = rig.root.join(ID);
    assert_eq!(
        r.stdout,
        format!(
            "would remove sbx-00000000000f (expired at 2000-01-01T00:00:00Z)\nwould remove socket directory {}\n",
            dir.display()
        )
    );

    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&format!("{expired}\n")));
    let r = rig.sbx(&["--json", "gc", "--dry-run"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let v = json(&r.stdout);
    assert_eq!((&v["dry_run"], &v["containers"][0]["id"]), (&true.into(), &ID.into()));

    rig.fake.push_spawn_failure();
    let r = rig.sbx(&["--json", "gc"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(json(&r.stderr)["error"]["kind"], "docker_missing");
    assert_eq!(rig.fake.verbs(), ["network ls", "ps", "network ls", "ps", "network ls"], "a dry run removes nothing");
}

#[test]
fn ttl_prints_the_new_expiry() {
    let rig = Rig::new();
    // No sbx.socket label: no watchdog to start.
    rig.fake.push(Output::ok(&rig.record_line(&[])));
    let r = rig.sbx(&["ttl", ID, "30m"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let at = humantime::parse_rfc3339(r.stdout.trim_end()).unwrap();
    let left = at.duration_since(std::time::SystemTime::now()).unwrap().as_secs();
    assert!((1790..=1800).contains(&left), "{left}");

    rig.fake.push(Output::ok(&rig.record_line(&[])));
    let r = rig.sbx(&["--json", "ttl", ID, "30m"]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let v = json(&r.stdout);
    assert_eq!(v["id"], ID);
    assert!(humantime::parse_rfc3339(v["expires_at"].as_str().unwrap()).is_ok());

    let r = rig.sbx(&["--json", "ttl", ID, "nope"]);
    assert_eq!((r.code, r.stdout.as_str()), (2, ""));
    assert_eq!(
        r.stderr,
        "{\"error\":{\"hint\":\"write a duration such as 500ms, 90s, 30m or 2h\",\"kind\":\"invalid_input\",\
         \"message\":\"invalid --ttl \\\"nope\\\": it is not a duration\"}}\n"
    );
    assert_eq!(rig.fake.verbs(), ["container inspect", "container inspect"], "the expiry is kept on the host");
    assert!(rig.fake.calls().iter().all(|c| c.last().unwrap() == ID), "{:?}", rig.fake.calls());
}

mod checks;
mod egress;
mod events;
mod files;
mod lifecycle;
mod pool;
mod pool_remote;
mod workbench;

#[test]
fn sbx_pull_is_create_s_pull_default_and_a_bad_value_is_invalid_input() {
    let pinned = format!("r/x@{IMG}");
    // SBX_PULL=never: the missing image is not pulled; the hint names the pull to run.
    let rig = Rig::new();
    rig.fake.push(Output::fail(1, "Error response from daemon: No such image: r/x"));
    let never = Env { pull: Some("never".into()), ..Env::default() };
    let r = rig.sbx_with(&["create", "--image", &pinned], never);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""), "{}", r.stderr);
    assert!(r.stderr.contains(&format!("`docker pull {pinned}`")), "{}", r.stderr);
    assert_eq!(rig.fake.verbs(), ["image inspect"]);
    // A flag wins over the environment; a bad value is refused before any docker call.
    let bad = Env { pull: Some("always".into()), ..Env::default() };
    let r = rig.sbx_with(&["create", "--image", &pinned], bad.clone());
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("SBX_PULL") && r.stderr.contains("`missing` or `never`"), "{}", r.stderr);
    rig.fake.push(Output::fail(1, "Error response from daemon: No such image: r/x"));
    let r = rig.sbx_with(&["create", "--pull", "never", "--image", &pinned], bad);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(rig.fake.verbs(), ["image inspect", "image inspect"]);
}

#[test]
fn man_into_a_file_or_below_one_says_what_to_give() {
    let rig = Rig::new();
    std::fs::create_dir_all(&rig.state).unwrap();
    let file = rig.state.join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    for dir in [file.clone(), file.join("man1")] {
        let r = rig.sbx(&["--json", "man", dir.to_str().unwrap()]);
        let e = json(&r.stderr);
        assert_eq!((r.code, e["error"]["kind"].as_str()), (1, Some("io")), "{}", r.stderr);
        assert!(e["error"]["message"].as_str().unwrap().starts_with("cannot write man pages into"), "{}", r.stderr);
        assert!(e["error"]["hint"].as_str().unwrap().contains("give a directory"), "{}", r.stderr);
    }
    assert!(rig.fake.calls().is_empty());
}

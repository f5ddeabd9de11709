//! Remote engines, continued: `stop`/`start`/`pause`/`resume`
//! of a sandbox on the remote engine (reached through sshd on loopback, see
//! `remote`), which engine this machine's files of a sandbox belong to (a
//! local `gc` or `destroy` leaves a remote sandbox's marker, watchdog and
//! TTL alone; the remote engine's `gc` reaps what its removed sandboxes
//! left), and gc of the helper-volume filler a killed create left.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::remote::{local_paths, sbx, with};
use crate::support::*;

fn ls_state(w: &World, env: &[(String, String)], id: &str) -> String {
    let ls = json(&sbx(w, &["--json", "ls"], env));
    let r = ls.as_array().unwrap().iter().find(|r| r["id"] == id).cloned();
    r.unwrap_or_else(|| panic!("ls lacks {id}: {ls}"))["state"].as_str().unwrap().to_string()
}

fn connect(w: &World, env: &[(String, String)], id: &str) -> Command {
    let mut c = Command::new(SBX);
    c.args(w.dir_args()).args(["connect", id]);
    for k in ["DOCKER_CONTEXT", "DOCKER_CONFIG", "SBX_CONTEXT", "SBX_SOCKET_DIR"] {
        c.env_remove(k);
    }
    c.envs(env.iter().map(|(k, v)| (k, v)));
    c
}

/// stop, start (readiness through the relayed channel, a line answered
/// after the start), pause, resume over ssh, with no argv naming a path of
/// this machine; a start that never gets ready is stopped again.
#[test]
fn a_remote_sandbox_stops_starts_pauses_and_resumes_over_ssh() {
    let remote = Remote::start();
    let w = World::new();
    let shim = Shim::logging(&w);
    let env = with(remote.env(), &[("SBX_DOCKER", shim.path().to_str().unwrap())]);
    let label = w.case_label();
    let out = sbx(&w, &["create", "--image", &w.image, "--label", &label, "--ttl", "1h"], &env);
    assert_success(&out, "create over ssh");
    let sb = w.adopt(stdout(&out).trim());
    line_by_line(connect(&w, &env, &sb.id), &["before"], str::to_string);

    assert_success(&sbx(&w, &["stop", "--grace", "0", &sb.id], &env), "stop over ssh");
    assert_eq!(ls_state(&w, &env, &sb.id), "stopped");
    let before = shim.argvs().len();
    let started = std::time::Instant::now();
    let out = sbx(&w, &["--json", "start", &sb.id], &env);
    assert_success(&out, "start over ssh");
    eprintln!("remote start took {:?}", started.elapsed());
    assert_eq!(json(&out)["state"], "running");
    let verbs: Vec<String> = shim.argvs().split_off(before).iter().map(|a| a[0].clone()).collect();
    let (cp, start) = (verbs.iter().position(|v| v == "cp"), verbs.iter().position(|v| v == "start"));
    assert!(cp.is_some() && cp < start, "/run is read before docker start: {verbs:?}");
    line_by_line(connect(&w, &env, &sb.id), &["alpha", "beta"], str::to_string);
    assert_success(&sbx(&w, &["pause", &sb.id], &env), "pause over ssh");
    assert_eq!(ls_state(&w, &env, &sb.id), "paused");
    // Reached on its recorded container id without a look-up: docker's
    // refusal of the exec is said in sbx's words.
    let out = sbx(&w, &["--json", "connect", &sb.id], &env);
    assert_exit(&out, 1, "connect to a paused remote sandbox");
    assert!(stderr(&out).contains("\"paused\"") && stderr(&out).contains("sbx resume"), "{}", stderr(&out));
    assert_success(&sbx(&w, &["resume", &sb.id], &env), "resume over ssh");
    line_by_line(connect(&w, &env, &sb.id), &["after"], str::to_string);
    assert_eq!(w.socket_dirs(), Vec::<String>::new(), "a remote start made a socket directory here");
    let pidfile = w.state_dir.join("watchdog").join(&sb.id);
    let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    assert!(alive(pid), "the TTL watchdog (watching its TTL here) ended");

    let out = sbx(&w, &["create", "--image", &w.image, "--label", &label, "--socket-wait", "0", "--", "sleep"], &env);
    assert_success(&out, "create of a program that never binds");
    let never = w.adopt(stdout(&out).trim());
    assert_success(&sbx(&w, &["stop", "--grace", "0", &never.id], &env), "stop");
    let out = sbx(&w, &["start", "--socket-wait", "2s", &never.id], &env);
    assert_exit(&out, 1, "a remote start that never gets ready");
    let err = stderr(&out);
    assert!(err.contains("inside the sandbox") && err.contains("was stopped again"), "{err}");
    assert_eq!(ls_state(&w, &env, &never.id), "stopped");
    assert_eq!(w.containers().len(), 2, "kept, not destroyed");
    let out = sbx(&w, &["connect", &never.id], &env);
    assert_exit(&out, 1, "connect to a stopped remote sandbox");
    assert!(stderr(&out).contains("not running"), "{}", stderr(&out));
    // Removed behind sbx's back: its record here still names it.
    docker_ok(&["rm", "-f", &never.id]);
    let out = sbx(&w, &["--json", "connect", &never.id], &env);
    assert_exit(&out, 1, "connect to a remote sandbox removed with docker rm");
    assert!(stderr(&out).contains("\"not_found\""), "{}", stderr(&out));

    let argvs = shim.argvs();
    assert_eq!(local_paths(&argvs), Vec::<String>::new(), "paths of this machine sent to a remote engine: {argvs:?}");
}

/// The check before `docker start` is real: a stopped sandbox whose
/// /run/sandbox was swapped for a symlink (done here in the container's
/// layer on the engine's disk; its root is read-only to the sandbox and to
/// `docker cp`) is refused, never started, and kept.
#[test]
fn a_remote_start_refuses_a_run_swapped_while_stopped() {
    let remote = Remote::start();
    let w = World::new();
    let env = remote.env();
    let label = w.case_label();
    let out = sbx(&w, &["create", "--image", &w.image, "--label", &label], &env);
    assert_success(&out, "create over ssh");
    let sb = w.adopt(stdout(&out).trim());
    assert_success(&sbx(&w, &["stop", "--grace", "0", &sb.id], &env), "stop over ssh");
    let upper = PathBuf::from(sb.inspect("{{.GraphDriver.Data.UpperDir}}").trim());
    let sock = upper.join("run/sandbox");
    assert!(sock.is_dir(), "no /run/sandbox in the container's layer at {}", upper.display());
    std::fs::remove_dir_all(&sock).unwrap();
    std::os::unix::fs::symlink("/tmp", &sock).unwrap();
    let out = sbx(&w, &["start", &sb.id], &env);
    assert_exit(&out, 1, "start of a sandbox whose /run/sandbox is a symlink");
    let err = stderr(&out);
    assert!(err.contains("/run/sandbox in the image is a Symlink to /tmp"), "{err}");
    assert_eq!(sb.inspect("{{.State.Status}}").trim(), "exited", "it was started");
    assert_eq!(w.containers().len(), 1);
}

/// A docker stand-in for this machine's own engine when it is not the
/// remote one: it holds none of the remote engine's containers (on
/// loopback they are the same engine, which would hide the bug).
struct Elsewhere(PathBuf);

impl Elsewhere {
    fn new(w: &World) -> Self {
        let dir = PathBuf::from("/tmp").join(format!("sbxt-{}-elsewhere", w.case));
        std::fs::create_dir_all(&dir).unwrap();
        let script = "#!/bin/sh\n\
            case \"$1\" in\n\
            ps|network|volume) exit 0 ;;\n\
            container|inspect|rm) for a in \"$@\"; do case \"$a\" in sbx-*|????????????????????????????????????????????????????????????????) echo \"Error: No such container: $a\" >&2 ;; esac; done; exit 1 ;;\n\
            esac\n\
            exec docker \"$@\"\n";
        let path = dir.join("docker");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        Elsewhere(dir)
    }

    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("SBX_DOCKER".into(), self.0.join("docker").display().to_string()),
        ]
    }
}

impl Drop for Elsewhere {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// gc and destroy against this machine's engine leave the files of a
/// sandbox on a remote engine alone (its TTL, so its TTL watchdog); gc
/// against the remote engine reaps them once the sandbox was removed there
/// behind sbx's back, and the watchdog ends. Nothing of it is ever under
/// the socket root here.
#[test]
fn gc_acts_only_on_the_files_of_its_own_engine_s_sandboxes() {
    let remote = Remote::start();
    let w = World::new();
    let env = remote.env();
    let label = w.case_label();
    let out = sbx(&w, &["create", "--image", &w.image, "--label", &label, "--ttl", "1h"], &env);
    assert_success(&out, "create --ttl over ssh");
    let sb = w.adopt(stdout(&out).trim());
    let expires = w.state_dir.join("expires").join(&sb.id);
    let pidfile = w.state_dir.join("watchdog").join(&sb.id);
    until(Duration::from_secs(10), || pidfile.exists()).expect("the watchdog never recorded itself");
    let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    assert_success(&sbx(&w, &["ttl", &sb.id, "2h"], &env), "ttl over ssh");
    let ttl = std::fs::read_to_string(&expires).unwrap();

    let here = Elsewhere::new(&w);
    let out = sbx(&w, &["--json", "gc"], &here.env());
    assert_success(&out, "gc on this machine's engine");
    assert_eq!(w.socket_dirs(), Vec::<String>::new(), "a remote create made a socket directory here");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(alive(pid), "its watchdog ended");
    assert_eq!(std::fs::read_to_string(&expires).ok(), Some(ttl), "its TTL was forgotten");
    let out = sbx(&w, &["destroy", &sb.id], &here.env());
    assert_success(&out, "destroy on this machine's engine (already gone there)");
    assert!(expires.exists(), "a local destroy forgot a remote sandbox");

    docker_ok(&["rm", "-f", &sb.id]);
    let out = sbx(&w, &["--json", "gc"], &env);
    assert_success(&out, "gc over ssh");
    assert!(!expires.exists(), "the remote gc left the TTL: {}", stdout(&out));
    until(Duration::from_secs(5), || !alive(pid)).expect("the watchdog outlived the TTL");
    assert_eq!(w.socket_dirs(), Vec::<String>::new());
}

fn fillers() -> Vec<String> {
    let out = docker_ok(&["ps", "-a", "--filter", "label=sbx.helper.filler", "--format", "{{.Names}}"]);
    out.lines().filter(|n| n.starts_with("sbx-fill-")).map(str::to_string).collect()
}

/// The fillers sbx itself made: not a stand-in another test of this module
/// plants at the same time (it carries its world's case label).
fn sbx_fillers() -> Vec<String> {
    let format = format!("{{{{.Names}}}}\t{{{{.Label \"{TEST_LABEL}.case\"}}}}");
    let out = docker_ok(&["ps", "-a", "--filter", "label=sbx.helper.filler", "--format", &format]);
    // `docker_ok` trims the output: the last line's empty case loses its tab.
    out.lines()
        .map(|l| l.split_once('\t').unwrap_or((l, "")))
        .filter(|(n, case)| n.starts_with("sbx-fill-") && case.is_empty())
        .map(|(n, _)| n.to_string())
        .collect()
}

/// A create SIGKILLed while it fills the helper volume leaves its filler
/// container; gc against that engine removes it (its create is gone), and
/// only it.
#[test]
fn gc_removes_the_filler_of_a_create_killed_mid_fill() {
    let remote = Remote::start();
    let w = World::new();
    let shim = Shim::new(&w, "cp", false);
    let env = with(remote.env(), &[("SBX_DOCKER", shim.path().to_str().unwrap())]);
    let before = sbx_fillers();
    let label = w.case_label();
    let mut cmd = Command::new(SBX);
    cmd.args(w.dir_args()).args(["create", "--image", &w.image, "--label", &label]);
    cmd.env_remove("DOCKER_HOST").envs(env.iter().map(|(k, v)| (k, v)));
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    until(Duration::from_secs(60), || shim.reached()).expect("the create never reached the fill");
    child.kill().unwrap();
    child.wait().unwrap();
    shim.release();
    let left: Vec<String> = sbx_fillers().into_iter().filter(|f| !before.contains(f)).collect();
    assert_eq!(left.len(), 1, "the killed create left no filler (or several): {left:?}");

    let out = sbx(&w, &["--json", "gc"], &remote.env());
    assert_success(&out, "gc over ssh");
    let v = json(&out);
    assert_eq!(v["fillers"], serde_json::json!(left), "{v}");
    assert!(!fillers().contains(&left[0]), "gc left the filler {}", left[0]);
}

/// A filler another machine sharing the key made just now, whose label
/// says it was made in 1970 (that machine's clock far behind): gc over ssh
/// keeps it, since its age is docker's `Created` against the engine's
/// clock. The other way (a label in the future on a filler docker made
/// over an hour ago) cannot be staged, as docker's `Created` cannot be
/// aged; the unit tests hold that rule.
#[test]
fn gc_keeps_a_fresh_filler_whose_label_says_it_is_old() {
    let remote = Remote::start();
    let w = World::new();
    assert_success(&sbx(&w, &["gc"], &remote.env()), "a first gc over ssh (the data dir's key)");
    let key = std::fs::read(w.state_dir.join("key")).unwrap();
    let name = format!("sbx-fill-{}", w.case.replace(|c: char| !c.is_ascii_alphanumeric(), ""));
    let value = "1 another-machine 2 3";
    let owner = sbx::sandbox::shared::fillers::token(&key, &name, value);
    let (filler, owner, label) = (format!("sbx.helper.filler={value}"), format!("sbx.owner={owner}"), w.case_label());
    docker_ok(&[
        "create",
        "--name",
        &name,
        "--label",
        &filler,
        "--label",
        &owner,
        "--label",
        &label,
        "--network",
        "none",
        &w.image,
    ]);

    let out = sbx(&w, &["--json", "gc"], &remote.env());
    assert_success(&out, "gc over ssh");
    let v = json(&out);
    assert!(!v["fillers"].to_string().contains(&name), "gc reaped a filler docker made just now: {v}");
    assert!(fillers().contains(&name), "the filler is gone");
    docker_ok(&["rm", "-f", &name]);
    w.assert_nothing_left();
}

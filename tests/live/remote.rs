//! Remote engines: the one engine here reached
//! through sshd on loopback (`support::Remote`), so sbx takes the remote
//! path for real. Loopback hides local-path bugs (every path exists on the
//! "remote" too), so the logging docker shim checks that no argv sbx runs
//! names a path of this machine. Each docker call over ssh costs ~0.3 s:
//! the tests are few and make few calls.
//!
//! layout: ~450 lines, over the tree's ~400, on purpose: one area whose
//! tests share the ssh rig's helpers (`sbx`, `with`, `local_paths`); slice 1
//! (where the engine is, refusals) first, then slice 2 (create and the life
//! of a sandbox on the remote engine).

use std::process::{Command, Output, Stdio};

use crate::support::*;

/// sbx with `env` only (none of the caller's engine variables leak in).
pub(crate) fn sbx(w: &World, args: &[&str], env: &[(String, String)]) -> Output {
    let mut cmd = Command::new(SBX);
    cmd.args(w.dir_args()).args(args).stdin(Stdio::null());
    for k in ["DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "SBX_CONTEXT", "SBX_SOCKET_DIR", "SBX_STRICT_EGRESS"] {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    cmd.output().expect("spawn sbx")
}

pub(crate) fn with(mut env: Vec<(String, String)>, more: &[(&str, &str)]) -> Vec<(String, String)> {
    env.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    env
}

/// Every path of this machine an argv names: an argument, or a part of one
/// split at `=`, `,` and `:` (`--mount type=bind,src=/x`, `-v /a:/b`),
/// under the test's temp dirs (the world's data dir and socket root, the
/// shim's, its files: all `/tmp/sbxt-*`), sbx's default data dir or a
/// home. Paths inside the sandbox (/run/sbx/helper, /tmp/x) are fine, and
/// so is `--security-opt seccomp=PATH`: the docker CLI reads that file here
/// and sends its content.
pub(crate) fn local_paths(argvs: &[Vec<String>]) -> Vec<String> {
    let home = std::env::var("HOME").ok().filter(|h| h.len() > 1).unwrap_or_else(|| "/root".into());
    let here = ["/tmp/sbxt-", "/var/lib/sbx", "/home/", &home];
    argvs
        .iter()
        .flat_map(|a| {
            let seccomp = |i: usize| i > 0 && a[i - 1] == "--security-opt" && a[i].starts_with("seccomp=");
            a.iter().enumerate().filter(move |(i, _)| !seccomp(*i)).map(|(_, v)| v)
        })
        .flat_map(|a| a.split(['=', ',', ':']).map(str::to_string).collect::<Vec<_>>())
        .filter(|p| here.iter().any(|h| p.starts_with(h)))
        .collect()
}

pub(crate) fn doctor_check<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["checks"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no {name} in {v}"))
}

#[test]
fn doctor_ls_inspect_destroy_gc_drive_the_remote_engine_and_name_no_local_path() {
    let remote = Remote::start();
    let w = World::new();
    let shim = Shim::logging(&w);
    let env = with(remote.env(), &[("SBX_DOCKER", shim.path().to_str().unwrap())]);

    let out = sbx(&w, &["doctor"], &env);
    let text = stdout(&out);
    assert!(out.status.success(), "doctor: {text}\n{}", stderr(&out));
    assert!(text.contains(&format!("ok    engine-location    remote: {}\n", remote.url())), "{text}");
    assert!(text.contains("remote host-paths") && text.contains("create --ro/--rw/--state-dir are refused"), "{text}");
    assert!(text.contains("--clone needs --persist"), "{text}");
    assert!(text.contains("ok    remote helper") && text.contains("sbx-helper-KEY"), "{text}");
    assert!(
        text.contains("ok    probe") && text.contains("the engine is remote"),
        "doctor runs its probe remotely: {text}"
    );
    assert!(text.contains("ok    docker             engine "), "the engine answered through ssh: {text}");

    let out = sbx(&w, &["--json", "doctor"], &env);
    let v = json(&out);
    assert_eq!(doctor_check(&v, "engine-location")["detail"], format!("remote: {}", remote.url()));

    let out = sbx(&w, &["ls"], &env);
    assert_success(&out, "ls");
    let out = sbx(&w, &["inspect", "sbx-0123456789ab"], &env);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("no sandbox sbx-0123456789ab on this engine"), "{}", stderr(&out));
    let out = sbx(&w, &["destroy", "sbx-0123456789ab"], &env);
    assert_success(&out, "destroy of a sandbox already gone");
    // A socket directory with no container: an orphan to a local gc, but
    // a remote engine's gc cannot tell whose it is and leaves it.
    let orphan = w.socket_root.join("sbx-0123456789ab");
    std::fs::create_dir(&orphan).unwrap();
    let out = sbx(&w, &["gc"], &env);
    assert_success(&out, "gc");
    assert!(orphan.exists(), "gc against a remote engine removed a socket directory of this machine");

    let argvs = shim.argvs();
    for verb in ["version", "info", "container", "ps", "network"] {
        assert!(argvs.iter().any(|a| a.first().map(String::as_str) == Some(verb)), "no docker {verb}: {argvs:?}");
    }
    assert_eq!(local_paths(&argvs), Vec::<String>::new(), "paths of this machine sent to a remote engine: {argvs:?}");
    let out = sbx(&w, &["gc"], &[("PATH".to_string(), std::env::var("PATH").unwrap_or_default())]);
    assert_success(&out, "gc on the local engine");
    assert!(!orphan.exists(), "the local gc keeps an orphaned socket directory: {}", stdout(&out));
}

#[test]
fn create_refuses_paths_of_this_machine_before_any_docker_call() {
    let remote = Remote::start();
    let w = World::new();
    let shim = Shim::logging(&w);
    let env = with(remote.env(), &[("SBX_DOCKER", shim.path().to_str().unwrap())]);
    let dir = w.socket_root.to_str().unwrap();
    let image = w.image.clone();
    let label = w.case_label();
    let create = |more: &[&str]| {
        let mut args = vec!["create", "--image", &image, "--label", &label];
        args.extend_from_slice(more);
        sbx(&w, &args, &env)
    };
    for (more, flag, why) in [
        (&["--ro", dir][..], "--ro", "names a path on this machine"),
        (&["--rw", &format!("{dir}:/data")], "--rw", "names a path on this machine"),
        (&["--state-dir", dir], "--state-dir", "names a path on this machine"),
        (&["--session", "s", "--clone", "https://example.invalid/r.git"], "--clone", "only a --persist session"),
    ] {
        let out = create(more);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{more:?}: {err}");
        assert!(err.contains(&format!("invalid {flag}")) && err.contains(why), "{more:?}: {err}");
        assert!(err.contains(&remote.url()), "the message names the engine: {err}");
    }
    let out = sbx(&w, &["--json", "create", "--image", &image, "--ro", dir], &env);
    assert_eq!((out.status.code(), json_err(&out)), (Some(2), "invalid_input".to_string()));

    // The direct channel dials a socket file on the engine's machine: exit 2, nothing made.
    let out = create(&["--channel", "direct"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "--channel direct: {err}");
    assert!(err.contains("invalid --channel") && err.contains(&remote.url()), "--channel direct: {err}");

    assert_eq!(shim.argvs(), Vec::<Vec<String>>::new(), "a refused create made a docker call");
    assert_eq!(w.containers(), Vec::<String>::new(), "a refused create made a container");
    assert_eq!(w.socket_dirs(), Vec::<String>::new(), "a refused create made a socket dir");
}

fn json_err(out: &Output) -> String {
    let v: serde_json::Value = serde_json::from_str(stderr(out).lines().last().unwrap_or("{}")).unwrap();
    v["error"]["kind"].as_str().unwrap_or_default().to_string()
}

/// A docker context this test made in its rig's own DOCKER_CONFIG; removed in Drop.
struct Context<'a> {
    remote: &'a Remote,
    name: String,
    config: String,
}

impl<'a> Context<'a> {
    fn create(remote: &'a Remote) -> Self {
        let name = unique("sbxt-ctx-");
        let config = remote.docker_config().to_str().unwrap().to_string();
        let host = format!("host={}", remote.url());
        let out = remote.docker(&["context", "create", &name, "--docker", &host], &[("DOCKER_CONFIG", &config)]);
        assert!(out.status.success(), "docker context create: {}", String::from_utf8_lossy(&out.stderr));
        Context { remote, name, config }
    }
}

impl Drop for Context<'_> {
    fn drop(&mut self) {
        let _ = self.remote.docker(&["context", "rm", "-f", &self.name], &[("DOCKER_CONFIG", &self.config)]);
    }
}

#[test]
fn contexts_are_followed_to_the_remote_engine_and_refused_with_docker_host() {
    let remote = Remote::start();
    let w = World::new();
    let ctx = Context::create(&remote);
    let shim = Shim::logging(&w);
    let base = vec![
        ("PATH".to_string(), remote.path()),
        ("DOCKER_CONFIG".to_string(), ctx.config.clone()),
        ("SBX_DOCKER".to_string(), shim.path().to_str().unwrap().to_string()),
    ];

    // Two answers to one question: refused before any docker call.
    let host = with(base.clone(), &[("DOCKER_HOST", &remote.url())]);
    let out = sbx(&w, &["--context", &ctx.name, "ls"], &host);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("DOCKER_HOST is set too"), "{}", stderr(&out));
    let out = sbx(&w, &["ls"], &with(host.clone(), &[("SBX_CONTEXT", &ctx.name)]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(shim.argvs(), Vec::<Vec<String>>::new(), "a refused command made a docker call");

    // --context: every call goes to that context, and doctor says it is remote.
    let out = sbx(&w, &["--json", "--context", &ctx.name, "doctor"], &base);
    let v = json(&out);
    let want = format!("remote: {} (docker context {})", remote.url(), ctx.name);
    assert_eq!(doctor_check(&v, "engine-location")["detail"], want);
    assert_eq!(doctor_check(&v, "docker")["status"], "ok", "{v}");
    let argvs = shim.argvs();
    assert!(!argvs.is_empty());
    for a in &argvs {
        assert_eq!(a[..2], ["--context".to_string(), ctx.name.clone()], "{a:?}");
    }
    assert_eq!(local_paths(&argvs), Vec::<String>::new(), "{argvs:?}");

    // DOCKER_CONTEXT, and the CLI's current context, are followed too.
    let ro = ["create", "--image", &w.image, "--ro", "/etc"];
    let out = sbx(&w, &ro, &with(base.clone(), &[("DOCKER_CONTEXT", &ctx.name)]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("the engine is remote ({})", remote.url())), "{}", stderr(&out));
    let used = remote.docker(&["context", "use", &ctx.name], &[("DOCKER_CONFIG", &ctx.config)]);
    assert!(used.status.success(), "{}", String::from_utf8_lossy(&used.stderr));
    let out = sbx(&w, &ro, &base);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("the engine is remote"), "{}", stderr(&out));
    // `--context default` is this machine's engine again: the refusal is gone (the path is checked instead).
    let out = sbx(&w, &["--context", "default", "create", "--image", &w.image, "--ro", "/nonexistent-sbxt"], &base);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!stderr(&out).contains("remote"), "{}", stderr(&out));
    assert_eq!(w.containers(), Vec::<String>::new());
}

/// The local default engine is resolved without a docker call:
/// a create stays at the benchmark's two calls (`docker run` and one
/// `docker container inspect`) once the image's user is cached.
#[test]
fn the_default_local_engine_costs_create_no_extra_docker_call() {
    let w = World::new();
    let first = w.create(&[]);
    let shim = Shim::logging(&w);
    let label = w.case_label();
    let out = sbx(
        &w,
        &["create", "--image", &w.image, "--label", &label],
        &[
            ("SBX_DOCKER".to_string(), shim.path().to_str().unwrap().to_string()),
            ("PATH".to_string(), std::env::var("PATH").unwrap_or_default()),
        ],
    );
    assert_success(&out, "create on the local engine");
    let second = w.adopt(stdout(&out).trim());
    let verbs: Vec<String> = shim.argvs().iter().map(|a| a[0].clone()).collect();
    // `docker run` alone: the image's user is cached from the first create,
    // and under runc the mount check finds the main pid in this machine's /proc.
    assert_eq!(verbs, ["run"], "{:?}", shim.argvs());
    drop((first, second));
}

/// A sandbox this machine made on its local engine, reached again through
/// ssh: loopback makes it the same engine, but sbx must act as if it were
/// another machine's and refuse what reads this machine's /proc or socket
/// files (exit 1, honest), while `inspect` still works (and `audit`, through
/// its probe on the engine: `remote_audit`).
#[test]
fn what_needs_this_machine_to_be_the_engine_s_fails_honestly_when_remote() {
    let remote = Remote::start();
    let w = World::new();
    let sb = w.create(&[]);
    let env = remote.env();
    let out = sbx(&w, &["inspect", &sb.id], &env);
    assert_success(&out, "inspect over ssh");
    let out = sbx(&w, &["connect", &sb.id], &env);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "connect: {err}");
    assert!(err.contains("remote engines: not yet supported") && err.contains("direct channel"), "connect: {err}");
    assert!(err.contains(&remote.url()), "{err}");
    // stop is a plain docker call; start needs the socket directory and
    // helper a local engine's sandbox has on the engine's machine.
    assert_success(&sbx(&w, &["stop", "--grace", "0", &sb.id], &env), "stop over ssh");
    let out = sbx(&w, &["start", &sb.id], &env);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "start: {err}");
    assert!(
        err.contains("remote engines: not yet supported") && err.contains("created against a local engine"),
        "{err}"
    );
    assert_eq!(w.containers().len(), 1, "a refused command removed the sandbox");
}

/// `sbx ARGS` with `env`, `input` on its stdin.
fn sbx_stdin(w: &World, args: &[&str], env: &[(String, String)], input: &[u8]) -> Output {
    use std::io::Write;
    let mut cmd = Command::new(SBX);
    cmd.args(w.dir_args()).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for k in ["DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "SBX_CONTEXT", "SBX_SOCKET_DIR"] {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let mut child = cmd.spawn().expect("spawn sbx");
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

/// The whole life of a sandbox on a remote engine: made
/// with the relayed channel and the helper from a volume there, a round
/// trip of several MiB and an interactive exchange through `connect`, a
/// route reached and revoked, exec, cp both ways, a port-forward curl
/// reads through, destroy; and no argv naming a path of this machine.
#[test]
fn a_sandbox_lives_its_whole_life_on_a_remote_engine() {
    let remote = Remote::start();
    let w = World::new();
    let shim = Shim::logging(&w);
    let env = with(remote.env(), &[("SBX_DOCKER", shim.path().to_str().unwrap())]);
    let net = Network::new(true);
    let svc = Service::start(&net, &w.image);
    let route = format!("inference:{}:8080", svc.name);
    let label = w.case_label();

    let started = std::time::Instant::now();
    let out = sbx(&w, &["--json", "create", "--image", &w.image, "--label", &label, "--route", &route], &env);
    assert_success(&out, "create over ssh");
    eprintln!("remote create took {:?}", started.elapsed());
    let v = json(&out);
    let sb = w.adopt(v["id"].as_str().unwrap());
    assert_eq!((v["channel"].as_str(), v["socket"].as_str()), (Some("exec"), Some("/run/sandbox/sandbox.sock")), "{v}");
    let mounts = sb.inspect("{{range .Mounts}}{{.Type}} {{.Name}} {{.Destination}} {{.RW}};{{end}}");
    assert!(mounts.contains(" /run/sbx false;") && mounts.contains("volume sbx-helper-"), "{mounts}");
    // Nothing sbx makes for a remote sandbox belongs on this machine's file
    // system: no directory under the socket root (an empty one was made,
    // and removed at destroy).
    assert_eq!(w.socket_dirs(), Vec::<String>::new(), "a remote create made a socket directory here");

    // A second create reuses the helper volume the first one verified: one
    // `docker volume inspect`, no filler.
    let before = shim.argvs().len();
    let started = std::time::Instant::now();
    let out = sbx(&w, &["create", "--image", &w.image, "--label", &label], &env);
    assert_success(&out, "a second create over ssh");
    eprintln!("second remote create took {:?}", started.elapsed());
    let second = w.adopt(stdout(&out).trim());
    let verbs: Vec<String> = shim.argvs().split_off(before).iter().map(|a| a[..2].join(" ")).collect();
    assert_eq!(verbs.iter().filter(|v| v.starts_with("volume ")).count(), 1, "{verbs:?}");
    assert_eq!(verbs.iter().filter(|v| *v == "create --network").count(), 0, "a filler again: {verbs:?}");
    assert_success(&sbx(&w, &["logs", &second.id], &env), "logs over ssh");
    let ls = json(&sbx(&w, &["ls", "--json"], &env));
    assert_eq!(ls.as_array().map(Vec::len), Some(2), "{ls}");
    assert_success(&sbx(&w, &["destroy", &second.id], &env), "destroy over ssh");
    drop(second);

    let data = blob(4 << 20);
    let out = sbx_stdin(&w, &["connect", &sb.id], &env, &data);
    assert_success(&out, "connect over ssh");
    assert!(out.stdout == data, "connect changed the bytes ({} of {})", out.stdout.len(), data.len());
    let mut connect = Command::new(SBX);
    connect.args(w.dir_args()).args(["connect", &sb.id]);
    for k in ["DOCKER_CONTEXT", "DOCKER_CONFIG", "SBX_CONTEXT", "SBX_SOCKET_DIR"] {
        connect.env_remove(k);
    }
    connect.envs(env.iter().map(|(k, v)| (k, v)));
    line_by_line(connect, &["alpha", "beta"], |l| l.to_string());

    let dial = |sbx_args: &[&str]| sbx(&w, sbx_args, &env);
    let reach = ["exec", &sb.id, "--", "/bin/fixture", "dial", &svc.addr()];
    assert_success(&dial(&reach), "the route's service through sbx exec");
    let local = w.state_dir.with_extension("cp");
    std::fs::write(&local, b"to the sandbox\n").unwrap();
    let dest = format!("{}:/tmp/x", sb.id);
    assert_success(&dial(&["cp", local.to_str().unwrap(), &dest]), "cp in");
    let back = w.state_dir.with_extension("back");
    assert_success(&dial(&["cp", &dest, back.to_str().unwrap()]), "cp out");
    assert_eq!(std::fs::read(&back).unwrap(), b"to the sandbox\n");
    let _ = std::fs::remove_file(&local);
    let _ = std::fs::remove_file(&back);

    assert_success(&dial(&["exec", "-d", &sb.id, "--", "/bin/fixture", "http", "7000"]), "an http server");
    assert_success(&dial(&["wait-port", &sb.id, "7000", "--timeout", "20s"]), "wait-port");
    let mut pf = Command::new(SBX);
    pf.args(w.dir_args()).args(["port-forward", &sb.id, "0:7000"]).stdout(Stdio::piped()).stderr(Stdio::null());
    pf.envs(env.iter().map(|(k, v)| (k, v)));
    let mut child = pf.spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut line).unwrap();
    let addr = line.split_whitespace().next().unwrap_or_default().to_string();
    let curl = Command::new("curl").args(["-sS", "--max-time", "20", &format!("http://{addr}/through-ssh")]).output();
    let _ = child.kill();
    let _ = child.wait();
    let curl = curl.unwrap();
    assert_eq!(stdout(&curl), "/through-ssh", "curl through the forward: {}", stderr(&curl));

    assert_success(&dial(&["revoke", &sb.id, "inference"]), "revoke over ssh");
    assert_exit(&dial(&reach), 1, "the revoked route's service");
    assert_success(&dial(&["destroy", &sb.id]), "destroy over ssh");
    assert_eq!(w.containers(), Vec::<String>::new());
    assert_eq!(w.socket_dirs(), Vec::<String>::new(), "the sandbox's marker here outlived it");

    let argvs = shim.argvs();
    assert_eq!(local_paths(&argvs), Vec::<String>::new(), "paths of this machine sent to a remote engine: {argvs:?}");
    assert!(argvs.iter().any(|a| a.first().map(String::as_str) == Some("create")), "{argvs:?}");
}

/// TTL and gc against a remote engine: the watchdog on this machine
/// destroys an expired sandbox there, and `gc` reaps one whose watchdog died.
#[test]
fn ttl_and_gc_reach_the_remote_engine() {
    let remote = Remote::start();
    let w = World::new();
    let env = remote.env();
    let label = w.case_label();
    let create = |ttl: &str| {
        let out = sbx(&w, &["create", "--image", &w.image, "--label", &label, "--ttl", ttl], &env);
        assert_success(&out, "create --ttl over ssh");
        stdout(&out).trim().to_string()
    };
    let reaped = create("2s");
    assert_eq!(w.socket_dirs(), Vec::<String>::new(), "a remote create made a socket directory here");
    kill_watchdog_until_expired(&w, &reaped);
    // Long enough that a loaded engine's create and gc over ssh end before
    // it expires (at 12 s, gc beside other remote suites took it too).
    let watched = create("30s");
    let out = sbx(&w, &["gc"], &env);
    assert_success(&out, "gc over ssh");
    assert_eq!(w.containers().len(), 1, "gc left the expired sandbox {reaped} (or took the live one)");
    let gone = until(std::time::Duration::from_secs(60), || w.containers().is_empty());
    assert!(gone.is_some(), "the watchdog never destroyed {watched} on the remote engine");
    assert_eq!(w.socket_dirs(), Vec::<String>::new());
}

/// A mount an image redirects, on a remote engine, where this machine's /proc says
/// nothing: an image whose symlinks move /run/sbx or /run is refused before
/// the sandbox starts (exit 1), and one whose VOLUME could land over /run
/// through a symlink (sbx's tmpfs, which `docker cp` of the created sandbox
/// does not show, where the sandbox could plant its own /run/sbx/helper)
/// is refused before anything is made (exit 2); nothing is left.
#[test]
fn images_that_redirect_or_cover_the_helper_are_refused_on_a_remote_engine() {
    use std::path::Path;
    let remote = Remote::start();
    let w = World::new();
    let env = remote.env();
    let label = w.case_label();
    type Shape = dyn Fn(&Path);
    let cases: [(&str, &[&str], &Shape); 3] = [
        ("/run/sbx a symlink", &[], &|r: &Path| {
            std::fs::create_dir_all(r.join("run")).unwrap();
            std::os::unix::fs::symlink("/tmp/sbx", r.join("run/sbx")).unwrap();
        }),
        ("/run a symlink", &[], &|r: &Path| std::os::unix::fs::symlink("/tmp", r.join("run")).unwrap()),
        ("a VOLUME over /run", &["VOLUME [\"/x/y/z\"]"], &|r: &Path| {
            std::fs::create_dir_all(r.join("run/sbx")).unwrap();
            std::fs::copy(fixture_binary(), r.join("run/sbx/helper")).unwrap();
            std::fs::create_dir_all(r.join("x/y")).unwrap();
            std::os::unix::fs::symlink("/run", r.join("x/y/z")).unwrap();
        }),
    ];
    for (what, changes, shape) in cases {
        let tree = ImageTree::new(&[]).for_case(&w).changes(changes);
        shape(tree.root());
        let img = tree.import();
        let out = sbx(&w, &["create", "--image", &img.0, "--label", &label, "--socket-wait", "20s"], &env);
        if out.status.success() {
            let _ = w.adopt(stdout(&out).trim());
        }
        let err = stderr(&out);
        if changes.is_empty() {
            assert_exit(&out, 1, &format!("create over ssh from an image with {what}"));
            assert!(err.contains(&format!("image {} redirects /run/sbx", img.0)), "{what}: {err}");
        } else {
            assert_exit(&out, 2, &format!("create over ssh from an image with {what}"));
            assert!(err.contains("VOLUME \"/x/y/z\": on a remote engine sbx takes only a top-level VOLUME"), "{err}");
        }
        assert_eq!(w.containers(), Vec::<String>::new(), "{what}: a refused create left its container");
        assert_eq!(w.socket_dirs(), Vec::<String>::new(), "{what}: a refused create left its marker");
    }
}

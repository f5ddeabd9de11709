//! Remote engines: the one engine here reached through sshd on
//! loopback (`DOCKER_HOST=ssh://root@127.0.0.1:PORT`, the live tests' rig),
//! so every docker call, sbx's and the baseline's, pays the ssh round trip.
//!
//! - create-to-ready: `sbx create` (relayed channel, helper from the
//!   engine's volume, /run checked with `docker cp` before start) against
//!   `docker run -d` of the argv sbx's own builder makes for that sandbox
//!   (relayed channel, the same helper volume) plus polling `docker exec ID
//!   /run/sbx/helper probe-socket /run/sandbox/sandbox.sock 500` until it
//!   answers 0, as sbx polls. The baseline skips what sbx adds for a remote
//!   engine: the create/cp/start split of the layout check and the `docker
//!   volume inspect` of the helper volume.
//! - connect: one line ("ping\n") echoed back and stdin closed, through
//!   `sbx connect ID` against `docker exec -i ID /run/sbx/helper connect
//!   /run/sandbox/sandbox.sock 10000` (10 s: connect's default timeout), in
//!   the same sandbox, each a new process.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use super::common::Remote;
use super::{run_within, timed, Bench, Case, DOCKER_LIMIT, LABEL, SBX_LIMIT};

/// Variables that would point sbx or docker elsewhere than the rig's engine.
const AWAY: [&str; 4] = ["DOCKER_CONTEXT", "DOCKER_CONFIG", "SBX_CONTEXT", "SBX_SOCKET_DIR"];

fn sbx(b: &Bench, r: &Remote, args: &[&str]) -> String {
    let mut c = b.sbx_cmd(args);
    for k in AWAY {
        c.env_remove(k);
    }
    c.envs(r.env());
    let out = run_within(c, SBX_LIMIT, &format!("sbx {} (over ssh)", args[0]));
    assert!(out.status.success(), "sbx {args:?} over ssh: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn docker_cmd(r: &Remote, args: &[&str]) -> Command {
    let mut c = Command::new("docker");
    c.args(args).stdin(Stdio::null());
    for k in AWAY {
        c.env_remove(k);
    }
    c.envs(r.env());
    c
}

fn docker(r: &Remote, args: &[&str]) -> Output {
    run_within(docker_cmd(r, args), DOCKER_LIMIT, &format!("docker {} (over ssh)", args[0]))
}

fn docker_ok(r: &Remote, args: &[&str]) -> String {
    let out = docker(r, args);
    assert!(out.status.success(), "docker {args:?} over ssh: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The `docker run -d` argv sbx builds for a remote sandbox named `name`.
fn bare_argv(b: &Bench, name: &str, helper_volume: &str) -> Vec<String> {
    let req = sbx::spec::CreateRequest { image: b.image.clone(), labels: vec![LABEL.into()], ..Default::default() };
    let spec = sbx::spec::SandboxSpec::from_request(&req, None).unwrap();
    // Only a label on the relayed channel: nothing of this machine is mounted.
    let dir = b.root.join(name);
    let sock = dir.join("sandbox.sock");
    let plan = sbx::docker::argv::RunPlan {
        channel: sbx::host::channel::Kind::Exec,
        id: name,
        spec: &spec,
        uid: 65534,
        gid: 65534,
        tier: 2,
        socket_dir: &dir,
        socket_path: &sock,
        created_at: "2026-01-01T00:00:00Z",
        owner: "bench",
        expires_at: None,
        networks: &[],
        private: &[],
        dns: None,
        helper: None,
        helper_volume: Some(helper_volume),
        volume: None,
        persist_size: None,
        seccomp: &b.seccomp,
        hosts: &[],
        family: sbx::model::runtime::Family::Runc,
        image_volumes: &[],
        trust: None,
    };
    sbx::docker::argv::container(&plan, true).into_iter().map(|s| s.into_string().unwrap()).collect()
}

/// Bare: `docker run -d` and the helper's probe until the socket answers.
fn bare_create(b: &Bench, r: &Remote, helper_volume: &str) -> String {
    let name = format!("sbxb-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
    let argv = bare_argv(b, &name, helper_volume);
    let cid = docker_ok(r, &argv.iter().map(String::as_str).collect::<Vec<_>>());
    for _ in 0..60 {
        let out =
            docker(r, &["exec", "--", &cid, "/run/sbx/helper", "probe-socket", "/run/sandbox/sandbox.sock", "500"]);
        if out.status.success() {
            return cid;
        }
    }
    panic!("bare sandbox {name}: the socket never answered the helper's probe");
}

/// One line through `cmd` (stdin piped): wall time from spawn to exit; the
/// line must come back as sent.
fn round_trip(mut cmd: Command, what: &str) -> f64 {
    let (out, t) = timed(|| {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: could not start: {e}"));
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"ping\n").unwrap();
        drop(stdin);
        let (tx, rx) = std::sync::mpsc::channel();
        let pid = child.id();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(out) => out.unwrap(),
            Err(_) => {
                let _ =
                    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
                panic!("{what} did not finish within 60 s; killed it")
            }
        }
    });
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout, b"ping\n", "{what}: the line did not come back");
    t
}

pub fn run(b: &Bench, reps: &dyn Fn(usize) -> usize, cases: &mut Vec<Case>) {
    let r = Remote::start();
    // Warm up both paths; sbx's first create makes and fills the helper volume.
    let id = sbx(b, &r, &["create", "--image", &b.image, "--label", LABEL]);
    sbx(b, &r, &["destroy", &id]);
    let volume = format!("sbx-helper-{}", sbx::host::helper::key());
    let cid = bare_create(b, &r, &volume);
    docker_ok(&r, &["rm", "-f", "-v", &cid]);

    let mut create = Case { name: "create-to-ready, remote (ssh)".into(), target: None, ..Default::default() };
    let mut connect = Case { name: "connect round trip, remote (ssh)".into(), target: None, ..Default::default() };
    for i in 0..reps(6) {
        for sbx_first in [i % 2 == 0, i % 2 != 0] {
            if sbx_first {
                let (id, t) = timed(|| sbx(b, &r, &["create", "--image", &b.image, "--label", LABEL]));
                create.sbx_ms.push(t);
                sbx(b, &r, &["destroy", &id]);
            } else {
                let (cid, t) = timed(|| bare_create(b, &r, &volume));
                create.bare_ms.push(t);
                docker_ok(&r, &["rm", "-f", "-v", &cid]);
            }
        }
        eprint!(".");
    }
    // Connect: both sides in one sandbox made by sbx.
    let id = sbx(b, &r, &["create", "--image", &b.image, "--label", LABEL]);
    let cid = docker_ok(&r, &["inspect", "--format", "{{.Id}}", &id]);
    for i in 0..reps(10) {
        for sbx_first in [i % 2 == 0, i % 2 != 0] {
            if sbx_first {
                let mut c = b.sbx_cmd(&["connect", &id]);
                for k in AWAY {
                    c.env_remove(k);
                }
                c.envs(r.env());
                connect.sbx_ms.push(round_trip(c, "sbx connect (over ssh)"));
            } else {
                let c = docker_cmd(
                    &r,
                    &["exec", "-i", "--", &cid, "/run/sbx/helper", "connect", "/run/sandbox/sandbox.sock", "10000"],
                );
                connect.bare_ms.push(round_trip(c, "docker exec -i helper connect (over ssh)"));
            }
        }
        eprint!(".");
    }
    sbx(b, &r, &["destroy", &id]);
    cases.extend([create, connect]);
}

//! Live-test support: the fixture image (`fixture`, built once per run),
//! images a test packs itself (`image`), one test's world of unique labelled resources removed in `Drop` even when
//! the test fails (`world`), a blocking docker stand-in (`docker_shim`), the
//! egress tests' stand-in internet (`internet`) and client (`egress`), the stock Debian image (`debian`) and the secrets tests' stand-in HTTPS API (`standin_api`), the engine reached through sshd on loopback (`ssh`), the opt-in recorder of sbx invocations (`record`, `SBX_RECORD_CORPUS`), and running the real binary and checking what it printed (here).
//!
//! These tests need a Docker engine. They never skip: without one they fail
//! and say so (`cargo test --lib` runs the unit tests alone).

// benches/sbx_bench.rs includes this module for the fixture alone.
#![allow(dead_code, unused_imports)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

pub mod debian;
mod docker_shim;
pub mod egress;
mod fixture;
mod image;
pub mod internet;
mod record;
pub mod serve;
mod ssh;
pub mod standin_api;
mod world;

pub use debian::debian_image;
pub use docker_shim::Shim;
pub use fixture::{fixture_binary, fixture_image};
pub use image::{armed_with, attacker, gcc_static, Image, ImageTree};
pub use internet::{curl, exec_in, tools_image, Internet};
pub use record::{record, Invocation};
pub use ssh::Remote;
pub use world::{remove_case_volumes, Network, Sandbox, Service, World};

pub const SBX: &str = env!("CARGO_BIN_EXE_sbx");

/// Every test resource carries this label, so a crashed run can be swept
/// with `docker rm -f $(docker ps -aq --filter label=sbx-test)`.
pub const TEST_LABEL: &str = "sbx-test";

pub fn docker(args: &[&str]) -> Output {
    Command::new("docker").args(args).stdin(Stdio::null()).output().expect("spawn docker")
}

pub fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(out.status.success(), "docker {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub fn unique(prefix: &str) -> String {
    format!("{prefix}{:08x}", rand::random::<u32>())
}

/// Pack the directory `root` into the tar file `tar`, every entry owned by
/// root (what `docker import` of an image tree wants).
pub fn tar_root(root: &Path, tar: &Path) {
    let st = Command::new("tar")
        .args(["--owner=0", "--group=0", "--numeric-owner", "-C"])
        .arg(root)
        .arg("-cf")
        .arg(tar)
        .arg(".")
        .status()
        .expect("spawn tar");
    assert!(st.success(), "tar failed");
}

/// `levels` directories nested in `dir`, made relative to descriptors (as a
/// sandbox would), so making them needs no long paths.
pub fn nest(dir: &Path, levels: usize) {
    use nix::fcntl::{open, openat, OFlag};
    use nix::sys::stat::{mkdirat, Mode};
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut fd = open(dir, flags, Mode::empty()).unwrap();
    for _ in 0..levels {
        mkdirat(Some(fd), "d", Mode::from_bits_truncate(0o700)).unwrap();
        let next = openat(Some(fd), "d", flags, Mode::empty()).unwrap();
        nix::unistd::close(fd).unwrap();
        fd = next;
    }
    nix::unistd::close(fd).unwrap();
}

/// Run sbx with this world's directories and at most `nofile` open descriptors.
pub fn sbx_limited(w: &World, args: &[&str], nofile: u64) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(SBX);
    cmd.args(w.dir_args()).args(args).stdin(Stdio::null());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, nofile, nofile)
                .map_err(std::io::Error::from)
        });
    }
    let out = cmd.output().expect("spawn sbx");
    record(&Invocation { args: &w.args_with(args), env: &[], env_removed: &[], stdin: b"" }, Some(&out));
    out
}

/// Run sbx and report its peak RSS in KiB, its docker children's
/// included. The fixture's `rusage` spawns and measures it: wait4 of a child
/// this harness spawned would report the harness's own peak, hundreds of
/// MiB late in a full run, as the child's (exec keeps the spawner's
/// high-water mark).
pub fn sbx_rss(w: &World, args: &[&str]) -> (Output, i64) {
    let figure = std::env::temp_dir().join(unique("rss"));
    let out = Command::new(fixture_binary())
        .arg("rusage")
        .arg(&figure)
        .arg(SBX)
        .args(w.dir_args())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("spawn the fixture's rusage");
    let kib = std::fs::read_to_string(&figure).expect("the fixture's figure").parse().expect("a number");
    let _ = std::fs::remove_file(&figure);
    (out, kib)
}

/// Run git with a fixed identity and default branch; panics on failure.
pub fn git(args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.email=t@t", "-c", "user.name=t", "-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Talk to `sbx connect` line by line: each answer is read before the next
/// line goes, nothing half-closed (an interactive client), then EOF.
/// `answer` says what the sandbox program answers to a line.
pub fn line_by_line(mut connect: Command, lines: &[&str], answer: impl Fn(&str) -> String) {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::mpsc;
    let mut child = connect.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut to = child.stdin.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let from = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in from.lines() {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    for word in lines {
        writeln!(to, "{word}").and_then(|()| to.flush()).expect("write a line to sbx connect");
        match rx.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(Ok(line)) => assert_eq!(line, answer(word)),
            other => {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!("no answer to {word:?} while the connection stays open: {other:?}; stderr: {}", stderr(&out));
            }
        }
    }
    drop(to);
    let out = child.wait_with_output().unwrap();
    assert_success(&out, "sbx connect, ended by EOF on stdin");
}

pub fn assert_success(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn assert_exit(out: &Output, code: i32, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}: expected exit {code}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// sbx's JSON stdout, or a panic that shows what it printed instead.
pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

/// Poll (bounded) until `f` holds; the time it first held.
pub fn until(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Instant> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// `n` bytes of every value, in no simple pattern.
pub fn blob(n: usize) -> Vec<u8> {
    (0..n as u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect()
}

/// The TTL timing test runs alone; the tests that load the engine hardest
/// (20 parallel creates, racing destroys, floods, bombs, hogs) run beside
/// each other but never beside it, so a 2-core machine's docker is not
/// saturated while a deadline is measured. One lock for the whole live
/// binary: every suite runs in this one process.
static ENGINE_LOAD: RwLock<()> = RwLock::new(());

/// Held by a test that loads the engine hard.
pub fn loading_the_engine() -> RwLockReadGuard<'static, ()> {
    ENGINE_LOAD.read().unwrap_or_else(|e| e.into_inner())
}

/// Held by a test that measures a deadline: no engine-loading test runs meanwhile.
pub fn engine_alone() -> RwLockWriteGuard<'static, ()> {
    ENGINE_LOAD.write().unwrap_or_else(|e| e.into_inner())
}

/// SIGKILL the TTL watchdog of sandbox `id` (created with a short `--ttl`), as
/// a reboot would, and wait until `ls --json` shows it expired.
pub fn kill_watchdog_until_expired(w: &World, id: &str) {
    let pidfile = w.state_dir.join("watchdog").join(id);
    until(Duration::from_secs(5), || pidfile.exists()).expect("watchdog never recorded itself");
    let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();
    until(Duration::from_secs(10), || {
        let ls = json(&w.sbx(&["ls", "--json"]));
        ls.as_array().unwrap().iter().any(|r| r["id"] == id && r["expired"] == true)
    })
    .expect("ls never showed it as expired");
}

/// `sbx ARGS` with env and `input` on stdin (written from a thread, so a
/// reader that stops taking it cannot block the test), killed (and
/// reported as None) after `limit`.
pub fn sbx_within_fed(w: &World, args: &[&str], env: &[(&str, &str)], input: &[u8], limit: Duration) -> Option<Output> {
    let mut cmd = Command::new(SBX);
    cmd.args(w.dir_args()).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn sbx");
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &data));
    // Drained as sbx writes: a pipe left full would stop sbx, and the limit
    // would report a hang that was the test's own.
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = std::io::Read::read_to_end(&mut r, &mut v);
            }
            v
        })
    };
    let out = drain(child.stdout.take().map(|r| Box::new(r) as _));
    let err = drain(child.stderr.take().map(|r| Box::new(r) as _));
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Some(status) = child.try_wait().unwrap() {
            let out = Output { status, stdout: out.join().unwrap(), stderr: err.join().unwrap() };
            record(&Invocation { args: &w.args_with(args), env, env_removed: &[], stdin: input }, Some(&out));
            return Some(out);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    record(&Invocation { args: &w.args_with(args), env, env_removed: &[], stdin: input }, None);
    None
}

/// The loop devices backed by `file` (`losetup --associated`).
pub fn loops_of(file: &std::path::Path) -> Vec<String> {
    let out = Command::new("losetup")
        .args(["--list", "--noheadings", "--output", "NAME", "--associated"])
        .arg(file)
        .output()
        .expect("spawn losetup");
    String::from_utf8_lossy(&out.stdout).lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect()
}

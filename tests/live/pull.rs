//! Pulling pinned images against a registry of the test's own:
//! Debian's `docker-registry` on 127.0.0.1 (dockerd allows plain http on
//! 127.0.0.0/8), holding an image made by the test (the fixture binary plus
//! a unique file: an id of its own; the shared fixture is never pushed or
//! removed). The image is removed from the engine after the push, so the
//! create must pull it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

const REGISTRY: &str = "/usr/bin/docker-registry";

/// A registry on a free 127.0.0.1 port, its storage in a temp dir; stopped
/// and removed on drop.
struct Registry {
    child: Child,
    dir: PathBuf,
    addr: String,
}

impl Registry {
    fn start() -> Self {
        // CI installs it (.ci/run); a missing one fails the test, never skips it.
        assert!(
            std::path::Path::new(REGISTRY).exists(),
            "{REGISTRY} is missing: install Debian's docker-registry package (`apt-get install docker-registry`)"
        );
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("registry-"));
        std::fs::create_dir_all(dir.join("store")).unwrap();
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n",
            dir.join("store").display()
        );
        std::fs::write(dir.join("config.yml"), config).unwrap();
        let log = std::fs::File::create(dir.join("log")).unwrap();
        let child = Command::new(REGISTRY)
            .arg("serve")
            .arg(dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let reg = Registry { child, dir, addr };
        let up = until(Duration::from_secs(15), || {
            http_get(&reg.addr, "/v2/").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
        });
        assert!(up.is_some(), "the registry on {} never answered: {}", reg.addr, reg.log());
        reg
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The status line and headers of `GET path`, or None when nothing answers.
fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// An image of this test's own pushed to `reg` and then removed from the
/// engine (every tag: the engine lacks it); returns `repo@sha256:D`.
fn push_own_image(w: &World, reg: &Registry) -> String {
    let tree = ImageTree::new(&[]).for_case(w);
    std::fs::write(tree.root().join("unique"), unique("content-")).unwrap();
    let img = tree.import();
    let repo = format!("{}/sbxtest/{}", reg.addr, w.case.to_lowercase());
    docker_ok(&["tag", &img.0, &format!("{repo}:t")]);
    let pushed = docker(&["push", &format!("{repo}:t")]);
    assert_success(&pushed, "docker push to the test's registry");
    let digests = docker_ok(&["image", "inspect", "--format", "{{json .RepoDigests}}", &img.0]);
    let digests: Vec<String> = serde_json::from_str(&digests).unwrap();
    let pinned = digests.into_iter().find(|d| d.starts_with(&repo)).expect("a digest after the push");
    // `rmi -f` by id: every tag of it goes, so the engine lacks it.
    drop(img);
    assert!(!docker(&["image", "inspect", &pinned]).status.success(), "the engine still has {pinned}");
    pinned
}

fn create(w: &World, image: &str, more: &[&str]) -> std::process::Output {
    let label = w.case_label();
    let mut args = vec!["create", "--image", image, "--label", &label];
    args.extend_from_slice(more);
    w.sbx(&args)
}

fn assert_only_id(out: &std::process::Output) -> String {
    let id = stdout(out);
    assert!(
        id.len() == 17 && id.starts_with("sbx-") && id.ends_with('\n'),
        "stdout is the id alone, nothing of docker pull's: {id:?}"
    );
    id.trim().to_string()
}

#[test]
fn a_missing_pinned_image_is_pulled_by_digest_and_runs() {
    let reg = Registry::start();
    let w = World::new();
    let pinned = push_own_image(&w, &reg);
    // Declared before the sandbox: removed after it.
    let _pulled = Image(pinned.clone());
    // `--pull never` keeps today's answer: the command to run, nothing made.
    let out = create(&w, &pinned, &["--pull", "never"]);
    assert_exit(&out, 1, "create --pull never of a missing image");
    assert!(stderr(&out).contains(&format!("`docker pull {pinned}`")), "{}", stderr(&out));
    w.assert_nothing_left();
    assert!(!docker(&["image", "inspect", &pinned]).status.success(), "--pull never pulled");
    // SBX_PULL=never is the same default.
    let label = w.case_label();
    let out = w.sbx_env(&["create", "--image", &pinned, "--label", &label], &[("SBX_PULL", "never")]);
    assert_exit(&out, 1, "SBX_PULL=never");
    w.assert_nothing_left();

    let started = Instant::now();
    let out = create(&w, &pinned, &[]);
    assert_success(&out, "create of a missing pinned image");
    let sb = w.adopt(&assert_only_id(&out));
    // Piped stderr: no progress line at all.
    assert!(!stderr(&out).contains("pulling") && !stderr(&out).contains('\r'), "{:?}", stderr(&out));
    let out = w.sbx_stdin(&["connect", &sb.id], b"pulled and running");
    assert_success(&out, "connect");
    assert_eq!(out.stdout, b"pulled and running");
    let digests = docker_ok(&["image", "inspect", "--format", "{{json .RepoDigests}}", &pinned]);
    assert!(digests.contains(&pinned), "the engine has it under that digest: {digests}");
    eprintln!("pull and create took {:?}", started.elapsed());
}

#[test]
fn failed_pulls_say_why_and_leave_nothing() {
    let reg = Registry::start();
    let w = World::new();
    let pinned = push_own_image(&w, &reg);
    let repo = pinned.split('@').next().unwrap().to_string();
    // A digest the registry does not have.
    let absent = format!("{repo}@sha256:{}", "0".repeat(64));
    let out = create(&w, &absent, &[]);
    assert_exit(&out, 1, "create of a digest the registry lacks");
    let err = stderr(&out);
    assert!(err.contains(&format!("could not pull image {absent}: the registry has no such manifest")), "{err}");
    assert!(err.contains("manifest unknown") && err.contains("nothing was created"), "{err}");
    assert!(out.stdout.is_empty());
    w.assert_nothing_left();
    // A registry that is not there.
    let gone = format!("127.0.0.1:{}/sbxtest/x@sha256:{}", free_port(), "1".repeat(64));
    let out = create(&w, &gone, &["--json"]);
    assert_exit(&out, 1, "create from an unreachable registry");
    let v: serde_json::Value = serde_json::from_str(stderr(&out).lines().last().unwrap()).unwrap();
    assert_eq!(v["error"]["kind"], "pull_failed", "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("could not be reached"), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("connection refused"), "{v}");
    w.assert_nothing_left();
    // An image id is never pulled: it names content on one engine only.
    let id = format!("sha256:{}", "2".repeat(64));
    let out = create(&w, &id, &[]);
    assert_exit(&out, 1, "create of a missing image id");
    let err = stderr(&out);
    assert!(err.contains("is not on this engine") && err.contains("image id names an image on one engine"), "{err}");
    assert!(!err.contains("could not pull"), "{err}");
    w.assert_nothing_left();
    assert!(!docker(&["image", "inspect", &pinned]).status.success(), "nothing pulled the pushed image");
}

#[test]
fn pull_progress_shows_on_a_terminal_only() {
    let reg = Registry::start();
    let w = World::new();
    let pinned = push_own_image(&w, &reg);
    let _pulled = Image(pinned.clone());
    let label = w.case_label();
    let dirs: Vec<String> = w.dir_args().iter().map(|a| a.to_string_lossy().into_owned()).collect();
    // Under a pseudo-terminal (script(1)): stdout and stderr are both the terminal.
    let on_tty = |global: &str| {
        let line = format!("{SBX} {global} {} create --image {pinned} --label {label}", dirs.join(" "));
        let out = Command::new("script").args(["-qec", &line, "/dev/null"]).stdin(Stdio::null()).output().unwrap();
        assert_success(&out, "create under a terminal");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let id = text.rsplit("\r\x1b[2K").next().unwrap().lines().rev().find(|l| l.starts_with("sbx-")).unwrap_or("");
        assert!(id.trim().len() == 16, "an id at the end: {text:?}");
        (w.adopt(id.trim()), text)
    };
    // -v: the log owns stderr, so no progress line is drawn over it.
    let (sb, text) = on_tty("-v");
    assert!(text.contains("DEBUG") && text.contains("docker (streamed)"), "{text:?}");
    assert!(!text.contains("\r\x1b[2K"), "no progress line under -v: {text:?}");
    drop(sb);
    docker_ok(&["rmi", "--no-prune", &pinned]);
    let (_sb, text) = on_tty("");
    assert!(text.contains("\r\x1b[2Ksbx: pulling ") && text.contains("1/1 layers, pulling "), "{text:?}");
    assert!(text.contains("\r\x1b[2Ksbx-"), "the line is cleared before the id: {text:?}");
}

#[test]
fn a_hung_registry_is_cut_off_and_ctrl_c_ends_the_pull() {
    // Accepts connections and never answers, as a registry that stopped.
    let hung = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = hung.local_addr().unwrap();
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        hung.set_nonblocking(true).unwrap();
        let end = Instant::now() + Duration::from_secs(40);
        while Instant::now() < end {
            if let Ok((c, _)) = hung.accept() {
                conns.push(c);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let w = World::new();
    let label = w.case_label();
    let image = format!("{addr}/sbxtest/hung@sha256:{}", "3".repeat(64));
    let started = Instant::now();
    let out = w.sbx_env(&["create", "--image", &image, "--label", &label], &[("SBX_PULL_TIMEOUT", "2s")]);
    assert_exit(&out, 1, "a pull from a registry that never answers");
    assert!(stderr(&out).contains(&format!("pulling image {image} took longer than 2s")), "{}", stderr(&out));
    assert!(stderr(&out).contains("SBX_PULL_TIMEOUT"), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(12), "cut off at its deadline: {:?}", started.elapsed());
    w.assert_nothing_left();

    // Ctrl-C while it hangs: sbx ends the pull at once and exits 130.
    let child = Command::new(SBX)
        .args(w.dir_args())
        .args(["create", "--image", &image, "--label", &label])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let asked = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, 130, "SIGINT during a pull");
    assert!(asked.elapsed() < Duration::from_secs(5), "ended at once: {:?}", asked.elapsed());
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    w.assert_nothing_left();
    drop(held);
}

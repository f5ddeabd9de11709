//! Live-test support: the fixture image, unique labelled resources that are
//! removed in `Drop` (even when a test fails), and running the real binary.
//!
//! These tests need a Docker engine. They never skip: without one they fail
//! and say so (`cargo test --lib` runs the unit tests alone).

// benches/sbx_bench.rs includes this module for the fixture alone.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

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

fn require_docker() {
    static CHECK: OnceLock<Result<String, String>> = OnceLock::new();
    let r = CHECK.get_or_init(|| {
        match Command::new("docker").args(["version", "--format", "{{.Server.Version}}"]).output() {
            Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
            Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
            Err(e) => Err(e.to_string()),
        }
    });
    if let Err(e) = r {
        panic!(
            "live tests need a reachable Docker engine (`docker version` failed: {e}); \
             start dockerd, or run only the unit tests with `cargo test --lib`"
        );
    }
}

/// The fixture image: `tests/fixture/sandbox_fixture.rs` built statically and
/// packed alone with `docker import` (no shell, no libc, /tmp 0755 root, as
/// in many distroless images). Cached by the binary's content hash.
pub fn fixture_image() -> String {
    static IMAGE: OnceLock<String> = OnceLock::new();
    require_docker();
    IMAGE.get_or_init(build_fixture).clone()
}

/// The fixture binary itself, for tests that run it on the host.
pub fn fixture_binary() -> PathBuf {
    fixture_image();
    fixture_dir().join("root/bin/fixture")
}

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fixture-{}", std::process::id()))
}

fn build_fixture() -> String {
    let dir = fixture_dir();
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::create_dir_all(root.join("tmp")).unwrap();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    set_mode(&root.join("tmp"), 0o755);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixture/sandbox_fixture.rs");
    let bin = root.join("bin/fixture");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc)
        .args(["--edition", "2021", "-O", "-C", "target-feature=+crt-static", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("spawn rustc");
    assert!(out.status.success(), "building the fixture failed: {}", String::from_utf8_lossy(&out.stderr));
    let hash = content_hash(&std::fs::read(&bin).unwrap());
    let label = format!("{TEST_LABEL}.fixture={hash}");
    let cached = docker_ok(&["images", "-q", "--no-trunc", "--filter", &format!("label={label}")]);
    // Images built FROM the fixture inherit its label; only the imported one
    // has no other label (a test's derived image must never be taken for it).
    // (An image built FROM the fixture keeps its labels but has more layers.)
    let pristine = |id: &&str| {
        docker_ok(&["image", "inspect", "--format", "{{len .Config.Labels}} {{len .RootFS.Layers}}", id]) == "2 1"
    };
    if let Some(id) = cached.lines().find(pristine) {
        return id.to_string();
    }
    // Fixture images of older fixture sources in this checkout: remove
    // (in-use ones stay). Only this checkout's: another checkout's test run
    // on the same engine may be using its own fixture right now.
    let tree = format!("{TEST_LABEL}.tree={}", content_hash(env!("CARGO_MANIFEST_DIR").as_bytes()));
    let stale = docker_ok(&[
        "images",
        "-q",
        "--no-trunc",
        "--filter",
        &format!("label={TEST_LABEL}.fixture"),
        "--filter",
        &format!("label={tree}"),
    ]);
    for old in stale.lines() {
        let _ = docker(&["rmi", old]);
    }
    let tar = dir.join("fixture.tar");
    tar_root(&root, &tar);
    let id = docker_ok(&[
        "import",
        "--change",
        "ENTRYPOINT [\"/bin/fixture\"]",
        "--change",
        &format!("LABEL {label} {tree}"),
        tar.to_str().unwrap(),
    ]);
    id
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
    cmd.output().expect("spawn sbx")
}

/// Run sbx and report its peak RSS in KiB (wait4's rusage of that child alone).
// Reaped by wait4, which clippy does not see.
#[allow(clippy::zombie_processes)]
pub fn sbx_rss(w: &World, args: &[&str]) -> (Output, i64) {
    let mut child = Command::new(SBX)
        .args(w.dir_args())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sbx");
    // Drain the pipes from threads so sbx never blocks on them.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut v).unwrap();
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).unwrap();
        v
    });
    let mut status = 0;
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { nix::libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4");
    let out = Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    };
    (out, usage.ru_maxrss)
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

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// FNV-1a: a stable content key, not a security boundary.
fn content_hash(data: &[u8]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

/// One test's world: its own socket root and a label on everything it makes.
pub struct World {
    pub case: String,
    pub socket_root: PathBuf,
    /// Its own state dir: its own ownership key, so no test's `gc` or `ls`
    /// ever sees another test's sandboxes.
    pub state_dir: PathBuf,
    pub image: String,
}

impl World {
    pub fn new() -> Self {
        let image = fixture_image();
        let case = unique("c");
        // Short: the whole socket path must fit in 107 bytes.
        let socket_root = PathBuf::from("/tmp").join(format!("sbxt-{case}"));
        std::fs::create_dir_all(&socket_root).unwrap();
        let state_dir = PathBuf::from("/tmp").join(format!("sbxt-{case}-state"));
        World { case, socket_root, state_dir, image }
    }

    pub fn case_label(&self) -> String {
        format!("{TEST_LABEL}.case={}", self.case)
    }

    /// Run sbx with this world's socket root.
    pub fn sbx(&self, args: &[&str]) -> Output {
        self.sbx_env(args, &[])
    }

    pub fn sbx_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(SBX);
        cmd.args(self.dir_args()).args(args).stdin(Stdio::null());
        cmd.env_remove("SBX_STRICT_EGRESS").env_remove("SBX_SOCKET_DIR");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("spawn sbx")
    }

    /// Run sbx with `input` on its stdin (written from a thread, so a large
    /// input cannot deadlock against sbx's output).
    pub fn sbx_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        let mut child = Command::new(SBX)
            .args(self.dir_args())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sbx");
        let mut stdin = child.stdin.take().expect("piped stdin");
        let data = input.to_vec();
        let feeder = std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut stdin, &data);
        });
        let out = child.wait_with_output().expect("wait for sbx");
        feeder.join().expect("stdin feeder");
        out
    }

    pub fn dir_args(&self) -> Vec<std::ffi::OsString> {
        vec!["--socket-dir".into(), self.socket_root.clone().into(), "--data-dir".into(), self.state_dir.clone().into()]
    }

    /// `sbx create --image <fixture> --label <case> ARGS`; panics on failure.
    pub fn create(&self, args: &[&str]) -> Sandbox {
        let out = self.try_create(args);
        assert_success(&out, "sbx create");
        let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
        self.adopt(&id)
    }

    /// Guard a sandbox created with `--json` (known only by its id).
    pub fn adopt(&self, id: &str) -> Sandbox {
        Sandbox { id: id.to_string(), dir_args: self.dir_args() }
    }

    pub fn try_create(&self, args: &[&str]) -> Output {
        let label = self.case_label();
        let mut full = vec!["create", "--image", &self.image, "--label", &label];
        full.extend_from_slice(args);
        self.sbx(&full)
    }

    /// Containers (any state) carrying this test's label.
    pub fn containers(&self) -> Vec<String> {
        let out = docker_ok(&["ps", "-aq", "--filter", &format!("label={}", self.case_label())]);
        out.lines().map(str::to_string).collect()
    }

    /// Entries left under this test's socket root.
    pub fn socket_dirs(&self) -> Vec<String> {
        std::fs::read_dir(&self.socket_root)
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default()
    }

    pub fn assert_nothing_left(&self) {
        assert_eq!(self.containers(), Vec::<String>::new(), "containers left behind");
        assert_eq!(self.socket_dirs(), Vec::<String>::new(), "socket directories left behind");
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let names =
            docker_ok(&["ps", "-a", "--format", "{{.Names}}", "--filter", &format!("label={}", self.case_label())]);
        for c in self.containers() {
            let _ = docker(&["rm", "-f", "-v", &c]);
        }
        // Private route networks sbx made for this test's sandboxes, should a
        // failed test have skipped their destroy.
        for name in names.lines() {
            let nets = docker_ok(&["network", "ls", "-q", "--filter", &format!("label=sbx.private-for={name}")]);
            for net in nets.lines() {
                let attached = docker_ok(&[
                    "network",
                    "inspect",
                    "--format",
                    "{{range $k, $v := .Containers}}{{$k}} {{end}}",
                    net,
                ]);
                for c in attached.split_whitespace() {
                    let _ = docker(&["network", "disconnect", "--force", net, c]);
                }
                let _ = docker(&["network", "rm", net]);
            }
        }
        // Persistent session volumes of this test (sessions are named after the case).
        let vols = docker_ok(&["volume", "ls", "-q", "--filter", &format!("name=sbx-state-{}", self.case)]);
        for v in vols.lines() {
            let _ = docker(&["volume", "rm", v]);
        }
        let _ = std::fs::remove_dir_all(&self.socket_root);
        // A session directory keeps its nosuid bind until `destroy --purge`;
        // a test that failed before purging must not leave it mounted.
        if let Ok(vols) = std::fs::read_dir(self.state_dir.join("volumes")) {
            for v in vols.flatten() {
                let _ = nix::mount::umount2(&v.path(), nix::mount::MntFlags::MNT_DETACH);
            }
        }
        let _ = std::fs::remove_dir_all(&self.state_dir);
    }
}

/// A sandbox made by `sbx create`; destroyed (by sbx, then by docker) on drop.
pub struct Sandbox {
    pub id: String,
    dir_args: Vec<std::ffi::OsString>,
}

impl Sandbox {
    pub fn exec(&self, args: &[&str]) -> Output {
        let mut full = vec!["exec", self.id.as_str(), "/bin/fixture"];
        full.extend_from_slice(args);
        docker(&full)
    }

    pub fn inspect(&self, format: &str) -> String {
        docker_ok(&["inspect", "--format", format, &self.id])
    }
}

impl Drop for Sandbox {
    /// Every test ends by destroying its sandboxes with sbx, and that must
    /// work (unless the test already failed: then only clean up).
    fn drop(&mut self) {
        let out = Command::new(SBX).args(&self.dir_args).args(["destroy", &self.id]).output();
        let _ = docker(&["rm", "-f", "-v", &self.id]);
        if !std::thread::panicking() {
            let out = out.expect("spawn sbx destroy");
            assert!(
                out.status.success(),
                "sbx destroy {} at the end of the test failed: {}",
                self.id,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// A route network `sbx-<host>`, removed on drop after detaching everything.
pub struct Network {
    pub host: String,
    pub name: String,
}

impl Network {
    pub fn new(internal: bool) -> Self {
        let host = unique("t");
        let name = format!("sbx-{host}");
        let mut args = vec!["network", "create", "--label", TEST_LABEL];
        if internal {
            args.push("--internal");
        }
        args.push(&name);
        docker_ok(&args);
        Network { host, name }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        let attached =
            docker_ok(&["network", "inspect", "--format", "{{range $k, $v := .Containers}}{{$k}} {{end}}", &self.name]);
        for c in attached.split_whitespace() {
            let _ = docker(&["network", "disconnect", "--force", &self.name, c]);
        }
        let _ = docker(&["network", "rm", &self.name]);
    }
}

/// A stand-in route service: the fixture echoing TCP on port 8080, named
/// after the network's host so the route's target resolves to it.
pub struct Service {
    pub name: String,
    pub ip: String,
}

impl Service {
    pub fn start(net: &Network, image: &str) -> Self {
        let name = net.host.clone();
        docker_ok(&[
            "run",
            "-d",
            "--name",
            &name,
            "--label",
            TEST_LABEL,
            "--network",
            &net.name,
            "--user",
            "65534",
            "--cap-drop",
            "ALL",
            "--read-only",
            image,
            "tcp-echo",
            "8080",
        ]);
        let ip = docker_ok(&[
            "inspect",
            "--format",
            &format!("{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}", net.name),
            &name,
        ]);
        Service { name, ip }
    }

    pub fn addr(&self) -> String {
        format!("{}:8080", self.ip)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", "-v", &self.name]);
    }
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

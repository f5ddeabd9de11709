//! One test's world and what it makes: its own socket root and state dir,
//! sandboxes, route networks and stand-in services, each labelled and
//! removed in `Drop` (even when the test fails).

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use super::*;

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
        let removed = ["SBX_STRICT_EGRESS", "SBX_SOCKET_DIR"];
        for k in removed {
            cmd.env_remove(k);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("spawn sbx");
        record(&Invocation { args: &self.args_with(args), env, env_removed: &removed, stdin: b"" }, Some(&out));
        out
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
        record(&Invocation { args: &self.args_with(args), env: &[], env_removed: &[], stdin: input }, Some(&out));
        out
    }

    pub fn dir_args(&self) -> Vec<std::ffi::OsString> {
        vec!["--socket-dir".into(), self.socket_root.clone().into(), "--data-dir".into(), self.state_dir.clone().into()]
    }

    /// This world's directory flags, then `args`: the argv the recorder keeps.
    pub fn args_with(&self, args: &[&str]) -> Vec<std::ffi::OsString> {
        let mut all = self.dir_args();
        all.extend(args.iter().map(std::ffi::OsString::from));
        all
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
        // This test's pools: forgotten first, so a refiller still running
        // stops at its next step, and waited for (bounded), so no member is
        // made after the containers below are removed (a failed pool test
        // once left two).
        if let Ok(d) = std::fs::read_dir(self.state_dir.join("pools")) {
            for e in d.flatten() {
                let pool = sbx::host::pool::Pool::at(&self.state_dir, &e.file_name().to_string_lossy());
                let _ = std::fs::remove_file(e.path().join("spec.json"));
                let _ = super::until(std::time::Duration::from_secs(60), || !pool.filling());
            }
        }
        let names =
            docker_ok(&["ps", "-a", "--format", "{{.Names}}", "--filter", &format!("label={}", self.case_label())]);
        for c in self.containers() {
            let _ = docker(&["rm", "-f", "-v", &c]);
        }
        // Private route networks sbx made for this test's sandboxes, and
        // their egress gates (labelled with the sandbox, not the case),
        // should a failed test have skipped their destroy.
        for name in names.lines() {
            let gates = docker_ok(&["ps", "-aq", "--filter", &format!("label=sbx.gate-of={name}")]);
            for g in gates.lines() {
                let _ = docker(&["rm", "-f", "-v", g]);
            }
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
        remove_case_volumes(&self.case);
        let _ = std::fs::remove_dir_all(&self.socket_root);
        // A session directory keeps its nosuid bind (or its image's mount) until `destroy --purge`;
        // a test that failed before purging must not leave it mounted.
        if let Ok(vols) = std::fs::read_dir(self.state_dir.join("volumes")) {
            for v in vols.flatten() {
                let _ = nix::mount::umount2(&v.path(), nix::mount::MntFlags::MNT_DETACH);
                // A bounded session's image: its loop device too.
                if v.file_name().to_string_lossy().contains(".img") {
                    for dev in super::loops_of(&v.path()) {
                        let _ = Command::new("losetup").args(["--detach", &dev]).output();
                    }
                }
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

    /// The uid sbx gave it (`Config.User`, `UID:UID`, in sbx's range).
    pub fn uid(&self) -> u32 {
        let user = self.inspect("{{.Config.User}}");
        let (u, g) = user.split_once(':').unwrap_or_else(|| panic!("not UID:GID: {user:?}"));
        assert_eq!(u, g, "the gid is the uid");
        let uid: u32 = u.parse().unwrap();
        assert!((0x7000_0000..0x7100_0000).contains(&uid), "{uid} is outside sbx's range");
        uid
    }
}

impl Drop for Sandbox {
    /// Every test ends by destroying its sandboxes with sbx, and that must
    /// work (unless the test already failed: then only clean up).
    fn drop(&mut self) {
        let out = Command::new(SBX).args(&self.dir_args).args(["destroy", &self.id]).output();
        let mut args = self.dir_args.clone();
        args.extend(["destroy".into(), self.id.clone().into()]);
        record(&Invocation { args: &args, env: &[], env_removed: &[], stdin: b"" }, out.as_ref().ok());
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
        Self::with_prefix(internal, "sbx-")
    }

    /// A network named PREFIX<host>: the stand-in internet is not a route
    /// network, and sbx refuses `sbx-*` as an egress network.
    pub fn with_prefix(internal: bool, prefix: &str) -> Self {
        let host = unique("t");
        let name = format!("{prefix}{host}");
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

/// A stand-in route service: the fixture echoing TCP on ports 8080 (the
/// routes' port) and 9090 (one no route names), named after the network's
/// host so the route's target resolves to it.
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
            "9090",
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
        self.addr_port(8080)
    }

    pub fn addr_port(&self, port: u16) -> String {
        format!("{}:{port}", self.ip)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", "-v", &self.name]);
    }
}

/// The persistent session volumes of test `case` (sessions are named after
/// the case), then the backing volumes of remote ones (an overlay's
/// directories are in them): what a test that failed before `--purge` left.
pub fn remove_case_volumes(case: &str) {
    for prefix in ["sbx-state-", "sbx-data-"] {
        let vols = docker_ok(&["volume", "ls", "-q", "--filter", &format!("name={prefix}{case}")]);
        for v in vols.lines() {
            let _ = docker(&["volume", "rm", v]);
        }
    }
}

//! `sbx serve` for the live tests, driven by the real E2B Python SDK (e2b 2.63.0 from PyPI, in
//! the virtualenv scripts/test makes at [`VENV`]; made here when missing,
//! never skipped). The SDK's URLs all point at the server on a free
//! 127.0.0.1 port, and `E2B_DOMAIN` is a name that never resolves, so a
//! URL the SDK builds past them fails here instead of leaving the machine.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::*;

pub const VENV: &str = "/var/cache/sbx-test/e2b-2.63.0";
pub const SDK: &str = "e2b==2.63.0";

/// The venv's python, with the pinned SDK importable (made once per machine).
pub fn sdk_python() -> PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| venv_python(VENV, SDK, "e2b")).clone()
}

/// The python of the virtualenv at `venv` with the pip requirement `spec`
/// installed, made when `import module` fails there (never skipped).
pub fn venv_python(venv: &str, spec: &str, module: &str) -> PathBuf {
    let py = Path::new(venv).join("bin/python");
    let has = |py: &Path| {
        Command::new(py).args(["-c", &format!("import {module}")]).output().is_ok_and(|o| o.status.success())
    };
    if !has(&py) {
        std::fs::create_dir_all(Path::new(venv).parent().unwrap()).unwrap();
        let made = Command::new("python3").args(["-m", "venv", venv]).output().expect("spawn python3");
        assert_success(&made, "python3 -m venv (Debian: apt-get install python3-venv; scripts/test does)");
        let pip = Path::new(venv).join("bin/pip");
        let got = Command::new(pip).args(["install", "-q", "--disable-pip-version-check", spec]).output().unwrap();
        assert_success(&got, &format!("pip install {spec}"));
        assert!(has(&py), "{spec} installed but `import {module}` fails");
    }
    py
}

/// A Debian image with bash: Debian's bash-static as /bin/bash and
/// busybox-static's applets (scripts/test installs both). Its ENTRYPOINT
/// fails at once: a sandbox of it stays up only if sbx never runs it.
pub fn bash_image(w: &World) -> Image {
    bash_in(ImageTree::new(&["etc", "home"]).for_case(w))
}

/// [`bash_image`] packed from `tree` (the benchmark's has no test world).
pub fn bash_in(tree: ImageTree) -> Image {
    let tree = tree.start("ENTRYPOINT [\"/bin/false\"]");
    let bin = tree.root().join("bin");
    std::fs::copy("/bin/bash-static", bin.join("bash")).expect("/bin/bash-static (apt-get install bash-static)");
    std::fs::copy("/bin/busybox", bin.join("busybox")).expect("/bin/busybox (apt-get install busybox-static)");
    for applet in ["sh", "cat", "echo", "false", "true", "sleep", "id", "ls", "head", "sha256sum", "ln", "mkdir"] {
        std::os::unix::fs::symlink("busybox", bin.join(applet)).unwrap();
    }
    tree.import()
}

/// `sbx serve` running for one test; stopped, and every sandbox of its
/// world destroyed, on drop.
pub struct Server<'w> {
    pub w: &'w World,
    pub child: Child,
    pub addr: String,
    /// `http://ADDR`, or `https://ADDR` when started with `--tls-cert`.
    pub url: String,
    pub log: PathBuf,
}

impl<'w> Server<'w> {
    pub fn start(w: &'w World, templates: &[String]) -> Self {
        Self::start_under(w, templates, &[])
    }

    /// `sbx serve` run by `wrapper` (a program and its arguments, then sbx's argv).
    pub fn start_under(w: &'w World, templates: &[String], wrapper: &[&str]) -> Self {
        Self::launch(w, templates, wrapper, &[])
    }

    /// `sbx serve --template ... EXTRA...`: serve's own flags (create defaults, TLS ...).
    pub fn start_with(w: &'w World, templates: &[String], extra: &[&str]) -> Self {
        Self::launch(w, templates, &[], extra)
    }

    fn launch(w: &'w World, templates: &[String], wrapper: &[&str], extra: &[&str]) -> Self {
        let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-{}.log", w.case));
        let mut cmd = match wrapper {
            [] => Command::new(SBX),
            [program, args @ ..] => {
                let mut c = Command::new(program);
                c.args(args).arg(SBX);
                c
            }
        };
        // Port 0: serve binds a free port and says which, so no other test
        // can take it between a probe and the bind.
        cmd.args(w.dir_args()).args(["serve", "--listen", "127.0.0.1:0"]);
        for t in templates {
            cmd.args(["--template", t]);
        }
        cmd.args(extra);
        let err = std::fs::File::create(&log).unwrap();
        let child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(err).spawn().expect("spawn sbx serve");
        let scheme = if extra.contains(&"--tls-cert") { "https" } else { "http" };
        let mut s = Server { w, child, addr: String::new(), url: String::new(), log };
        let said = said_listening(&s.log, scheme);
        s.addr = said.unwrap_or_else(|| panic!("sbx serve did not say where it listens: {}", s.stderr()));
        s.url = format!("{scheme}://{}", s.addr);
        assert!(TcpStream::connect(&s.addr).is_ok(), "sbx serve said {} but does not listen there", s.addr);
        s
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn key(&self) -> String {
        std::fs::read_to_string(self.w.state_dir.join("serve/api-key")).unwrap().trim().to_string()
    }

    /// `script` with the real SDK pointed at this server, ready to run.
    pub fn sdk(&self, script: &str, key: &str) -> Command {
        let url = self.url.as_str();
        let mut cmd = Command::new(sdk_python());
        cmd.args(["-X", "faulthandler", "-u", "-c", script]).env_clear();
        cmd.env("PATH", "/usr/bin:/bin").env("HOME", std::env::temp_dir());
        cmd.envs([("E2B_API_URL", url), ("E2B_SANDBOX_URL", url), ("E2B_API_KEY", key)]);
        cmd.envs([("E2B_DOMAIN", "sbx-serve.invalid"), ("NO_PROXY", "*"), ("no_proxy", "*")]);
        // glibc writes a fatal error (a double free, ...) to /dev/tty unless told otherwise.
        cmd.env("LIBC_FATAL_STDERR_", "1").env("RUST_BACKTRACE", "1");
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Run `script` with the real SDK pointed at this server.
    pub fn python(&self, script: &str, key: &str) -> std::process::Output {
        self.sdk(script, key).output().expect("spawn python")
    }
}

/// The `HOST:PORT` that sbx serve, its stderr going to `log`, says it
/// listens on, within 15 s.
pub fn said_listening(log: &Path, scheme: &str) -> Option<String> {
    let mut at = None;
    until(Duration::from_secs(15), || {
        at = listening_on(&std::fs::read_to_string(log).unwrap_or_default(), scheme);
        at.is_some()
    })?;
    at
}

/// The `HOST:PORT` of the `listening on SCHEME://HOST:PORT` line in `stderr`.
pub fn listening_on(stderr: &str, scheme: &str) -> Option<String> {
    let prefix = format!("listening on {scheme}://");
    let line = stderr.lines().find_map(|l| l.split_once(&prefix).map(|(_, a)| a.trim().to_string()))?;
    line.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok_and(|p| p != 0)).then_some(line)
}

impl Drop for Server<'_> {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The world's own data dir: `ls` lists only what this server made.
        let out = self.w.sbx(&["ls", "--json"]);
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout) {
            for r in v.as_array().into_iter().flatten() {
                if let Some(id) = r["id"].as_str() {
                    let _ = self.w.sbx(&["destroy", id]);
                }
            }
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The Python example docs/serve.md shows, run as it is there.
pub fn doc_example() -> String {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/serve.md")).unwrap();
    let start = page.find("```python\n").expect("docs/serve.md has a python example") + "```python\n".len();
    let len = page[start..].find("```").expect("the example's block ends");
    page[start..start + len].to_string()
}

//! The egress tests' "internet": stand-in servers under names that
//! look real, on a bridge network the test makes and hands sbx as
//! `--egress-network`, with a resolver stand-in the gate is pointed at
//! (`--egress-dns`) that counts the queries it gets. No test traffic ever
//! goes to an address outside this network.
//!
//! - `web`: the fixture's `http-serve` on port 80 (`files.example`, `evil.example`);
//! - `tls`: `openssl s_server -WWW` on 443 with a self-signed certificate the
//!   test makes (`pypi.org`, `tls2.example`);
//! - `dns`: the fixture's `dns-serve` on 53, and `http-serve` on 80 too, so it
//!   is a private address the gate COULD reach but no rule allows
//!   (`rebind.example` resolves to it, `loop.example` to 127.0.0.1).
//!
//! The allow rules for the stand-ins are `/32` CIDRs ([`Internet::cidr_rules`]),
//! not the whole subnet: then the refused private address is on the same
//! bridge, reachable, and a refusal proves the gate's check rather than a
//! route that does not exist.
//!
//! The sandbox side: [`tools_image`] is the fixture plus `curl` and `openssl`
//! with their shared libraries (found with ldd, as sbx's own probe and gate
//! images are made), so the sandbox runs an ordinary client that honours
//! `HTTP_PROXY`/`HTTPS_PROXY`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use super::*;

/// The names the resolver stand-in answers, and what for.
pub const FILES: &str = "files.example";
pub const EVIL: &str = "evil.example";
pub const PYPI: &str = "pypi.org";
pub const TLS2: &str = "tls2.example";
pub const REBIND: &str = "rebind.example";
pub const LOOP: &str = "loop.example";

/// The payload files every stand-in serves: `big.bin` (several MiB, no
/// simple pattern) and `small.txt`.
pub const BIG: usize = 5 << 20;

pub struct Internet {
    pub net: Network,
    /// Stand-in containers, removed on drop (before the network).
    containers: Vec<String>,
    pub web_ip: String,
    pub tls_ip: String,
    pub dns_ip: String,
    pub subnet: String,
    dir: PathBuf,
}

impl Internet {
    /// Start the stand-ins on a new (non-internal) bridge network.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`Internet::start`], the resolver stand-in also answering `NAME=IP`
    /// for each of `zone` (a name whose owner points it anywhere).
    pub fn start_with(zone: &[String]) -> Self {
        Self::start_then(|_| zone.to_vec())
    }

    /// [`Internet::start_with`] the zone `more` returns: it runs once the
    /// network exists and before the resolver stand-in starts, so it can
    /// put stand-ins of its own on the network (removed by their owner)
    /// and name them.
    pub fn start_then(more: impl FnOnce(&Network) -> Vec<String>) -> Self {
        let net = Network::with_prefix(false, "inet-");
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("internet-"));
        let www = dir.join("www");
        std::fs::create_dir_all(&www).unwrap();
        std::fs::write(www.join("big.bin"), blob(BIG)).unwrap();
        std::fs::write(www.join("small.txt"), b"hello from the stand-in\n").unwrap();
        make_cert(&dir);
        // Readable by the stand-ins whatever uid they run as.
        for p in [&dir, &www] {
            std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        }
        for f in ["cert.pem", "key.pem", "www/big.bin", "www/small.txt"] {
            std::fs::set_permissions(dir.join(f), std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        }
        let mut inet = Internet {
            net,
            containers: Vec::new(),
            web_ip: String::new(),
            tls_ip: String::new(),
            dns_ip: String::new(),
            subnet: String::new(),
            dir,
        };
        let fixture = fixture_image();
        let srv = format!("{}:/srv:ro", inet.dir.display());
        inet.web_ip = inet.run("web", &["-v", &srv], &fixture, &["http-serve", "80", "/srv/www"]);
        let tls_args =
            ["-v", srv.as_str(), "-w", "/srv/www", "--entrypoint", "/usr/bin/openssl", "-e", "OPENSSL_CONF=/dev/null"];
        let tls_cmd =
            ["s_server", "-quiet", "-accept", "443", "-cert", "/srv/cert.pem", "-key", "/srv/key.pem", "-WWW"];
        inet.tls_ip = inet.run("tls", &tls_args, tools_image(), &tls_cmd);
        let dns_name = inet.name("dns");
        inet.dns_ip = inet.run("dns", &["-v", &srv], &fixture, &["http-serve", "80", "/srv/www"]);
        let zone = more(&inet.net);
        let zone = [
            format!("{FILES}={}", inet.web_ip),
            format!("{EVIL}={}", inet.web_ip),
            format!("{PYPI}={}", inet.tls_ip),
            format!("{TLS2}={}", inet.tls_ip),
            format!("{REBIND}={}", inet.dns_ip),
            format!("{LOOP}=127.0.0.1"),
        ]
        .into_iter()
        .chain(zone.iter().cloned())
        .collect::<Vec<_>>();
        let mut args = vec!["exec", "-d", &dns_name, "/bin/fixture", "dns-serve", "53"];
        args.extend(zone.iter().map(String::as_str));
        args.extend(["--count", "/tmp/queries"]);
        docker_ok(&args);
        until(std::time::Duration::from_secs(10), || {
            docker(&["exec", &dns_name, "/bin/fixture", "exists", "/tmp/queries"]).status.success()
        })
        .expect("the resolver stand-in never started");
        inet.subnet =
            docker_ok(&["network", "inspect", "--format", "{{(index .IPAM.Config 0).Subnet}}", &inet.net.name]);
        inet
    }

    fn name(&self, role: &str) -> String {
        format!("{}-{role}", self.net.host)
    }

    /// Start one stand-in (as root with only NET_BIND_SERVICE: it serves on
    /// 53, 80 or 443); its address on the network.
    fn run(&mut self, role: &str, opts: &[&str], image: &str, cmd: &[&str]) -> String {
        let name = self.name(role);
        let mut args = vec!["run", "-d", "--name", &name, "--label", TEST_LABEL, "--network", &self.net.name];
        args.extend(["--cap-drop", "ALL", "--cap-add", "NET_BIND_SERVICE", "--memory", "128m", "--pids-limit", "64"]);
        args.extend_from_slice(opts);
        args.push(image);
        args.extend_from_slice(cmd);
        docker_ok(&args);
        self.containers.push(name.clone());
        let format = format!("{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}", self.net.name);
        docker_ok(&["inspect", "--format", &format, &name])
    }

    /// The rules that let the gate connect to the web and TLS stand-ins'
    /// addresses (private, so refused without them), and nothing else.
    pub fn cidr_rules(&self) -> Vec<String> {
        vec![format!("{}/32:80", self.web_ip), format!("{}/32:443", self.tls_ip)]
    }

    /// `--egress-network`, `--egress-dns` and the CIDR rules, plus `--allow`
    /// for each of `names`: the create flags of a sandbox on this internet.
    pub fn create_args(&self, names: &[&str]) -> Vec<String> {
        let mut args =
            vec!["--egress-network".into(), self.net.name.clone(), "--egress-dns".into(), self.dns_ip.clone()];
        for rule in self.cidr_rules().into_iter().chain(names.iter().map(|n| n.to_string())) {
            args.extend(["--allow".into(), rule]);
        }
        args
    }

    /// How many queries for `name` (any type) the resolver stand-in got.
    pub fn queries(&self, name: &str) -> usize {
        let out = docker(&["exec", &self.name("dns"), "/bin/fixture", "read", "/tmp/queries"]);
        assert_success(&out, "reading the resolver stand-in's query log");
        stdout(&out).lines().filter(|l| l.split_whitespace().next() == Some(name)).count()
    }

    /// The payload the stand-ins serve as `big.bin`.
    pub fn big(&self) -> Vec<u8> {
        blob(BIG)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Internet {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = docker(&["rm", "-f", "-v", c]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        // The network goes with `self.net` (fields drop after this body).
    }
}

/// A self-signed certificate for the TLS stand-in (`cert.pem`, `key.pem` in
/// `dir`), made with the openssl CLI. The client skips verification (`-k`).
fn make_cert(dir: &Path) {
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=pypi.org", "-addext", "subjectAltName=DNS:pypi.org,DNS:tls2.example"])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .output()
        .expect("spawn openssl (apt-get install openssl)");
    assert_success(&out, "openssl req (making the stand-in's certificate)");
}

/// The fixture plus `/usr/bin/curl` and `/usr/bin/openssl` and their shared
/// libraries, as an image (entrypoint: the fixture). Cached on the engine by
/// content, like the fixture image.
pub fn tools_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let mut files: Vec<PathBuf> = Vec::new();
        for bin in ["/usr/bin/curl", "/usr/bin/openssl"] {
            files.push(PathBuf::from(bin));
            files.extend(shared_objects(Path::new(bin)));
        }
        files.sort();
        files.dedup();
        let mut key = std::fs::read(fixture_binary()).unwrap();
        for f in &files {
            key.extend_from_slice(f.to_string_lossy().as_bytes());
            key.extend(std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())));
        }
        let label = format!("{TEST_LABEL}.tools={}", fnv(&key));
        let cached = docker_ok(&["images", "-q", "--no-trunc", "--filter", &format!("label={label}")]);
        if let Some(id) = cached.lines().next() {
            return id.to_string();
        }
        let tree = ImageTree::new(&["etc", "srv"]);
        for f in &files {
            let inside = tree.root().join(f.strip_prefix("/").unwrap());
            std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
            // Copied through symlinks: the image holds the files themselves.
            std::fs::copy(f, &inside).unwrap();
        }
        tree.changes(&[&format!("LABEL {label}")]).import().keep()
    })
}

/// Absolute paths of the shared objects `exe` loads (ldd), read by sbx's own parser.
fn shared_objects(exe: &Path) -> Vec<PathBuf> {
    let out = Command::new("ldd").arg(exe).output().expect("spawn ldd");
    sbx::host::self_image::parse_ldd(&String::from_utf8_lossy(&out.stdout))
}

pub(crate) fn fnv(data: &[u8]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

/// Run `program ARGS` in sandbox `sb` with docker exec (so with the
/// sandbox's environment: its proxy variables).
pub fn exec_in(sb: &Sandbox, program: &str, args: &[&str]) -> Output {
    let mut full = vec!["exec", sb.id.as_str(), program];
    full.extend_from_slice(args);
    docker(&full)
}

/// `curl ARGS` in the sandbox, quiet but for errors, bounded in time;
/// the exit code says how it went.
pub fn curl(sb: &Sandbox, args: &[&str]) -> Output {
    let mut full = vec!["-sS", "--max-time", "20"];
    full.extend_from_slice(args);
    exec_in(sb, "/usr/bin/curl", &full)
}

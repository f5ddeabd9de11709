//! The secrets tests' stand-in API: `standin_api.py` (beside this file) in
//! a container of the stock Debian image on the test's [`Internet`], under
//! the names [`API`], [`GIT`] and [`OTHER`], serving HTTPS on 443 with a
//! certificate from a CA the test makes ([`StandinApi::ca_pem`] is what
//! sbx gets as `--egress-ca`). It logs every request it got as a JSON line
//! on stdout ([`StandinApi::requests`]); only `/echo` answers with what it
//! received. Git smart HTTP (`/org/repo.git`) and the pip index
//! (`/simple/sbxdemo/`) want one of the accepted tokens ([`StandinApi::accept`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::debian::debian_image;
use super::*;

/// The model-API name (a secret's host in the tests).
pub const API: &str = "api.example";
/// The git host's name (same stand-in, its own secret).
pub const GIT: &str = "git.example";
/// A second name of the same stand-in that no secret names: what reaches it
/// through the gate is what the sandbox sent.
pub const OTHER: &str = "other.example";

const SCRIPT: &str = include_str!("standin_api.py");

pub struct StandinApi {
    /// The CA (`ca.pem`, `ca.key`) and `srv/`, the stand-in's mount.
    dir: PathBuf,
    pub name: String,
    pub ip: String,
}

impl StandinApi {
    /// The CA, the stand-in's certificate and its accepted `tokens`; no
    /// container yet ([`StandinApi::start`]).
    pub fn new(tokens: &[&str]) -> Self {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("standin-"));
        let srv = dir.join("srv");
        std::fs::create_dir_all(&srv).unwrap();
        make_ca_and_leaf(&dir, &[API, GIT, OTHER]);
        std::fs::write(srv.join("standin_api.py"), SCRIPT).unwrap();
        let api = StandinApi { dir, name: unique("sbxt-standin-"), ip: String::new() };
        api.accept(tokens);
        api
    }

    /// Run it on `net` (as root with only NET_BIND_SERVICE: it serves on
    /// 443) and wait until it listens; the zone entries naming it.
    pub fn start(&mut self, net: &Network) -> Vec<String> {
        let srv = format!("{}:/srv:ro", self.dir.join("srv").display());
        docker_ok(&[
            "run",
            "-d",
            "--name",
            &self.name,
            "--label",
            TEST_LABEL,
            "--network",
            &net.name,
            "--cap-drop",
            "ALL",
            "--cap-add",
            "NET_BIND_SERVICE",
            "--memory",
            "256m",
            "--pids-limit",
            "128",
            "-v",
            &srv,
            "--entrypoint",
            "python3",
            debian_image(),
            "-u",
            "/srv/standin_api.py",
            "/srv",
        ]);
        let format = format!("{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}", net.name);
        self.ip = docker_ok(&["inspect", "--format", &format, &self.name]);
        let ready = until(Duration::from_secs(30), || {
            let (out, _) = self.logs();
            out.lines().any(|l| l.contains("\"ready\": true"))
        });
        if ready.is_none() {
            let (out, err) = self.logs();
            panic!("the stand-in API never listened:\nstdout: {out}\nstderr: {err}");
        }
        [API, GIT, OTHER].iter().map(|n| format!("{n}={}", self.ip)).collect()
    }

    /// An [`Internet`] with this stand-in on it, started with `tokens` accepted.
    pub fn on_internet(tokens: &[&str]) -> (Internet, StandinApi) {
        let mut api = StandinApi::new(tokens);
        let inet = Internet::start_then(|net| api.start(net));
        (inet, api)
    }

    /// The test CA's certificate (PEM): `--egress-ca`, or a client's `--cacert`.
    pub fn ca_pem(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The rule that lets a gate connect to it (a private address).
    pub fn rule(&self) -> String {
        format!("{}/32:443", self.ip)
    }

    /// Accept exactly `tokens` from now on (read for every request).
    pub fn accept(&self, tokens: &[&str]) {
        let srv = self.dir.join("srv");
        let part = srv.join("tokens.part");
        std::fs::write(&part, tokens.iter().map(|t| format!("{t}\n")).collect::<String>()).unwrap();
        std::fs::rename(&part, srv.join("tokens")).unwrap();
    }

    /// Its stdout and stderr so far (`docker logs`).
    pub fn logs(&self) -> (String, String) {
        let out = docker(&["logs", &self.name]);
        (stdout(&out), stderr(&out))
    }

    /// Every request it logged (the `ready` line and connection-level
    /// lines are left out: those have no `n`), in order.
    pub fn requests(&self) -> Vec<Value> {
        self.log_lines().into_iter().filter(|l| l.get("n").is_some()).collect()
    }

    /// Every line it logged, parsed.
    pub fn log_lines(&self) -> Vec<Value> {
        let (out, _) = self.logs();
        out.lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: a stand-in log line that is not JSON: {l}"))
            })
            .collect()
    }

    /// The requests it logged for `host` (by the Host header, with or
    /// without `:443`) and `path` prefix.
    pub fn requests_to(&self, host: &str, path: &str) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| header(r, "host").is_some_and(|h| h == host || h == format!("{host}:443")))
            .filter(|r| r["path"].as_str().unwrap_or("").starts_with(path))
            .collect()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for StandinApi {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", "-v", &self.name]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Every value of header `name` (any case) in a logged request.
pub fn headers(request: &Value, name: &str) -> Vec<String> {
    request["headers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|kv| kv[0].as_str().is_some_and(|k| k.eq_ignore_ascii_case(name)))
        .filter_map(|kv| kv[1].as_str().map(str::to_string))
        .collect()
}

/// The one value of header `name` in a logged request (the first, if several).
pub fn header(request: &Value, name: &str) -> Option<String> {
    headers(request, name).into_iter().next()
}

/// Where `needle` occurs in a logged request, by part: `header NAME`,
/// `target`, `body`, `sni`. Empty when nowhere.
pub fn found_in(request: &Value, needle: &str) -> Vec<String> {
    let mut at = Vec::new();
    for kv in request["headers"].as_array().into_iter().flatten() {
        let (k, v) = (kv[0].as_str().unwrap_or(""), kv[1].as_str().unwrap_or(""));
        if k.contains(needle) || v.contains(needle) {
            at.push(format!("header {}", k.to_ascii_lowercase()));
        }
    }
    for part in ["target", "body", "sni", "bad"] {
        if request[part].as_str().is_some_and(|s| s.contains(needle)) {
            at.push(part.to_string());
        }
    }
    at
}

/// `Basic base64(user:password)`, as a client sends it.
pub fn basic(user: &str, password: &str) -> String {
    use base64::Engine;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
}

/// A CA (`ca.pem`, `ca.key` in `dir`) and a leaf it signed for `names`
/// (`srv/cert.pem`, `srv/key.pem`), made with the openssl CLI; both P-256,
/// valid two days, with the extensions a strict verifier (webpki) wants.
pub fn make_ca_and_leaf(dir: &Path, names: &[&str]) {
    let srv = dir.join("srv");
    let openssl = |args: &[&str], what: &str| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .env("OPENSSL_CONF", "/dev/null")
            .output()
            .expect("spawn openssl (apt-get install openssl)");
        assert_success(&out, what);
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let mut ca = vec!["req", "-x509", "-days", "2", "-subj", "/CN=sbx-test stand-in CA"];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem"]);
    ca.extend(["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
    ca.extend(["-addext", "subjectKeyIdentifier=hash"]);
    openssl(&ca, "openssl req (the stand-in's CA)");
    let mut csr = vec!["req", "-new", "-subj"];
    let cn = format!("/CN={}", names[0]);
    csr.push(&cn);
    csr.extend(ec);
    csr.extend(["-keyout", "srv/key.pem", "-out", "leaf.csr"]);
    openssl(&csr, "openssl req (the stand-in's key)");
    let san = names.iter().map(|n| format!("DNS:{n}")).collect::<Vec<_>>().join(",");
    let ext = format!(
        "subjectAltName={san}\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
         extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
    );
    std::fs::write(dir.join("leaf.ext"), ext).unwrap();
    let sign = [
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "leaf.ext",
        "-out",
        "srv/cert.pem",
    ];
    openssl(&sign, "openssl x509 (signing the stand-in's certificate)");
    let _ = srv;
}

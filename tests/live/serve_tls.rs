//! `sbx serve --tls-cert --tls-key`: the real E2B SDK over HTTPS and
//! HTTP/2 (it offers h2 by ALPN), trusting a throwaway CA made here with
//! `openssl`; plain HTTP to the TLS port, and the flags' refusals.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::support::serve::*;
use super::support::*;

/// A throwaway CA and a server certificate it signed for 127.0.0.1, in a
/// dir of the test's own; removed on drop.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(case: &str) -> Self {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("tls-{case}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl").args(args).current_dir(&dir).stdin(Stdio::null()).output();
            assert_success(&out.expect("spawn openssl"), &format!("openssl {args:?}"));
        };
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
        openssl(
            &[
                &["req", "-x509"][..],
                &ec,
                &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=sbx test CA"],
            ]
            .concat(),
        );
        openssl(
            &[&["req", "-new"][..], &ec, &["-keyout", "key.pem", "-out", "server.csr", "-subj", "/CN=127.0.0.1"]]
                .concat(),
        );
        std::fs::write(
            dir.join("ext.cnf"),
            "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "cert.pem",
        ]);
        // openssl writes keys 0600 under root's umask too; say so, as serve demands.
        std::fs::set_permissions(dir.join("key.pem"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        Pki { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// serve's TLS flags for this certificate.
    fn flags(&self) -> [String; 4] {
        ["--tls-cert".into(), self.path("cert.pem"), "--tls-key".into(), self.path("key.pem")]
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// serve with TLS, `templates` and `more` flags.
fn start<'w>(w: &'w World, templates: &[String], pki: &Pki, more: &[&str]) -> Server<'w> {
    let flags = pki.flags();
    let mut extra: Vec<&str> = flags.iter().map(String::as_str).collect();
    extra.extend(more);
    Server::start_with(w, templates, &extra)
}

/// curl `args` (bounded), its output.
fn curl(args: &[&str]) -> Output {
    Command::new("curl").args(["-sS", "--max-time", "20"]).args(args).stdin(Stdio::null()).output().expect("spawn curl")
}

#[test]
fn the_e2b_sdk_works_over_https_and_http2() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let pki = Pki::new(&w.case);
    // -v: serve logs each TLS connection's protocol.
    let s = start(&w, &[format!("debian={}", img.0)], &pki, &["-v"]);
    assert!(s.url.starts_with("https://") && s.stderr().contains(&format!("listening on {}", s.url)), "{}", s.stderr());
    let script = r#"
import time
from e2b import Sandbox
sbx = Sandbox.create("debian")
try:
    seen = []
    r = sbx.commands.run("echo one; sleep 2; echo two", on_stdout=lambda l: seen.append((l, time.monotonic())))
    ended = time.monotonic()
    assert (r.stdout, r.exit_code) == ("one\ntwo\n", 0), r
    assert [l for l, _ in seen] == ["one\n", "two\n"], seen
    assert ended - seen[0][1] > 1.0, "output came at the end, not as it was made"
    info = sbx.files.write("/tmp/over-tls", b"\x00\xffh2")
    assert sbx.files.read("/tmp/over-tls", format="bytes") == b"\x00\xffh2"
    assert sbx.sandbox_id in [x.sandbox_id for x in Sandbox.list().next_items()]
finally:
    assert sbx.kill()
print("ok")
"#;
    let out = s.sdk(script, &s.key()).env("SSL_CERT_FILE", pki.path("ca.pem")).output().unwrap();
    assert_success(&out, &format!("the SDK over https (server said: {})", s.stderr()));
    assert_eq!(stdout(&out), "ok\n");
    assert_eq!(json(&w.sbx(&["ls", "--json"])), serde_json::json!([]), "kill destroyed it");
    // The SDK negotiated HTTP/2, and pins file downloads to HTTP/1.1
    // (ENVD_API_FILE_DOWNLOAD_HTTP_VERSION): both were served over TLS.
    let log = s.stderr();
    assert!(log.contains("TLS connection protocol=\"h2\""), "the SDK did not negotiate h2: {log}");
    assert!(log.contains("TLS connection protocol=\"http/1.1\""), "no HTTP/1.1 download connection: {log}");
    // The same server, asked by curl: h2 when offered, HTTP/1.1 when only that is.
    let h2 = curl(&["--cacert", &pki.path("ca.pem"), "--http2", "-v", &format!("{}/health", s.url)]);
    let (said, body) = (stderr(&h2), stdout(&h2));
    assert!(said.contains("ALPN: server accepted h2") && said.contains("< HTTP/2 401"), "{said}");
    assert!(body.contains("\"code\":401"), "E2B's error shape: {body}");
    let h1 = curl(&["--cacert", &pki.path("ca.pem"), "--http1.1", "-v", &format!("{}/health", s.url)]);
    assert!(stderr(&h1).contains("< HTTP/1.1 401"), "{}", stderr(&h1));
    // Without the CA, the certificate is not trusted: nothing is sent.
    let untrusted = curl(&[&format!("{}/health", s.url)]);
    assert_eq!(untrusted.status.code(), Some(60), "curl's 'peer certificate cannot be authenticated': {untrusted:?}");
}

/// SIGTERM over HTTP/2: GOAWAY, a command in flight still ends with its
/// output, the server exits 0.
#[test]
fn sigterm_over_http2_lets_a_command_in_flight_end() {
    use std::io::BufRead;
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let pki = Pki::new(&w.case);
    let mut s = start(&w, &[format!("debian={}", img.0)], &pki, &["-v"]);
    let script = r#"
from e2b import Sandbox
sbx = Sandbox.create("debian", timeout=120)
h = sbx.commands.run("sleep 2; echo done", background=True)
print("started", sbx.sandbox_id)
print(h.wait().stdout, end="")
"#;
    let mut sdk = s.sdk(script, &s.key());
    sdk.env("SSL_CERT_FILE", pki.path("ca.pem")).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut py = sdk.spawn().unwrap();
    let mut lines = std::io::BufReader::new(py.stdout.take().unwrap()).lines();
    let first = lines.next().expect("the script printed nothing").unwrap();
    assert!(first.starts_with("started sbx-"), "{first}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(s.child.id() as i32), nix::sys::signal::SIGTERM).unwrap();
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let done = py.wait_with_output().unwrap();
    assert!(done.status.success(), "{}\nserver said: {}", stderr(&done), s.stderr());
    assert_eq!(rest, ["done"], "the command in flight ended with its output");
    let status = s.child.wait().unwrap();
    assert!(status.success(), "serve exits 0 on SIGTERM: {status:?}; {}", s.stderr());
    assert!(s.stderr().contains("TLS connection protocol=\"h2\""), "{}", s.stderr());
}

/// Plain HTTP to the TLS port is told, in plain HTTP and E2B's error
/// shape, to use https; the SDK pointed at http:// says so too; TLS
/// clients are served as before.
#[test]
fn plain_http_to_the_tls_port_fails_cleanly() {
    let w = World::new();
    let pki = Pki::new(&w.case);
    let s = start(&w, &[], &pki, &[]);
    let plain = curl(&["-i", &format!("http://{}/health", s.addr)]);
    let said = stdout(&plain);
    assert!(said.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{plain:?}");
    assert!(said.contains(r#"{"code":400,"message":"sbx serve speaks TLS on this port: use https://"}"#), "{said}");
    let script = r#"
import os, urllib.request, urllib.error
from e2b import Sandbox, SandboxException
url = os.environ["E2B_API_URL"]
try:
    urllib.request.urlopen(url + "/health", timeout=20)
    raise SystemExit("plain HTTP was answered as if TLS")
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
try:
    Sandbox.create("debian", api_key=os.environ["E2B_API_KEY"])
    raise SystemExit("a create over plain HTTP succeeded")
except SandboxException as e:
    print("sdk", e)
"#;
    let plain_url = format!("http://{}", s.addr);
    let out =
        s.sdk(script, &s.key()).env("E2B_API_URL", &plain_url).env("E2B_SANDBOX_URL", &plain_url).output().unwrap();
    assert_success(
        &out,
        &format!("python urllib and the SDK, plain HTTP to the TLS port (server said: {})", s.stderr()),
    );
    let text = stdout(&out);
    assert!(
        text.starts_with("400 {\"code\":400,\"message\":\"sbx serve speaks TLS on this port: use https://\"}\n"),
        "{text}"
    );
    assert!(text.contains("sdk 400: sbx serve speaks TLS on this port: use https://"), "{text}");
    let ok =
        curl(&["--cacert", &pki.path("ca.pem"), "-o", "/dev/null", "-w", "%{http_code}", &format!("{}/health", s.url)]);
    assert_eq!(stdout(&ok), "401", "the server still serves TLS: {}", s.stderr());
    assert_eq!(json(&w.sbx(&["ls", "--json"])), serde_json::json!([]), "nothing was made");
}

/// `sbx serve ARGS` in `w`, bounded: a refusal that does not come ends the test, not the run.
fn serve(w: &World, args: &[&str]) -> Output {
    let out = Command::new("timeout")
        .args(["20", SBX])
        .args(w.dir_args())
        .arg("serve")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("spawn sbx serve");
    assert_ne!(out.status.code(), Some(124), "sbx serve {args:?} listened instead of refusing");
    out
}

fn port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string()
}

#[test]
fn bad_tls_flags_and_cleartext_on_the_network_exit_2() {
    let w = World::new();
    let pki = Pki::new(&w.case);
    let (cert, key) = (pki.path("cert.pem"), pki.path("key.pem"));
    let local = format!("127.0.0.1:{}", port());
    // Not loopback, no TLS: refused, pointing at the TLS flags.
    let out = serve(&w, &["--listen", &format!("0.0.0.0:{}", port())]);
    assert_exit(&out, 2, "0.0.0.0 without TLS");
    assert!(
        stderr(&out).contains("in the clear") && stderr(&out).contains("--tls-cert FILE --tls-key FILE"),
        "{}",
        stderr(&out)
    );
    // A key others may read.
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = serve(&w, &["--listen", &local, "--tls-cert", &cert, "--tls-key", &key]);
    assert_exit(&out, 2, "a key others can read");
    assert!(stderr(&out).contains("lets its group or others read the private key"), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("chmod 600 {key}")), "{}", stderr(&out));
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // A key that cannot be read (a directory, a missing file), one that is not the certificate's.
    let dir = pki.dir.join("a-dir");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let out = serve(&w, &["--listen", &local, "--tls-cert", &cert, "--tls-key", &dir.display().to_string()]);
    assert_exit(&out, 2, "a directory as the key");
    assert!(stderr(&out).contains("--tls-key") && stderr(&out).contains("cannot be read"), "{}", stderr(&out));
    let out = serve(&w, &["--listen", &local, "--tls-cert", &pki.path("none.pem"), "--tls-key", &key]);
    assert_exit(&out, 2, "a missing certificate");
    assert!(stderr(&out).contains("--tls-cert") && stderr(&out).contains("cannot be read"), "{}", stderr(&out));
    let out = serve(&w, &["--listen", &local, "--tls-cert", &cert, "--tls-key", &pki.path("ca.key")]);
    assert_exit(&out, 2, "the CA's key for the server's certificate");
    assert!(stderr(&out).contains("does not go with --tls-cert"), "{}", stderr(&out));
    let out = serve(&w, &["--listen", &local, "--tls-cert", &key, "--tls-key", &key]);
    assert_exit(&out, 2, "a key as the certificate");
    assert!(stderr(&out).contains("no CERTIFICATE block"), "{}", stderr(&out));
    let out = serve(&w, &["--listen", &local, "--tls-cert", &cert]);
    assert_exit(&out, 2, "--tls-cert alone");
    assert!(stderr(&out).contains("--tls-key"), "{}", stderr(&out));
    // Nothing listened, and no key was made, for any of them.
    assert!(std::net::TcpStream::connect(&local).is_err(), "something listens on {local}");
    assert!(!Path::new(&w.state_dir).join("serve/api-key").exists(), "a refused start made an API key");
}

/// With TLS, a non-loopback address is served (reached here over loopback only).
#[test]
fn with_tls_a_wildcard_address_is_served() {
    let w = World::new();
    let pki = Pki::new(&w.case);
    let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-{}.log", w.case));
    // Port 0: the port serve says it bound, never one probed earlier that
    // another test may have taken since.
    let mut child = Command::new(SBX)
        .args(w.dir_args())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .args(pki.flags())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn sbx serve");
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    let bound = said_listening(&log, "https");
    let port = bound.as_ref().and_then(|a| a.strip_prefix("0.0.0.0:")).map(str::to_string);
    let got = port.as_ref().map(|p| {
        let url = format!("https://127.0.0.1:{p}/health");
        curl(&["--cacert", &pki.path("ca.pem"), "-o", "/dev/null", "-w", "%{http_code}", &url])
    });
    let _ = child.kill();
    let _ = child.wait();
    let said = said();
    let _ = std::fs::remove_file(&log);
    let got = got.unwrap_or_else(|| panic!("sbx serve did not say it listens on 0.0.0.0:PORT: {said}"));
    assert_eq!(stdout(&got), "401", "{said}");
}

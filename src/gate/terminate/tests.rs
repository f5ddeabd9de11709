//! Termination in process: an HTTPS stand-in on 127.0.0.1 (its own CA,
//! handed to the gate as the vault's roots) records every request it gets
//! and answers `/echo` with the request's head, the rest with `ok`; the
//! sandbox side trusts the sandbox CA whose leaf the vault holds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;

use crate::gate::tests::pki::Ca;
use crate::gate::vault::arm;
use crate::spec::egress::vault::{HostCert, SecretValue, Vault};
use crate::spec::egress::{AllowRule, LogLine, Mode, Policy, RequestRule, Terminated};

const HOST: &str = "files.example";
const PH: &str = "sbx-ph-0123456789abcdef";
const VALUE: &str = "real-value-s3cr3t";

type Seen = Arc<Mutex<Vec<String>>>;

/// The bench's body: 200 MiB.
const BULK: usize = 200 << 20;

/// The HTTPS stand-in: (port, what it received, its CA).
async fn stand_in() -> (u16, Seen, Ca) {
    stand_in_with(false).await
}

/// `rude`: answer one request per connection, then close without saying so.
async fn stand_in_with(rude: bool) -> (u16, Seen, Ca) {
    let ca = Ca::new();
    let (cert, key) = ca.leaf(HOST);
    let chain = CertificateDer::pem_slice_iter(cert.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let (acceptor, log) = (acceptor.clone(), log.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(s).await else { return };
                if rude {
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && tls.read_exact(&mut b).await.is_ok() {
                        head.push(b[0]);
                    }
                    log.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
                    let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await;
                    let _ = tls.shutdown().await;
                    return;
                }
                // The connection's last Authorization, for `/remembered`: a
                // host that reflects what an earlier request sent.
                let remembered: Seen = Arc::default();
                let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (log, remembered) = (log.clone(), remembered.clone());
                    async move {
                        let auth = req
                            .headers()
                            .get("authorization")
                            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
                        let mut text = format!("{} {}\n", req.method(), req.uri());
                        for (k, v) in req.headers() {
                            text.push_str(&format!("{k}: {}\n", String::from_utf8_lossy(v.as_bytes())));
                        }
                        let path = req.uri().path().to_string();
                        let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        text.push('\n');
                        text.push_str(&String::from_utf8_lossy(&body));
                        log.lock().unwrap().push(text.clone());
                        let answer = match path.as_str() {
                            "/remembered" => remembered.lock().unwrap().join("\n"),
                            "/echo" => text,
                            "/big" => format!("{VALUE}x").repeat(300_000),
                            "/bulk" => "y".repeat(BULK),
                            _ => "ok".to_string(),
                        };
                        remembered.lock().unwrap().extend(auth);
                        let mut resp = hyper::Response::new(Full::new(Bytes::from(answer)));
                        if path == "/echo" {
                            resp.headers_mut().insert("x-token", VALUE.parse().unwrap());
                        }
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let io = hyper_util::rt::TokioIo::new(tls);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
            });
        }
    });
    (port, seen, ca)
}

fn client_config(ca_pem: &str) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

struct T {
    rig: crate::gate::tests::Rig,
    port: u16,
    seen: Seen,
    sandbox_ca: Ca,
}

fn policy(port: u16, rules: Vec<RequestRule>) -> Policy {
    let lo = std::net::IpAddr::from([127, 0, 0, 0]);
    Policy {
        mode: Mode::Enforce,
        rules: vec![AllowRule::Host { name: HOST.into(), port }, AllowRule::Cidr { addr: lo, prefix: 8, port }],
        host_addrs: Vec::new(),
        terminate: vec![Terminated { host: HOST.into(), port, rules, secrets: vec!["API_KEY".into()] }],
    }
}

async fn setup_with(port: u16, up_ca: Ca, rules: Vec<RequestRule>) -> T {
    let mut t = setup_on(port, &up_ca, rules, true).await;
    t.seen = Arc::default();
    t
}

async fn setup(rules: Vec<RequestRule>, push: bool) -> T {
    let (port, seen, up_ca) = stand_in().await;
    let mut t = setup_on(port, &up_ca, rules, push).await;
    t.seen = seen;
    t
}

async fn setup_on(port: u16, up_ca: &Ca, rules: Vec<RequestRule>, push: bool) -> T {
    let seen = Seen::default();
    let rig = crate::gate::tests::rig(policy(port, rules)).await;
    let sandbox_ca = Ca::new();
    if push {
        let (cert_pem, key_pem) = sandbox_ca.leaf(HOST);
        let vault = Vault {
            secrets: vec![SecretValue {
                name: "API_KEY".into(),
                host: HOST.into(),
                port,
                header: "Authorization".into(),
                placeholder: PH.into(),
                value: VALUE.into(),
            }],
            certs: vec![HostCert { host: HOST.into(), cert_pem, key_pem }],
            roots_pem: up_ca.pem(),
        };
        rig.vault.send_replace(Some(Arc::new(arm(vault).unwrap())));
    }
    T { rig, port, seen, sandbox_ca }
}

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

impl T {
    /// A TLS connection through the gate, with this SNI.
    async fn connect_sni(&self, sni: &str) -> std::io::Result<Tls> {
        let s = self.rig.tunnel(&format!("{HOST}:{}", self.port)).await;
        let connector = tokio_rustls::TlsConnector::from(client_config(&self.sandbox_ca.pem()));
        connector.connect(ServerName::try_from(sni.to_string()).unwrap(), s).await
    }

    async fn connect(&self) -> Tls {
        self.connect_sni(HOST).await.unwrap()
    }

    /// Send `request` on a new connection, read the whole answer.
    async fn ask(&self, request: &str) -> String {
        let mut s = self.connect().await;
        s.write_all(request.as_bytes()).await.unwrap();
        read_all(&mut s).await
    }

    fn seen(&self) -> String {
        self.seen.lock().unwrap().join("\n----\n")
    }

    fn host(&self) -> String {
        format!("{HOST}:{}", self.port)
    }

    fn logs(&self) -> Vec<LogLine> {
        self.rig.logs.lock().unwrap().clone()
    }
}

async fn read_all<S: AsyncRead + Unpin>(s: &mut S) -> String {
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got)).await.unwrap();
    String::from_utf8_lossy(&got).into_owned()
}

/// One response (head and de-chunked body) off a kept-alive connection.
async fn read_one<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> (String, String) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).await.unwrap();
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let mut body = Vec::new();
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        loop {
            let mut line = Vec::new();
            while !line.ends_with(b"\r\n") {
                s.read_exact(&mut byte).await.unwrap();
                line.push(byte[0]);
            }
            let n = usize::from_str_radix(std::str::from_utf8(&line[..line.len() - 2]).unwrap(), 16).unwrap();
            let mut chunk = vec![0; n + 2];
            s.read_exact(&mut chunk).await.unwrap();
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    }
    (head, String::from_utf8_lossy(&body).into_owned())
}

fn status(reply: &str) -> &str {
    reply.split(' ').nth(1).unwrap_or(reply)
}

fn get(path: &str, host: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n")
}

#[tokio::test]
async fn the_value_goes_only_into_its_header_in_each_form_and_never_comes_back() {
    let t = setup(Vec::new(), true).await;
    let b64 = base64::engine::general_purpose::STANDARD;
    let basic = b64.encode(format!("git:{PH}"));
    for auth in [format!("Bearer {PH}"), PH.to_string(), format!("Basic {basic}")] {
        let reply = t.ask(&get("/echo", &t.host(), &format!("Authorization: {auth}\r\n"))).await;
        assert_eq!(status(&reply), "200", "{reply}");
        assert!(!reply.contains(VALUE), "the value came back: {reply}");
        assert!(reply.contains(&auth), "{reply}");
        assert!(reply.to_ascii_lowercase().contains(&format!("x-token: {PH}")), "{reply}");
    }
    let seen = t.seen();
    let real_basic = b64.encode(format!("git:{VALUE}"));
    for want in [format!("authorization: Bearer {VALUE}"), format!("authorization: {VALUE}\n")] {
        assert!(seen.contains(&want), "{want}: {seen}");
    }
    assert!(seen.contains(&format!("authorization: Basic {real_basic}")), "{seen}");
    assert!(!seen.contains(PH), "{seen}");
    assert!(seen.contains("accept-encoding: identity"), "{seen}");
    let lines: Vec<LogLine> = t.logs().into_iter().filter(|l| l.path.is_some()).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    for l in &lines {
        assert_eq!((l.method.as_deref(), l.path.as_deref(), l.status), (Some("GET"), Some("/echo"), Some(200)));
        assert_eq!(l.secrets, ["API_KEY"]);
        let text = serde_json::to_string(l).unwrap();
        assert!(!text.contains(VALUE) && !text.contains(PH));
        LogLine::parse(&text).unwrap();
    }
}

#[tokio::test]
async fn a_large_body_is_replaced_across_reads() {
    let t = setup(Vec::new(), true).await;
    let mut s = t.connect().await;
    s.write_all(get("/big", &t.host(), "").as_bytes()).await.unwrap();
    let (head, body) = read_one(&mut s).await;
    assert_eq!(status(&head), "200");
    assert!(!body.contains(VALUE));
    assert_eq!(body, format!("{PH}x").repeat(300_000));
}

#[tokio::test]
async fn the_placeholder_anywhere_else_is_refused_and_nothing_arrives() {
    let t = setup(Vec::new(), true).await;
    let h = t.host();
    for request in [
        get("/echo", &h, &format!("X-Other: {PH}\r\n")),
        get(&format!("/echo?k={PH}"), &h, ""),
        get(&format!("/{PH}"), &h, ""),
        get("/echo", &h, &format!("Authorization: token {PH}\r\n")),
        get("/echo", &h, &format!("{PH}: x\r\nAuthorization: Bearer {PH}\r\n")),
        get("/echo", &h, &format!("Authorization: Bearer {PH}\r\nAuthorization: Bearer {PH}\r\n")),
        format!("POST /echo HTTP/1.1\r\nHost: {h}\r\nContent-Length: 30\r\n\r\n{PH}1234567"),
        format!("POST /echo HTTP/1.1\r\nHost: {h}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nsbx-p\r\n12\r\nh-0123456789abcdef\r\n0\r\n\r\n"),
    ] {
        let reply = t.ask(&request).await;
        assert_eq!(status(&reply), "403", "{request}: {reply}");
        assert!(!reply.contains(VALUE));
    }
    assert!(t.seen.lock().unwrap().is_empty(), "{}", t.seen());
    // A body without it passes, chunked too.
    let body = format!(
        "POST /echo HTTP/1.1\r\nHost: {h}\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    );
    assert_eq!(status(&t.ask(&body).await), "200");
    assert!(t.seen().contains("\n\nabc"), "{}", t.seen());
}

#[tokio::test]
async fn tricks_against_the_terminated_host_are_refused() {
    let t = setup(Vec::new(), true).await;
    let h = t.host();
    let auth = format!("Authorization: Bearer {PH}\r\n");
    for (request, want) in [
        (get("/echo", "evil.example", &auth), "403"),
        (get("/echo", &format!("{HOST}:1"), &auth), "403"),
        (format!("GET /echo HTTP/1.1\r\nHost: {h}\r\nHost: evil.example\r\n{auth}\r\n"), "403"),
        (get("https://evil.example/echo", &h, &auth), "403"),
        (get("http://files.example/echo", &h, &auth), "400"),
        (get("/echo", &h, &format!("{auth}Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n")), "403"),
        (
            format!(
                "POST /echo HTTP/1.1\r\nHost: {h}\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            ),
            "400",
        ),
        (format!("POST /echo HTTP/1.1\r\nHost: {h}\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"), "400"),
        (format!("GET /echo HTTP/1.1\r\nHost: {h}\r\nX-A: a\r\n b\r\n\r\n"), "400"),
        (format!("GET /echo HTTP/1.1\r\nHost: {h}\nX-A: a\r\n\r\n"), "400"),
        (get("/a/%2e%2e/%2e%2e/echo", &h, &auth), "400"),
        (get("/a%2fb", &h, &auth), "400"),
        (get("/a\\b", &h, &auth), "400"),
    ] {
        let reply = t.ask(&request).await;
        assert_eq!(status(&reply), want, "{request:?}: {reply}");
    }
    assert!(t.seen.lock().unwrap().is_empty(), "{}", t.seen());
    // Another SNI: no TLS session at all, and the reason logged.
    assert!(t.connect_sni("evil.example").await.is_err());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let logs = t.logs();
    assert!(logs.iter().any(|l| l.reason.as_deref().is_some_and(|r| r.contains("is not files.example"))), "{logs:?}");
}

#[tokio::test]
async fn every_request_on_a_kept_alive_connection_is_checked() {
    let t = setup(Vec::new(), true).await;
    let h = t.host();
    let mut s = t.connect().await;
    // Two requests in one write: the second one (smuggled behind the
    // first's body) is parsed and checked like the first.
    let two = format!(
        "POST /echo HTTP/1.1\r\nHost: {h}\r\nContent-Length: 2\r\nAuthorization: Bearer {PH}\r\n\r\nhi\
         GET /echo HTTP/1.1\r\nHost: {h}\r\nX-Leak: {PH}\r\n\r\n"
    );
    s.write_all(two.as_bytes()).await.unwrap();
    let (head, body) = read_one(&mut s).await;
    assert_eq!(status(&head), "200", "{head}");
    assert!(body.contains(PH) && !body.contains(VALUE), "{body}");
    let rest = read_all(&mut s).await;
    assert_eq!(status(&rest), "403", "{rest}");
    assert_eq!(t.seen.lock().unwrap().len(), 1, "{}", t.seen());
    // Kept alive and good: both pass.
    let mut s = t.connect().await;
    for _ in 0..2 {
        s.write_all(format!("GET /ok HTTP/1.1\r\nHost: {h}\r\n\r\n").as_bytes()).await.unwrap();
        let (head, body) = read_one(&mut s).await;
        assert_eq!((status(&head), body.as_str()), ("200", "ok"));
    }
}

#[tokio::test]
async fn a_policy_without_the_host_ends_its_kept_alive_connection() {
    let t = setup(Vec::new(), true).await;
    let h = t.host();
    let mut s = t.connect().await;
    s.write_all(format!("GET /ok HTTP/1.1\r\nHost: {h}\r\n\r\n").as_bytes()).await.unwrap();
    assert_eq!(status(&read_one(&mut s).await.0), "200");
    let mut p = policy(t.port, Vec::new());
    p.rules.remove(0);
    p.terminate.clear();
    t.rig.set_policy(&p.to_json());
    tokio::time::sleep(Duration::from_millis(600)).await;
    let _ = s.write_all(format!("GET /ok HTTP/1.1\r\nHost: {h}\r\n\r\n").as_bytes()).await;
    let rest = read_all(&mut s).await;
    assert!(rest.is_empty() || status(&rest) == "403", "{rest}");
    assert_eq!(t.seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn an_upstream_that_closed_a_kept_alive_connection_is_dialled_again() {
    let (port, seen, up_ca) = stand_in_with(true).await;
    let mut t = setup_on(port, &up_ca, Vec::new(), true).await;
    t.seen = seen;
    let h = t.host();
    let mut s = t.connect().await;
    for _ in 0..3 {
        s.write_all(format!("GET /ok HTTP/1.1\r\nHost: {h}\r\nAuthorization: Bearer {PH}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let (head, _) = read_one(&mut s).await;
        assert_eq!(status(&head), "200", "{head}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = t.seen();
    assert_eq!(seen.matches(&format!("Bearer {VALUE}")).count(), 3, "{seen}");
}

#[tokio::test]
async fn rules_let_a_clone_through_and_refuse_a_push() {
    let rules = vec![
        RequestRule::parse("GET", "/org/repo.git/info/refs").unwrap(),
        RequestRule::parse("POST", "/org/repo.git/git-upload-pack").unwrap(),
    ];
    let t = setup(rules, true).await;
    let h = t.host();
    let refs = get("/org/repo.git/info/refs?service=git-upload-pack", &h, "");
    assert_eq!(status(&t.ask(&refs).await), "200");
    let post = |p: &str| format!("POST {p} HTTP/1.1\r\nHost: {h}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    assert_eq!(status(&t.ask(&post("/org/repo.git/git-upload-pack")).await), "200");
    let pushed = t.ask(&post("/org/repo.git/git-receive-pack")).await;
    assert_eq!(status(&pushed), "403", "{pushed}");
    assert!(pushed.contains("no rule allows POST /org/repo.git/git-receive-pack"), "{pushed}");
    let sneaky = t.ask(&post("/org/repo.git/git-upload-pack/../git-receive-pack")).await;
    assert_eq!(status(&sneaky), "403", "{sneaky}");
    // Path parameters a Tomcat or Spring upstream would take for path.
    for target in [
        "/org/repo.git/git-upload-pack/..;/git-receive-pack",
        "/org/repo.git/git-upload-pack/%2e%2e;/git-receive-pack",
        "/org/repo.git/git-upload-pack;x/../git-receive-pack",
        "/org/repo.git/git-upload-pack/..%3b/git-receive-pack",
    ] {
        let reply = t.ask(&post(target)).await;
        assert_eq!(status(&reply), "400", "{target}: {reply}");
        assert!(reply.contains("';'"), "{reply}");
    }
    assert_eq!(t.seen.lock().unwrap().len(), 2, "{}", t.seen());
    let lines: Vec<LogLine> = t.logs().into_iter().filter(|l| l.method.is_some()).collect();
    assert!(lines.iter().any(|l| l.rule.as_deref() == Some("GET /org/repo.git/info/refs") && l.status == Some(200)));
    assert!(lines.iter().any(|l| l.decision == "deny" && l.status == Some(403)));
}

#[tokio::test]
async fn plain_http_to_a_terminated_host_and_a_missing_vault_get_nothing() {
    let t = setup(Vec::new(), false).await;
    let reply = t.rig.ask(format!("GET http://{}/echo HTTP/1.1\r\nHost: {HOST}\r\n\r\n", t.host()).as_bytes()).await;
    assert_eq!(status(&reply), "403", "{reply}");
    assert!(reply.contains("use https://"), "{reply}");
    assert!(t.connect_sni(HOST).await.is_err());
    let line = t.rig.log(HOST).await;
    assert_eq!(line.decision, "deny");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        t.logs().iter().any(|l| l.reason.as_deref().is_some_and(|r| r.contains("no certificate"))),
        "{:?}",
        t.logs()
    );
    assert!(t.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_host_that_is_not_terminated_sees_the_placeholder_untouched() {
    let (port, _) = crate::gate::tests::echo().await;
    let rig = crate::gate::tests::rig(crate::gate::tests::allow(port)).await;
    let mut s = rig.tunnel(&format!("{HOST}:{port}")).await;
    let msg = format!("GET / HTTP/1.1\r\nAuthorization: Bearer {PH}\r\n\r\n");
    s.write_all(msg.as_bytes()).await.unwrap();
    let mut got = vec![0; msg.len()];
    s.read_exact(&mut got).await.unwrap();
    assert_eq!(String::from_utf8(got).unwrap(), msg);
}

/// 200 MiB through a terminated host against the same through a tunnel to
/// the same stand-in (run in release: `cargo test --release --lib
/// terminated_throughput -- --ignored --nocapture`).
#[tokio::test]
#[ignore]
async fn terminated_throughput_against_a_tunnel() {
    let (port, _, up_ca) = stand_in().await;
    let tunnel_rig = crate::gate::tests::rig(crate::gate::tests::allow(port)).await;
    let time = |s: Tls| async move {
        let mut s = s;
        let start = std::time::Instant::now();
        let get = format!("GET /bulk HTTP/1.1\r\nHost: {HOST}:{port}\r\nConnection: close\r\n\r\n");
        s.write_all(get.as_bytes()).await.unwrap();
        let mut buf = vec![0; 1 << 20];
        let mut total = 0;
        let mut first = Vec::new();
        loop {
            match s.read(&mut buf).await {
                Ok(0) => break,
                Err(e) => panic!("after {total} bytes: {e}"),
                Ok(n) => {
                    if first.len() < 300 {
                        first.extend_from_slice(&buf[..n.min(300)]);
                    }
                    total += n;
                }
            }
        }
        assert!(total > BULK, "{total}: {}", String::from_utf8_lossy(&first));
        start.elapsed()
    };
    let raw = tunnel_rig.tunnel(&format!("{HOST}:{port}")).await;
    let connector = tokio_rustls::TlsConnector::from(client_config(&up_ca.pem()));
    let plain = time(connector.connect(ServerName::try_from(HOST).unwrap(), raw).await.unwrap()).await;
    drop(tunnel_rig);
    let t = setup_with(port, up_ca, Vec::new()).await;
    let through = time(t.connect().await).await;
    let ratio = plain.as_secs_f64() / through.as_secs_f64();
    println!("tunnel {plain:?}, terminated {through:?}: {:.0}% of the tunnel", ratio * 100.0);
}

/// The sandbox chooses what goes in a logged path, method, header name,
/// reason or CONNECT host: a placeholder put there never reaches the log.
#[tokio::test]
async fn the_decision_log_never_shows_a_placeholder() {
    let t = setup(vec![RequestRule::parse("GET", "/ok").unwrap()], true).await;
    let h = t.host();
    for request in [
        get(&format!("/{PH}"), &h, ""),
        get(&format!("/ok/{PH}"), &h, ""),
        get(&format!("/ok/%73bx-ph-0123456789abcdef/{}", "x".repeat(600)), &h, ""),
        // Where the logged path is cut.
        get(&format!("/ok/{}/{PH}", "x".repeat(500)), &h, ""),
        format!("{PH} /ok HTTP/1.1\r\nHost: {h}\r\nConnection: close\r\n\r\n"),
        get("/ok", &h, &format!("{PH}: x\r\n")),
        get("/ok", &h, &format!("X-{PH}: {PH}\r\n")),
    ] {
        assert_eq!(status(&t.ask(&request).await), "403", "{request}");
    }
    let connect = format!("CONNECT {PH}.example:443 HTTP/1.1\r\nHost: {PH}.example:443\r\n\r\n");
    assert_eq!(status(&t.rig.ask(connect.as_bytes()).await), "403");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let logs = t.logs();
    assert!(logs.len() >= 7, "{logs:?}");
    for l in &logs {
        let text = serde_json::to_string(l).unwrap();
        assert!(!text.to_ascii_lowercase().contains(PH), "the log shows the placeholder: {text}");
        assert!(!text.contains(VALUE), "{text}");
        LogLine::parse(&text).unwrap();
    }
}

/// A server name holding the placeholder: refused on the terminated host
/// and on a tunnel, and the log shows none of it, not even the part of it
/// before a cut.
#[tokio::test]
async fn a_server_name_holding_the_placeholder_is_not_logged() {
    let t = setup(Vec::new(), true).await;
    assert!(t.connect_sni(&format!("{PH}.example")).await.is_err());
    // A tunnel (127.0.0.1 is allowed, not terminated), the placeholder
    // where a long name is cut for the log.
    let s = t.rig.tunnel(&format!("127.0.0.1:{}", t.port)).await;
    let long = format!("{}.{}.{PH}.example", "a".repeat(40), "b".repeat(29));
    let connector = tokio_rustls::TlsConnector::from(client_config(&t.sandbox_ca.pem()));
    assert!(connector.connect(ServerName::try_from(long).unwrap(), s).await.is_err());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let logs = t.logs();
    assert_eq!(logs.iter().filter(|l| l.reason.as_deref().is_some_and(|r| r.contains("server name"))).count(), 2);
    for l in &logs {
        let text = serde_json::to_string(l).unwrap();
        assert!(!text.contains(&PH[..8]), "the log shows (part of) the placeholder: {text}");
    }
}

/// Basic credentials holding the placeholder in any form but the exact
/// one the gate replaces: refused, and nothing reaches the host.
#[tokio::test]
async fn basic_credentials_in_any_other_spelling_are_refused() {
    let t = setup(Vec::new(), true).await;
    let h = t.host();
    let b64 = base64::engine::general_purpose::STANDARD;
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    // "a:" + 23 bytes: 25 bytes, so the canonical token ends in "==".
    let tok = b64.encode(format!("a:{PH}"));
    assert!(tok.ends_with("=="));
    let unpadded = tok.trim_end_matches('=').to_string();
    let (l, r) = tok.split_at(12);
    // The last sextet with bits the decoder must ignore set: `Q`->`R`.
    let mut loose = tok.clone().into_bytes();
    let k = loose.len() - 3;
    loose[k] += 1;
    let loose = String::from_utf8(loose).unwrap();
    for auth in [
        format!("basic {tok}"),
        format!("BASIC {tok}"),
        format!("Basic  {tok}"),
        format!("Basic\t{tok}"),
        format!("Basic {unpadded}"),
        format!("Basic {l} {r}"),
        format!("Basic {l}\t{r}"),
        format!("Basic {tok} x"),
        format!("Basic {loose}"),
        format!("Basic {}", url.encode(format!("a:{PH}"))),
        format!("Basic *{tok}"),
        format!("Basic {}", b64.encode(format!("ab:{PH}x"))),
        format!("Basic {}", b64.encode(format!("ab:x{PH}"))),
        format!("Basic {}", b64.encode(format!("ab:{PH}\0"))),
        format!("Basic {}", b64.encode(format!("{PH}:pw"))),
        format!("Basic {}", b64.encode(format!("{PH}:{PH}"))),
        format!("Basic {}", b64.encode(format!("x{PH}"))),
    ] {
        let reply = t.ask(&get("/echo", &h, &format!("Authorization: {auth}\r\n"))).await;
        assert_eq!(status(&reply), "403", "{auth:?}: {reply}");
    }
    // Put in once, the placeholder still may not ride along in another header.
    let both = format!("Authorization: Bearer {PH}\r\nX-Other: Basic {tok}\r\n");
    assert_eq!(status(&t.ask(&get("/echo", &h, &both)).await), "403");
    assert!(t.seen.lock().unwrap().is_empty(), "{}", t.seen());
    let reply = t.ask(&get("/echo", &h, &format!("Authorization: Basic {tok}\r\n"))).await;
    assert_eq!(status(&reply), "200", "{reply}");
    assert!(t.seen().contains(&format!("authorization: Basic {}", b64.encode(format!("a:{VALUE}")))), "{}", t.seen());
}

/// A method or path override lets an allowed request do what the rules
/// forbid on a server that honours it: refused where there are rules.
#[tokio::test]
async fn override_headers_are_refused_on_a_host_with_rules() {
    let t = setup(vec![RequestRule::parse("GET", "/org/repo.git/info/refs").unwrap()], true).await;
    let h = t.host();
    for extra in [
        "X-HTTP-Method-Override: POST",
        "x-http-method: DELETE",
        "X-Method-Override: PUT",
        "X-Original-URL: /org/repo.git/git-receive-pack",
        "X-Rewrite-URL: /admin",
        "X-Original-Method: POST",
        "X-Override-URL: /admin",
        "X-Forwarded-Path: /admin",
        "X-Envoy-Original-Path: /admin",
    ] {
        let reply = t.ask(&get("/org/repo.git/info/refs", &h, &format!("{extra}\r\n"))).await;
        assert_eq!(status(&reply), "403", "{extra}: {reply}");
        let name = extra.split(':').next().unwrap();
        assert!(reply.contains(name) && reply.contains("override"), "{reply}");
    }
    assert!(t.seen.lock().unwrap().is_empty(), "{}", t.seen());
    // Without rules there is nothing to get around.
    let t = setup(Vec::new(), true).await;
    let reply = t.ask(&get("/echo", &t.host(), "X-HTTP-Method-Override: POST\r\n")).await;
    assert_eq!(status(&reply), "200", "{reply}");
}

/// A Basic token put in on every request of a kept-alive connection, and
/// taken out of every response on it: a host may reflect in a later
/// response what an earlier request sent.
#[tokio::test]
async fn basic_is_put_in_and_taken_out_on_every_request_of_a_connection() {
    let t = setup(Vec::new(), true).await;
    let h = t.host();
    let b64 = base64::engine::general_purpose::STANDARD;
    let tok = b64.encode(format!("git:{PH}"));
    let real = b64.encode(format!("git:{VALUE}"));
    let mut s = t.connect().await;
    for auth in [format!("Basic {tok}"), format!("Basic {tok}"), format!("Bearer {PH}"), format!("Basic {tok}")] {
        s.write_all(format!("GET /echo HTTP/1.1\r\nHost: {h}\r\nAuthorization: {auth}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let (head, body) = read_one(&mut s).await;
        assert_eq!(status(&head), "200", "{head}");
        assert!(body.contains(&auth) && !body.contains(&real) && !body.contains(VALUE), "{body}");
    }
    s.write_all(format!("GET /remembered HTTP/1.1\r\nHost: {h}\r\n\r\n").as_bytes()).await.unwrap();
    let (head, body) = read_one(&mut s).await;
    assert_eq!(status(&head), "200", "{head}");
    assert!(!body.contains(&real) && !body.contains(VALUE), "a later response gave the token away: {body}");
    assert_eq!(body.matches(&format!("Basic {tok}")).count(), 3, "{body}");
    let seen = t.seen();
    assert_eq!(seen.matches(&format!("authorization: Basic {real}")).count(), 3, "{seen}");
    assert!(!seen.contains(PH), "{seen}");
}

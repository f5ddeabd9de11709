//! The gate in process, on 127.0.0.1 only: a resolver stand-in answers
//! `files.example` with 127.0.0.1 and counts queries; upstreams are local
//! servers the tests start; the policy allows them through a Host rule plus
//! a CIDR rule for 127.0.0.0/8 on their port (loopback needs one).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{dns, head, serve, tls, Config, Files};
use crate::spec::egress::{AllowRule, LogLine, Mode, Policy};

const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

pub(crate) fn allow(port: u16) -> Policy {
    let lo = IpAddr::from([127, 0, 0, 0]);
    Policy {
        mode: Mode::Enforce,
        rules: vec![
            AllowRule::Host { name: "files.example".into(), port },
            AllowRule::Cidr { addr: lo, prefix: 8, port },
        ],
        host_addrs: Vec::new(),
        terminate: Vec::new(),
    }
}

pub(crate) struct Rig {
    gate: SocketAddr,
    policy: std::path::PathBuf,
    queries: Arc<AtomicUsize>,
    pub(crate) logs: Arc<Mutex<Vec<LogLine>>>,
    task: tokio::task::JoinHandle<()>,
    /// What the control channel would set.
    pub(crate) vault: tokio::sync::watch::Sender<Option<Arc<super::vault::Armed>>>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_dir_all(self.policy.parent().unwrap());
    }
}

async fn rig_with(policy: Policy, tune: impl FnOnce(&mut Config)) -> Rig {
    let (resolver, queries) = dns::stand_in(&["files.example"]).await;
    let dir = std::env::temp_dir().join(format!("sbx-gate-{}-{}", std::process::id(), rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("policy.json");
    let text = policy.to_json();
    std::fs::write(&path, &text).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gate = listener.local_addr().unwrap();
    let mut config = Config::new("sbx-0123456789ab".into(), Some(resolver));
    tune(&mut config);
    let logs = Arc::new(Mutex::new(Vec::new()));
    let sink = logs.clone();
    let log = Box::new(move |l: &LogLine| sink.lock().unwrap().push(l.clone()));
    let (vault, vault_rx) = tokio::sync::watch::channel(None);
    let files = Files { path: path.clone(), bytes: text.into_bytes(), policy, vault: vault_rx };
    let task = tokio::spawn(serve(vec![listener], config, files, log));
    Rig { gate, policy: path, queries, logs, task, vault }
}

pub(crate) async fn rig(policy: Policy) -> Rig {
    rig_with(policy, |_| {}).await
}

impl Rig {
    /// The log line of the connection to `host`, once it has ended.
    pub(crate) async fn log(&self, host: &str) -> LogLine {
        for _ in 0..300 {
            if let Some(l) = self.logs.lock().unwrap().iter().find(|l| l.host == host) {
                return l.clone();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no log line for {host:?}: {:?}", self.logs.lock().unwrap());
    }

    /// Send `request`, read until the gate closes.
    pub(crate) async fn ask(&self, request: &[u8]) -> String {
        let mut s = TcpStream::connect(self.gate).await.unwrap();
        s.write_all(request).await.unwrap();
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await.unwrap().unwrap();
        String::from_utf8_lossy(&got).into_owned()
    }

    pub(crate) async fn tunnel(&self, target: &str) -> TcpStream {
        let mut s = TcpStream::connect(self.gate).await.unwrap();
        s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes()).await.unwrap();
        let mut got = vec![0; ESTABLISHED.len()];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(ESTABLISHED));
        s
    }

    pub(crate) fn set_policy(&self, text: &str) {
        let tmp = self.policy.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &self.policy).unwrap();
    }
}

/// An upstream that echoes everything back, then half-closes.
pub(crate) async fn echo() -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let received = Arc::new(AtomicUsize::new(0));
    let seen = received.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let (mut r, mut w) = s.into_split();
                let mut buf = vec![0; 65536];
                while let Ok(n @ 1..) = r.read(&mut buf).await {
                    seen.fetch_add(n, Ordering::SeqCst);
                    if w.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
                let _ = w.shutdown().await;
            });
        }
    });
    (port, received)
}

fn status(reply: &str) -> &str {
    reply.split(' ').nth(1).unwrap_or(reply)
}

#[tokio::test]
async fn a_tunnel_carries_several_mib_byte_exact_both_ways_and_logs_them() {
    let (port, _) = echo().await;
    let rig = rig(allow(port)).await;
    let s = rig.tunnel(&format!("files.example:{port}")).await;
    let payload: Vec<u8> = (0..5 * 1024 * 1024u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 | 1).collect();
    let (mut r, mut w) = s.into_split();
    let sent = payload.clone();
    let writer = tokio::spawn(async move {
        w.write_all(&sent).await.unwrap();
        w.shutdown().await.unwrap();
    });
    let mut back = Vec::new();
    r.read_to_end(&mut back).await.unwrap();
    writer.await.unwrap();
    assert!(back == payload, "{} bytes back of {}", back.len(), payload.len());
    let line = rig.log("files.example").await;
    assert_eq!((line.decision.as_str(), line.port, line.addr.as_deref()), ("allow", port, Some("127.0.0.1")));
    assert_eq!((line.bytes_up, line.bytes_down), (payload.len() as u64, payload.len() as u64));
    assert_eq!(line.rule, Some(format!("files.example:{port}")));
    assert_eq!(line.sandbox, "sbx-0123456789ab");
}

#[tokio::test]
async fn plain_http_goes_upstream_in_origin_form_with_the_uri_host_and_no_proxy_headers() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let upstream = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0; 1024];
        while !String::from_utf8_lossy(&got).ends_with("abc") {
            let n = s.read(&mut buf).await.unwrap();
            got.extend(&buf[..n]);
        }
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").await.unwrap();
        String::from_utf8(got).unwrap()
    });
    let rig = rig(allow(port)).await;
    let reply = rig
        .ask(
            format!(
                "POST http://files.example:{port}/up?x=1 HTTP/1.1\r\nHost: evil.example\r\nProxy-Authorization: Basic eA==\r\n\
                 Proxy-Connection: keep-alive\r\nAccept: */*\r\nContent-Length: 3\r\n\r\nabcGET /next HTTP/1.1\r\n\r\n"
            )
            .as_bytes(),
        )
        .await;
    assert_eq!(reply, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
    let want = format!(
        "POST /up?x=1 HTTP/1.1\r\nHost: files.example:{port}\r\nAccept: */*\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc"
    );
    assert_eq!(upstream.await.unwrap(), want, "one request, nothing pipelined after its body");
    let line = rig.log("files.example").await;
    assert_eq!((line.decision.as_str(), line.bytes_up, line.bytes_down), ("allow", want.len() as u64, 43));
}

#[tokio::test]
async fn an_unlisted_name_gets_403_without_a_dns_query() {
    let (port, _) = echo().await;
    let rig = rig(allow(port)).await;
    let reply = rig.ask(format!("CONNECT evil.example:{port} HTTP/1.1\r\n\r\n").as_bytes()).await;
    assert_eq!(status(&reply), "403", "{reply}");
    assert!(reply.contains("\r\n\r\nsbx egress gate: "), "{reply}");
    let reply = rig.ask(b"GET http://other.example/x HTTP/1.1\r\nHost: other.example\r\n\r\n").await;
    assert_eq!(status(&reply), "403", "{reply}");
    let line = rig.log("evil.example").await;
    assert_eq!((line.decision.as_str(), line.port, line.addr.clone()), ("deny", port, None));
    assert!(line.reason.is_some(), "{line:?}");
    assert_eq!((rig.log("other.example").await.port, rig.queries.load(Ordering::SeqCst)), (80, 0));
}

#[tokio::test]
async fn literals_and_names_that_resolve_to_refused_addresses_get_403() {
    let (port, received) = echo().await;
    let mut policy = allow(port);
    // Allowed by name on another port, where no CIDR rule covers loopback.
    policy.rules.push(AllowRule::Host { name: "files.example".into(), port: port.wrapping_add(1) });
    let rig = rig(policy).await;
    let reply = rig.ask(format!("CONNECT 10.1.2.3:{port} HTTP/1.1\r\n\r\n").as_bytes()).await;
    assert_eq!(status(&reply), "403", "{reply}");
    let reply = rig.ask(format!("CONNECT [::1]:{port} HTTP/1.1\r\n\r\n").as_bytes()).await;
    assert_eq!(status(&reply), "403", "{reply}");
    let other = port.wrapping_add(1);
    let reply = rig.ask(format!("CONNECT files.example:{other} HTTP/1.1\r\n\r\n").as_bytes()).await;
    assert_eq!(status(&reply), "403", "{reply}");
    let line = rig.log("files.example").await;
    assert_eq!((line.decision.as_str(), line.port), ("deny", other));
    assert!(rig.queries.load(Ordering::SeqCst) > 0, "the name was resolved, its address refused");
    // A literal covered by the CIDR rule passes.
    let mut s = rig.tunnel(&format!("127.0.0.1:{port}")).await;
    s.write_all(b"x").await.unwrap();
    let mut b = [0; 1];
    s.read_exact(&mut b).await.unwrap();
    assert_eq!((&b, received.load(Ordering::SeqCst)), (b"x", 1));
}

#[tokio::test]
async fn a_tls_hello_for_another_name_is_cut_before_it_reaches_upstream() {
    let (port, received) = echo().await;
    let rig = rig(allow(port)).await;
    let mut s = rig.tunnel(&format!("files.example:{port}")).await;
    s.write_all(&tls::client_hello(Some("evil.example"), 100)).await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await.unwrap();
    assert!(got.is_empty(), "{got:?}");
    let line = rig.log("files.example").await;
    assert_eq!((line.decision.as_str(), line.bytes_up), ("deny", 0));
    assert!(line.reason.as_deref().unwrap_or_default().contains("\"evil.example\""), "{line:?}");
    assert_eq!(received.load(Ordering::SeqCst), 0);
    // The right name, any case, passes, and so does no name on a literal.
    let hello = tls::client_hello(Some("FILES.example"), 100);
    for (target, hello) in [("files.example", hello), ("127.0.0.1", tls::client_hello(None, 4000))] {
        let mut s = rig.tunnel(&format!("{target}:{port}")).await;
        s.write_all(&hello).await.unwrap();
        let mut back = vec![0; hello.len()];
        s.read_exact(&mut back).await.unwrap();
        assert_eq!(back, hello);
    }
    // No name on a tunnel to a name: refused.
    let mut s = rig.tunnel(&format!("files.example:{port}")).await;
    s.write_all(&tls::client_hello(None, 4000)).await.unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got).await;
    assert!(got.is_empty());
}

#[tokio::test]
async fn a_policy_change_cuts_what_it_no_longer_allows_and_a_broken_one_is_ignored() {
    let (port, _) = echo().await;
    let rig = rig(allow(port)).await;
    rig.set_policy("{not json");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut s = rig.tunnel(&format!("files.example:{port}")).await;
    s.write_all(b"ping").await.unwrap();
    let mut b = [0; 4];
    s.read_exact(&mut b).await.unwrap();
    let mut observe = allow(port);
    observe.mode = Mode::Observe;
    rig.set_policy(&observe.to_json());
    tokio::time::sleep(Duration::from_millis(600)).await;
    s.write_all(b"pong").await.unwrap();
    s.read_exact(&mut b).await.unwrap();
    assert_eq!(&b, b"pong", "still allowed in observe mode");
    rig.set_policy(&Policy::default().to_json());
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let r = tokio::time::timeout(Duration::from_secs(3), s.read_to_end(&mut rest)).await;
    assert!(r.is_ok() && rest.is_empty(), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    let line = rig.log("files.example").await;
    assert_eq!((line.decision.as_str(), line.bytes_up, line.bytes_down), ("deny", 8, 8));
    assert!(line.reason.as_deref().unwrap_or_default().starts_with("cut after a policy change: "), "{line:?}");
}

#[tokio::test]
async fn malformed_requests_get_400_and_are_logged() {
    let rig = rig(allow(1)).await;
    for (req, code) in [
        ("GET /local HTTP/1.1\r\nHost: files.example\r\n\r\n", "400"),
        ("CONNECT files.example HTTP/1.1\r\n\r\n", "400"),
        ("CONNECT files.example:0 HTTP/1.1\r\n\r\n", "400"),
        ("CONNECT files.example:1 HTTP/2.0\r\n\r\n", "400"),
        ("CONNECT a b:1 HTTP/1.1\r\n\r\n", "400"),
        ("CONNECT 127.1:1 HTTP/1.1\r\n\r\n", "400"),
        ("CONNECT bad_host!:1 HTTP/1.1\r\n\r\n", "400"),
        ("GET https://files.example/ HTTP/1.1\r\n\r\n", "400"),
        ("GET http://u@files.example:1/ HTTP/1.1\r\n\r\n", "400"),
        ("GET http://files.example:1/ HTTP/1.1\r\nbad header\r\n\r\n", "400"),
        ("POST http://files.example:1/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "411"),
        ("\r\n\r\n", "400"),
        ("GET http://files.example:1/ HTTP/1.1\r\n", "400"),
    ] {
        let mut s = TcpStream::connect(rig.gate).await.unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        s.shutdown().await.unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.unwrap();
        let got = String::from_utf8_lossy(&got);
        assert_eq!(status(&got), code, "{req:?}: {got}");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let logs = rig.logs.lock().unwrap();
    assert_eq!(logs.len(), 13);
    assert!(logs.iter().all(|l| l.decision == "deny" && l.reason.is_some()), "{logs:?}");
    assert_eq!(rig.queries.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_oversize_or_slow_head_is_refused() {
    let rig = rig_with(allow(1), |c| c.head_wait = Duration::from_millis(300)).await;
    let mut big = b"GET http://files.example:1/ HTTP/1.1\r\n".to_vec();
    while big.len() <= head::MAX_HEAD {
        big.extend(b"X-Filler: 0123456789abcdef0123456789abcdef\r\n");
    }
    assert_eq!(status(&rig.ask(&big).await), "431");
    assert_eq!(status(&rig.ask(b"CONNECT files.example:1 HTTP/1.1\r\n").await), "408");
}

#[tokio::test]
async fn over_the_connection_limit_the_gate_answers_503() {
    let (port, _) = echo().await;
    let rig = rig_with(allow(port), |c| c.max_connections = 1).await;
    let held = rig.tunnel(&format!("files.example:{port}")).await;
    let reply = rig.ask(format!("CONNECT files.example:{port} HTTP/1.1\r\n\r\n").as_bytes()).await;
    assert_eq!(status(&reply), "503", "{reply}");
    drop(held);
    tokio::time::sleep(Duration::from_millis(100)).await;
    rig.tunnel(&format!("files.example:{port}")).await;
}

#[test]
fn names_are_canonical_and_numeric_lookalikes_are_refused() {
    assert_eq!(head::normalize_host("Files.Example."), Some("files.example".into()));
    assert_eq!(head::normalize_host("::FFFF:127.0.0.1"), Some("::ffff:127.0.0.1".into()));
    for bad in ["127.1", "0x7f.1", "a..b", "-a.example", "a.example-", "", "a b", &"a".repeat(64)] {
        assert_eq!(head::normalize_host(bad), None, "{bad}");
    }
}

/// Certificates for tests: a CA and leaves it signs.
pub(crate) mod pki;

/// The sandbox as the attacker (promise 1): each hole found has a
/// test here, and so has each attack that held.
mod attack;

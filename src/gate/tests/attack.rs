//! A hostile sandbox against its own gate, in process: smuggling through
//! the request head, host spellings that could name another address,
//! ClientHellos that hide or stretch the name, and lines that would vanish
//! from (or forge) the decision log.

use super::*;
use crate::spec::egress::MAX_LINE;

/// A request's status (400, 403...), the upstream's byte count, the DNS
/// queries made: what an attack got.
async fn try_connect(rig: &Rig, target: &str) -> String {
    let reply = rig.ask(format!("CONNECT {target} HTTP/1.1\r\nHost: files.example\r\n\r\n").as_bytes()).await;
    status(&reply).to_string()
}

/// The decision log line of this connection must survive the host's check
/// (`sbx egress log` skips lines it refuses: a refusal would vanish).
fn assert_loggable(line: &LogLine) {
    let text = serde_json::to_string(line).unwrap();
    assert!(text.len() <= MAX_LINE, "a {}-byte log line: the host would drop it", text.len());
    LogLine::parse(&text).unwrap_or_else(|e| panic!("{e}: {text:.300}"));
}

#[tokio::test]
async fn host_spellings_that_name_another_address_are_refused_without_dns() {
    let (port, received) = echo().await;
    let rig = rig(allow(port)).await;
    // Numeric IPv4 forms a resolver reads as 127.0.0.1, userinfo, percent
    // and IDN spellings, brackets around a name, a mapped literal outside
    // every rule, junk after a bracket, a signed port: 400 or 403, never a
    // lookup, never a byte upstream.
    let other = port.wrapping_add(1);
    for (target, want) in [
        (format!("2130706433:{port}"), "400"),
        (format!("0x7f.1:{port}"), "400"),
        (format!("0x7F000001:{port}"), "400"),
        (format!("017700000001:{port}"), "400"),
        (format!("127.1:{port}"), "400"),
        (format!("files.example.evil:{port}"), "403"),
        (format!("files%2eexample:{port}"), "400"),
        (format!("files.example%00.evil.example:{port}"), "400"),
        (format!("fïles.example:{port}"), "400"),
        (format!("xn--fles-6na.example:{port}"), "403"),
        (format!("[files.example]:{port}"), "400"),
        (format!("[::1]x:{port}"), "400"),
        (format!("[::ffff:10.0.0.1]:{port}"), "403"),
        (format!("[::ffff:127.0.0.1]:{other}"), "403"),
        (format!("[64:ff9b::7f00:1]:{port}"), "403"),
        (format!("files.example:+{port}"), "400"),
        (format!("files.example:0{port}"), "400"),
        (format!("files.example:{other}"), "403"),
        (format!("u@files.example:{port}"), "400"),
    ] {
        let got = try_connect(&rig, &target).await;
        assert_eq!(got, want, "CONNECT {target}");
    }
    assert_eq!((rig.queries.load(Ordering::SeqCst), received.load(Ordering::SeqCst)), (0, 0));
    // Upper case and a trailing dot are the same name: allowed.
    let mut s = rig.tunnel(&format!("FILES.Example.:{port}")).await;
    s.write_all(b"x").await.unwrap();
    let mut b = [0; 1];
    s.read_exact(&mut b).await.unwrap();
}

#[tokio::test]
async fn a_bare_cr_or_lf_in_the_request_target_cannot_start_a_second_request() {
    // Before: the target went upstream as the path, bare LF and all; a
    // lenient server reads "Host: evil.example" from it.
    for target in [
        "http://files.example:1/a\nHost:evil.example",
        "http://files.example:1/a\rX",
        "http://files.example:1/\u{7f}",
        "http://files.example:1/é",
    ] {
        let head = format!("GET {target} HTTP/1.1\r\n\r\n");
        let r = head::parse(head.as_bytes()).unwrap_err();
        assert_eq!(r.status, 400, "{target:?}: {r:?}");
    }
    // Through the gate too: refused before any upstream or DNS.
    let (port, received) = echo().await;
    let rig = rig(allow(port)).await;
    let reply =
        rig.ask(format!("GET http://files.example:{port}/a\nHost:evil.example HTTP/1.1\r\n\r\n").as_bytes()).await;
    assert_eq!(status(&reply), "400", "{reply}");
    assert_eq!((rig.queries.load(Ordering::SeqCst), received.load(Ordering::SeqCst)), (0, 0));
}

#[test]
fn content_length_is_plain_digits_and_goes_upstream_once() {
    // "+3" parsed as 3 by the gate but not by every server: the 3 body bytes
    // would then be a second request, with its own Host, to the same address.
    for cl in ["+3", "-0", "0x3", "3 3", "3,3", ""] {
        let head = format!("POST http://files.example/ HTTP/1.1\r\nContent-Length: {cl}\r\n\r\n");
        let r = head::parse(head.as_bytes()).unwrap_err();
        assert_eq!((r.status, r.reason.as_str()), (400, "malformed Content-Length"), "{cl:?}");
    }
    let head = "POST http://files.example/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n";
    let head::Request::Http(r) = head::parse(head.as_bytes()).unwrap() else { panic!("not HTTP") };
    let sent = String::from_utf8(r.origin_head()).unwrap();
    assert_eq!(sent.matches("Content-Length").count(), 1, "{sent}");
    assert_eq!(r.body_len, 3);
    let two = "POST http://files.example/ HTTP/1.1\r\nContent-Length: 3\r\ncontent-length: 4\r\n\r\n";
    assert_eq!(head::parse(two.as_bytes()).unwrap_err().status, 400);
    let te = "POST http://files.example/ HTTP/1.1\r\nTRANSFER-encoding: identity\r\nContent-Length: 3\r\n\r\n";
    assert_eq!(head::parse(te.as_bytes()).unwrap_err().status, 411);
}

#[tokio::test]
async fn an_encrypted_client_hello_is_cut_it_would_front_for_any_name() {
    // ECH: the outer SNI names the allowed host, the server answers for the
    // encrypted inner name. Before: the gate saw files.example and passed it.
    let (port, received) = echo().await;
    let rig = rig(allow(port)).await;
    for kind in [0xfe0d, 0xffce] {
        let hello = tls::client_hello_with(Some("files.example"), &[(kind, &[0u8; 40])], 100);
        let mut s = rig.tunnel(&format!("files.example:{port}")).await;
        s.write_all(&hello).await.unwrap();
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await.unwrap();
        assert!(got.is_empty(), "{kind:#x}: {got:?}");
    }
    assert_eq!(received.load(Ordering::SeqCst), 0);
    let line = rig.log("files.example").await;
    assert!(line.reason.as_deref().unwrap_or_default().contains("Encrypted Client Hello"), "{line:?}");
}

#[tokio::test]
async fn a_hello_trickled_a_byte_at_a_time_is_cut_at_one_deadline() {
    // Before: the wait restarted at every read, so a hello sent a byte per
    // (wait - 1) held the tunnel for hours.
    let (port, received) = echo().await;
    let rig = rig_with(allow(port), |c| c.head_wait = Duration::from_millis(400)).await;
    let hello = tls::client_hello(Some("files.example"), 1000);
    let mut s = rig.tunnel(&format!("files.example:{port}")).await;
    let hello = hello[..40].to_vec();
    let trickle = tokio::spawn(async move {
        for b in hello {
            if s.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    // Cut at the deadline (400 ms), not when the trickle ends (4 s).
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(rig.logs.lock().unwrap().iter().any(|l| l.host == "files.example"), "the trickled hello still holds on");
    trickle.abort();
    let line = rig.log("files.example").await;
    assert_eq!(line.decision, "deny", "{line:?}");
    assert!(line.reason.as_deref().unwrap_or_default().contains("in time"), "{line:?}");
    assert_eq!(received.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_huge_or_hostile_server_name_still_makes_a_log_line_the_host_reads() {
    // Before: the reason quoted the whole SNI (up to 16 KiB); the line was
    // over MAX_LINE and `sbx egress log` skipped it: the refusal vanished.
    let (port, _) = echo().await;
    let rig = rig(allow(port)).await;
    let long = format!("{}.example", "a".repeat(12_000));
    let forged = "x\",\"decision\":\"allow\"}\n{\"host\":\"evil.example\u{1b}[2J";
    for sni in [long.as_str(), forged] {
        let mut s = rig.tunnel(&format!("files.example:{port}")).await;
        s.write_all(&tls::client_hello(Some(sni), 4000)).await.unwrap();
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await.unwrap();
        assert!(got.is_empty());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let logs = rig.logs.lock().unwrap().clone();
    assert_eq!(logs.len(), 2, "{logs:?}");
    for line in &logs {
        assert_eq!((line.decision.as_str(), line.host.as_str()), ("deny", "files.example"));
        assert_loggable(line);
    }
}

#[test]
fn a_name_with_many_refused_addresses_makes_a_bounded_reason() {
    // A name the sandbox picks (observe mode) may resolve to 64 private
    // addresses; before, each one's reason was joined into the log line.
    let policy = Policy { mode: Mode::Observe, ..Policy::default() };
    let reasons: Vec<String> = (0..64u8)
        .map(|i| match policy.check_addr(IpAddr::from([10, 0, 0, i]), 443) {
            crate::spec::egress::Verdict::Deny { reason } => reason,
            v => panic!("{v:?}"),
        })
        .collect();
    let reason = super::super::dial::refused_reason("many.example", &reasons);
    assert!(reason.ends_with("; and 61 more refused addresses"), "{reason}");
    let line = LogLine {
        time: "2026-01-01T00:00:00.000Z".into(),
        sandbox: "sbx-0123456789ab".into(),
        host: "a".repeat(60) + "." + &"b".repeat(60) + "." + &"c".repeat(60) + "." + &"d".repeat(60) + ".example",
        port: 443,
        addr: Some("10.0.0.0".into()),
        decision: "deny".into(),
        rule: None,
        reason: Some(reason),
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        method: None,
        path: None,
        status: None,
        secrets: Vec::new(),
    };
    assert_loggable(&line);
}

#[tokio::test]
async fn what_follows_an_allowed_request_never_reaches_another_host() {
    // Pipelined: a second request after the first's body (another host in
    // its URI and Host) is dropped; only one request per connection.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let upstream = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await.unwrap();
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut got)).await;
        String::from_utf8_lossy(&got).into_owned()
    });
    let rig = rig(allow(port)).await;
    let req = format!(
        "GET http://files.example:{port}/ HTTP/1.1\r\nHost: evil.example\r\n\r\n\
         GET http://evil.example:{port}/ HTTP/1.1\r\nHost: evil.example\r\n\r\n"
    );
    let mut s = TcpStream::connect(rig.gate).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), s.read_to_end(&mut got)).await;
    let seen = upstream.await.unwrap();
    assert!(!seen.contains("evil"), "{seen}");
    assert_eq!(seen.matches("GET ").count(), 1, "{seen}");
    assert_eq!(rig.queries.load(Ordering::SeqCst), 2, "files.example's A and AAAA, nothing for evil.example");
}

/// The Docker host's own address (here 127.0.0.1 stands in for it) is
/// refused under a wider CIDR rule, as a literal CONNECT and as what an
/// allowed name resolves to; a rule naming exactly it reaches it; each
/// refusal is logged with its reason.
#[tokio::test]
async fn the_host_s_own_address_is_reached_only_through_a_rule_naming_exactly_it() {
    let (port, received) = echo().await;
    let mut policy = allow(port);
    policy.set_host_addrs([IpAddr::from([127, 0, 0, 1])]);
    let rig = rig(policy.clone()).await;
    assert_eq!(try_connect(&rig, &format!("127.0.0.1:{port}")).await, "403");
    assert_eq!(try_connect(&rig, &format!("files.example:{port}")).await, "403");
    assert_eq!(rig.queries.load(Ordering::SeqCst), 2, "the name was allowed and resolved (A, AAAA)");
    assert_eq!(received.load(Ordering::SeqCst), 0);
    for host in ["127.0.0.1", "files.example"] {
        let line = rig.log(host).await;
        assert_eq!((line.decision.as_str(), line.addr.as_deref()), ("deny", Some("127.0.0.1")), "{line:?}");
        let reason = line.reason.clone().unwrap_or_default();
        assert!(reason.contains("127.0.0.1 is the Docker host's own address"), "{reason}");
        assert!(reason.contains(&format!("--allow 127.0.0.1/32:{port}")), "{reason}");
        assert_loggable(&line);
    }
    policy.allow(&[crate::spec::egress::AllowRule::parse(&format!("127.0.0.1/32:{port}"), true).unwrap()]);
    rig.set_policy(&policy.to_json());
    tokio::time::sleep(super::super::POLICY_POLL * 3).await;
    let mut s = rig.tunnel(&format!("files.example:{port}")).await;
    s.write_all(b"ping").await.unwrap();
    let mut back = [0; 4];
    s.read_exact(&mut back).await.unwrap();
    assert_eq!(&back, b"ping");
}

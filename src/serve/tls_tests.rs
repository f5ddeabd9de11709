//! TLS and HTTP/2: the certificate and key checks, the handshake timeout,
//! and HTTP/2's limits, spoken to in raw frames as an attacker would.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::tests::{shared, temp};
use super::*;

/// A self-signed P-256 certificate for 127.0.0.1 (valid for a century) and its key.
const CERT: &str = r#"
-----BEGIN CERTIFICATE-----
MIIBkzCCATigAwIBAgIUK4qsT58Ky5u83id2KT5YJsa2AYQwCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKc2J4LXRlc3QtYTAgFw0yNjEyMDIxNjQ1MDlaGA8yMTI2MTEw
ODE2NDUwOVowFTETMBEGA1UEAwwKc2J4LXRlc3QtYTBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABDVTXpdQHlzxkAzD9BExbN+LiaJqDk+AsleLU8QmT+JHpTOAUj1Y
FPHkrNYHQdiFzixk6rew4iMyc3Osjsh8LZKjZDBiMB0GA1UdDgQWBBROzyDSPSpr
pB8hqEdtiJpR4p8M2DAfBgNVHSMEGDAWgBROzyDSPSprpB8hqEdtiJpR4p8M2DAP
BgNVHRMBAf8EBTADAQH/MA8GA1UdEQQIMAaHBH8AAAEwCgYIKoZIzj0EAwIDSQAw
RgIhAL7YIJmEpRuBP4UAoltQUtQBZE8x3ygCf6b/xAIEB4piAiEAxCYWFQKemmuL
V8sgybPIQexXYRw812Dm0Ca7zcsXzCk=
-----END CERTIFICATE-----
"#;
const KEY: &str = r#"
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg+EAbqLvrpLvhdoDo
moyCEF5YJ3lFyzwcU6wyHFrBMRqhRANCAAQ1U16XUB5c8ZAMw/QRMWzfi4miag5P
gLJXi1PEJk/iR6UzgFI9WBTx5KzWB0HYhc4sZOq3sOIjMnNzrI7IfC2S
-----END PRIVATE KEY-----
"#;
/// Another key, not the certificate's.
const OTHER_KEY: &str = r#"
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg8KhPSaaJyzV9WxES
+XN99OUlTLM+WwDu4xIeFAkW2yyhRANCAATP1ot1YqJHbeTBhrLidfWB6Ohv9uom
OCSHIcmA88Pk/PZX9E0LX19+wPEDqO68qyKuXOWGqsqDPRb7rjGxh2Qz
-----END PRIVATE KEY-----
"#;

/// `cert` and `key` written to a fresh dir, the key 0600.
fn files(name: &str, cert: &str, key: &str) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let d = temp(name);
    let (c, k) = (d.join("cert.pem"), d.join("key.pem"));
    std::fs::write(&c, cert).unwrap();
    std::fs::write(&k, key).unwrap();
    std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600)).unwrap();
    (d, c, k)
}

fn refused(cert: &std::path::Path, key: &std::path::Path) -> crate::model::invalid::Invalid {
    match config::tls(cert, key) {
        Err(Error::Invalid(i)) => i,
        other => panic!("not refused as invalid input: {:?}", other.map(|_| ())),
    }
}

#[test]
fn the_certificate_and_key_are_checked_before_anything_listens() {
    let (d, c, k) = files("tls-ok", CERT, KEY);
    let config = config::tls(&c, &k).unwrap();
    assert_eq!(config.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
    // A key others can read is refused, as an API key file is.
    std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o640)).unwrap();
    let e = refused(&c, &k);
    assert_eq!(e.what, "--tls-key");
    assert!(e.reason.contains("mode 640") && e.hint.as_deref().is_some_and(|h| h.starts_with("chmod 600")), "{e:?}");
    std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Missing files, files that are not PEM, and a key of another certificate.
    let e = refused(&d.join("nothing.pem"), &k);
    assert!(e.what == "--tls-cert" && e.reason.contains("cannot be read"), "{e:?}");
    let e = refused(&c, &d.join("nothing.pem"));
    assert!(e.what == "--tls-key" && e.reason.contains("cannot be read"), "{e:?}");
    std::fs::write(&c, "not a certificate\n").unwrap();
    let e = refused(&c, &k);
    assert!(e.what == "--tls-cert" && e.reason.contains("no CERTIFICATE block"), "{e:?}");
    std::fs::write(&c, KEY).unwrap();
    assert_eq!(refused(&c, &k).what, "--tls-cert", "a key given as the certificate");
    std::fs::write(&c, CERT).unwrap();
    std::fs::write(&k, CERT).unwrap();
    let e = refused(&c, &k);
    assert!(e.what == "--tls-key" && e.reason.contains("no PRIVATE KEY block"), "{e:?}");
    std::fs::write(&k, OTHER_KEY).unwrap();
    let e = refused(&c, &k);
    assert!(e.what == "--tls-key" && e.reason.contains("does not go with --tls-cert"), "{e:?}");
    std::fs::remove_dir_all(&d).unwrap();
}

fn limits(s: Arc<Shared>, timeout: Duration) -> (tokio::sync::watch::Sender<bool>, Limits) {
    let (stop, stopping) = tokio::sync::watch::channel(false);
    (stop, Limits { shared: s, stop: stopping, header_timeout: timeout, idle_timeout: timeout })
}

#[test]
fn a_client_that_never_finishes_its_handshake_is_cut_off() {
    let d = temp("handshake");
    let (_, c, k) = files("handshake-pem", CERT, KEY);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (_stop, l) = limits(shared(&d, "0123456789abcdef0123"), Duration::from_millis(200));
        let tls = tokio_rustls::TlsAcceptor::from(config::tls(&c, &k).unwrap());
        let slots = Arc::new(tokio::sync::Semaphore::new(1));
        let (mut client, server) = tokio::io::duplex(4096);
        tls_connection(server, tls, l, slots.clone().acquire_owned().await.unwrap());
        // Half a ClientHello's record header, then nothing.
        client.write_all(&[0x16, 0x03]).await.unwrap();
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(5), client.read(&mut buf)).await;
        assert_eq!(read.expect("still open 5s after the handshake timeout").unwrap_or(0), 0);
        let back = tokio::time::timeout(Duration::from_secs(5), slots.acquire()).await;
        assert!(back.is_ok(), "the cut connection's slot was not given back");
    });
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn plain_http_to_the_tls_port_is_told_to_use_https() {
    let d = temp("plain");
    let (_, c, k) = files("plain-pem", CERT, KEY);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (_stop, l) = limits(shared(&d, "0123456789abcdef0123"), Duration::from_secs(30));
        let tls = tokio_rustls::TlsAcceptor::from(config::tls(&c, &k).unwrap());
        let slots = Arc::new(tokio::sync::Semaphore::new(1));
        let (mut client, server) = tokio::io::duplex(4096);
        tls_connection(server, tls, l, slots.clone().acquire_owned().await.unwrap());
        client.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut got = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut got)).await;
        read.expect("the connection stayed open").unwrap();
        let got = String::from_utf8_lossy(&got);
        assert!(got.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{got}");
        assert!(got.ends_with(r#"{"code":400,"message":"sbx serve speaks TLS on this port: use https://"}"#), "{got}");
        assert!(tokio::time::timeout(Duration::from_secs(5), slots.acquire()).await.is_ok());
    });
    std::fs::remove_dir_all(&d).unwrap();
}

/// One HTTP/2 frame: a 9-byte header, then `payload`.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend(payload);
    f
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;

/// Read frames until one of `kind` (its flags and payload), or None at the end.
async fn until_frame(c: &mut DuplexStream, kind: u8) -> Option<(u8, Vec<u8>)> {
    loop {
        let mut head = [0u8; 9];
        c.read_exact(&mut head).await.ok()?;
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        c.read_exact(&mut payload).await.ok()?;
        if head[3] == kind {
            return Some((head[4], payload));
        }
    }
}

/// A server speaking HTTP/2 on a duplex pipe, as after ALPN chose h2.
async fn h2_server(d: &std::path::Path, timeout: Duration) -> (DuplexStream, Arc<tokio::sync::Semaphore>) {
    let (stop, l) = limits(shared(d, "0123456789abcdef0123"), timeout);
    let slots = Arc::new(tokio::sync::Semaphore::new(1));
    let slot = slots.clone().acquire_owned().await.unwrap();
    let (mut client, server) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let _stop = stop;
        http2(server, &l).await;
        drop(slot);
    });
    client.write_all(PREFACE).await.unwrap();
    client.write_all(&frame(SETTINGS, 0, 0, &[])).await.unwrap();
    (client, slots)
}

#[test]
fn http2_announces_its_stream_and_header_caps_and_closes_when_idle() {
    let d = temp("h2-idle");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (mut c, slots) = h2_server(&d, Duration::from_millis(300)).await;
        let (flags, payload) = until_frame(&mut c, SETTINGS).await.expect("the server's SETTINGS");
        assert_eq!(flags & 1, 0, "the server's own SETTINGS, not an ACK");
        let settings: Vec<(u16, u32)> = payload
            .chunks(6)
            .map(|s| (u16::from_be_bytes([s[0], s[1]]), u32::from_be_bytes([s[2], s[3], s[4], s[5]])))
            .collect();
        assert!(settings.contains(&(0x3, MAX_STREAMS)), "SETTINGS_MAX_CONCURRENT_STREAMS: {settings:?}");
        assert!(settings.contains(&(0x6, MAX_HEADER_LIST)), "SETTINGS_MAX_HEADER_LIST_SIZE: {settings:?}");
        // No request in the header timeout: GOAWAY, then the end.
        let away = tokio::time::timeout(Duration::from_secs(5), until_frame(&mut c, GOAWAY)).await;
        let (_, payload) = away.expect("an idle HTTP/2 connection was still open after 5s").expect("a GOAWAY");
        assert_eq!(payload[4..8], [0, 0, 0, 0], "NO_ERROR: an orderly close");
        let back = tokio::time::timeout(Duration::from_secs(5), slots.acquire()).await;
        assert!(back.is_ok(), "the idle connection's slot was not given back");
    });
    std::fs::remove_dir_all(&d).unwrap();
}

/// CVE-2023-44487: streams opened and reset at once, faster than they can
/// be served, end the connection with ENHANCE_YOUR_CALM.
#[test]
fn http2_rapid_reset_ends_the_connection() {
    let d = temp("h2-reset");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (mut c, slots) = h2_server(&d, Duration::from_secs(30)).await;
        // GET https / (HPACK static table entries 2, 7, 4), then RST_STREAM CANCEL.
        let mut burst = Vec::new();
        for i in 0..1000u32 {
            burst.extend(frame(0x1, 0x5, 2 * i + 1, &[0x82, 0x87, 0x84]));
            burst.extend(frame(0x3, 0, 2 * i + 1, &8u32.to_be_bytes()));
        }
        let _ = c.write_all(&burst).await;
        let away = tokio::time::timeout(Duration::from_secs(10), until_frame(&mut c, GOAWAY)).await;
        let (_, payload) = away.expect("no GOAWAY within 10s of the burst").expect("a GOAWAY");
        assert_eq!(payload[4..8], 0xbu32.to_be_bytes(), "ENHANCE_YOUR_CALM");
        let back = tokio::time::timeout(Duration::from_secs(5), slots.acquire()).await;
        assert!(back.is_ok(), "the connection's slot was not given back");
    });
    std::fs::remove_dir_all(&d).unwrap();
}

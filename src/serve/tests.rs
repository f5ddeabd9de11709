use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use super::config::{own_key, read_key_file};
use super::control::parse_new;
use super::envd::{check_user, parse_signal, parse_start, unenvelope};
use super::http::matches_any;
use super::index::{Entry, Index};
use super::make::{template_of, Template};
use super::process::wire::envelope;
use super::query::ListQuery;
use super::*;

const IMG: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

pub(super) fn temp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("sbx-serve-{name}-{}-{}", std::process::id(), config::random_hex(4)));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn listen_takes_loopback_and_unix_and_refuses_the_rest() {
    assert_eq!(Listen::parse("127.0.0.1:3000", false).unwrap(), Listen::Tcp("127.0.0.1:3000".parse().unwrap()));
    assert_eq!(Listen::parse("[::1]:8049", false).unwrap(), Listen::Tcp("[::1]:8049".parse().unwrap()));
    assert_eq!(Listen::parse("unix:/run/x.sock", false).unwrap(), Listen::Unix("/run/x.sock".into()));
    let e = Listen::parse("0.0.0.0:3000", false).unwrap_err();
    assert!(e.reason.contains("in the clear"), "{e}");
    assert!(e.hint.as_deref().is_some_and(|h| h.contains("--tls-cert FILE --tls-key FILE")), "{e:?}");
    assert!(Listen::parse("192.168.1.4:80", false).is_err());
    assert!(Listen::parse("localhost:3000", false).is_err());
    assert!(Listen::parse("unix:relative.sock", false).is_err());
    // With TLS any address goes; a name still does not.
    assert_eq!(Listen::parse("0.0.0.0:3000", true).unwrap(), Listen::Tcp("0.0.0.0:3000".parse().unwrap()));
    assert!(Listen::parse("localhost:3000", true).is_err());
}

#[test]
fn a_template_is_a_name_and_a_pinned_image() {
    let (n, i) = parse_template(&format!("debian={IMG}")).unwrap();
    assert_eq!((n.as_str(), i.as_str()), ("debian", IMG));
    assert!(parse_template("debian=debian:12").is_err(), "a tag alone is not pinned");
    assert!(parse_template(&format!("-x={IMG}")).is_err());
    assert!(parse_template("nothing").is_err());
    let mut t = std::collections::BTreeMap::new();
    t.insert("debian".to_string(), crate::spec::ImageRef::parse(IMG).unwrap());
    let img = || Template::Image(crate::spec::ImageRef::parse(IMG).unwrap());
    let no_pool = |_: &str| false;
    assert_eq!(template_of(&t, "debian", no_pool), Some(img()));
    assert_eq!(template_of(&t, IMG, no_pool), Some(img()), "a pinned image is a template itself");
    assert_eq!(template_of(&t, "base", no_pool), None);
    let pools = |n: &str| n == "warm" || n == "debian";
    assert_eq!(template_of(&t, "warm", pools), Some(Template::Pool("warm".into())), "a warm pool's name");
    assert_eq!(template_of(&t, "debian", pools), Some(img()), "a --template wins over a pool of its name");
    assert_eq!(template_of(&t, "../warm", |_| true), None, "only a pool name is looked up as a pool");
}

#[test]
fn a_key_file_others_can_read_is_refused() {
    let d = temp("keys");
    let f = d.join("keys");
    std::fs::write(&f, "# ours\n0123456789abcdef0123\n\nfedcba9876543210fedc\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
    let e = read_key_file(&f).unwrap_err();
    assert!(e.to_string().contains("lets its group or others read"), "{e}");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(read_key_file(&f).unwrap(), vec!["0123456789abcdef0123", "fedcba9876543210fedc"]);
    std::fs::write(&f, "short\n").unwrap();
    assert!(read_key_file(&f).is_err());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_own_key_is_made_once_0600() {
    let d = temp("own");
    let (k1, path, made) = own_key(&d).unwrap();
    assert!(made && k1.len() > 32);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let dir = std::fs::metadata(path.parent().unwrap()).unwrap();
    assert_eq!(dir.permissions().mode() & 0o777, 0o700, "serve/ is serve's alone");
    let (k2, _, made) = own_key(&d).unwrap();
    assert_eq!((k2, made), (k1, false));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn keys_match_exactly() {
    let keys = ["0123456789abcdef0123", "fedcba9876543210fedc"];
    assert!(matches_any("fedcba9876543210fedc", keys));
    assert!(!matches_any("fedcba9876543210fed", keys));
    assert!(!matches_any("", keys));
    assert!(!matches_any("x", []));
}

#[test]
fn a_create_body_is_checked_and_what_sbx_lacks_is_refused() {
    let ok = parse_new(
        br#"{"templateID":"debian","timeout":300,"envVars":{"A":"1"},"metadata":{"k":"v"},"autoPause":false}"#,
    )
    .unwrap();
    assert_eq!(ok.template, "debian");
    assert_eq!(ok.timeout_secs, 300);
    assert_eq!(ok.env, vec![("A".to_string(), "1".to_string())]);
    assert_eq!(ok.metadata.get("k").map(String::as_str), Some("v"));
    let status = |b: &[u8]| parse_new(b).unwrap_err().0.as_u16();
    assert_eq!(status(br#"{"templateID":"d","autoPause":true}"#), 501);
    assert_eq!(
        status(br#"{"templateID":"d","network":{"rules":{"x.example":[{"transform":{"headers":{"A":"b"}}}]}}}"#),
        501
    );
    assert_eq!(status(br#"{"templateID":"d","network":{"allowOut":"x.example"}}"#), 400);
    assert_eq!(status(br#"{"templateID":"d","allow_internet_access":"yes"}"#), 400);
    assert_eq!(status(br#"{"templateID":"d","envVars":{"SBX_X":"1"}}"#), 400);
    assert_eq!(status(br#"{"templateID":"d","envVars":{"1A":"1"}}"#), 400);
    assert_eq!(status(br#"{"templateID":"d","envVars":{"PATH=/evil:/bin":"x"}}"#), 400, "a name with '='");
    assert_eq!(status(br#"{"templateID":"d","envVars":{"A":"x\u0000y"}}"#), 400, "a NUL is refused, not a 500");
    let long = format!(r#"{{"templateID":"d","envVars":{{"A":"{}"}}}}"#, "x".repeat(200_000));
    assert_eq!(status(long.as_bytes()), 400, "a value no argv can carry is a 400, not E2BIG's 500");
    assert!(parse_start(&json!({"process": {"cmd": "x", "envs": {"A": "x".repeat(200_000)}}})).is_err());
    assert_eq!(status(br#"{"templateID":"d","timeout":0}"#), 400);
    assert_eq!(status(br#"{"templateID":"d","timeout":-5}"#), 400);
    assert_eq!(status(br#"{"timeout":5}"#), 400);
    assert_eq!(status(b"not json"), 400);
}

#[test]
fn connect_envelopes_round_trip() {
    let msg = json!({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo hi"]}});
    let b = envelope(0, &msg);
    assert_eq!(b[0], 0);
    assert_eq!(u32::from_be_bytes([b[1], b[2], b[3], b[4]]) as usize, b.len() - 5);
    assert_eq!(unenvelope(&b).unwrap(), msg);
    assert!(unenvelope(&b[..b.len() - 1]).is_err());
    let mut compressed = b.to_vec();
    compressed[0] = 1;
    assert!(unenvelope(&compressed).is_err());
}

#[test]
fn a_start_request_becomes_an_exec() {
    let s = parse_start(&json!({"process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo hi"], "envs": {"A": "b"}, "cwd": "/tmp"}, "stdin": false}))
        .unwrap();
    assert_eq!(s.cmd, ["/bin/bash", "-l", "-c", "echo hi"]);
    assert_eq!(s.opts.env, vec![("A".to_string(), "b".to_string())]);
    assert_eq!(s.opts.workdir.as_deref(), Some("/tmp"));
    assert_eq!(s.opts.user, None, "never another uid");
    assert!(parse_start(&json!({"process": {"cmd": "x", "cwd": "rel"}})).is_err());
    assert!(parse_start(&json!({"process": {"cmd": "x", "envs": {"SBX_SOCKET": "/x"}}})).is_err());
    let e = parse_start(&json!({"process": {"cmd": "x", "envs": {"PATH=/evil:/bin": "x"}}})).unwrap_err();
    assert!(e.contains("a name must be letters"), "{e}");
    let e = parse_start(&json!({"process": {"cmd": "x", "envs": {"A": "x\u{0}y"}}})).unwrap_err();
    assert!(e.contains("holds a NUL byte"), "{e}");
    let pty = parse_start(&json!({"process": {"cmd": "x"}, "pty": {"size": {"rows": 24, "cols": 80}}})).unwrap();
    assert_eq!((pty.pty, pty.stdin), (Some((80, 24)), false));
    assert!(parse_start(&json!({"process": {"cmd": "x"}, "pty": {"size": {"rows": 0, "cols": 80}}})).is_err());
    assert!(parse_start(&json!({"process": {"cmd": "x"}, "stdin": true})).unwrap().stdin);
    assert!(parse_start(&json!({"process": {}})).is_err());
}

#[test]
fn the_e2b_user_never_changes_the_uid() {
    let with = |v: &str| {
        let mut h = hyper::HeaderMap::new();
        h.insert(hyper::header::AUTHORIZATION, v.parse().unwrap());
        check_user(&h)
    };
    assert!(check_user(&hyper::HeaderMap::new()).is_ok());
    // base64("root:") and base64("user:")
    assert_eq!(with("Basic cm9vdDo=").unwrap_err().0, "permission_denied");
    assert_eq!(with("Basic dXNlcjo=").unwrap_err().0, "invalid_argument");
}

#[test]
fn the_list_query_filters_and_pages() {
    let q = ListQuery::parse("state=running&metadata=k%3Dv%26a%3Db&limit=2").unwrap();
    assert_eq!(q.states, Some(vec!["running".to_string()]));
    assert_eq!(q.metadata, vec![("k".into(), "v".into()), ("a".into(), "b".into())]);
    let meta: std::collections::BTreeMap<String, String> =
        [("k", "v"), ("a", "b"), ("z", "y")].iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    assert!(q.wants("running", &meta));
    assert!(!q.wants("paused", &meta));
    assert!(!q.wants("running", &Default::default()));
    let rows: Vec<(String, serde_json::Value)> = (0..5).map(|i| (format!("k{i}"), json!(i))).collect();
    let (page, next) = q.page(rows.clone());
    assert_eq!(page, vec![json!(0), json!(1)]);
    let q2 = ListQuery::parse(&format!("limit=2&nextToken={}", next.unwrap())).unwrap();
    assert_eq!(q2.page(rows.clone()).0, vec![json!(2), json!(3)]);
    assert!(ListQuery::parse("state=dead").is_err());
    assert!(ListQuery::parse("limit=0").is_err());
    assert!(ListQuery::parse("nextToken=zz").is_err());
    assert!(ListQuery::parse("template=x").is_err(), "a filter not applied is refused, not ignored");
}

#[test]
fn the_index_is_one_file_0600_replaced_whole() {
    let d = temp("index");
    let i = Index::open(d.clone()).unwrap();
    let e = Entry {
        token: "t".into(),
        template: "debian".into(),
        metadata: [("k".to_string(), "v".to_string())].into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        cpu_count: 1,
        memory_mb: 512,
    };
    i.insert("sbx-0123456789ab", e.clone()).unwrap();
    let f = d.join("index.json");
    assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o600);
    let e2 = Index::open(d.clone()).err().expect("a second server on one data dir is refused");
    assert!(e2.to_string().contains("another sbx serve uses this data dir"), "{e2}");
    drop(i);
    let i = Index::open(d.clone()).expect("free again once the first is gone");
    assert_eq!(i.get("sbx-0123456789ab"), Some(e));
    i.remove(&["sbx-0123456789ab".to_string()]).unwrap();
    drop(i);
    assert!(Index::open(d.clone()).unwrap().all().is_empty());
    let mut names: Vec<_> = std::fs::read_dir(&d).unwrap().flatten().map(|e| e.file_name()).collect();
    names.sort();
    assert_eq!(names, ["index.json", "serve.lock"].map(std::ffi::OsString::from), "no temp file left");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn envd_paths_are_told_from_the_control_plane() {
    assert!(is_envd("/health"));
    assert!(is_envd("/process.Process/Start"));
    assert!(is_envd("/filesystem.Filesystem/Stat"));
    assert!(!is_envd("/v2/sandboxes"));
    assert!(!is_envd("/process.Process"));
    assert!(!is_envd("/healthz"));
}

#[test]
fn a_signal_request_names_a_pid_and_kill_or_term() {
    assert_eq!(parse_signal(&json!({"process": {"pid": 42}, "signal": "SIGNAL_SIGKILL"})), Ok((42, 9)));
    assert_eq!(parse_signal(&json!({"process": {"pid": 42}, "signal": 15})), Ok((42, 15)));
    assert!(parse_signal(&json!({"process": {"pid": 42}, "signal": "SIGNAL_UNSPECIFIED"})).is_err());
    assert!(parse_signal(&json!({"process": {"tag": "x"}, "signal": "SIGNAL_SIGKILL"})).is_err());
}

#[test]
fn multipart_parts_keep_their_bytes_and_names() {
    let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/a b\"\r\nContent-Type: application/octet-stream\r\n\r\n\x00\r\n--Xy\xff\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n\r\n--XyZ--\r\n";
    let parts = super::files::multipart(body, "XyZ").unwrap();
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0], (Some("/tmp/a b".to_string()), b"\x00\r\n--Xy\xff".to_vec()));
    assert_eq!(parts[1], (None, vec![]));
    assert!(super::files::multipart(b"no boundary", "XyZ").is_err());
    assert!(super::files::multipart(b"--XyZ\r\nContent-Disposition: x\r\n\r\nunterminated", "XyZ").is_err());
}

#[test]
fn an_idempotency_key_replays_its_create_once_made() {
    use super::idempotency::{digest, valid, Claim, Keys};
    let k = Keys::default();
    let (a, b) = (digest(b"a"), digest(b"b"));
    assert_eq!(k.claim("k-1", a), Claim::New);
    assert_eq!(k.claim("k-1", a), Claim::Busy);
    assert_eq!(k.claim("k-1", b), Claim::Mismatch);
    k.finish("k-1", a, Some(&json!({"sandboxID": "sbx-0123456789ab"})));
    assert_eq!(k.claim("k-1", a), Claim::Replay(json!({"sandboxID": "sbx-0123456789ab"})));
    assert_eq!(k.claim("k-2", a), Claim::New);
    k.finish("k-2", a, None);
    assert_eq!(k.claim("k-2", a), Claim::New, "a failed create frees its key");
    assert!(valid("0f2c-aa") && !valid("") && !valid("UPPER") && !valid(&"a".repeat(256)));
}

/// A server's shared state over a temp data dir, no keys beyond `key`.
pub(super) fn shared(d: &std::path::Path, key: &str) -> Arc<Shared> {
    let defaults = make::Defaults::new(Default::default(), false, None).unwrap();
    let config = Config {
        listen: Listen::parse("127.0.0.1:1", false).unwrap(),
        templates: Default::default(),
        keys: None,
        defaults,
    };
    let (jobs, _) = std::sync::mpsc::channel();
    Arc::new(Shared {
        keys: vec![key.to_string()],
        config,
        index: Index::open(d.to_path_buf()).unwrap(),
        jobs,
        idempotency: Default::default(),
        procs: Default::default(),
        watchers: Default::default(),
    })
}

#[test]
fn a_client_slow_to_send_its_headers_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let d = temp("slow");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let s = shared(&d, "0123456789abcdef0123");
        let (_stop, stop) = tokio::sync::watch::channel(false);
        let limits = Limits { shared: s, stop, header_timeout: ms(200), idle_timeout: ms(200) };
        let slots = Arc::new(tokio::sync::Semaphore::new(2));
        // A whole request is answered as ever.
        let (mut client, server) = tokio::io::duplex(4096);
        connection(server, limits.clone(), slots.clone().acquire_owned().await.unwrap());
        client.write_all(b"GET /v2/sandboxes HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut buf = [0u8; 64];
        let n = client.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 401"), "{:?}", String::from_utf8_lossy(&buf[..n]));
        // One that never ends its headers is closed once the timeout passes.
        let (mut slow, server) = tokio::io::duplex(4096);
        connection(server, limits.clone(), slots.clone().acquire_owned().await.unwrap());
        slow.write_all(b"GET /v2/sandboxes HTTP/1.1\r\nHo").await.unwrap();
        let read = tokio::time::timeout(std::time::Duration::from_secs(5), slow.read(&mut buf)).await;
        let n = read.expect("the slow client's connection was still open after 5s").unwrap_or(0);
        assert!(n == 0 || buf[..n].starts_with(b"HTTP/1.1 408"), "{:?}", String::from_utf8_lossy(&buf[..n]));
        // Its slot is given back when it ends.
        let back = tokio::time::timeout(std::time::Duration::from_secs(5), slots.acquire()).await;
        assert!(back.is_ok(), "the cut connection's slot was not given back");
    });
    std::fs::remove_dir_all(&d).unwrap();
}

fn ms(n: u64) -> std::time::Duration {
    std::time::Duration::from_millis(n)
}

/// A client's pool keeps a served connection longer than the header
/// timeout; a server that closed it then would race the client's next
/// request on it. One that has only been refused is closed at that timeout.
#[test]
fn a_served_connection_idles_past_the_header_timeout_a_refused_one_does_not() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let d = temp("idle");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let s = shared(&d, "0123456789abcdef0123");
        let (_stop, stop) = tokio::sync::watch::channel(false);
        let limits = Limits { shared: s, stop, header_timeout: ms(200), idle_timeout: ms(3000) };
        let slots = Arc::new(tokio::sync::Semaphore::new(2));
        let ask = |key: &str| format!("GET /nothing HTTP/1.1\r\nHost: x\r\nX-API-KEY: {key}\r\n\r\n");
        let mut buf = [0u8; 512];
        let (mut served, server) = tokio::io::duplex(4096);
        connection(server, limits.clone(), slots.clone().acquire_owned().await.unwrap());
        let (mut refused, server) = tokio::io::duplex(4096);
        connection(server, limits.clone(), slots.clone().acquire_owned().await.unwrap());
        served.write_all(ask("0123456789abcdef0123").as_bytes()).await.unwrap();
        let n = served.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 404"), "{:?}", String::from_utf8_lossy(&buf[..n]));
        refused.write_all(ask("wrong").as_bytes()).await.unwrap();
        let n = refused.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 401"), "{:?}", String::from_utf8_lossy(&buf[..n]));
        tokio::time::sleep(ms(1000)).await;
        // Five header timeouts later the served one answers on the same connection...
        served.write_all(ask("0123456789abcdef0123").as_bytes()).await.unwrap();
        let n = tokio::time::timeout(ms(2000), served.read(&mut buf)).await.expect("no answer").unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 404"), "{:?}", String::from_utf8_lossy(&buf[..n]));
        // ...and the refused one was closed.
        let n = tokio::time::timeout(ms(100), refused.read(&mut buf)).await.expect("the refused one is still open");
        assert_eq!(n.unwrap_or(0), 0);
        // Served, then idle past the idle timeout: closed too.
        let n = tokio::time::timeout(ms(5000), served.read(&mut buf)).await.expect("the served one idled forever");
        assert_eq!(n.unwrap_or(0), 0);
    });
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_own_key_is_never_one_others_planted_or_can_read() {
    let d = temp("planted");
    let key = d.join("serve/api-key");
    std::fs::create_dir_all(d.join("serve")).unwrap();
    // A link to a file anyone reads: its first long line would be the key.
    std::os::unix::fs::symlink("/etc/passwd", &key).unwrap();
    let e = own_key(&d).unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    std::fs::remove_file(&key).unwrap();
    std::fs::write(&key, "0123456789abcdef0123\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = own_key(&d).unwrap_err();
    assert!(e.to_string().contains("lets its group or others read"), "{e}");
    // An empty file (or a directory) there is refused, not retried forever.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&key, "").unwrap();
    let e = own_key(&d).unwrap_err();
    assert!(e.to_string().contains("holds no key"), "{e}");
    std::fs::remove_file(&key).unwrap();
    std::fs::create_dir(&key).unwrap();
    assert!(own_key(&d).unwrap_err().to_string().contains("not a regular file"));
    std::fs::remove_dir(&key).unwrap();
    assert!(own_key(&d).unwrap().2, "made once nothing is in the way");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_link_planted_as_the_lock_is_not_followed() {
    let d = temp("lock");
    let elsewhere = d.join("elsewhere");
    std::os::unix::fs::symlink(&elsewhere, d.join("serve.lock")).unwrap();
    let e = Index::open(d.clone()).err().expect("a link as serve.lock is refused");
    assert!(e.to_string().contains("serve.lock"), "{e}");
    assert!(!elsewhere.exists(), "the link was followed: {}", elsewhere.display());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn serve_s_create_defaults_are_checked_as_create_checks_them() {
    use crate::spec::CreateRequest;
    let with = |f: &dyn Fn(&mut CreateRequest)| {
        let mut r = CreateRequest::default();
        f(&mut r);
        make::Defaults::new(r, false, None)
    };
    assert!(with(&|r| r.cpus = Some("lots".into())).is_err());
    assert!(with(&|r| r.pids = Some(0)).is_err());
    assert!(with(&|r| r.allow = vec!["127.0.0.1".into()]).is_err(), "--allow as create checks it");
    assert!(with(&|r| r.routes = vec!["nothing".into()]).is_err());
    assert!(with(&|r| r.egress_network = Some("host".into())).is_err(), "a gate flag is checked without --allow");
    assert!(with(&|r| r.egress_network = Some("my-net".into())).is_ok(), "and taken for the gates creates ask for");
    let d = with(&|r| {
        r.allow = vec!["10.0.0.5/32:80".into()];
        r.env = vec!["A=default".into(), "B=kept".into()];
        r.cpus = Some("1.5".into());
    })
    .unwrap();
    let new = parse_new(
        br#"{"templateID":"t","timeout":60,"envVars":{"A":"mine"},"network":{"allowOut":["files.example:80"]}}"#,
    )
    .unwrap();
    let egress = d.egress_for(&new.network).unwrap();
    let req = d.request_for(&crate::spec::ImageRef::parse(IMG).unwrap(), &new, &egress);
    assert_eq!(req.env, ["B=kept", "A=mine"]);
    assert_eq!(req.allow, ["files.example:80", "10.0.0.5/32:80"]);
    assert_eq!((req.ttl.as_deref(), req.cpus.as_deref(), req.image.as_str()), (Some("60s"), Some("1.5"), IMG));
    assert!(crate::spec::SandboxSpec::from_request(&req, None).unwrap().egress.is_some());
    // No gate asked for: the gate's own flags are left out, not refused.
    let d = with(&|r| r.egress_network = Some("my-net".into())).unwrap();
    let new = parse_new(br#"{"templateID":"t"}"#).unwrap();
    let req = d.request_for(&crate::spec::ImageRef::parse(IMG).unwrap(), &new, &d.egress_for(&new.network).unwrap());
    assert_eq!(req.egress_network, None);
    assert!(crate::spec::SandboxSpec::from_request(&req, None).unwrap().egress.is_none());
}

#[test]
fn a_snapshot_id_names_only_a_checkpoint_serve_made() {
    use super::make::{parse_snapshot_id, snapshot_id};
    let id = snapshot_id("sbx-0123456789ab", "e2b-half");
    assert_eq!(id, "sbx-0123456789ab.e2b-half");
    assert_eq!(parse_snapshot_id(&id), Some(("sbx-0123456789ab", "e2b-half")));
    for bad in [
        "sbx-0123456789ab.before",
        "sbx-0123456789ab.e2b-../x",
        "../x.e2b-half",
        "sbx-0123456789ab",
        "sbx-0123456789ab.e2b-a/b",
        "debian",
    ] {
        assert_eq!(parse_snapshot_id(bad), None, "{bad}");
    }
}

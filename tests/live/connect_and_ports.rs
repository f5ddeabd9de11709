//! `sbx connect` and `sbx port-forward` as interactive clients use them: line
//! by line (each answer read before the next line goes, nothing half-closed),
//! keep-alive, a banner first, binary data; and a sandbox that keeps its
//! socket's backlog full makes sbx give up, never hang.

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};

use crate::support::*;

#[test]
fn ports_on_a_sandbox_without_network() {
    let w = World::new();
    let sb = w.create(&[]);
    assert_eq!(sb.inspect("{{.HostConfig.NetworkMode}}"), "none");
    let out = w.sbx(&["wait-port", &sb.id, "7000", "--timeout", "300ms"]);
    assert_exit(&out, 1, "nothing listens yet");
    assert_success(&w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", "tcp-echo", "7000"]), "start a listener");
    assert_success(&w.sbx(&["wait-port", &sb.id, "7000", "--timeout", "10s"]), "wait-port sees it");

    let mut pf = Forward::start(&w, &sb.id, "7000");
    let local = pf.local.clone();
    assert!(local.starts_with("127.0.0.1:"), "listens on loopback only: {local}");
    let data = blob(3 << 20);
    for _ in 0..2 {
        let mut s = std::net::TcpStream::connect(&local).unwrap();
        let mut w2 = s.try_clone().unwrap();
        let d = data.clone();
        let t = std::thread::spawn(move || {
            w2.write_all(&d).unwrap();
            w2.shutdown(std::net::Shutdown::Write).unwrap();
        });
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        t.join().unwrap();
        assert!(got == data, "port-forward changed the bytes ({} of {})", got.len(), data.len());
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pf.child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let status = pf.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "port-forward ends cleanly on Ctrl-C");
    assert_exit(&w.sbx(&["port-forward", &sb.id, "0:0"]), 2, "bad port");
}

/// `sbx port-forward ID 0:PORT` in the background; its local address and the child (killed on drop).
pub(crate) struct Forward {
    pub child: std::process::Child,
    pub local: String,
}

impl Forward {
    pub fn start(w: &World, id: &str, port: &str) -> Forward {
        let mut child = Command::new(SBX)
            .args(w.dir_args())
            .args(["port-forward", id, &format!("0:{port}")])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut line).unwrap();
        let local = line.split_whitespace().next().unwrap().to_string();
        Forward { child, local }
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run a Python client with a hard limit, so a relay that holds data back
/// fails the test instead of hanging it.
fn python(script: &str, args: &[&str]) -> Output {
    Command::new("timeout")
        .args(["-k", "5", "40", "python3", "-c", script])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("spawn python3")
}

const KEEP_ALIVE: &str = r#"
import http.client, sys
host, port = sys.argv[1].rsplit(":", 1)
c = http.client.HTTPConnection(host, int(port), timeout=10)
for path in ["/first", "/second"]:
    c.request("GET", path)
    r = c.getresponse()
    print(r.status, r.read().decode())
"#;

const BANNER_THEN_LINES: &str = r#"
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
f = s.makefile("rwb", buffering=0)
print(f.readline().decode().strip())
for word in ["one", "two", "three"]:
    s.sendall(word.encode() + b"\n")
    print(f.readline().decode().strip())
"#;

const LINE_BY_LINE: &str = r#"
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
for word in ["alpha", "beta", "gamma"]:
    s.sendall(word.encode() + b"\n")
    got = b""
    while not got.endswith(b"\n"):
        chunk = s.recv(100)
        if not chunk:
            break
        got += chunk
    print(got.decode().strip())
"#;

#[test]
fn port_forward_is_interactive_keep_alive_banner_and_line_by_line() {
    // Nothing came back until the client half-closed. Clients
    // here never half-close: each waits for the answer before going on.
    let w = World::new();
    let sb = w.create(&[]);
    for (mode, port) in [("http", "7101"), ("banner", "7102"), ("tcp-echo", "7103")] {
        assert_success(&w.sbx(&["exec", "-d", &sb.id, "--", "/bin/fixture", mode, port]), mode);
        assert_success(&w.sbx(&["wait-port", &sb.id, port, "--timeout", "10s"]), "wait-port");
    }
    let http = Forward::start(&w, &sb.id, "7101");
    let out = python(KEEP_ALIVE, &[&http.local]);
    assert_success(&out, "two requests over one keep-alive connection");
    assert_eq!(stdout(&out), "200 /first\n200 /second\n");

    let banner = Forward::start(&w, &sb.id, "7102");
    let out = python(BANNER_THEN_LINES, &[&banner.local]);
    assert_success(&out, "a server that speaks first");
    assert_eq!(stdout(&out), "220 fixture\n250 one\n250 two\n250 three\n");

    let echo = Forward::start(&w, &sb.id, "7103");
    let out = python(LINE_BY_LINE, &[&echo.local]);
    assert_success(&out, "a line protocol answered line by line");
    assert_eq!(stdout(&out), "alpha\nbeta\ngamma\n");
    // curl, an ordinary client, gets its answer without half-closing.
    let out = Command::new("curl")
        .args(["-sS", "-m", "15", &format!("http://{}/curl", http.local), &format!("http://{}/again", http.local)])
        .output()
        .expect("spawn curl");
    assert_success(&out, "curl, two URLs on one connection");
    assert_eq!(stdout(&out), "/curl/again");
}

const CONNECT_LINES: &str = r#"
import subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
for word in ["alpha", "beta", "gamma"]:
    p.stdin.write(word.encode() + b"\n")
    p.stdin.flush()
    print(p.stdout.readline().decode().strip())
p.stdin.close()
print("exit", p.wait(timeout=10))
"#;

#[test]
fn connect_is_interactive_line_by_line() {
    let w = World::new();
    let sb = w.create(&[]);
    let mut args: Vec<String> = vec![SBX.to_string()];
    args.extend(w.dir_args().into_iter().map(|a| a.into_string().unwrap()));
    args.extend(["connect".to_string(), sb.id.clone()]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = python(CONNECT_LINES, &argv);
    assert_success(&out, "sbx connect driven line by line");
    assert_eq!(stdout(&out), "alpha\nbeta\ngamma\nexit 0\n");
}

#[test]
fn connect_gives_up_on_a_socket_whose_backlog_the_sandbox_keeps_full() {
    // Connect(2) blocks while the accept queue is full,
    // and the sandbox decides whether it ever empties.
    let w = World::new();
    let sb = w.create(&["--", "full-backlog"]);
    let mut full = false;
    for _ in 0..100 {
        if stdout(&docker(&["logs", &sb.id])).contains("full") {
            full = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(full, "the sandbox never filled its backlog");
    // A hard limit on the test side: a hang fails the test, it does not hang the suite.
    let connect = |extra: &[&str]| {
        let started = std::time::Instant::now();
        let out = Command::new("timeout")
            .args(["-k", "2", "25"])
            .arg(SBX)
            .args(w.dir_args())
            .arg("connect")
            .args(extra)
            .arg(&sb.id)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out, started.elapsed())
    };
    let (out, took) = connect(&["--timeout", "2s"]);
    assert_exit(&out, 1, "connect to a full backlog");
    assert!(stderr(&out).contains("did not accept the connection within 2s"), "{}", stderr(&out));
    assert!(took < std::time::Duration::from_secs(8), "took {took:?}");
    let (out, took) = connect(&[]);
    assert_exit(&out, 1, "connect with the default deadline");
    assert!(stderr(&out).contains("within 10s"), "{}", stderr(&out));
    assert!(took < std::time::Duration::from_secs(18), "took {took:?}");
    assert_exit(&w.sbx(&["connect", "--timeout", "soon", &sb.id]), 2, "a bad duration");
}

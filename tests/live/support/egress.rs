//! Driving a sandbox's egress from a live test: create one with
//! the tools image, fetch through its gate with curl, read its decision log,
//! and check that nothing of a gate is left.

use std::process::Output;
use std::time::Duration;

use super::*;

/// `sbx create --image <tools> --label <case> ARGS`; the guarded sandbox.
pub fn create(w: &World, args: &[String]) -> Sandbox {
    let out = try_create(w, args);
    assert_success(&out, &format!("sbx create {args:?}"));
    w.adopt(stdout(&out).trim())
}

pub fn try_create(w: &World, args: &[String]) -> Output {
    let label = w.case_label();
    let mut full = vec!["create", "--image", tools_image(), "--label", &label];
    full.extend(args.iter().map(String::as_str));
    w.sbx(&full)
}

pub fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// What curl got: its exit code, the HTTP status of the response and of a
/// CONNECT (0 when there was none), and the body.
pub struct Fetched {
    pub exit: i32,
    pub code: u16,
    pub connect: u16,
    pub body: Vec<u8>,
    pub stderr: String,
}

const MARK: &[u8] = b"\n@@curl@@ ";

/// `curl URL` in the sandbox, through whatever proxy its environment names.
pub fn fetch(sb: &Sandbox, url: &str, extra: &[&str]) -> Fetched {
    let w = format!("{}%{{http_code}} %{{http_connect}}", String::from_utf8_lossy(MARK));
    let mut args = vec!["-k", "-w", w.as_str()];
    args.extend_from_slice(extra);
    args.push(url);
    let out = curl(sb, &args);
    let at = out.stdout.windows(MARK.len()).rposition(|x| x == MARK).unwrap_or(out.stdout.len());
    let tail = String::from_utf8_lossy(out.stdout.get(at + MARK.len()..).unwrap_or_default()).into_owned();
    let mut codes = tail.split_whitespace().map(|c| c.parse().unwrap_or(0));
    Fetched {
        exit: out.status.code().unwrap_or(-1),
        code: codes.next().unwrap_or(0),
        connect: codes.next().unwrap_or(0),
        body: out.stdout[..at].to_vec(),
        stderr: stderr(&out),
    }
}

impl std::fmt::Debug for Fetched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let body = String::from_utf8_lossy(&self.body[..self.body.len().min(300)]).into_owned();
        write!(
            f,
            "curl exit {} status {} connect {} ({} bytes: {body:?}) stderr: {}",
            self.exit,
            self.code,
            self.connect,
            self.body.len(),
            self.stderr
        )
    }
}

/// The decision log, as `sbx egress log ID --json` prints it (one JSON
/// object a line), polled until `want` holds (a line is written when its
/// connection ends, a moment after curl returns).
pub fn log_until(w: &World, id: &str, want: impl Fn(&[serde_json::Value]) -> bool) -> Vec<serde_json::Value> {
    let mut last = Vec::new();
    until(Duration::from_secs(10), || {
        let out = w.sbx(&["egress", "log", id, "--json"]);
        assert_success(&out, "sbx egress log --json");
        last = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: a log line that is not JSON: {l}")))
            .collect();
        want(&last)
    })
    .unwrap_or_else(|| panic!("the decision log never showed what was expected: {last:#?}"));
    last
}

pub fn line_for<'a>(lines: &'a [serde_json::Value], host: &str, decision: &str) -> Option<&'a serde_json::Value> {
    lines.iter().find(|l| l["host"] == host && l["decision"] == decision)
}

/// Nothing of sandbox `id`'s egress is left: no gate, no internal network, no policy dir.
pub fn assert_no_egress_left(w: &World, id: &str) {
    let gates = docker_ok(&["ps", "-aq", "--filter", &format!("label=sbx.gate-of={id}")]);
    assert_eq!(gates, "", "the gate of {id} was left behind");
    assert_eq!(docker(&["container", "inspect", &format!("{id}-gate")]).status.code(), Some(1), "{id}-gate left");
    assert_eq!(docker(&["network", "inspect", &format!("{id}-egress")]).status.code(), Some(1), "{id}-egress left");
    let dir = w.state_dir.join("egress").join(id);
    assert!(!dir.exists(), "the policy dir {} was left behind", dir.display());
}

/// A service on the Docker host's own address (the one non-loopback,
/// non-bridge IPv4 address `ip -j addr` lists first), as one bound to
/// 0.0.0.0 would be: it answers every connection with a plain HTTP 200
/// and counts them. The traffic never leaves this machine.
pub struct HostService {
    pub ip: String,
    /// The prefix length of the host's network (`ip` gives it).
    pub prefix: u8,
    pub port: u16,
    pub hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

pub const HOST_BODY: &[u8] = b"host-only\n";

impl HostService {
    pub fn start() -> Self {
        let (ip, prefix) = host_address();
        Self::start_on(ip, prefix)
    }

    /// The service on `ip`, one of this host's addresses (see [`LoAddress`]).
    pub fn start_on(ip: String, prefix: u8) -> Self {
        let l = std::net::TcpListener::bind((ip.as_str(), 0)).expect("bind on the host's own address");
        let port = l.local_addr().unwrap().port();
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = hits.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                std::thread::spawn(move || {
                    use std::io::{Read, Write};
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut buf = [0; 4096];
                    let _ = s.read(&mut buf);
                    let head = format!("HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n", HOST_BODY.len());
                    let _ = s.write_all(head.as_bytes()).and_then(|()| s.write_all(HOST_BODY));
                });
            }
        });
        HostService { ip, prefix, port, hits }
    }

    pub fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The host's network as a CIDR rule on the service's port
    /// (`192.0.2.0/24:PORT` here): it covers the host's address.
    pub fn network_rule(&self) -> String {
        let ip: std::net::Ipv4Addr = self.ip.parse().unwrap();
        let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
        format!("{}/{}:{}", std::net::Ipv4Addr::from(u32::from(ip) & mask), self.prefix, self.port)
    }

    /// `curl -p http://IP:PORT/` in `sb`: a CONNECT to the host's address.
    pub fn fetch_from(&self, sb: &Sandbox, host: &str) -> Fetched {
        fetch(sb, &format!("http://{host}:{}/", self.port), &["-p"])
    }
}

/// An address of the test's own on `lo` (as an anycast or service address
/// would be), removed on drop: traffic to it never leaves this machine.
pub struct LoAddress(pub String);

impl LoAddress {
    pub fn add(ip: &str) -> Self {
        let out = std::process::Command::new("ip").args(["addr", "add", &format!("{ip}/32"), "dev", "lo"]).output();
        let out = out.expect("spawn ip (apt-get install iproute2)");
        assert!(out.status.success(), "ip addr add {ip}/32 dev lo: {}", String::from_utf8_lossy(&out.stderr));
        LoAddress(ip.to_string())
    }
}

impl Drop for LoAddress {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["addr", "del", &format!("{}/32", self.0), "dev", "lo"]).output();
    }
}

/// This machine's own IPv4 address and prefix length, from `ip -j addr`:
/// the first global one on an interface that is not loopback, a Docker
/// bridge or a veth.
pub fn host_address() -> (String, u8) {
    let out = std::process::Command::new("ip").args(["-j", "-4", "addr", "show", "scope", "global"]).output();
    let out = out.expect("spawn ip (apt-get install iproute2)");
    let links: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("ip -j prints JSON");
    for link in &links {
        let name = link["ifname"].as_str().unwrap_or_default();
        let flags = link["flags"].as_array().cloned().unwrap_or_default();
        if name == "docker0"
            || name.starts_with("br-")
            || name.starts_with("veth")
            || flags.iter().any(|f| f == "LOOPBACK")
        {
            continue;
        }
        for a in link["addr_info"].as_array().into_iter().flatten() {
            if let (Some(ip), Some(len)) = (a["local"].as_str(), a["prefixlen"].as_u64()) {
                return (ip.to_string(), len as u8);
            }
        }
    }
    panic!("this machine has no global IPv4 address outside Docker's bridges: {links:?}");
}

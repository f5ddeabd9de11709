//! The secrets cases: HTTPS to a host whose secret the gate puts in (the
//! gate terminates TLS, parses the request, re-originates TLS and scans the
//! response for the value) beside HTTPS to the same server under a second
//! name with no secret, which the same gate passes through as an
//! end-to-end tunnel. One sandbox, one gate, one server, interleaved.
//!
//! The server is `openssl s_server -WWW` (the live tests' TLS stand-in) with
//! a certificate from a CA the bench makes for both names; the gate gets
//! that CA as `--egress-ca`. The client is the same curl in the same
//! sandbox for both sides, given one CA file holding the sandbox's own
//! bundle (for the gate's certificate) and the bench's CA (for the server's
//! through the tunnel), so both sides load the same trust store.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use super::common::internet::Internet;
use super::common::standin_api::make_ca_and_leaf;
use super::common::{blob, tools_image, unique};
use super::egress::Row;
use super::{docker, docker_ok, percentile, Bench, LABEL};

/// The name the secret belongs to (terminated by the gate).
const SECRET_HOST: &str = "api.example";
/// The same server under a name with no secret (tunnelled).
const TUNNEL_HOST: &str = "tunnel.example";
const HUGE: usize = 200 << 20;
/// Where the sandbox's copy of both CAs goes.
const CA_IN: &str = "/tmp/both-ca.pem";

/// The server's certificate, files and container; removed on drop.
struct Server {
    dir: PathBuf,
    name: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", "-v", &self.name]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn prepare() -> Server {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("sbxb-secrets-"));
    let www = dir.join("srv/www");
    std::fs::create_dir_all(&www).unwrap();
    make_ca_and_leaf(&dir, &[SECRET_HOST, TUNNEL_HOST]);
    std::fs::write(www.join("small.txt"), b"hello from the stand-in\n").unwrap();
    std::fs::write(www.join("huge.bin"), blob(HUGE)).unwrap();
    // Readable by the server whatever uid it runs as; its key only there.
    for (p, mode) in [("srv", 0o755), ("srv/www", 0o755), ("srv/key.pem", 0o644), ("srv/cert.pem", 0o644)] {
        std::fs::set_permissions(dir.join(p), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    for f in ["small.txt", "huge.bin"] {
        std::fs::set_permissions(www.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::write(dir.join("token"), "bench-token-value-0123456789\n").unwrap();
    std::fs::set_permissions(dir.join("token"), std::fs::Permissions::from_mode(0o600)).unwrap();
    Server { dir, name: unique("sbxb-tls-") }
}

/// Each of `n` requests for the small file on a connection of its own
/// (`Connection: close`: the gate keeps a terminated client connection
/// alive otherwise, and the tunnel's server closes each), in one curl;
/// each one's time to first byte in ms.
fn first_bytes(id: &str, host: &str, n: usize) -> Vec<f64> {
    let url = format!("https://{host}/small.txt");
    let mut args = vec!["-H", "Connection: close", "-w", "%{http_code} %{time_starttransfer}\\n"];
    for _ in 0..n {
        args.extend(["-o", "/dev/null", url.as_str()]);
    }
    let out = String::from_utf8(curl(id, &args)).unwrap();
    out.lines()
        .map(|l| match l.split_once(' ') {
            Some(("200", t)) => t.parse::<f64>().unwrap() * 1e3,
            _ => panic!("a request to {host} did not answer 200: {l:?} ({out})"),
        })
        .collect()
}

/// MiB/s of the 200 MiB file from its first byte to its last.
fn bulk(id: &str, host: &str) -> f64 {
    let url = format!("https://{host}/huge.bin");
    let w = "%{http_code} %{size_download} %{time_starttransfer} %{time_total}";
    let out = String::from_utf8(curl(id, &["-o", "/dev/null", "-w", w, &url])).unwrap();
    let f: Vec<&str> = out.split_whitespace().collect();
    assert!(f.len() == 4 && f[0] == "200" && f[1] == HUGE.to_string(), "200 MiB from {host} came back as {out:?}");
    let secs = f[3].parse::<f64>().unwrap() - f[2].parse::<f64>().unwrap();
    HUGE as f64 / (1 << 20) as f64 / secs
}

fn curl(id: &str, args: &[&str]) -> Vec<u8> {
    let mut full = vec!["exec", id, "/usr/bin/curl", "-sS", "--max-time", "120", "--cacert", CA_IN];
    full.extend_from_slice(args);
    let out = docker(&full);
    assert!(
        out.status.success(),
        "curl in the sandbox failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

pub fn run(b: &Bench, reps: &dyn Fn(usize) -> usize, rows: &mut Vec<Row>) {
    let server = prepare();
    let srv = format!("{}:/srv:ro", server.dir.join("srv").display());
    let name = server.name.clone();
    let inet = Internet::start_then(|net| {
        let mut a = vec!["run", "-d", "--name", &name, "--label", LABEL, "--network", &net.name];
        a.extend(["--cap-drop", "ALL", "--cap-add", "NET_BIND_SERVICE", "--memory", "256m", "-v", &srv]);
        a.extend(["-w", "/srv/www", "--entrypoint", "/usr/bin/openssl", "-e", "OPENSSL_CONF=/dev/null"]);
        a.push(tools_image());
        a.extend(["s_server", "-quiet", "-accept", "443", "-cert", "/srv/cert.pem", "-key", "/srv/key.pem", "-WWW"]);
        docker_ok(&a);
        let format = format!("{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}", net.name);
        let ip = docker_ok(&["inspect", "--format", &format, &name]);
        vec![format!("{SECRET_HOST}={ip}"), format!("{TUNNEL_HOST}={ip}")]
    });
    let format = format!("{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}", inet.net.name);
    let ip = docker_ok(&["inspect", "--format", &format, &server.name]);

    let ca = server.dir.join("ca.pem").display().to_string();
    let secret = format!("TOKEN@{SECRET_HOST}=file:{}", server.dir.join("token").display());
    let cidr = format!("{ip}/32:443");
    let tunnel = format!("{TUNNEL_HOST}:443");
    let mut args = vec!["create", "--image", tools_image(), "--label", LABEL];
    args.extend(["--egress-network", &inet.net.name, "--egress-dns", &inet.dns_ip, "--egress-ca", &ca]);
    args.extend(["--allow", &cidr, "--allow", &tunnel, "--secret", &secret]);
    let id = String::from_utf8(b.sbx(&args).stdout).unwrap().trim().to_string();

    // One CA file for both sides: the sandbox's bundle and the bench's CA.
    let format = "{{range .Mounts}}{{if eq .Destination \"/run/sbx-ca\"}}{{.Source}}{{end}}{{end}}";
    let bundle_path = format!("{}/ca-bundle.pem", docker_ok(&["inspect", "--format", format, &id]));
    let mut both = std::fs::read(&bundle_path).unwrap_or_else(|e| panic!("the sandbox's CA bundle {bundle_path}: {e}"));
    both.extend(std::fs::read(&ca).unwrap());
    let both_path = server.dir.join("both-ca.pem");
    std::fs::write(&both_path, both).unwrap();
    std::fs::set_permissions(&both_path, std::fs::Permissions::from_mode(0o644)).unwrap();
    b.sbx(&["cp", &both_path.display().to_string(), &format!("{id}:{CA_IN}")]);

    // Warm both paths (the gate's first lookups, the server's page cache).
    first_bytes(&id, SECRET_HOST, 1);
    first_bytes(&id, TUNNEL_HOST, 1);

    let mut ttfb = Row::new("secrets: time to first byte, terminated host", "ms", "tunnel");
    for i in 0..reps(30) {
        for terminated in [i % 2 == 0, i % 2 == 1] {
            if terminated {
                ttfb.gate.extend(first_bytes(&id, SECRET_HOST, 10));
            } else {
                ttfb.base.extend(first_bytes(&id, TUNNEL_HOST, 10));
            }
        }
    }
    let added = percentile(&ttfb.gate, 0.5) - percentile(&ttfb.base, 0.5);
    ttfb.judge(format!("+{added:.2} ms p50"), "≤ +5 ms p50", added <= 5.0);
    rows.push(ttfb);
    eprint!(".");

    let mut tput = Row::new("secrets: 200 MiB, terminated host", "MiB/s", "tunnel");
    for i in 0..reps(9) {
        for terminated in [i % 2 == 0, i % 2 == 1] {
            if terminated {
                tput.gate.push(bulk(&id, SECRET_HOST));
            } else {
                tput.base.push(bulk(&id, TUNNEL_HOST));
            }
        }
        eprint!(".");
    }
    let share = percentile(&tput.gate, 0.5) / percentile(&tput.base, 0.5);
    tput.judge(format!("{:.0}% of the tunnel", share * 100.0), "≥ 70% of the tunnel", share >= 0.70);
    rows.push(tput);

    // The value reached the server only inside TLS the gate terminated;
    // that the sandbox never sees it is the live tests' to prove.
    b.sbx(&["destroy", &id]);
    drop(server);
    drop(inet);
}

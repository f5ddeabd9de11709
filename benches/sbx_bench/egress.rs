//! The egress cases: a sandbox's gate beside a direct connection
//! between the same two containers, and `create --allow` beside `create
//! --private-routes` with one route. Interleaved like every other case.
//!
//! The stage: one stand-in server (the fixture's `http-serve` on 80 and its
//! `dns-serve` on 53, both from the live tests' stand-ins) on a bridge
//! network of its own, answering `files.example` with its own address. The
//! gate resolves through it (`--egress-dns`) and reaches it under a `/32`
//! CIDR rule, as in the live tests. The server is the live tests' `web`
//! stand-in with room for the load here (a 200 MiB body read into memory,
//! a thread per connection for 500 connections). For the direct side the
//! bench joins the sandbox to that network itself (sbx never does), so the
//! same curl in the same container reaches the same server by address.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use super::common::{blob, fixture_image, tools_image, Network};
use super::{docker, docker_ok, percentile, Bench, LABEL};

/// The name the stage's resolver answers.
const NAME: &str = "files.example";
/// The bulk transfer's size.
const HUGE: usize = 200 << 20;
/// Concurrent connections through one gate, spread over `CLIENTS` curl
/// processes (each well inside the sandbox's 1024 open files: a socket and
/// an output file per transfer).
const CONCURRENT: usize = 500;
const CLIENTS: usize = 4;
/// Each of the concurrent connections fetches `/slow/N`: N bytes of `s` in
/// 16 KiB chunks, 100 ms after each, so every connection stays open at
/// least 200 ms and all of them overlap. N differs per connection, so a
/// response delivered to the wrong client shows as a wrong length.
const SLOW_BASE: usize = 16 << 10;

/// One egress comparison: the gate's side against its baseline.
#[derive(serde::Serialize)]
pub struct Row {
    pub name: String,
    pub unit: &'static str,
    pub gate: Vec<f64>,
    pub base: Vec<f64>,
    /// What the baseline is ("direct", "create --private-routes").
    pub baseline: &'static str,
    pub result: String,
    pub target: String,
    pub met: bool,
}

/// The stand-in server and its network, removed on drop (failure included).
struct Stage {
    net: Network,
    server: String,
    ip: String,
    dir: PathBuf,
}

impl Stage {
    fn start() -> Self {
        let net = Network::with_prefix(false, "inet-");
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("sbxb-egress-{}", net.host));
        let www = dir.join("www");
        std::fs::create_dir_all(&www).unwrap();
        std::fs::write(www.join("small.txt"), b"hello from the stand-in\n").unwrap();
        std::fs::write(www.join("huge.bin"), blob(HUGE)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        for (p, mode) in [(&dir, 0o755), (&www, 0o755), (&www.join("small.txt"), 0o644), (&www.join("huge.bin"), 0o644)]
        {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let server = format!("sbxb-inet-{}", net.host);
        let mut stage = Stage { net, server, ip: String::new(), dir };
        let srv = format!("{}:/srv:ro", stage.dir.display());
        let fixture = fixture_image();
        docker_ok(&[
            "run",
            "-d",
            "--name",
            &stage.server,
            "--label",
            LABEL,
            "--network",
            &stage.net.name,
            "--cap-drop",
            "ALL",
            "--cap-add",
            "NET_BIND_SERVICE",
            "--memory",
            "1g",
            "--pids-limit",
            "1100",
            "-v",
            &srv,
            &fixture,
            "http-serve",
            "80",
            "/srv/www",
        ]);
        let format = format!("{{{{(index .NetworkSettings.Networks \"{}\").IPAddress}}}}", stage.net.name);
        stage.ip = docker_ok(&["inspect", "--format", &format, &stage.server]);
        let zone = format!("{NAME}={}", stage.ip);
        docker_ok(&["exec", "-d", &stage.server, "/bin/fixture", "dns-serve", "53", &zone, "--count", "/tmp/queries"]);
        let start = Instant::now();
        while !docker(&["exec", &stage.server, "/bin/fixture", "exists", "/tmp/queries"]).status.success() {
            assert!(start.elapsed() < Duration::from_secs(10), "the resolver stand-in never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        stage
    }

    /// The create flags of a sandbox on this stage, allowed `files.example:80`.
    fn create_args(&self) -> Vec<String> {
        let mut a: Vec<String> = vec!["--egress-network".into(), self.net.name.clone(), "--egress-dns".into()];
        a.push(self.ip.clone());
        for rule in [format!("{}/32:80", self.ip), format!("{NAME}:80")] {
            a.extend(["--allow".into(), rule]);
        }
        a
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", "-v", &self.server]);
        let _ = std::fs::remove_dir_all(&self.dir);
        // The network goes with `self.net` (it detaches what is still on it).
    }
}

/// `curl ARGS` in sandbox `id` (its environment: the gate as its proxy);
/// stdout, or a panic naming what failed.
fn curl(id: &str, args: &[&str]) -> Vec<u8> {
    let mut full = vec!["exec", id, "/usr/bin/curl", "-sS", "--max-time", "60"];
    full.extend_from_slice(args);
    let out = docker(&full);
    assert!(
        out.status.success(),
        "curl {:?} in the sandbox failed ({}): {}",
        &args[..args.len().min(8)],
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Fetch each of `urls` on a connection of its own (the server closes
/// each), in one curl; each transfer's time to first byte, in ms.
fn first_bytes(id: &str, urls: &[String], direct: bool) -> Vec<f64> {
    let mut args = vec!["-w", "%{http_code} %{time_starttransfer}\\n"];
    if direct {
        args.extend(["--noproxy", "*"]);
    }
    for u in urls {
        args.extend(["-o", "/dev/null", u.as_str()]);
    }
    let out = String::from_utf8(curl(id, &args)).unwrap();
    out.lines()
        .map(|l| match l.split_once(' ') {
            Some(("200", t)) => t.parse::<f64>().unwrap() * 1e3,
            _ => panic!("a request for the small file did not answer 200: {l:?} ({out})"),
        })
        .collect()
}

/// Fetch the 200 MiB file once; MiB/s from its first byte to its last (the
/// server reads the file into memory before its first byte, on both sides).
fn bulk(id: &str, url: &str, direct: bool) -> f64 {
    let mut args = vec!["-o", "/dev/null", "-w", "%{http_code} %{size_download} %{time_starttransfer} %{time_total}"];
    if direct {
        args.extend(["--noproxy", "*"]);
    }
    args.push(url);
    let out = String::from_utf8(curl(id, &args)).unwrap();
    let f: Vec<&str> = out.split_whitespace().collect();
    assert!(f.len() == 4 && f[0] == "200" && f[1] == HUGE.to_string(), "the 200 MiB transfer came back as {out:?}");
    let secs = f[3].parse::<f64>().unwrap() - f[2].parse::<f64>().unwrap();
    HUGE as f64 / (1 << 20) as f64 / secs
}

pub fn run(b: &Bench, reps: &dyn Fn(usize) -> usize, rows: &mut Vec<Row>, notes: &mut Vec<String>) {
    let stage = Stage::start();
    let egress = stage.create_args();
    let egress: Vec<&str> = egress.iter().map(String::as_str).collect();

    // The sandbox: the live tests' tools image (curl), with a gate; then on
    // the stage's network too, for the direct side.
    let mut args = vec!["create", "--image", tools_image(), "--label", LABEL];
    args.extend_from_slice(&egress);
    let id = String::from_utf8(b.sbx(&args).stdout).unwrap().trim().to_string();
    docker_ok(&["network", "connect", &stage.net.name, &id]);
    let via_gate = |path: &str| format!("http://{NAME}{path}");
    let direct = |path: &str| format!("http://{}{path}", stage.ip);
    // Warm both paths (the server's page cache, the gate's first lookup).
    first_bytes(&id, &[via_gate("/small.txt")], false);
    first_bytes(&id, &[direct("/small.txt")], true);

    // 1. Time to first byte, a new connection each.
    let mut ttfb = Row::new("egress: time to first byte", "ms", "direct");
    for i in 0..reps(30) {
        for gate in [i % 2 == 0, i % 2 == 1] {
            if gate {
                ttfb.gate.extend(first_bytes(&id, &vec![via_gate("/small.txt"); 20], false));
            } else {
                ttfb.base.extend(first_bytes(&id, &vec![direct("/small.txt"); 20], true));
            }
        }
    }
    let added = percentile(&ttfb.gate, 0.5) - percentile(&ttfb.base, 0.5);
    ttfb.judge(format!("+{added:.2} ms p50"), "≤ +2 ms p50", added <= 2.0);
    rows.push(ttfb);
    eprint!(".");

    // 2. Throughput of one 200 MiB transfer.
    let mut tput = Row::new("egress: 200 MiB transfer", "MiB/s", "direct");
    for i in 0..reps(9) {
        for gate in [i % 2 == 0, i % 2 == 1] {
            if gate {
                tput.gate.push(bulk(&id, &via_gate("/huge.bin"), false));
            } else {
                tput.base.push(bulk(&id, &direct("/huge.bin"), true));
            }
        }
        eprint!(".");
    }
    let share = percentile(&tput.gate, 0.5) / percentile(&tput.base, 0.5);
    tput.judge(format!("{:.0}% of direct", share * 100.0), "≥ 80% of direct", share >= 0.80);
    rows.push(tput);

    // 3. 500 concurrent connections through the one gate.
    rows.push(concurrent(b, &id));
    eprint!(".");
    b.sbx(&["destroy", &id]);

    // 4. create --allow against create --private-routes with one route, the
    // route's service a running container on the stage's network.
    let svc = format!("benchsvc{:06x}", rand::random::<u32>() & 0xffffff);
    let fixture = fixture_image();
    docker_ok(&["run", "-d", "--name", &svc, "--label", LABEL, "--network", &stage.net.name, &fixture, "sleep"]);
    let route = format!("r0:{svc}:80");
    let private = ["--private-routes", "--route", route.as_str()];
    // Warm up both (sbx's own image is imported on the first --allow).
    for extra in [&egress[..], &private[..]] {
        let made = b.create(extra);
        b.sbx(&["destroy", &made]);
    }
    let mut create = Row::new("egress: create --allow", "ms", "create --private-routes, one route");
    for i in 0..reps(10) {
        for gate in [i % 2 == 0, i % 2 == 1] {
            let (made, t) = super::timed(|| b.create(if gate { &egress } else { &private }));
            let side = if gate { &mut create.gate } else { &mut create.base };
            side.push(t);
            b.sbx(&["destroy", &made]);
        }
        eprint!(".");
    }
    let ratio = percentile(&create.gate, 0.5) / percentile(&create.base, 0.5);
    create.judge(format!("{ratio:.2}x"), "≤ 1.50x", ratio <= 1.5);
    rows.push(create);
    let mut counted = vec!["create", "--image", b.image.as_str(), "--label", LABEL];
    counted.extend_from_slice(&egress);
    let n = b.calls(&counted);
    notes.push(format!("calls\tcreate --allow\t{n}"));
    let cpu: Vec<f64> = (0..5).map(|_| b.cpu_ms(&counted)).collect();
    notes.push(format!("cpu\tcreate --allow\t{}", percentile(&cpu, 0.5)));
    // Those creates' sandboxes (and so their gates), untimed.
    b.destroy_labelled();
    let _ = docker(&["rm", "-f", "-v", &svc]);
    drop(stage);
}

/// 500 connections at once through one gate, each fetching a body of its
/// own length; every one must answer 200 with exactly its bytes. The
/// decision log gives how many were open at the same time.
fn concurrent(b: &Bench, id: &str) -> Row {
    // By the gate's address, not its name: 500 lookups at once would start
    // 500 resolver threads in curl, against the sandbox's pids limit.
    let net = sbx::model::gate::network(id);
    let format = format!("{{{{(index .NetworkSettings.Networks \"{net}\").IPAddress}}}}");
    let gate_ip = docker_ok(&["inspect", "--format", &format, &sbx::model::gate::container(id)]);
    let proxy = format!("http://{gate_ip}:{}", sbx::model::gate::PORT);
    let per = CONCURRENT / CLIENTS;
    let since = SystemTime::now();
    let (codes, wall) = super::timed(|| {
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..CLIENTS)
                .map(|c| {
                    let proxy = &proxy;
                    s.spawn(move || {
                        let mut a: Vec<String> =
                            ["-x", proxy, "--parallel", "--parallel-immediate"].iter().map(|s| s.to_string()).collect();
                        a.extend(["--parallel-max".into(), per.to_string()]);
                        a.extend(["-w".into(), "%{http_code} %{size_download}\\n".into()]);
                        for k in c * per..(c + 1) * per {
                            a.extend(["-o".into(), format!("/tmp/c{k}")]);
                            a.push(format!("http://{NAME}/slow/{}", SLOW_BASE + k));
                        }
                        let a: Vec<&str> = a.iter().map(String::as_str).collect();
                        String::from_utf8(curl(id, &a)).unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>().concat()
        })
    });
    let mut sizes: Vec<usize> = codes
        .lines()
        .map(|l| match l.split_once(' ') {
            Some(("200", n)) => n.parse().unwrap(),
            _ => panic!("a concurrent connection through the gate failed: {l:?}"),
        })
        .collect();
    sizes.sort();
    let want: Vec<usize> = (0..CONCURRENT).map(|k| SLOW_BASE + k).collect();
    assert_eq!(sizes, want, "the concurrent connections' sizes differ");
    // Byte-exact: every body read back, in order, with one curl of file:// URLs.
    let mut a: Vec<String> = (0..CONCURRENT).map(|k| format!("file:///tmp/c{k}")).collect();
    a.insert(0, "--noproxy".into());
    a.insert(1, "*".into());
    let got = curl(id, &a.iter().map(String::as_str).collect::<Vec<_>>());
    let total: usize = want.iter().sum();
    assert!(
        got.len() == total && got.iter().all(|&c| c == b's'),
        "the concurrent connections' bodies differ ({} of {total} bytes)",
        got.len()
    );
    let peak = peak_open(b, id, since);
    let mut row = Row::new("egress: 500 concurrent connections", "ms", "-");
    row.gate.push(wall);
    row.judge(format!("{CONCURRENT} of {CONCURRENT} byte-exact, {peak} open at once"), "all 500", true);
    row
}

/// The most connections the gate had open at once since `since`, from its
/// decision log (each line: start time and duration).
fn peak_open(b: &Bench, id: &str, since: SystemTime) -> usize {
    let out = b.sbx(&["egress", "log", id, "--json"]);
    let mut edges: Vec<(SystemTime, i32)> = Vec::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let Some(start) = v["time"].as_str().and_then(|t| humantime::parse_rfc3339(t).ok()) else { continue };
        // The log's times are in milliseconds.
        if start + Duration::from_millis(1) < since || v["decision"] != "allow" {
            continue;
        }
        let end = start + Duration::from_millis(v["duration_ms"].as_u64().unwrap_or(0));
        edges.push((start, 1));
        edges.push((end, -1));
    }
    // Ends before starts at the same instant: touching is not overlapping.
    edges.sort();
    let (mut open, mut peak) = (0i32, 0i32);
    for (_, d) in edges {
        open += d;
        peak = peak.max(open);
    }
    peak as usize
}

impl Row {
    pub fn new(name: &str, unit: &'static str, baseline: &'static str) -> Self {
        Row {
            name: name.into(),
            unit,
            gate: Vec::new(),
            base: Vec::new(),
            baseline,
            result: String::new(),
            target: String::new(),
            met: false,
        }
    }

    pub fn judge(&mut self, result: String, target: &str, met: bool) {
        self.result = result;
        self.target = target.into();
        self.met = met;
    }
}

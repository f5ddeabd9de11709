//! The serve cases, through `sbx serve` and the real E2B SDK (the venv
//! tests/live/support/serve.rs makes): a cold create beside `sbx create`
//! of the same image; `commands.run("true")` beside a bare `docker exec`
//! of the same command line; a warm-pool create at the HTTP level (one
//! kept-alive connection, no process start); and 50 SDK sessions each
//! running one `echo` a second for a minute, with the server's memory.
//! The Python side (below) times both sides of each pair, interleaved,
//! and prints the samples as one JSON object.

use std::io::Read;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::common::serve::{bash_in, sdk_python};
use super::common::ImageTree;
use super::{percentile, Bench, LABEL};

const POOL_SIZE: usize = 5;

const DRIVER: &str = r#"
import json, os, subprocess, sys, threading, time, http.client
from e2b import Sandbox
E = os.environ
reps, sessions, seconds = int(E["REPS"]), int(E["SESSIONS"]), int(E["SECONDS"])
sbx = [E["SBX"], "--socket-dir", E["SOCKETS"], "--data-dir", E["DATA"]]
def ms(t0): return (time.perf_counter() - t0) * 1e3
def timed(f):
    t0 = time.perf_counter(); v = f(); return v, ms(t0)
def sh(*a):
    r = subprocess.run(list(a), capture_output=True, text=True)
    if r.returncode != 0: raise SystemExit(f"{a}: {r.stderr}")
    return r.stdout.strip()
out = {"cold_serve": [], "cold_cli": [], "run_sdk": [], "run_docker": [], "warm": []}
# Warm-up of both paths. The cold pair is of the fixture image (it binds
# sbx's socket, so `sbx create` of it is ready); "bench" has bash for commands.
Sandbox.create("fix").kill()
sh(*sbx, "destroy", sh(*sbx, "create", "--image", E["IMAGE"], "--label", E["LABEL"]))
for i in range(reps):
    for first in ([0, 1] if i % 2 == 0 else [1, 0]):
        if first == 0:
            s, t = timed(lambda: Sandbox.create("fix"))
            out["cold_serve"].append(t); s.kill()
        else:
            sid, t = timed(lambda: sh(*sbx, "create", "--image", E["IMAGE"], "--label", E["LABEL"]))
            out["cold_cli"].append(t); sh(*sbx, "destroy", sid)
s = Sandbox.create("bench", timeout=600)
s.commands.run("true")
argv = ["docker", "exec", s.sandbox_id, "/bin/bash", "-l", "-c", "true"]
for i in range(reps * 3):
    for first in ([0, 1] if i % 2 == 0 else [1, 0]):
        if first == 0:
            r, t = timed(lambda: s.commands.run("true")); assert r.exit_code == 0
            out["run_sdk"].append(t)
        else:
            _, t = timed(lambda: sh(*argv)); out["run_docker"].append(t)
s.kill()
# Warm-pool creates at the HTTP level: one kept-alive connection.
host, port = E["ADDR"].split(":")
conn = http.client.HTTPConnection(host, int(port))
hdr = {"X-API-KEY": E["KEY"], "Content-Type": "application/json"}
body = json.dumps({"templateID": E["POOL"], "timeout": 300})
def pool_ready():
    rows = json.loads(sh(*sbx, "--json", "pool", "ls"))
    row = [r for r in rows if r["name"] == E["POOL"]][0]
    return row["ready"] >= int(E["POOL_SIZE"]) and not row.get("filling")
for i in range(reps):
    deadline = time.time() + 120
    sh(*sbx, "pool", "fill", E["POOL"])
    while not pool_ready():
        if time.time() > deadline: raise SystemExit("the pool did not refill")
        time.sleep(0.1); sh(*sbx, "pool", "fill", E["POOL"])
    t0 = time.perf_counter()
    conn.request("POST", "/v2/sandboxes", body, hdr)
    resp = conn.getresponse(); data = resp.read()
    out["warm"].append(ms(t0))
    if resp.status != 201: raise SystemExit(f"warm create: {resp.status} {data!r}")
    sid = json.loads(data)["sandboxID"]
    conn.request("DELETE", "/sandboxes/" + sid, headers=hdr); conn.getresponse().read()
# Sessions at once, one echo a second each.
errors, lat, rss = [], [], []
lock = threading.Lock()
start = threading.Barrier(sessions + 1)
def session():
    try:
        box = Sandbox.create("bench", timeout=600)
    except Exception as e:
        with lock: errors.append(f"create: {e}")
        start.wait(); return
    start.wait()
    end = time.time() + seconds
    try:
        while time.time() < end:
            t0 = time.perf_counter()
            try:
                r = box.commands.run("echo hi")
                if r.stdout != "hi\n": raise RuntimeError(f"stdout {r.stdout!r}")
                with lock: lat.append(ms(t0))
            except Exception as e:
                with lock: errors.append(f"run: {e}")
            time.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))
    finally:
        box.kill()
threads = [threading.Thread(target=session) for _ in range(sessions)]
for t in threads: t.start()
start.wait()
t_end = time.time() + seconds
while time.time() < t_end:
    for line in open(f"/proc/{E['SERVE_PID']}/status"):
        if line.startswith("VmRSS:"): rss.append(int(line.split()[1]))
    time.sleep(0.5)
for t in threads: t.join()
out.update({"errors": errors[:20], "error_count": len(errors), "session_ms": lat, "rss_kib": rss})
print(json.dumps(out))
"#;

/// `sbx serve` on a free loopback port with the bench's data dir: killed on drop.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The report's serve table, as markdown rows.
pub fn run(b: &Bench, reps: &dyn Fn(usize) -> usize) -> String {
    let image = bash_in(ImageTree::new(&["etc", "home"]));
    let pool = format!("benchsrv{:06x}", rand::random::<u32>() & 0xffffff);
    let size = POOL_SIZE.to_string();
    b.sbx(&["pool", "create", &pool, "--size", &size, "--image", &b.image, "--label", LABEL]);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| measure(b, &image.0, &pool, reps)));
    b.sbx(&["pool", "rm", &pool]);
    drop(image);
    match result {
        Ok(md) => md,
        Err(e) => std::panic::resume_unwind(e),
    }
}

fn measure(b: &Bench, image: &str, pool: &str, reps: &dyn Fn(usize) -> usize) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let template = format!("bench={image}");
    let fixture = format!("fix={}", b.image);
    let log = b.root.join("serve.log");
    let mut cmd = b.sbx_cmd(&["serve", "--listen", &addr, "--template", &template, "--template", &fixture]);
    cmd.stdout(Stdio::null()).stderr(std::fs::File::create(&log).unwrap());
    let serve = Serve(cmd.spawn().expect("spawn sbx serve"));
    let deadline = Instant::now() + Duration::from_secs(15);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline, "sbx serve did not listen: {}", std::fs::read_to_string(&log).unwrap());
        std::thread::sleep(Duration::from_millis(20));
    }
    let key = std::fs::read_to_string(b.data.join("serve/api-key")).unwrap().trim().to_string();
    let quick = reps(3) < 3;
    let url = format!("http://{addr}");
    let mut py = std::process::Command::new(sdk_python());
    py.args(["-u", "-c", DRIVER]).env_clear().env("PATH", "/usr/bin:/bin").env("HOME", std::env::temp_dir());
    py.envs([("E2B_API_URL", url.as_str()), ("E2B_SANDBOX_URL", url.as_str()), ("E2B_API_KEY", key.as_str())]);
    py.envs([("E2B_DOMAIN", "sbx-serve.invalid"), ("NO_PROXY", "*"), ("no_proxy", "*")]);
    py.envs([
        ("SBX", super::SBX),
        ("IMAGE", b.image.as_str()),
        ("LABEL", LABEL),
        ("POOL", pool),
        ("ADDR", addr.as_str()),
    ]);
    py.env("SOCKETS", &b.root).env("DATA", &b.data).env("KEY", &key).env("POOL_SIZE", POOL_SIZE.to_string());
    py.env("SERVE_PID", serve.0.id().to_string()).env("REPS", reps(15).to_string());
    py.env("SESSIONS", "50").env("SECONDS", if quick { "20" } else { "60" });
    py.stdout(Stdio::piped()).stderr(Stdio::inherit()).stdin(Stdio::null());
    let mut child = py.spawn().expect("spawn the SDK driver");
    let mut text = String::new();
    child.stdout.take().unwrap().read_to_string(&mut text).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "the SDK driver failed (serve said: {})", std::fs::read_to_string(&log).unwrap());
    let v: serde_json::Value = serde_json::from_str(text.trim()).expect("the driver's JSON");
    drop(serve);
    report(&v)
}

fn report(v: &serde_json::Value) -> String {
    let f = |k: &str| -> Vec<f64> { v[k].as_array().into_iter().flatten().filter_map(|x| x.as_f64()).collect() };
    let p = |k: &str, q: f64| percentile(&f(k), q);
    let met = |ok: bool| if ok { "yes" } else { "no" };
    let mut md = String::new();
    let (warm, warm95) = (p("warm", 0.5), p("warm", 0.95));
    md.push_str(&format!(
        "| warm-pool create over HTTP, p50 (p95) | {} | {warm:.1} ms ({warm95:.1}) | ≤ 5 ms | {} |\n",
        f("warm").len(),
        met(warm <= 5.0)
    ));
    let cold = p("cold_serve", 0.5) / p("cold_cli", 0.5);
    md.push_str(&format!(
        "| cold create: SDK `Sandbox.create` / `sbx create`, p50 | {} | {:.1} / {:.1} ms = {cold:.2}x | ≤ 1.05x | {} |\n",
        f("cold_serve").len(),
        p("cold_serve", 0.5),
        p("cold_cli", 0.5),
        met(cold <= 1.05)
    ));
    let run = p("run_sdk", 0.5) / p("run_docker", 0.5);
    md.push_str(&format!(
        "| SDK `commands.run(\"true\")` / `docker exec ... bash -l -c true`, p50 | {} | {:.1} / {:.1} ms = {run:.2}x | ≤ 1.2x | {} |\n",
        f("run_sdk").len(),
        p("run_sdk", 0.5),
        p("run_docker", 0.5),
        met(run <= 1.2)
    ));
    let errors = v["error_count"].as_u64().unwrap_or(u64::MAX);
    let rss = f("rss_kib");
    let (first, peak) = (rss.first().copied().unwrap_or(f64::NAN), rss.iter().copied().fold(0.0, f64::max));
    md.push_str(&format!(
        "| 50 SDK sessions, one `echo` a second each: errors; run p50 (p95) | {} | {errors} errors; {:.0} ms ({:.0}) | 0 errors | {} |\n",
        f("session_ms").len(),
        p("session_ms", 0.5),
        p("session_ms", 0.95),
        met(errors == 0)
    ));
    md.push_str(&format!(
        "| memory of `sbx serve` under those 50 sessions: first, peak RSS | {} | {:.1} MiB, {:.1} MiB | bounded | {} |\n",
        rss.len(),
        first / 1024.0,
        peak / 1024.0,
        met(peak < 256.0 * 1024.0)
    ));
    if errors > 0 {
        for e in v["errors"].as_array().into_iter().flatten() {
            eprintln!("serve bench error: {e}");
        }
    }
    md
}

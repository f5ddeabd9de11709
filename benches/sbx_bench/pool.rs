//! The pool cases: a claim from a warm pool (`sbx create --pool`,
//! the sbx process's start included) beside a cold `sbx create` and bare
//! `docker run` plus the socket wait, interleaved; 20 claims at once on a
//! pool of 20; the docker calls the claiming process makes; and what an
//! idle member costs.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{percentile, run_within, timed, Bench, LABEL, SBX_LIMIT};

const SIZE: usize = 20;

/// The report's pool table, as markdown rows.
pub fn run(b: &Bench, reps: &dyn Fn(usize) -> usize) -> String {
    let name = format!("bench{:06x}", rand::random::<u32>() & 0xffffff);
    let size = SIZE.to_string();
    b.sbx(&["pool", "create", &name, "--size", &size, "--image", &b.image, "--label", LABEL]);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| measure(b, &name, reps)));
    // The unclaimed members; claimed ones carry LABEL and go with the bench's cleanup.
    b.sbx(&["pool", "rm", &name]);
    match result {
        Ok(md) => md,
        Err(e) => std::panic::resume_unwind(e),
    }
}

/// `sbx pool ls --json`'s row for `name`: (ready, filling, idle memory bytes).
fn state(b: &Bench, name: &str) -> (usize, u64, u64) {
    let out = b.sbx(&["--json", "pool", "ls"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v.as_array().cloned().unwrap_or_default();
    let row = rows.iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("pool {name} not in {v}"));
    (
        row["ready"].as_u64().unwrap_or(0) as usize,
        row["filling"].as_u64().unwrap_or(0),
        row["idle_memory_bytes"].as_u64().unwrap_or(0),
    )
}

/// Until the pool is full again and its refiller done (so the next
/// measurement does not share the engine with it).
fn wait_full(b: &Bench, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(180);
    // The pool's own files, not `pool ls` (which also asks docker stats).
    let pool = sbx::host::pool::Pool::at(&b.data, name);
    loop {
        let ready = pool.ready().len();
        if ready >= SIZE && !pool.filling() {
            return;
        }
        assert!(Instant::now() < deadline, "pool {name} did not refill to {SIZE} (ready {ready})");
        // Tops up now, or returns at once while the claim's refiller holds the pool.
        b.sbx(&["pool", "fill", name]);
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn claim(b: &Bench, name: &str) -> String {
    String::from_utf8(b.sbx(&["create", "--pool", name, "--no-fallback"]).stdout).unwrap().trim().to_string()
}

fn measure(b: &Bench, name: &str, reps: &dyn Fn(usize) -> usize) -> String {
    wait_full(b, name);
    let (_, _, idle) = state(b, name);
    let idle_mib = idle as f64 / SIZE as f64 / (1 << 20) as f64;
    let (mut claims, mut cold, mut bare) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..reps(15) {
        // Rotate which goes first.
        for k in 0..3 {
            match (i + k) % 3 {
                0 => {
                    let (id, t) = timed(|| claim(b, name));
                    claims.push(t);
                    b.sbx(&["destroy", &id]);
                }
                1 => {
                    let (id, t) = timed(|| b.create(&[]));
                    cold.push(t);
                    b.sbx(&["destroy", &id]);
                }
                _ => {
                    let ((n, d), t) = timed(|| b.bare_create(&[]));
                    bare.push(t);
                    b.bare_destroy(&n, &d);
                }
            }
        }
        wait_full(b, name);
        eprint!(".");
    }
    // 20 claims at once on a full pool of 20: wall time of the batch.
    let mut batches = Vec::new();
    for _ in 0..reps(3) {
        wait_full(b, name);
        let started = Instant::now();
        let ids: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..SIZE).map(|_| s.spawn(|| claim(b, name))).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        batches.push(super::ms(started.elapsed()));
        let mut distinct = ids.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), SIZE, "20 concurrent claims gave {} distinct ids", distinct.len());
        let mut args = vec!["destroy"];
        args.extend(ids.iter().map(String::as_str));
        b.sbx(&args);
        eprint!(".");
    }
    wait_full(b, name);
    let calls = claim_calls(b, name);
    let p = |v: &[f64], q: f64| percentile(v, q);
    let met = |ok: bool| if ok { "yes" } else { "no" };
    let mut md = String::new();
    md.push_str(&format!(
        "| claim (`create --pool`), p50 | {} | {:.1} ms | ≤ 15 ms | {} |\n",
        claims.len(),
        p(&claims, 0.5),
        met(p(&claims, 0.5) <= 15.0)
    ));
    md.push_str(&format!(
        "| claim (`create --pool`), p95 | {} | {:.1} ms | ≤ 30 ms | {} |\n",
        claims.len(),
        p(&claims, 0.95),
        met(p(&claims, 0.95) <= 30.0)
    ));
    md.push_str(&format!(
        "| cold `sbx create`, p50 (p95) | {} | {:.1} ms ({:.1}) | - | - |\n",
        cold.len(),
        p(&cold, 0.5),
        p(&cold, 0.95)
    ));
    md.push_str(&format!(
        "| bare `docker run` + socket wait, p50 (p95) | {} | {:.1} ms ({:.1}) | - | - |\n",
        bare.len(),
        p(&bare, 0.5),
        p(&bare, 0.95)
    ));
    md.push_str(&format!(
        "| 20 concurrent claims on a pool of 20, wall (worst) | {} | {:.1} ms ({:.1}) | ≤ 150 ms | {} |\n",
        batches.len(),
        p(&batches, 0.5),
        batches.iter().cloned().fold(0.0, f64::max),
        met(p(&batches, 0.5) <= 150.0)
    ));
    md.push_str(&format!("| docker calls in the claiming process | 1 | {calls} | 0 | {} |\n", met(calls == 0)));
    md.push_str(&format!("| idle memory of a member (docker stats) | {SIZE} | {idle_mib:.2} MiB | - | - |\n"));
    md
}

/// The docker calls a claim makes itself: a shim logs each call's parent
/// pid, and only the claiming sbx's count (its refiller's are its own).
fn claim_calls(b: &Bench, name: &str) -> usize {
    let log = b.root.join("pool-calls");
    let shim = b.root.join("pool-docker");
    std::fs::write(&shim, format!("#!/bin/sh\necho \"$PPID $1\" >> '{}'\nexec docker \"$@\"\n", log.display()))
        .unwrap();
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut c: Command = b.sbx_cmd(&["create", "--pool", name, "--no-fallback"]);
    c.env("SBX_DOCKER", &shim).stdout(Stdio::piped());
    let child = c.spawn().unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "claim: {}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let _ = run_within(b.sbx_cmd(&["destroy", &id]), SBX_LIMIT, "sbx destroy");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    text.lines().filter(|l| l.split(' ').next() == Some(pid.to_string().as_str())).count()
}

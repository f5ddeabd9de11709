//! sbx beside bare docker, in one run, on this machine's engine.
//!
//!     cargo bench --bench sbx_bench               # full run, rewrites BENCHMARKS.md
//!     cargo bench --bench sbx_bench -- --quick    # fewer repetitions
//!     cargo bench --bench sbx_bench -- --json     # also one JSON object on stdout
//!     cargo bench --bench sbx_bench -- --quick --only egress   # some sections only
//!
//! `--only A,B` runs only the named sections (create, routes, exec, ls, gc,
//! parallel, egress, secrets, runtime, pool, lifecycle, remote, serve) and prints the report on stderr instead of rewriting
//! BENCHMARKS.md, which only a full run writes.
//!
//! Every comparison is a ratio of medians measured interleaved in the same
//! run (sbx, bare, sbx, bare, ...): absolute times drift on a shared
//! machine, same-run ratios hold. The bare baseline is the shortest docker
//! sequence that gives the same sandbox: the same `docker run` argv (built
//! by sbx's own argv builder), waiting for the socket, `docker rm -f`.
//!
//! Never hangs: every docker and sbx command it runs has a
//! deadline, past which it is killed and the run fails saying which command
//! the engine did not finish. Bulk removals on both sides go through sbx's
//! own pacing (`sbx::docker::pace`), never one `docker rm` of many.

#[path = "../tests/live/support/mod.rs"]
mod common;
#[path = "sbx_bench/egress.rs"]
mod egress;
#[path = "sbx_bench/lifecycle.rs"]
mod lifecycle;
#[path = "sbx_bench/markdown.rs"]
mod markdown;
#[path = "sbx_bench/pool.rs"]
mod pool;
#[path = "sbx_bench/remote.rs"]
mod remote;
#[path = "sbx_bench/secrets.rs"]
mod secrets;
#[path = "sbx_bench/serve.rs"]
mod serve;
#[path = "sbx_bench/snapshots.rs"]
mod snapshots;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{fixture_image, SBX};
use sbx::docker::pace::{self, Pace};
use sbx::model::record::RouteNetwork;
use sbx::model::runtime::Family;

const LABEL: &str = "sbx-bench=1";

/// Deadlines for what the bench runs: one docker call, one sbx command (a
/// gc of 100 or a destroy of 200 included; sbx's own calls have theirs).
const DOCKER_LIMIT: Duration = Duration::from_secs(120);
const SBX_LIMIT: Duration = Duration::from_secs(600);

/// Run `cmd` to completion within `limit`; past it, kill its process group
/// and fail the run saying what hung, instead of waiting forever.
fn run_within(mut cmd: Command, limit: Duration, what: &str) -> Output {
    use std::os::unix::process::CommandExt;
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: could not start: {e}"));
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap_or_else(|e| panic!("{what}: {e}")),
        Err(_) => {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            panic!(
                "{what} did not finish within {}s; killed it. Is the engine hung? (`docker info`; engine 20.10's network controller can deadlock, only restarting dockerd clears it)",
                limit.as_secs()
            )
        }
    }
}

fn docker(args: &[&str]) -> Output {
    let mut c = Command::new("docker");
    c.args(args).stdin(Stdio::null());
    run_within(c, DOCKER_LIMIT, &format!("docker {}", args.iter().take(3).copied().collect::<Vec<_>>().join(" ")))
}

fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(out.status.success(), "docker {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `docker rm -f -v` of many, paced exactly as sbx paces its own (the same
/// function), each batch under sbx's change deadline.
fn remove_paced(ids: &[String]) -> Result<(), String> {
    let exec = sbx::docker::RealDocker::new(None);
    let failed: Vec<String> = pace::remove_containers(&exec, Pace::default(), ids)
        .into_iter()
        .filter_map(|(batch, r)| r.err().map(|e| format!("{}: {e}", batch.join(" "))))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

struct Bench {
    image: String,
    root: PathBuf,
    data: PathBuf,
    shim_log: PathBuf,
    shim: PathBuf,
    helper: Option<PathBuf>,
    seccomp: PathBuf,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    if s.is_empty() {
        return f64::NAN;
    }
    let i = ((s.len() - 1) as f64 * p).round() as usize;
    s[i]
}

#[derive(Default, serde::Serialize)]
struct Case {
    name: String,
    sbx_ms: Vec<f64>,
    bare_ms: Vec<f64>,
    target: Option<f64>,
}

impl Case {
    fn ratio(&self) -> f64 {
        percentile(&self.sbx_ms, 0.5) / percentile(&self.bare_ms, 0.5)
    }
}

impl Bench {
    fn new() -> Self {
        let image = fixture_image();
        let tag = format!("{:08x}", rand::random::<u32>());
        let root = PathBuf::from(format!("/tmp/sbxb-{tag}"));
        let data = PathBuf::from(format!("/tmp/sbxb-{tag}-data"));
        std::fs::create_dir_all(&root).unwrap();
        let shim_log = PathBuf::from(format!("/tmp/sbxb-{tag}-calls"));
        let shim = PathBuf::from(format!("/tmp/sbxb-{tag}-docker"));
        std::fs::write(
            &shim,
            format!("#!/bin/sh\nprintf '%s\\n' \"$1\" >> '{}'\nexec docker \"$@\"\n", shim_log.display()),
        )
        .unwrap();
        std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        // The same read-only helper mount sbx gives every sandbox.
        let helper = sbx::host::helper::install(&data, false).unwrap();
        let seccomp = sbx::host::seccomp::install(&data).unwrap();
        Bench { image, root, data, shim_log, shim, helper, seccomp }
    }

    fn sbx_cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(SBX);
        c.arg("--socket-dir").arg(&self.root).arg("--data-dir").arg(&self.data).args(args).stdin(Stdio::null());
        c
    }

    fn sbx(&self, args: &[&str]) -> Output {
        let out = run_within(self.sbx_cmd(args), SBX_LIMIT, &format!("sbx {}", args.first().unwrap_or(&"")));
        assert!(out.status.success(), "sbx {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    }

    fn create(&self, extra: &[&str]) -> String {
        let mut args = vec!["create", "--image", &self.image, "--label", LABEL];
        args.extend_from_slice(extra);
        String::from_utf8(self.sbx(&args).stdout).unwrap().trim().to_string()
    }

    /// The docker argv sbx itself would run for this sandbox, from sbx's own builder.
    fn bare_argv(
        &self,
        name: &str,
        dir: &Path,
        networks: &[RouteNetwork],
        detach_run: bool,
        runtime: &str,
    ) -> Vec<String> {
        let req = sbx::spec::CreateRequest {
            image: self.image.clone(),
            labels: vec![LABEL.into()],
            runtime: Some(runtime.into()),
            ..Default::default()
        };
        let spec = sbx::spec::SandboxSpec::from_request(&req, None).unwrap();
        let sock = dir.join("sandbox.sock");
        let plan = sbx::docker::argv::RunPlan {
            channel: sbx::host::channel::Kind::Direct,
            id: name,
            spec: &spec,
            uid: 65534,
            gid: 65534,
            tier: 2,
            socket_dir: dir,
            socket_path: &sock,
            created_at: "2026-01-01T00:00:00Z",
            owner: "bench",
            expires_at: None,
            networks,
            private: &[],
            dns: None,
            helper: self.helper.as_deref(),
            helper_volume: None,
            volume: None,
            persist_size: None,
            seccomp: &self.seccomp,
            hosts: &[],
            family: if runtime == "runsc" { Family::Gvisor } else { Family::Runc },
            image_volumes: &[],
            trust: None,
        };
        sbx::docker::argv::container(&plan, detach_run).into_iter().map(|s| s.into_string().unwrap()).collect()
    }

    fn bare_dir(&self, name: &str) -> PathBuf {
        let d = self.root.join(format!("bare-{name}"));
        std::fs::create_dir_all(&d).unwrap();
        nix::unistd::chown(&d, Some(nix::unistd::Uid::from_raw(65534)), Some(nix::unistd::Gid::from_raw(65534)))
            .unwrap();
        d
    }

    /// Bare: run (or create, connect, start) and wait for the socket.
    fn bare_create(&self, networks: &[RouteNetwork]) -> (String, PathBuf) {
        self.bare_create_under(networks, "runc")
    }

    /// Bare, under the engine's runtime `runtime`.
    fn bare_create_under(&self, networks: &[RouteNetwork], runtime: &str) -> (String, PathBuf) {
        let name = format!("sbxb-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
        let dir = self.bare_dir(&name);
        if networks.len() <= 1 {
            let argv = self.bare_argv(&name, &dir, networks, true, runtime);
            docker_ok(&argv.iter().map(String::as_str).collect::<Vec<_>>());
        } else {
            let argv = self.bare_argv(&name, &dir, networks, false, runtime);
            docker_ok(&argv.iter().map(String::as_str).collect::<Vec<_>>());
            for n in &networks[1..] {
                docker_ok(&["network", "connect", &n.network, &name]);
            }
            docker_ok(&["start", &name]);
        }
        wait_for(&dir.join("sandbox.sock"));
        (name, dir)
    }

    fn bare_destroy(&self, name: &str, dir: &Path) {
        docker_ok(&["rm", "-f", "-v", name]);
        let _ = std::fs::remove_dir_all(dir);
    }

    fn calls(&self, args: &[&str]) -> usize {
        let _ = std::fs::remove_file(&self.shim_log);
        let mut c = self.sbx_cmd(args);
        c.env("SBX_DOCKER", &self.shim);
        let out = run_within(c, SBX_LIMIT, &format!("sbx {} (counting calls)", args[0]));
        assert!(out.status.success(), "sbx {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        std::fs::read_to_string(&self.shim_log).map(|s| s.lines().count()).unwrap_or(0)
    }

    fn cpu_ms(&self, args: &[&str]) -> f64 {
        let mut c = self.sbx_cmd(args);
        // That line alone: a debug log of every step would add its own cost.
        c.env("RUST_LOG", "sbx::cpu=debug");
        let out = run_within(c, SBX_LIMIT, &format!("sbx {} (CPU time)", args[0]));
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.lines().rev().find(|l| l.contains("sbx cpu")).unwrap_or_default().to_string();
        let num = |k: &str| {
            line.split(k)
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        num("user_ms=") + num("sys_ms=")
    }

    /// `sbx destroy` every sandbox this bench made that is still there
    /// (untimed): sbx removes their gates, networks and policy dirs too.
    /// The names of those it found.
    fn destroy_labelled(&self) -> Vec<String> {
        let filter = |l: &str| format!("label={l}");
        let out = docker(&[
            "ps",
            "-a",
            "--format",
            "{{.Names}}",
            "--filter",
            &filter(LABEL),
            "--filter",
            &filter(sbx::model::record::MANAGED),
        ]);
        let names: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
        if !names.is_empty() {
            let mut a = vec!["destroy"];
            a.extend(names.iter().map(String::as_str));
            let out = run_within(self.sbx_cmd(&a), SBX_LIMIT, "sbx destroy (cleanup)");
            if !out.status.success() {
                eprintln!("cleanup: sbx destroy: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
        names
    }

    fn cleanup(&self) {
        // Best effort and paced: this also runs after a failed case.
        let sandboxes = self.destroy_labelled();
        let listed = |filter: &str| -> Vec<String> {
            let out = docker(&["ps", "-aq", "--filter", filter]);
            String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
        };
        let mut ids = listed(&format!("label={LABEL}"));
        ids.extend(listed("name=sbxb-"));
        // Gates whose sandbox's destroy failed (a gate carries no bench label).
        for name in &sandboxes {
            ids.extend(listed(&format!("label={}={name}", sbx::model::record::GATE_OF)));
        }
        ids.sort();
        ids.dedup();
        if let Err(e) = remove_paced(&ids) {
            eprintln!("cleanup: {e}");
        }
        for net in docker_ok(&["network", "ls", "-q", "--filter", &format!("label={LABEL}")]).lines() {
            let _ = docker(&["network", "rm", net]);
        }
        for name in &sandboxes {
            let _ = docker(&["network", "rm", &sbx::model::gate::network(name)]);
        }
        let _ = std::fs::remove_dir_all(&self.root);
        let _ = std::fs::remove_dir_all(&self.data);
        let _ = std::fs::remove_file(&self.shim);
        let _ = std::fs::remove_file(&self.shim_log);
    }
}

/// Poll for the socket as sbx does (2 ms, backing off to 20 ms).
fn wait_for(p: &Path) {
    let start = Instant::now();
    let mut delay = Duration::from_millis(2);
    while std::fs::symlink_metadata(p).is_err() {
        assert!(start.elapsed() < Duration::from_secs(60), "{} never appeared", p.display());
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(20));
    }
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let v = f();
    (v, ms(t.elapsed()))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let json = args.iter().any(|a| a == "--json");
    let only = Only::from_args(&args);
    // `cargo bench` passes --bench; anything else unknown is a mistake.
    let reps = |full: usize| if quick { (full / 3).max(2) } else { full };
    let b = Bench::new();
    let mut cases: Vec<Case> = Vec::new();
    let mut rows: Vec<egress::Row> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut pool_md = String::new();
    let mut serve_md = String::new();
    let mut snapshots_md = String::new();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run(&b, &only, &reps, &mut cases, &mut notes);
        if only.wants("egress") {
            egress::run(&b, &reps, &mut rows, &mut notes);
        }
        if only.wants("secrets") {
            secrets::run(&b, &reps, &mut rows);
        }
        if only.wants("pool") {
            pool_md = pool::run(&b, &reps);
        }
        if only.wants("serve") {
            serve_md = serve::run(&b, &reps);
        }
        if only.wants("snapshots") {
            snapshots_md = snapshots::run(&b, &reps);
        }
        eprintln!();
    }));
    b.cleanup();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    let (calls, cpu) = notes_split(&notes);
    write_report(
        &cases,
        &rows,
        Tables { pool: &pool_md, serve: &serve_md, snapshots: &snapshots_md },
        &calls,
        &cpu,
        quick,
        only.0.is_none(),
    );
    if json {
        let v = serde_json::json!({
            "cases": cases.iter().map(|c| serde_json::json!({
                "name": c.name,
                "sbx_median_ms": percentile(&c.sbx_ms, 0.5),
                "sbx_p95_ms": percentile(&c.sbx_ms, 0.95),
                "bare_median_ms": percentile(&c.bare_ms, 0.5),
                "bare_p95_ms": percentile(&c.bare_ms, 0.95),
                "ratio": c.ratio(),
                "target": c.target,
                "runs": c.sbx_ms.len(),
            })).collect::<Vec<_>>(),
            "egress": rows.iter().map(|r| serde_json::json!({
                "name": r.name,
                "unit": r.unit,
                "gate_median": percentile(&r.gate, 0.5),
                "gate_p95": percentile(&r.gate, 0.95),
                "baseline": r.baseline,
                "baseline_median": percentile(&r.base, 0.5),
                "baseline_p95": percentile(&r.base, 0.95),
                "result": r.result,
                "target": r.target,
                "met": r.met,
                "runs": r.gate.len(),
            })).collect::<Vec<_>>(),
            "docker_calls": calls,
            "cpu_ms": cpu,
        });
        println!("{v}");
    }
}

/// `--only A,B`: the sections to run (all without it).
struct Only(Option<Vec<String>>);

const SECTIONS: [&str; 14] = [
    "create",
    "routes",
    "exec",
    "ls",
    "gc",
    "parallel",
    "egress",
    "secrets",
    "runtime",
    "pool",
    "lifecycle",
    "remote",
    "serve",
    "snapshots",
];

impl Only {
    fn from_args(args: &[String]) -> Self {
        let Some(i) = args.iter().position(|a| a == "--only") else { return Only(None) };
        let names: Vec<String> = args
            .get(i + 1)
            .unwrap_or_else(|| panic!("--only needs a section name: {}", SECTIONS.join(", ")))
            .split(',')
            .map(str::to_string)
            .collect();
        for n in &names {
            assert!(
                SECTIONS.contains(&n.as_str()),
                "--only {n}: no such section; the sections: {}",
                SECTIONS.join(", ")
            );
        }
        Only(Some(names))
    }

    fn wants(&self, section: &str) -> bool {
        match &self.0 {
            None => true,
            Some(v) => v.iter().any(|n| n == section),
        }
    }
}

fn notes_split(notes: &[String]) -> (BTreeMap<String, usize>, BTreeMap<String, f64>) {
    let mut calls = BTreeMap::new();
    let mut cpu = BTreeMap::new();
    for n in notes {
        let parts: Vec<&str> = n.splitn(3, '\t').collect();
        match parts.as_slice() {
            ["calls", k, v] => {
                calls.insert(k.to_string(), v.parse().unwrap());
            }
            ["cpu", k, v] => {
                cpu.insert(k.to_string(), v.parse().unwrap());
            }
            _ => {}
        }
    }
    (calls, cpu)
}

fn run(b: &Bench, only: &Only, reps: &dyn Fn(usize) -> usize, cases: &mut Vec<Case>, notes: &mut Vec<String>) {
    if SECTIONS[..6].iter().any(|s| only.wants(s)) {
        // Warm up both paths (image cache, helper install, key).
        let id = b.create(&[]);
        b.sbx(&["destroy", &id]);
        let (n, d) = b.bare_create(&[]);
        b.bare_destroy(&n, &d);
    }
    if only.wants("create") {
        // 1. create-to-ready and destroy, no route.
        let mut create = Case { name: "create-to-ready, no route".into(), target: Some(1.10), ..Default::default() };
        let mut destroy = Case { name: "destroy".into(), target: Some(1.10), ..Default::default() };
        for i in 0..reps(15) {
            let sbx_first = i % 2 == 0;
            for which in [sbx_first, !sbx_first] {
                if which {
                    let (id, t) = timed(|| b.create(&[]));
                    create.sbx_ms.push(t);
                    let (_, t) = timed(|| b.sbx(&["destroy", &id]));
                    destroy.sbx_ms.push(t);
                } else {
                    let ((n, d), t) = timed(|| b.bare_create(&[]));
                    create.bare_ms.push(t);
                    let (_, t) = timed(|| b.bare_destroy(&n, &d));
                    destroy.bare_ms.push(t);
                }
            }
            eprint!(".");
        }
        cases.push(create);
        cases.push(destroy);
    }
    if only.wants("routes") {
        // 2. the same with two routes.
        let hosts = [
            format!("bench{:06x}a", rand::random::<u32>() & 0xffffff),
            format!("bench{:06x}b", rand::random::<u32>() & 0xffffff),
        ];
        for h in &hosts {
            docker_ok(&[
                "network",
                "create",
                "--internal",
                "-o",
                "com.docker.network.bridge.inhibit_ipv4=true",
                "--label",
                LABEL,
                &format!("sbx-{h}"),
            ]);
        }
        let nets: Vec<RouteNetwork> = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| RouteNetwork { kind: format!("r{i}"), network: format!("sbx-{h}") })
            .collect();
        let r0 = format!("r0:{}:80", hosts[0]);
        let r1 = format!("r1:{}:80", hosts[1]);
        let mut routed = Case { name: "create-to-ready, two routes".into(), target: None, ..Default::default() };
        for i in 0..reps(10) {
            let sbx_first = i % 2 == 0;
            for which in [sbx_first, !sbx_first] {
                if which {
                    let (id, t) = timed(|| b.create(&["--route", &r0, "--route", &r1]));
                    routed.sbx_ms.push(t);
                    b.sbx(&["destroy", &id]);
                } else {
                    let ((n, d), t) = timed(|| b.bare_create(&nets));
                    routed.bare_ms.push(t);
                    b.bare_destroy(&n, &d);
                }
            }
            eprint!(".");
        }
        cases.push(routed);
        notes.push(format!(
            "calls\tcreate, two routes\t{}",
            b.calls(&["create", "--image", &b.image, "--label", LABEL, "--route", &r0, "--route", &r1])
        ));
    }
    if only.wants("exec") {
        // 3. exec.
        let id = b.create(&[]);
        let mut exec = Case { name: "exec".into(), target: Some(1.05), ..Default::default() };
        for i in 0..reps(30) {
            let sbx_first = i % 2 == 0;
            for which in [sbx_first, !sbx_first] {
                if which {
                    let (_, t) = timed(|| b.sbx(&["exec", &id, "--", "/bin/fixture", "exists", "/"]));
                    exec.sbx_ms.push(t);
                } else {
                    let (_, t) = timed(|| docker_ok(&["exec", &id, "/bin/fixture", "exists", "/"]));
                    exec.bare_ms.push(t);
                }
            }
        }
        eprint!(".");
        cases.push(exec);
        notes.push(format!("calls\tcreate, no route\t{}", b.calls(&["create", "--image", &b.image, "--label", LABEL])));
        notes.push(format!("calls\texec\t{}", b.calls(&["exec", &id, "--", "/bin/fixture", "exists", "/"])));
        notes.push(format!("calls\tinspect\t{}", b.calls(&["inspect", &id])));
        notes.push(format!("calls\tconnect\t{}", b.calls(&["connect", &id])));
        for (k, args) in [
            ("create, no route", vec!["create", "--image", b.image.as_str(), "--label", LABEL]),
            ("exec", vec!["exec", id.as_str(), "--", "/bin/fixture", "exists", "/"]),
            ("inspect", vec!["inspect", id.as_str()]),
            ("ls", vec!["ls"]),
        ] {
            let runs: Vec<f64> = (0..5).map(|_| b.cpu_ms(&args)).collect();
            notes.push(format!("cpu\t{k}\t{}", percentile(&runs, 0.5)));
        }
        notes.push(format!("calls\tdestroy\t{}", b.calls(&["destroy", &id])));
    }
    if only.wants("ls") {
        // 4. ls with 0, 50 and 200 sandboxes, against one `docker ps`.
        let mut have: Vec<String> = Vec::new();
        for target in [0usize, 50, 200] {
            let need = target - have.len();
            let made: Vec<String> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..4)
                    .map(|t| {
                        let n = need / 4 + usize::from(t < need % 4);
                        s.spawn(move || {
                            (0..n).map(|_| b.create(&["--socket-wait", "0", "--", "sleep"])).collect::<Vec<_>>()
                        })
                    })
                    .collect();
                hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
            });
            have.extend(made);
            let mut ls = Case { name: format!("ls, {target} sandboxes"), target: Some(1.1), ..Default::default() };
            // sbx's own `docker ps` (every sbx label, one template action
            // each): what sbx adds beyond it is what must stay flat.
            let own: Vec<String> = sbx::docker::argv::list().iter().map(|a| a.to_string_lossy().into_owned()).collect();
            let own: Vec<&str> = own.iter().map(String::as_str).collect();
            let mut beyond =
                Case { name: format!("ls, {target} sandboxes / its own `docker ps`"), ..Default::default() };
            for i in 0..reps(15) {
                let sbx_first = i % 2 == 0;
                for which in [sbx_first, !sbx_first] {
                    if which {
                        let (_, t) = timed(|| b.sbx(&["ls"]));
                        ls.sbx_ms.push(t);
                    } else {
                        let (_, t) =
                            timed(|| docker_ok(&["ps", "-a", "--no-trunc", "--filter", "label=sbx.managed=1"]));
                        ls.bare_ms.push(t);
                        let (_, t) = timed(|| docker_ok(&own));
                        beyond.bare_ms.push(t);
                    }
                }
            }
            beyond.sbx_ms = ls.sbx_ms.clone();
            notes.push(format!("calls\tls, {target} sandboxes\t{}", b.calls(&["ls"])));
            cases.push(ls);
            cases.push(beyond);
            eprint!(".");
        }
        // Tear the 200 down in one destroy (not timed): sbx paces it (
        // 50 ids in one `docker rm` hung the engine here once).
        let mut a = vec!["destroy"];
        a.extend(have.iter().map(String::as_str));
        b.sbx(&a);
    }
    if only.wants("gc") {
        // 5. gc reaping 100 expired sandboxes, against one `docker rm -f` of 100.
        let mut gc = Case { name: "gc of 100 expired".into(), target: Some(1.2), ..Default::default() };
        let state = sbx::host::state::State::at(b.data.clone());
        for round in 0..reps(4).min(4) {
            let ids: Vec<String> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            (0..25)
                                .map(|_| b.create(&["--ttl", "1h", "--socket-wait", "0", "--", "sleep"]))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
            });
            // Expire them without their watchdogs: as after a reboot.
            for id in &ids {
                // The watchdog records itself once it runs; wait for that before killing it.
                let start = Instant::now();
                let w = loop {
                    match state.watchdog(id) {
                        Some(w) => break w,
                        None if start.elapsed() < Duration::from_secs(10) => {
                            std::thread::sleep(Duration::from_millis(10))
                        }
                        None => panic!("the watchdog of {id} never started"),
                    }
                };
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(w.pid), nix::sys::signal::Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(200));
            for id in &ids {
                state.set_expiry(id, std::time::SystemTime::now() - Duration::from_secs(1)).unwrap();
            }
            // The baseline removes the same kind of containers: sandboxes made by sbx.
            let bare: Vec<String> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..4)
                    .map(|_| {
                        s.spawn(|| {
                            (0..25).map(|_| b.create(&["--socket-wait", "0", "--", "sleep"])).collect::<Vec<_>>()
                        })
                    })
                    .collect();
                hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
            });
            // Alternate which goes first: the engine is busiest right after the
            // 200 creates, and that must not fall on one side only.
            // The baseline removes them in the same paced batches as sbx's gc,
            // so the ratio is sbx's own cost; pacing's cost shows in the bare
            // median itself (see "Reading the figures").
            let rm = || remove_paced(&bare).unwrap_or_else(|e| panic!("paced docker rm of 100: {e}"));
            let run_gc = || {
                let (out, t) = timed(|| b.sbx(&["gc"]));
                assert_eq!(String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains("expired")).count(), 100);
                t
            };
            if round % 2 == 0 {
                gc.sbx_ms.push(run_gc());
                gc.bare_ms.push(timed(rm).1);
            } else {
                gc.bare_ms.push(timed(rm).1);
                gc.sbx_ms.push(run_gc());
            }
            // Their socket directories and records (not timed).
            let mut a = vec!["destroy"];
            a.extend(bare.iter().map(String::as_str));
            b.sbx(&a);
            eprint!(".");
        }
        cases.push(gc);
    }
    if only.wants("parallel") {
        // 6. 20 parallel creates, wall time.
        let mut par = Case { name: "20 parallel creates (wall)".into(), target: None, ..Default::default() };
        for i in 0..reps(3).min(3) {
            let sbx_first = i % 2 == 0;
            for which in [sbx_first, !sbx_first] {
                if which {
                    let (ids, t) = timed(|| {
                        std::thread::scope(|s| {
                            let hs: Vec<_> = (0..20).map(|_| s.spawn(|| b.create(&[]))).collect();
                            hs.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
                        })
                    });
                    par.sbx_ms.push(t);
                    let mut a = vec!["destroy"];
                    a.extend(ids.iter().map(String::as_str));
                    b.sbx(&a);
                } else {
                    let (made, t) = timed(|| {
                        std::thread::scope(|s| {
                            let hs: Vec<_> = (0..20).map(|_| s.spawn(|| b.bare_create(&[]))).collect();
                            hs.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
                        })
                    });
                    par.bare_ms.push(t);
                    for (n, d) in made {
                        b.bare_destroy(&n, &d);
                    }
                }
            }
            eprint!(".");
        }
        cases.push(par);
    }
    if only.wants("gc") {
        let gc_calls = b.calls(&["gc"]);
        notes.push(format!("calls\tgc (nothing to do)\t{gc_calls}"));
    }
    if only.wants("runtime") {
        runtime(b, reps, cases);
    }
    if only.wants("lifecycle") {
        lifecycle::run(b, reps, cases);
    }
    if only.wants("remote") {
        remote::run(b, reps, cases);
    }
}

/// Under gVisor (runsc, registered as `.ci/register-runsc` does),
/// sbx beside bare docker with the same runtime, and what runsc costs over
/// runc (both through sbx), all interleaved in one run.
fn runtime(b: &Bench, reps: &dyn Fn(usize) -> usize, cases: &mut Vec<Case>) {
    let runsc = ["--runtime", "runsc"];
    // Warm up: runsc's first start pays for loading it.
    let id = b.create(&runsc);
    b.sbx(&["destroy", &id]);
    let (n, d) = b.bare_create_under(&[], "runsc");
    b.bare_destroy(&n, &d);
    let mut create = Case { name: "create-to-ready, runsc".into(), target: Some(1.10), ..Default::default() };
    let mut over = Case { name: "create-to-ready, sbx runsc / sbx runc".into(), target: None, ..Default::default() };
    for i in 0..reps(15) {
        for sbx_first in [i % 2 == 0, i % 2 != 0] {
            if sbx_first {
                let (id, t) = timed(|| b.create(&runsc));
                create.sbx_ms.push(t);
                over.sbx_ms.push(t);
                b.sbx(&["destroy", &id]);
                let (id, t) = timed(|| b.create(&[]));
                over.bare_ms.push(t);
                b.sbx(&["destroy", &id]);
            } else {
                let ((n, d), t) = timed(|| b.bare_create_under(&[], "runsc"));
                create.bare_ms.push(t);
                b.bare_destroy(&n, &d);
            }
        }
        eprint!(".");
    }
    cases.push(create);
    cases.push(over);
    let gv = b.create(&runsc);
    let rc = b.create(&[]);
    let mut exec = Case { name: "exec, runsc".into(), target: Some(1.10), ..Default::default() };
    let mut exec_over = Case { name: "exec, sbx runsc / sbx runc".into(), target: None, ..Default::default() };
    let probe = ["--", "/bin/fixture", "exists", "/"];
    for i in 0..reps(30) {
        for sbx_first in [i % 2 == 0, i % 2 != 0] {
            if sbx_first {
                let args = [&["exec", gv.as_str()][..], &probe[..]].concat();
                let (_, t) = timed(|| b.sbx(&args));
                exec.sbx_ms.push(t);
                exec_over.sbx_ms.push(t);
                let args = [&["exec", rc.as_str()][..], &probe[..]].concat();
                let (_, t) = timed(|| b.sbx(&args));
                exec_over.bare_ms.push(t);
            } else {
                let (_, t) = timed(|| docker_ok(&["exec", &gv, "/bin/fixture", "exists", "/"]));
                exec.bare_ms.push(t);
            }
        }
    }
    eprint!(".");
    b.sbx(&["destroy", &gv, &rc]);
    cases.push(exec);
    cases.push(exec_over);
}

/// The pool and serve sections' rows, as markdown (empty: not run).
struct Tables<'a> {
    pool: &'a str,
    serve: &'a str,
    snapshots: &'a str,
}

/// The report as markdown: into BENCHMARKS.md after a full run, on stderr
/// after an `--only` run (a partial report must not replace the full one).
fn write_report(
    cases: &[Case],
    rows: &[egress::Row],
    tables: Tables<'_>,
    calls: &BTreeMap<String, usize>,
    cpu: &BTreeMap<String, f64>,
    quick: bool,
    full: bool,
) {
    let engine = docker_ok(&[
        "version",
        "--format",
        "{{.Server.Version}} (API {{.Server.APIVersion}}), CLI {{.Client.Version}}",
    ]);
    let kernel = String::from_utf8_lossy(&Command::new("uname").arg("-r").output().unwrap().stdout).trim().to_string();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .nth(1)
        .and_then(|k| k.parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
        / 1024;
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let date = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    let mut t = String::new();
    t.push_str("# sbx benchmarks\n\n");
    t.push_str(
        "sbx beside bare docker, measured interleaved in one run on this project's machine kind. Regenerate with:\n\n",
    );
    t.push_str("```sh\ncargo bench --bench sbx_bench            # add `-- --quick` for fewer repetitions, `-- --json` for JSON on stdout\n```\n\n");
    t.push_str(&format!(
        "Run: {date}{}. Engine {engine}. Machine: {cpus} cores, {mem} GiB, Linux {kernel}.\n\n",
        if quick { " (--quick)" } else { "" }
    ));
    t.push_str("## Time\n\nMedians and p95 in milliseconds over the runs; the ratio is sbx's median over bare docker's median from the same run.\n\n");
    t.push_str("| case | runs | sbx median | sbx p95 | bare median | bare p95 | ratio | target | met |\n|---|---|---|---|---|---|---|---|---|\n");
    for c in cases {
        let r = c.ratio();
        let (target, met) = match c.target {
            Some(x) => (format!("≤ {x:.2}x"), if r <= x { "yes" } else { "no" }.to_string()),
            None => ("-".into(), "-".into()),
        };
        t.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2}x | {} | {} |\n",
            c.name,
            c.sbx_ms.len(),
            percentile(&c.sbx_ms, 0.5),
            percentile(&c.sbx_ms, 0.95),
            percentile(&c.bare_ms, 0.5),
            percentile(&c.bare_ms, 0.95),
            r,
            target,
            met
        ));
    }
    if !rows.is_empty() {
        t.push_str("\n## Egress\n\nThrough a sandbox's gate beside a direct connection between the same two containers (the sandbox and a stand-in server), `create --allow` beside `create --private-routes` with one route, and HTTPS to a host whose secret the gate puts in beside the same server through an end-to-end tunnel; interleaved, medians and p95 over the samples (see \"What each case measures\").\n\n");
        t.push_str("| case | samples | gate / --allow median | p95 | baseline | baseline median | p95 | result | target | met |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for r in rows {
            let med = |v: &[f64], p: f64| {
                if v.is_empty() {
                    "-".to_string()
                } else {
                    format!("{:.2} {}", percentile(v, p), r.unit)
                }
            };
            t.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                r.name,
                r.gate.len(),
                med(&r.gate, 0.5),
                med(&r.gate, 0.95),
                r.baseline,
                med(&r.base, 0.5),
                med(&r.base, 0.95),
                r.result,
                r.target,
                if r.met { "yes" } else { "no" }
            ));
        }
    }
    let (pool_md, serve_md) = (tables.pool, tables.serve);
    if !pool_md.is_empty() {
        t.push_str("\n## Pool\n\nA claim from a warm pool of 20 (`sbx create --pool`, the sbx process's start included, until the id is printed: the member's socket was bound at fill time) beside a cold `sbx create` and bare `docker run` plus the socket wait, interleaved; the pool refilled before each round (see \"What each case measures\").\n\n");
        t.push_str("| case | runs | result | target | met |\n|---|---|---|---|---|\n");
        t.push_str(pool_md);
    }
    if !serve_md.is_empty() {
        t.push_str("\n## Serve\n\nThrough `sbx serve` with the real E2B SDK (2.63.0): a cold `Sandbox.create` of a `--template` of the fixture image beside `sbx create` of it, and `commands.run(\"true\")` beside a bare `docker exec` of the command line the SDK sends (`/bin/bash -l -c true`), each pair interleaved in one Python process; a warm-pool create as one HTTP request on a kept-alive connection (the pool refilled before each); then 50 SDK sessions at once, each running `echo hi` once a second, with `sbx serve`'s resident memory sampled every half second.\n\n");
        t.push_str("| case | samples | result | target | met |\n|---|---|---|---|---|\n");
        t.push_str(serve_md);
    }
    if !tables.snapshots.is_empty() {
        t.push_str("\n## Snapshots\n\nUnder gVisor registered as `runsc-snap` (runsc 20221219), the fixture's `count` (a counter held in memory, served on its socket): a `fork --from` child to ready beside a cold `sbx create --snapshots`, interleaved; five children at once; `checkpoint` (which leaves the sandbox running: runsc 20221219 cannot checkpoint with `--leave-running`, so it is a checkpoint, then a restore in place), `hibernate` and resume-to-ready, of the small program and of one holding 256 MiB; Docker's own checkpoint and restore of a bare container of the same image and runtime; and raw `runsc checkpoint`/`restore` of the same image as an OCI bundle outside the engine (`docker export` of its root, `runsc spec`, `--network=none`). Anchors from the field: Sandstorm's gVisor wake 103 ms p50 and 5 children in 226 ms, CubeSandbox's clone 220 ms, E2B's ~1 s resume.\n\n");
        t.push_str("| case | runs | result | target | met |\n|---|---|---|---|---|\n");
        t.push_str(tables.snapshots);
    }
    t.push_str("\n## Docker calls per command\n\nCounted with a logging `docker` shim (`SBX_DOCKER`). Targets: create with no route ≤ 3, with N routes ≤ 3 + N; `ls` must not grow with the number of sandboxes.\n\n| command | docker calls |\n|---|---|\n");
    for (k, v) in calls {
        t.push_str(&format!("| {k} | {v} |\n"));
    }
    t.push_str("\n## sbx's own CPU time\n\nuser+sys of the sbx process alone (docker children excluded), median of 5, from the one line it logs at exit (`getrusage(RUSAGE_SELF)`, under `RUST_LOG=sbx::cpu=debug`). Target ≤ 5 ms.\n\n| command | CPU ms |\n|---|---|\n");
    for (k, v) in cpu {
        t.push_str(&format!("| {k} | {v:.2} |\n"));
    }
    t.push_str(CASES_DOC);
    if !full {
        eprintln!("{t}\n(an --only run: BENCHMARKS.md left as it was)");
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("BENCHMARKS.md");
    // What this run did not make is kept as it was: benches/soak.py's
    // figures (an hour and an engine restart to make) and the notes on
    // what the figures mean, written by hand run after run.
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::write(&path, markdown::merge_sections(&old, &t)).unwrap();
    eprintln!("wrote {}", path.display());
}

const CASES_DOC: &str = "
## What each case measures

1. **create-to-ready, no route**: `sbx create` (returns once the sandbox has bound its socket) against the same `docker run -d` argv (built by sbx's own argv builder) plus waiting for the socket the same way. **destroy**: `sbx destroy` against `docker rm -f -v` plus removing the socket directory.
2. **two routes**: `sbx create --route ... --route ...` on two internal networks against `docker create` + `docker network connect` + `docker start` + the socket wait.
3. **exec**: `sbx exec ID -- /bin/fixture exists /` against `docker exec ID /bin/fixture exists /` (the fixture image has no `true`).
4. **ls**: `sbx ls` with 0, 50 and 200 sandboxes on the host against one `docker ps -a --filter label=sbx.managed=1`, and against sbx's own `docker ps` (the same filter with sbx's template: each of its 24 labels is one action of docker's Go template per container, which the owner token's check needs; docker renders it in ~4 ms more per 100 sandboxes than its default table). What sbx adds beyond its own `docker ps` (its start, about 2.3 ms of CPU, the token checks, one listing per kind of host state) is what must stay flat from 0 to 200.
5. **gc of 100 expired**: `sbx gc` reaping 100 sandboxes past their expiry (watchdogs killed, as after a reboot) against `docker rm -f -v` of 100 other sandboxes made the same way, in the same paced batches sbx uses.
6. **20 parallel creates**: wall time of 20 concurrent `sbx create` against 20 concurrent bare run + socket wait.
7. Docker calls per command and sbx's own CPU time, above.
8. **Egress**, on a stage of its own: one stand-in server (the live tests' fixture `http-serve` on 80 and `dns-serve` on 53, answering `files.example` with its own address) on a bridge network; a sandbox of the tools image (curl) created with `--allow files.example:80`, the server's `/32:80` CIDR rule (it is on a private bridge), `--egress-network` that network and `--egress-dns` the server. For the direct side the bench itself joins the sandbox to that network, so the same curl in the same container reaches the same server by address with `--noproxy '*'`; the gate's side goes by name through the proxy variables sbx sets, so it includes the gate's policy check, its DNS query and its second connection.
   - **time to first byte**: curl's `time_starttransfer` for a 24-byte file, 20 requests per curl, each on a new connection (the server closes every one); rounds alternate which side goes first. The result is the gate's p50 minus direct's.
   - **200 MiB transfer**: MiB/s of one 200 MiB body from its first byte to its last (the server reads the file into memory before its first byte, on both sides); the result is the gate's median over direct's.
   - **500 concurrent connections**: four curls in the sandbox with `--parallel`, 125 transfers each, all through the one gate (by its address: 500 lookups of its name at once would start 500 resolver threads in curl), each fetching `/slow/N` (N = 16 KiB + k bytes, 100 ms after each 16 KiB, so each stays open at least 200 ms and a body sent to the wrong client shows as a wrong length). Every one must answer 200 with exactly its bytes (read back from the sandbox in one curl of `file://` URLs); the peak of connections open at once comes from the gate's decision log (start and duration of each); the time is the whole batch's wall time.
   - **create --allow**: `sbx create --allow ...` (with the stage's flags above) against `sbx create --private-routes --route r0:SVC:80` (SVC a running container on the stage's network): both make one network of the sandbox's own; `--allow` also starts the gate (while the sandbox starts) and joins it to the egress network.
   - **secrets**, on a stage of its own: `openssl s_server -WWW` on 443 with a certificate, from a CA the bench makes, for two names of the same server: `api.example`, which has a secret (`--secret TOKEN@api.example=file:...`, the CA given as `--egress-ca`), and `tunnel.example`, allowed with no secret or rule. One sandbox, one gate, the same curl with one CA file holding the sandbox's bundle and the bench's CA. Through `api.example` the gate terminates TLS with the sandbox's CA, parses the request, puts in the value, opens its own TLS connection to the server verifying its certificate, and scans the response for the value; through `tunnel.example` it checks the SNI and tunnels the bytes. **time to first byte**: curl's `time_starttransfer`, 10 requests per curl, each on a new connection (`Connection: close`), rounds alternating; the gate's p50 minus the tunnel's. **200 MiB**: MiB/s of one body from its first byte to its last, terminated median over tunnel median.
9. **Runtime**, with runsc registered as `.ci/register-runsc` does (`--network=host --host-uds=create`): **create-to-ready, runsc** is `sbx create --runtime runsc` against the same `docker run --runtime runsc` argv from sbx's builder plus the socket wait; **exec, runsc** is `sbx exec` against `docker exec` in one runsc sandbox. The two `sbx runsc / sbx runc` rows are what gVisor costs: sbx under runsc over sbx under runc, interleaved in the same run (no target: the price of a kernel of the sandbox's own).
10. **Pool**: a pool of 20 made with `sbx pool create` and filled; each round claims one member (`sbx create --pool NAME --no-fallback`, from the process's start to its exit with the id printed), makes one cold `sbx create` and one bare sandbox, in rotating order, destroys all three, and waits until the pool is full again and its refiller done, so no measurement shares the engine with a refill. **20 concurrent claims**: 20 `sbx create --pool` started at once on a full pool of 20; the wall time until the last exits, and the 20 ids must be distinct. **Docker calls**: one claim with `SBX_DOCKER` pointing at a shim that logs each call's parent pid; only calls whose parent is the claiming sbx count (the refiller it starts has its own). **Idle memory**: the pool's `idle_memory_bytes` from `sbx pool ls --json` over its 20 members.
11. **Lifecycle**, one sandbox each side, interleaved: **stop** is `sbx stop --grace 0s` against `docker stop --time 0` (the fixture ignores SIGTERM as PID 1, so any grace would be waited out on both sides); **start-to-ready** is `sbx start` (which clears the last run's socket by descriptor, re-checks where the mounts landed and waits for the socket) against removing the old socket, `docker start` and the same socket wait; **pause + resume** is `sbx pause` then `sbx resume` against `docker pause` then `docker unpause`.
12. **Remote**, the same engine reached as a remote one through sshd on loopback (`DOCKER_HOST=ssh://root@127.0.0.1:PORT`, the live tests' rig), so each docker call on both sides pays the ssh round trip (~0.3 s); interleaved, no target. **create-to-ready, remote** is `sbx create` (relayed channel, helper from the engine's `sbx-helper-KEY` volume, which sbx verifies with one `docker volume inspect`; `docker create`, /run read back with `docker cp` before start, `docker start`, then the helper's socket probe) against `docker run -d` of the argv sbx's own builder makes for that sandbox (relayed channel, the same helper volume) plus `docker exec ID /run/sbx/helper probe-socket /run/sandbox/sandbox.sock 500` until it answers 0; the difference is what sbx adds for a remote engine (the layout check and the volume check). **connect round trip, remote** sends one line and closes stdin, until the echo is back and the process exits, through `sbx connect ID` against `docker exec -i ID /run/sbx/helper connect /run/sandbox/sandbox.sock 10000` in the same sandbox.
";

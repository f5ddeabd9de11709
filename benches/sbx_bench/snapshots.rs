//! The snapshots cases, under gVisor registered as `runsc-snap`: a cold
//! `sbx create --snapshots` of the fixture's `count` (the baseline a fork
//! child is held to), `sbx checkpoint` (which leaves it running: a
//! checkpoint, then a restore in place), `hibernate`, resume-to-ready,
//! `fork --from` of one child and of five at once; the same saves of a
//! program holding 256 MiB; and Docker's own path on a bare container of
//! the same image and runtime (`docker checkpoint create`, `docker start
//! --checkpoint`), and raw `runsc checkpoint`/`restore` of the same image
//! as an OCI bundle outside the engine, so sbx's cost over the engine's,
//! and the engine's over the runtime's, show.

use super::{docker, docker_ok, percentile, timed, Bench, LABEL};

const RUNTIME: &str = "runsc-snap";

fn ids(out: std::process::Output) -> Vec<String> {
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

fn size_of(b: &Bench, id: &str, name: &str) -> u64 {
    let out = b.sbx(&["--json", "checkpoints", id]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().unwrap().iter().find(|m| m["name"] == name).and_then(|m| m["size"].as_u64()).unwrap_or(0)
}

/// Saves of one sandbox running `program`: checkpoint ms, hibernate ms,
/// resume ms, and the checkpoint's size in bytes.
struct Saves {
    checkpoint: Vec<f64>,
    hibernate: Vec<f64>,
    resume: Vec<f64>,
    size: u64,
}

fn saves(b: &Bench, program: &[&str], runs: usize) -> Saves {
    let mut args = vec!["--snapshots", "--memory", "1024", "--"];
    args.extend_from_slice(program);
    let id = b.create(&args);
    let mut s = Saves { checkpoint: vec![], hibernate: vec![], resume: vec![], size: 0 };
    for i in 0..runs {
        let name = format!("b{i}");
        let (_, t) = timed(|| b.sbx(&["checkpoint", &id, "--name", &name]));
        s.checkpoint.push(t);
        s.size = size_of(b, &id, &name);
        b.sbx(&["checkpoints", "rm", &id, &name]);
        let (_, t) = timed(|| b.sbx(&["hibernate", &id]));
        s.hibernate.push(t);
        let (_, t) = timed(|| b.sbx(&["resume", &id]));
        s.resume.push(t);
        eprint!(".");
    }
    b.sbx(&["destroy", &id]);
    s
}

/// Docker's own checkpoint and restore of a bare container of the same
/// image under the same runtime: (checkpoint ms, restore ms). A fresh
/// container each time: runsc 20221219 leaves state behind when a restored
/// container is checkpointed again ("id already in use"), which sbx clears
/// and bare docker does not.
fn bare(b: &Bench, runs: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut save, mut restore) = (vec![], vec![]);
    for _ in 0..runs {
        let name = format!("sbxb-snap-{:08x}", rand::random::<u32>());
        let mut run = vec!["run", "-d", "--name", &name, "--label", LABEL, "--runtime", RUNTIME];
        run.extend(["--network", "none", "--entrypoint", "/bin/fixture", &b.image, "sleep"]);
        docker_ok(&run);
        let (_, t) = timed(|| docker_ok(&["checkpoint", "create", &name, "cp"]));
        save.push(t);
        docker_ok(&["wait", &name]);
        // As sbx does: otherwise the start's upload to containerd has the
        // checkpoint's own digest and fails while containerd still holds it.
        let full = docker_ok(&["inspect", "--format", "{{.Id}}", &name]);
        let root = docker_ok(&["info", "--format", "{{.DockerRootDir}}"]);
        let dir = std::path::Path::new(&root).join("containers").join(&full).join("checkpoints/cp");
        std::fs::write(dir.join(".nonce"), rand::random::<u64>().to_string()).unwrap();
        let (_, t) = timed(|| docker_ok(&["start", "--checkpoint", "cp", &name]));
        restore.push(t);
        let _ = docker(&["rm", "-f", &name]);
    }
    (save, restore)
}

/// `runsc ARGS` under its own state root, as the engine's shim would run
/// it. No pipes: a detached sandbox inherits them and would hold them open.
fn runsc(root: &std::path::Path, args: &[&str]) {
    let status = std::process::Command::new("runsc")
        .arg("--root")
        .arg(root)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("spawn runsc");
    assert!(status.success(), "runsc {args:?} failed");
}

/// The runtime alone: raw `runsc checkpoint` and `runsc restore` of the
/// same image and program, as an OCI bundle (`docker export` of its root,
/// `runsc spec`) outside the engine, under `--network=none` as runsc-snap
/// registers it: (checkpoint ms, restore ms).
fn raw_runsc(b: &Bench, runs: usize) -> (Vec<f64>, Vec<f64>) {
    let base = std::env::temp_dir().join(format!("sbxb-runsc-{:08x}", rand::random::<u32>()));
    let (bundle, root) = (base.join("bundle"), base.join("state"));
    std::fs::create_dir_all(bundle.join("rootfs")).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    let made = docker_ok(&["create", "--label", LABEL, "--entrypoint", "/bin/fixture", &b.image, "sleep"]);
    let mut export = std::process::Command::new("docker")
        .args(["export", &made])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn docker export");
    let untar = std::process::Command::new("tar")
        .arg("-C")
        .arg(bundle.join("rootfs"))
        .arg("-x")
        .stdin(export.stdout.take().unwrap())
        .status()
        .unwrap();
    let exported = export.wait().unwrap();
    let _ = docker(&["rm", "-f", &made]);
    assert!(exported.success() && untar.success(), "docker export of the fixture image");
    let spec = std::process::Command::new("runsc")
        .current_dir(&bundle)
        .args(["spec", "--", "/bin/fixture", "sleep"])
        .status()
        .unwrap();
    assert!(spec.success(), "runsc spec");
    let bundle_arg = bundle.to_string_lossy().into_owned();
    let (mut save, mut restore) = (vec![], vec![]);
    for i in 0..runs {
        let id = format!("sbxb-raw-{i}");
        let image = base.join(format!("image-{i}"));
        let image_arg = format!("--image-path={}", image.display());
        runsc(&root, &["--network=none", "run", "--detach", "--bundle", &bundle_arg, &id]);
        let (_, t) = timed(|| runsc(&root, &["checkpoint", &image_arg, &id]));
        save.push(t);
        runsc(&root, &["delete", &id]);
        let (_, t) = timed(|| {
            runsc(&root, &["--network=none", "restore", "--detach", &image_arg, "--bundle", &bundle_arg, &id])
        });
        restore.push(t);
        let _ = std::process::Command::new("runsc")
            .arg("--root")
            .arg(&root)
            .args(["kill", &id, "KILL"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        std::thread::sleep(std::time::Duration::from_millis(100));
        runsc(&root, &["delete", "--force", &id]);
    }
    let _ = std::fs::remove_dir_all(&base);
    (save, restore)
}

/// The report's snapshots table, as markdown rows.
pub fn run(b: &Bench, reps: &dyn Fn(usize) -> usize) -> String {
    // Warm up: runsc's first start pays for loading it.
    let id = b.create(&["--snapshots", "--", "count"]);
    b.sbx(&["destroy", &id]);

    let parent = b.create(&["--snapshots", "--", "count"]);
    b.sbx(&["checkpoint", &parent, "--name", "base"]);
    let (mut cold, mut child, mut five) = (vec![], vec![], vec![]);
    for i in 0..reps(9) {
        for cold_first in [i % 2 == 0, i % 2 != 0] {
            if cold_first {
                let (id, t) = timed(|| b.create(&["--snapshots", "--", "count"]));
                cold.push(t);
                b.sbx(&["destroy", &id]);
            } else {
                let (kids, t) = timed(|| ids(b.sbx(&["fork", &parent, "--from", "base"])));
                child.push(t);
                let mut args = vec!["destroy"];
                args.extend(kids.iter().map(String::as_str));
                b.sbx(&args);
            }
        }
        eprint!(".");
    }
    for _ in 0..reps(3) {
        let (kids, t) = timed(|| ids(b.sbx(&["fork", &parent, "--from", "base", "--count", "5"])));
        assert_eq!(kids.len(), 5);
        five.push(t);
        let mut args = vec!["destroy"];
        args.extend(kids.iter().map(String::as_str));
        b.sbx(&args);
        eprint!(".");
    }
    b.sbx(&["checkpoints", "rm", &parent, "base"]);
    b.sbx(&["destroy", &parent]);

    let small = saves(b, &["count"], reps(6));
    let big = saves(b, &["count-holding", "256"], reps(3));
    let (bare_save, bare_restore) = bare(b, reps(6));
    let (raw_save, raw_restore) = raw_runsc(b, reps(6));

    let p = |v: &[f64]| percentile(v, 0.5);
    let p95 = |v: &[f64]| percentile(v, 0.95);
    let met = |ok: bool| if ok { "yes" } else { "no" };
    let mib = |n: u64| n as f64 / (1 << 20) as f64;
    let mut md = String::new();
    md.push_str(&format!(
        "| cold `sbx create --snapshots`, p50 (p95) | {} | {:.0} ms ({:.0}) | - | - |\n",
        cold.len(),
        p(&cold),
        p95(&cold)
    ));
    let ratio = p(&child) / p(&cold);
    md.push_str(&format!(
        "| `fork --from` one child to ready / cold create, p50 | {} | {:.0} / {:.0} ms = {ratio:.2}x | ≤ 1.0x | {} |\n",
        child.len(),
        p(&child),
        p(&cold),
        met(ratio <= 1.0)
    ));
    md.push_str(&format!(
        "| `fork --from --count 5`, wall p50 (per child) | {} | {:.0} ms ({:.0}) | - | - |\n",
        five.len(),
        p(&five),
        p(&five) / 5.0
    ));
    for (what, s) in [("small program", &small), ("program holding 256 MiB", &big)] {
        md.push_str(&format!(
            "| `sbx checkpoint` (left running), {what}: p50 (p95); image | {} | {:.0} ms ({:.0}); {:.2} MiB | - | - |\n",
            s.checkpoint.len(),
            p(&s.checkpoint),
            p95(&s.checkpoint),
            mib(s.size)
        ));
        md.push_str(&format!(
            "| `sbx hibernate`, {what}, p50 (p95) | {} | {:.0} ms ({:.0}) | - | - |\n",
            s.hibernate.len(),
            p(&s.hibernate),
            p95(&s.hibernate)
        ));
    }
    md.push_str(&format!(
        "| `sbx resume` of a hibernated small program to ready, p50 (p95) | {} | {:.0} ms ({:.0}) | ≤ 500 ms | {} |\n",
        small.resume.len(),
        p(&small.resume),
        p95(&small.resume),
        met(p(&small.resume) <= 500.0)
    ));
    md.push_str(&format!(
        "| `sbx resume`, program holding 256 MiB, p50 (p95) | {} | {:.0} ms ({:.0}) | - | - |\n",
        big.resume.len(),
        p(&big.resume),
        p95(&big.resume)
    ));
    md.push_str(&format!(
        "| bare `docker checkpoint create` / `docker start --checkpoint`, same image and runtime, p50 | {} | {:.0} / {:.0} ms | - | - |\n",
        bare_save.len(),
        p(&bare_save),
        p(&bare_restore)
    ));
    md.push_str(&format!(
        "| raw `runsc checkpoint` / `runsc restore` of the same image as an OCI bundle, outside the engine, p50 | {} | {:.0} / {:.0} ms | - | - |\n",
        raw_save.len(),
        p(&raw_save),
        p(&raw_restore)
    ));
    md
}

//! Snapshots under gVisor (`create --snapshots`, runsc registered as
//! runsc-snap by `.ci/register-runsc-snap`): a checkpoint carries the
//! sandbox's memory (the fixture's `count` keeps its counter only there)
//! and leaves it running; hibernate frees it and resume brings it back;
//! an image edited, swapped between two sandboxes or another data dir's is
//! never restored; what cannot be saved is refused before anything is made.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

/// A `--snapshots` sandbox whose socket answers each connection with the
/// next number of a counter held in memory.
fn counter(w: &World) -> Sandbox {
    w.create(&["--snapshots", "--", "count"])
}

/// The counter's next number, over `sbx connect` (the relayed channel).
fn next(w: &World, id: &str) -> u64 {
    let out = w.sbx_stdin(&["connect", id], b"");
    assert_success(&out, "sbx connect");
    let text = stdout(&out);
    text.trim().parse().unwrap_or_else(|_| panic!("not a number from the counter: {text:?}"))
}

fn state_of(w: &World, id: &str) -> String {
    let ls = json(&w.sbx(&["--json", "ls"]));
    let rec = ls.as_array().unwrap().iter().find(|r| r["id"] == id).cloned();
    rec.unwrap_or_else(|| panic!("ls lacks {id}: {ls}"))["state"].as_str().unwrap().to_string()
}

fn image_dir(w: &World, id: &str, name: &str) -> PathBuf {
    w.state_dir.join("checkpoints").join(id).join(name)
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// The engine's own checkpoint directory of `id`: sbx leaves nothing there.
fn engine_leftovers(id: &str) -> Vec<String> {
    let root = docker_ok(&["info", "--format", "{{.DockerRootDir}}"]);
    let full = docker_ok(&["inspect", "--format", "{{.Id}}", id]);
    let dir = Path::new(&root).join("containers").join(full).join("checkpoints");
    std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// runsc's state files of container `full` (runsc 20221219 leaves one
/// behind after checkpointing a restored sandbox; sbx clears it).
fn runsc_states(full: &str) -> Vec<String> {
    let dir = std::fs::read_dir("/var/run/docker/runtime-runc/moby");
    dir.map(|d| {
        d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.contains(full)).collect()
    })
    .unwrap_or_default()
}

#[test]
fn a_checkpoint_carries_the_memory_and_leaves_the_sandbox_running() {
    let w = World::new();
    let sb = counter(&w);
    let a = next(&w, &sb.id);
    assert_eq!(next(&w, &sb.id), a + 1);
    let out = w.sbx(&["checkpoint", &sb.id, "--name", "before"]);
    assert_success(&out, "sbx checkpoint");
    assert_eq!(stdout(&out).trim(), "before", "the name alone on stdout");
    assert_eq!(state_of(&w, &sb.id), "running");
    // Restored from its memory, not started afresh: the counter goes on.
    assert_eq!(next(&w, &sb.id), a + 2);

    let listed = json(&w.sbx(&["--json", "checkpoints", &sb.id]));
    let list = listed.as_array().unwrap();
    assert_eq!(list.len(), 1, "{listed}");
    assert_eq!(list[0]["name"], "before");
    assert!(list[0]["size"].as_u64().unwrap() > 0, "{listed}");
    assert!(list[0].get("mac").is_none() && list[0].get("spec").is_none(), "no MAC or labels shown: {listed}");
    let table = stdout(&w.sbx(&["checkpoints"]));
    assert!(table.lines().any(|l| l.starts_with(&sb.id) && l.contains("before")), "{table}");

    // Private on the host, nothing left in the engine's directory.
    let img = image_dir(&w, &sb.id, "before");
    assert_eq!(mode(&w.state_dir.join("checkpoints")), 0o700);
    assert_eq!(mode(&img), 0o700);
    for f in std::fs::read_dir(&img).unwrap().flatten() {
        if f.file_type().unwrap().is_file() {
            assert_eq!(mode(&f.path()), 0o600, "{}", f.path().display());
        }
    }
    assert_eq!(engine_leftovers(&sb.id), Vec::<String>::new());

    // A second one of that name is refused; another name is fine; rm removes.
    let again = w.sbx(&["checkpoint", &sb.id, "--name", "before"]);
    assert_exit(&again, 1, "a checkpoint name taken");
    assert!(stderr(&again).contains("already"), "{}", stderr(&again));
    // Again and again: each one of a sandbox that was itself restored.
    assert_success(&w.sbx(&["checkpoint", &sb.id, "--name", "after"]), "a second checkpoint");
    assert_eq!(next(&w, &sb.id), a + 3);
    assert_success(&w.sbx(&["checkpoint", &sb.id, "--name", "third"]), "a third checkpoint");
    assert_eq!(next(&w, &sb.id), a + 4);
    assert_success(&w.sbx(&["checkpoints", "rm", &sb.id, "before"]), "checkpoints rm");
    assert!(!img.exists());
    assert_exit(&w.sbx(&["checkpoints", "rm", &sb.id, "before"]), 1, "rm of a removed checkpoint");

    // Destroy keeps its named checkpoints and says so; rm takes the last
    // of them and the directory; runsc keeps no state of it.
    let full = sb.inspect("{{.Id}}");
    let gone = w.sbx(&["destroy", &sb.id]);
    assert_success(&gone, "destroy");
    assert!(
        stderr(&gone).contains("kept 2 checkpoint(s)") && stderr(&gone).contains("after, third"),
        "{}",
        stderr(&gone)
    );
    assert_eq!(runsc_states(&full), Vec::<String>::new(), "runsc's state of a destroyed sandbox");
    assert_success(&w.sbx(&["checkpoints", "rm", &sb.id, "after", "third"]), "checkpoints rm after destroy");
    assert!(!w.state_dir.join("checkpoints").join(&sb.id).exists(), "checkpoints left after rm");
    w.assert_nothing_left();
}

#[test]
fn hibernate_frees_the_sandbox_and_resume_brings_it_back_where_it_was() {
    let w = World::new();
    let sb = counter(&w);
    let a = next(&w, &sb.id);
    // A file on its own tmpfs is saved with it too.
    assert_success(&sb.exec(&["write", "/tmp/kept"]), "write /tmp/kept");
    assert_success(&w.sbx(&["hibernate", &sb.id]), "sbx hibernate");
    assert_eq!(state_of(&w, &sb.id), "hibernated");
    assert_eq!(sb.inspect("{{.State.Status}} {{.State.Pid}}"), "exited 0", "no process held");
    let connect = w.sbx_stdin(&["connect", &sb.id], b"");
    assert_exit(&connect, 1, "connect to a hibernated sandbox");
    let out = w.sbx(&["resume", &sb.id]);
    assert_success(&out, "sbx resume");
    assert_eq!(state_of(&w, &sb.id), "running");
    assert_eq!(next(&w, &sb.id), a + 1, "the counter comes back from memory");
    assert_success(&sb.exec(&["exists", "/tmp/kept"]), "/tmp/kept after resume");
    assert!(!image_dir(&w, &sb.id, "hibernated").exists(), "the image goes once it is restored");
    assert_eq!(engine_leftovers(&sb.id), Vec::<String>::new());

    // Hibernated again, then destroyed: its image goes with it.
    assert_success(&w.sbx(&["hibernate", &sb.id]), "hibernate again");
    assert!(image_dir(&w, &sb.id, "hibernated").exists());
    let rm = w.sbx(&["checkpoints", "rm", &sb.id, "hibernated"]);
    assert_exit(&rm, 2, "hibernate's own image is the sandbox's whole state");
    assert_success(&w.sbx(&["destroy", &sb.id]), "destroy a hibernated sandbox");
    assert!(!w.state_dir.join("checkpoints").join(&sb.id).exists());
    w.assert_nothing_left();
}

/// Bytes of the image's files, by name, to swap and put back.
fn files_of(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_file() {
            v.push((e.file_name().into(), std::fs::read(e.path()).unwrap()));
        }
    }
    v.sort();
    v
}

fn put(dir: &Path, files: &[(PathBuf, Vec<u8>)]) {
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

#[test]
fn an_edited_or_swapped_image_is_never_restored() {
    let w = World::new();
    let a = counter(&w);
    let b = counter(&w);
    let na = next(&w, &a.id);
    assert_success(&w.sbx(&["hibernate", &a.id]), "hibernate a");
    assert_success(&w.sbx(&["hibernate", &b.id]), "hibernate b");
    let (ia, ib) = (image_dir(&w, &a.id, "hibernated"), image_dir(&w, &b.id, "hibernated"));
    let (fa, fb) = (files_of(&ia), files_of(&ib));
    assert!(!fa.is_empty());

    // One byte of a's memory changed, as a hostile hand on the data dir would.
    let mut edited = fa.clone();
    let big = edited.iter_mut().max_by_key(|f| f.1.len()).unwrap();
    let mid = big.1.len() / 2;
    big.1[mid] ^= 0x55;
    put(&ia, &edited);
    let out = w.sbx(&["--json", "resume", &a.id]);
    assert_exit(&out, 1, "resume of an edited image");
    assert!(stderr(&out).contains("checkpoint_untrusted"), "{}", stderr(&out));
    assert_eq!(state_of(&w, &a.id), "hibernated", "a refused resume leaves it hibernated");
    assert_eq!(engine_leftovers(&a.id), Vec::<String>::new(), "nothing refused reaches the engine");

    // b's valid image (same program, same moment) in a's place.
    for (name, _) in &fa {
        let _ = std::fs::remove_file(ia.join(name));
    }
    put(&ia, &fb);
    assert_exit(&w.sbx(&["resume", &a.id]), 1, "resume of another sandbox's image");

    // Its own, put back: restored, its memory intact.
    for (name, _) in &fb {
        let _ = std::fs::remove_file(ia.join(name));
    }
    put(&ia, &fa);
    assert_success(&w.sbx(&["resume", &a.id]), "resume of its own image");
    assert_eq!(next(&w, &a.id), na + 1);
    assert_success(&w.sbx(&["resume", &b.id]), "resume b");
}

#[test]
fn a_live_exec_session_is_refused_and_the_sandbox_keeps_running() {
    let w = World::new();
    let sb = counter(&w);
    let a = next(&w, &sb.id);
    let mut exec = Command::new("docker")
        .args(["exec", &sb.id, "/bin/fixture", "sleep"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    until(std::time::Duration::from_secs(10), || sb.inspect("{{len .ExecIDs}}") != "0").expect("the exec started");
    let out = w.sbx(&["--json", "checkpoint", &sb.id]);
    let _ = exec.kill();
    let _ = exec.wait();
    assert_exit(&out, 1, "checkpoint with a live exec");
    assert!(stderr(&out).contains("exec_live"), "{}", stderr(&out));
    assert_eq!(state_of(&w, &sb.id), "running");
    assert_eq!(next(&w, &sb.id), a + 1);
    assert_eq!(json(&w.sbx(&["--json", "checkpoints", &sb.id])), serde_json::json!([]));
}

#[test]
fn what_cannot_be_saved_is_refused_before_anything_is_made() {
    let w = World::new();
    for (args, flag) in [
        (vec!["--snapshots", "--route", "db:db:5432"], "--route"),
        (vec!["--snapshots", "--allow", "example.com"], "--allow"),
        (vec!["--snapshots", "--session", "s1", "--persist"], "--persist"),
        (vec!["--snapshots", "--channel", "direct"], "--channel"),
        (vec!["--runtime", "runsc-snap", "--route", "db:db:5432"], "--route"),
    ] {
        let out = w.try_create(&args);
        assert_exit(&out, 2, &format!("create {args:?}"));
        assert!(stderr(&out).contains(flag), "{args:?}: {}", stderr(&out));
    }
    w.assert_nothing_left();

    // Under runc: each command says what it needs, exit 2, nothing changed.
    let plain = w.create(&[]);
    let ps = || docker_ok(&["ps", "-aq"]);
    let before = ps();
    for args in [
        vec!["checkpoint", plain.id.as_str()],
        vec!["hibernate", plain.id.as_str()],
        vec!["fork", plain.id.as_str(), "--count", "2"],
    ] {
        let out = w.sbx(&args);
        assert_exit(&out, 2, &format!("{args:?} of a runc sandbox"));
        assert!(stderr(&out).contains("--snapshots"), "{}", stderr(&out));
    }
    assert_eq!(plain.inspect("{{.State.Status}}"), "running");
    assert_eq!(ps(), before, "a refused fork made a container");
    let snap = counter(&w);
    for bad in ["a/b", "..", "hibernated", "fork-mine", ""] {
        assert_exit(&w.sbx(&["checkpoint", &snap.id, "--name", bad]), 2, &format!("--name {bad:?}"));
    }
    for count in ["0", "65", "-1", "many"] {
        assert_exit(&w.sbx(&["fork", &snap.id, "--count", count]), 2, &format!("fork --count {count}"));
    }
    for bad in ["a/b", "..", ""] {
        assert_exit(&w.sbx(&["fork", &snap.id, "--from", bad]), 2, &format!("fork --from {bad:?}"));
    }
    assert_exit(&w.sbx(&["checkpoint", &snap.id, "--max-checkpoint-size", "lots"]), 2, "a bad size");
    // Too small a cap: refused, nothing kept, and still running.
    let out = w.sbx(&["checkpoint", &snap.id, "--max-checkpoint-size", "1K"]);
    assert_exit(&out, 1, "a checkpoint over its cap");
    assert_eq!(state_of(&w, &snap.id), "running");
    assert_eq!(json(&w.sbx(&["--json", "checkpoints", &snap.id])), serde_json::json!([]));
}

/// A sandbox removed behind sbx's back: gc removes its hibernation (its
/// whole state, of no use without it) and keeps its named checkpoints,
/// which `fork --from` still carries on from, until `checkpoints rm`.
#[test]
fn gc_removes_a_gone_sandboxs_hibernation_and_keeps_its_named_checkpoints() {
    let w = World::new();
    let sb = counter(&w);
    assert_success(&w.sbx(&["checkpoint", &sb.id, "--name", "kept"]), "checkpoint");
    assert_success(&w.sbx(&["hibernate", &sb.id]), "hibernate");
    let dir = w.state_dir.join("checkpoints").join(&sb.id);
    assert!(dir.join("hibernated").exists() && dir.join("kept").exists());
    docker_ok(&["rm", "-f", &sb.id]);
    assert!(dir.join("hibernated").exists(), "docker rm alone knows nothing of sbx's data dir");
    assert_success(&w.sbx(&["gc"]), "sbx gc");
    assert!(!dir.join("hibernated").exists(), "gc left the hibernation of a sandbox that is gone");
    assert!(dir.join("kept").exists(), "gc removed a named checkpoint");
    let listed = stdout(&w.sbx(&["checkpoints", &sb.id]));
    assert!(listed.contains("kept") && !listed.contains("hibernated"), "{listed}");
    assert_success(&w.sbx(&["checkpoints", "rm", &sb.id, "kept"]), "checkpoints rm of a gone sandbox");
    assert!(!dir.exists(), "the gone sandbox's last checkpoint took its dir");
    w.assert_nothing_left();
}

/// `sbx serve --snapshots`: E2B's pause of a template sandbox hibernates
/// it (its files and main process saved to disk, no runsc process held,
/// state `paused` to the SDK, `hibernated` to `ls`), and connect restores
/// it; a sandbox made without --snapshots still refuses a pause without
/// memory.
#[test]
fn the_e2b_sdk_pauses_a_snapshots_sandbox_to_disk_and_connects_it_back() {
    use crate::support::serve::{bash_image, Server};
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start_with(&w, &[format!("debian={}", img.0)], &["--snapshots"]);
    let script = r#"
from e2b import Sandbox, SandboxQuery, SandboxState
sbx = Sandbox.create("debian", timeout=300)
try:
    sbx.commands.run("echo kept > /tmp/kept")
    assert sbx.pause() is True
    assert sbx.get_info().state == "paused"
    paused = Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED])).next_items()
    assert [x.sandbox_id for x in paused] == [sbx.sandbox_id], paused
    print(sbx.sandbox_id, flush=True)
    import sys; sys.stdin.readline()
    assert sbx.pause() is False, "paused already"
    again = Sandbox.connect(sbx.sandbox_id, timeout=300)
    assert again.get_info().state == "running"
    assert again.commands.run("cat /tmp/kept").stdout == "kept\n"
    assert again.commands.run("echo back").stdout == "back\n"
    # Fork: each child carries the parent's files on, then goes its own way.
    kids = again.fork(count=2, timeout=120)
    assert len(kids) == 2 and all(isinstance(k, Sandbox) for k in kids), kids
    ids = {k.sandbox_id for k in kids} | {sbx.sandbox_id}
    assert len(ids) == 3, ids
    for i, k in enumerate(kids):
        assert k.commands.run("cat /tmp/kept").stdout == "kept\n"
        k.commands.run(f"echo {i} > /tmp/mine")
    assert [k.commands.run("cat /tmp/mine").stdout for k in kids] == ["0\n", "1\n"]
    assert again.commands.run("cat /tmp/mine 2>&1 || true").stdout.endswith("No such file or directory\n")
    left = kids[0].get_info().end_at - kids[0].get_info().started_at
    assert left.total_seconds() <= 130, left
    listed = {x.sandbox_id for x in Sandbox.list().next_items()}
    assert ids <= listed, (ids, listed)
    for k in kids:
        k.kill()
    # A snapshot is a template id, and outlives its sandbox.
    snap = again.create_snapshot(name="half")
    assert snap.names == ["half"], snap
    again.commands.run("echo later > /tmp/kept")
    again.kill()
    child = Sandbox.create(snap.snapshot_id, timeout=120)
    assert child.commands.run("cat /tmp/kept").stdout == "kept\n", "the snapshot's state, not the end's"
    assert child.get_info().template_id == snap.snapshot_id
    try:
        Sandbox.create(snap.snapshot_id, envs={"A": "b"})
        raise AssertionError("envs on a snapshot were taken")
    except Exception as e:
        assert "snapshot" in str(e), repr(e)
    try:
        Sandbox.create(sbx.sandbox_id + ".e2b-nothing")
        raise AssertionError("a missing snapshot made a sandbox")
    except Exception as e:
        assert "not found" in str(e), repr(e)
    child.kill()
    print("ok")
finally:
    sbx.kill()
"#;
    use std::io::{BufRead, Write};
    let mut py =
        s.sdk(script, &s.key()).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = std::io::BufReader::new(py.stdout.take().unwrap()).lines();
    let first = lines.next().map(Result::unwrap).unwrap_or_default();
    let hibernated = (!first.is_empty()).then(|| {
        let full = docker_ok(&["inspect", "--format", "{{.State.Status}} {{.State.Pid}} {{.Id}}", &first]);
        (state_of(&w, &first), full)
    });
    let _ = py.stdin.take().unwrap().write_all(b"\n");
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let done = py.wait_with_output().unwrap();
    assert!(done.status.success(), "{}\nserver said: {}", stderr(&done), s.stderr());
    let (state, engine) = hibernated.expect("the script printed no id");
    assert_eq!(state, "hibernated", "ls");
    let engine: Vec<&str> = engine.split(' ').collect();
    assert_eq!(engine[..2], ["exited", "0"], "no process held while paused");
    assert!(runsc_states(engine[2]).is_empty(), "runsc kept state of the paused sandbox");
    assert_eq!(rest, ["ok"]);
}

/// The processes on the host whose command line names container `full`
/// (runsc's sandbox, gofer and shim of it).
fn processes_of(full: &str) -> Vec<String> {
    let procs = std::fs::read_dir("/proc").unwrap().flatten();
    procs
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(full) && c.contains("runsc"))
        .collect()
}

fn mem_available_kib() -> u64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = info.lines().find(|l| l.starts_with("MemAvailable:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Hibernate gives the host back what the sandbox held: no runsc process
/// of its container is left, and the host's MemAvailable rises by at
/// least 200 MiB for a program holding 320 MiB (256 and some margin for
/// what other tests allocate meanwhile); resume brings the program back
/// with its counter. Run apart from the hogs; a rise short of it is
/// measured again over a few more hibernations, since a neighbour's
/// allocation can hide one, but memory never given back fails them all.
#[test]
fn hibernate_gives_the_host_its_memory_back() {
    let _alone = engine_alone();
    let w = World::new();
    let sb = w.create(&["--snapshots", "--memory", "1024", "--", "count-holding", "320"]);
    let full = docker_ok(&["inspect", "--format", "{{.Id}}", &sb.id]);
    let mut seen = Vec::new();
    for round in 1..=4u64 {
        assert_eq!(next(&w, &sb.id), round, "the counter comes back from memory");
        let usage = docker_ok(&["stats", "--no-stream", "--format", "{{.MemUsage}}", &sb.id]);
        assert!(!processes_of(&full).is_empty(), "no runsc process of a running sandbox: the check is blind");
        let before = mem_available_kib();
        assert_success(&w.sbx(&["hibernate", &sb.id]), "sbx hibernate");
        assert_eq!(processes_of(&full), Vec::<String>::new(), "runsc processes outlived hibernate");
        let mut rose = 0;
        until(Duration::from_secs(3), || {
            rose = rose.max(mem_available_kib().saturating_sub(before));
            rose >= 200 << 10
        });
        seen.push(format!("{} MiB (it used {usage})", rose >> 10));
        assert_success(&w.sbx(&["resume", &sb.id]), "sbx resume");
        if rose >= 200 << 10 {
            return;
        }
    }
    panic!("MemAvailable never rose by 200 MiB on hibernate: {seen:?}");
}

fn label_of(id: &str, key: &str) -> String {
    docker_ok(&["inspect", "--format", &format!("{{{{index .Config.Labels {key:?}}}}}"), id])
}

/// `fork --count 3` of a counter: each child carries on from the parent's
/// memory (answers the parent's next number), then each goes its own way;
/// the parent runs on. Every child is a sandbox of its own: id, container,
/// ownership token, TTL counted from the fork. `fork --from NAME` works
/// after its sandbox is destroyed.
#[test]
fn fork_makes_children_that_carry_on_then_diverge() {
    let w = World::new();
    let sb = w.create(&["--snapshots", "--ttl", "10m", "--", "count"]);
    assert_eq!((next(&w, &sb.id), next(&w, &sb.id)), (1, 2));
    std::thread::sleep(Duration::from_secs(2));
    let out = w.sbx(&["fork", &sb.id, "--count", "3"]);
    assert_success(&out, "sbx fork --count 3");
    let kids: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    assert_eq!(kids.len(), 3, "{kids:?}");
    let mut distinct = kids.clone();
    distinct.push(sb.id.clone());
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "ids of their own: {kids:?}");
    for k in &kids {
        assert_eq!(next(&w, k), 3, "child {k} carries on from the parent's memory");
    }
    assert_eq!(next(&w, &kids[0]), 4);
    assert_eq!(next(&w, &kids[0]), 5);
    assert_eq!(next(&w, &kids[1]), 4, "children diverge");
    assert_eq!(next(&w, &sb.id), 3, "the parent runs on from where it was");
    let owners: Vec<String> = kids.iter().chain([&sb.id]).map(|k| label_of(k, "sbx.owner")).collect();
    assert!(owners.iter().all(|o| o.len() == 32) && owners[0] != owners[1] && owners[0] != owners[3], "{owners:?}");
    let parent_ends = label_of(&sb.id, "sbx.expires");
    assert!(kids.iter().all(|k| label_of(k, "sbx.expires") > parent_ends), "a child's TTL counts from the fork");
    let ls = json(&w.sbx(&["--json", "ls"]));
    let running = ls.as_array().unwrap().iter().filter(|r| r["state"] == "running").count();
    assert_eq!(running, 4, "{ls}");
    assert_eq!(stdout(&w.sbx(&["checkpoints", &sb.id])).lines().count(), 1, "the fork's own checkpoint is gone");

    // From a named checkpoint, after its sandbox is gone.
    assert_success(&w.sbx(&["checkpoint", &sb.id, "--name", "half"]), "checkpoint --name half");
    assert_eq!(next(&w, &sb.id), 4);
    let gone = w.sbx(&["destroy", &sb.id]);
    assert_success(&gone, "destroy the parent");
    assert!(stderr(&gone).contains("kept 1 checkpoint(s) of"), "destroy says what it kept: {}", stderr(&gone));
    let from = w.sbx(&["fork", &sb.id, "--from", "half", "--count", "2"]);
    assert_success(&from, "fork --from a destroyed sandbox's checkpoint");
    let grand: Vec<String> = stdout(&from).lines().map(str::to_string).collect();
    assert_eq!(grand.len(), 2);
    for g in &grand {
        assert_eq!(next(&w, g), 4, "{g} carries on from the checkpoint, not from the parent's end");
    }
    assert_success(&w.sbx(&["checkpoints", "rm", &sb.id, "half"]), "checkpoints rm of a gone sandbox");
    assert!(!w.state_dir.join("checkpoints").join(&sb.id).exists(), "a gone sandbox's last checkpoint took its dir");
    let again = w.sbx(&["fork", &sb.id, "--from", "half"]);
    assert_exit(&again, 1, "fork --from a removed checkpoint");
    assert!(stderr(&again).contains("no checkpoint half"), "{}", stderr(&again));
    let ids: Vec<&str> = grand.iter().chain(&kids).map(String::as_str).collect();
    let mut args = vec!["destroy"];
    args.extend(ids);
    assert_success(&w.sbx(&args), "destroy every child");
    w.assert_nothing_left();
}

/// What a checkpoint carries beyond the main process's memory: a child
/// process with a counter of its own, the pipes to it, and a file under
/// /tmp that only an open descriptor names. Each fork child and the
/// parent after hibernate and resume answer with all three, then diverge.
#[test]
fn a_child_process_and_an_open_file_come_back_in_every_copy() {
    let w = World::new();
    let sb = w.create(&["--snapshots", "--", "count-family"]);
    let ask = |id: &str| {
        let out = w.sbx_stdin(&["connect", id], b"");
        assert_success(&out, "sbx connect");
        stdout(&out).trim().to_string()
    };
    assert_eq!(ask(&sb.id), "1 child=1 file=1");
    assert_eq!(ask(&sb.id), "2 child=2 file=2");
    let out = w.sbx(&["fork", &sb.id, "--count", "3"]);
    assert_success(&out, "sbx fork --count 3");
    let kids: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    assert_eq!(kids.len(), 3, "{kids:?}");
    for k in &kids {
        assert_eq!(ask(k), "3 child=3 file=3", "child {k} carries the child process and the open file");
    }
    assert_eq!(ask(&kids[0]), "4 child=4 file=4");
    assert_eq!(ask(&kids[1]), "4 child=4 file=4", "each copy's file is its own");
    assert_eq!(ask(&sb.id), "3 child=3 file=3", "the parent runs on from where it was");
    assert_success(&w.sbx(&["hibernate", &sb.id]), "hibernate");
    assert_success(&w.sbx(&["resume", &sb.id]), "resume");
    assert_eq!(ask(&sb.id), "4 child=4 file=4", "after hibernate and resume");
    let mut args = vec!["destroy", sb.id.as_str()];
    args.extend(kids.iter().map(String::as_str));
    assert_success(&w.sbx(&args), "destroy");
    w.assert_nothing_left();
}

/// sbx killed with SIGKILL part way through `fork --count 4`: `sbx gc`
/// removes every child it made (all or none: their ids were never
/// printed), and the parent runs on.
#[test]
fn gc_after_a_fork_killed_part_way_leaves_no_child() {
    let w = World::new();
    let sb = counter(&w);
    let parent = docker_ok(&["inspect", "--format", "{{.Id}}", &sb.id]);
    let mut fork = Command::new(SBX)
        .args(w.dir_args())
        .args(["fork", &sb.id, "--count", "4"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sbx fork");
    // A second child's container exists only once the first child's create returned.
    let two = until(Duration::from_secs(120), || w.containers().len() >= 3);
    fork.kill().unwrap();
    fork.wait().unwrap();
    assert!(two.is_some(), "fork never made two children: {:?}", w.containers());
    // The killed sbx's `docker create` calls in flight still finish, in
    // the engine and in docker CLIs that outlive it: gc runs once they
    // have (what a gc racing them misses is in the snapshots notes).
    let mut seen = w.containers().len();
    for _ in 0..30 {
        std::thread::sleep(Duration::from_secs(2));
        let now = w.containers().len();
        if now == seen {
            break;
        }
        seen = now;
    }
    assert_success(&w.sbx(&["gc"]), "sbx gc");
    let left = w.containers();
    assert!(left.len() == 1 && parent.starts_with(&left[0]), "gc left children of a killed fork: {left:?}");
    assert_eq!(
        json(&w.sbx(&["--json", "checkpoints", &sb.id])),
        serde_json::json!([]),
        "gc left the killed fork's own checkpoint of a parent that runs on"
    );
    assert_eq!(next(&w, &sb.id), 1, "the parent runs on");
    assert_success(&w.sbx(&["destroy", &sb.id]), "destroy the parent");
    w.assert_nothing_left();
}

/// SIGKILL of `checkpoint`, `hibernate` and `resume` at points through
/// each, then `sbx gc`: the sandbox is left running, stopped or
/// hibernated, never half of one; `start` or `resume` brings it back
/// answering; no partial image stays in the data dir, and the next save
/// clears what the killed one left in the engine's directory.
#[test]
fn kill_9_during_checkpoint_hibernate_or_resume_leaves_a_sandbox_that_comes_back() {
    let w = World::new();
    let sb = counter(&w);
    let back = |w: &World| match state_of(w, &sb.id).as_str() {
        "running" => {}
        "hibernated" => assert_success(&w.sbx(&["resume", &sb.id]), "resume after a kill"),
        other => {
            assert!(["stopped", "exited"].contains(&other), "a killed save left it {other}");
            assert_success(&w.sbx(&["start", &sb.id]), "start after a kill");
        }
    };
    for (i, (cmd, delay)) in [
        ("checkpoint", 150),
        ("checkpoint", 450),
        ("hibernate", 100),
        ("hibernate", 250),
        ("resume", 150),
        ("resume", 300),
    ]
    .into_iter()
    .enumerate()
    {
        back(&w);
        if cmd == "resume" {
            assert_success(&w.sbx(&["hibernate", &sb.id]), "hibernate before a killed resume");
        }
        let name = format!("k{i}");
        let mut args = vec![cmd, sb.id.as_str()];
        if cmd == "checkpoint" {
            args.extend(["--name", name.as_str()]);
        }
        let mut child = Command::new(SBX)
            .args(w.dir_args())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
        // The engine finishes a `docker checkpoint` or `start` whose CLI was
        // killed: until it has, the container is still changing state.
        std::thread::sleep(Duration::from_secs(3));
        assert_success(&w.sbx(&["gc"]), "gc after a kill");
        back(&w);
        let n = next(&w, &sb.id);
        assert!(n >= 1, "{cmd} killed after {delay} ms: the counter answered {n}");
        let dir = w.state_dir.join("checkpoints").join(&sb.id);
        let partial: Vec<String> = std::fs::read_dir(&dir)
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let partial: Vec<&String> = partial.iter().filter(|f| f.starts_with('.') && *f != ".lock").collect();
        assert!(partial.is_empty(), "{cmd} killed after {delay} ms left {partial:?}");
    }
    back(&w);
    assert_success(&w.sbx(&["checkpoint", &sb.id, "--name", "last"]), "a checkpoint after the kills");
    assert_eq!(engine_leftovers(&sb.id), Vec::<String>::new(), "the killed saves' engine images stay");
    assert_success(&w.sbx(&["destroy", &sb.id]), "destroy");
}

/// Hostile requests to `sbx serve --snapshots`, from Python's urllib: a
/// fork count or timeout out of range or of the wrong type, a snapshot
/// name that is a path, too long or not a string, and snapshot ids as
/// templates that name no snapshot of this server. Each is refused as
/// E2B's error shape (400 or 404) and nothing is made: no sandbox, no
/// checkpoint, the one sandbox running on.
#[test]
fn hostile_fork_and_snapshot_requests_make_nothing() {
    use crate::support::serve::{bash_image, Server};
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start_with(&w, &[format!("debian={}", img.0)], &["--snapshots"]);
    let script = r#"
import json, os, urllib.request, urllib.error
url, key = os.environ["E2B_API_URL"], os.environ["E2B_API_KEY"]
def call(method, path, body):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method,
        headers={"X-API-KEY": key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
code, made = call("POST", "/v2/sandboxes", {"templateID": "debian", "timeout": 300})
assert code == 201, (code, made)
sid = made["sandboxID"]
print(sid, flush=True)
for body in [{"count": 0}, {"count": 21}, {"count": "3"}, {"count": 1.5}, {"count": -1}, {"count": 1e30},
             {"count": None, "timeout": -5}, {"timeout": "60"}, {"timeout": 1e30}, [1], b"{", b"\xff"]:
    code, err = call("POST", f"/sandboxes/{sid}/fork", body)
    assert code == 400, (body, code, err)
    assert isinstance(err, dict) and err.get("code") == 400 and err.get("message"), err
for name in ["../../etc", "a/b", "x" * 80, 5, ["a"], "a\u0000b", "a b", "a\nb"]:
    code, err = call("POST", f"/sandboxes/{sid}/snapshots", {"name": name})
    assert code == 400, (name, code, err)
code, err = call("POST", "/sandboxes/sbx-000000000000/fork", {"count": 1})
assert code == 404, (code, err)
for t in [sid + ".e2b-nothing", sid + ".e2b-../../x", "../" + sid + ".e2b-a", sid + ".e2b-", sid + "." + "e2b-" + "x" * 80]:
    code, err = call("POST", "/v2/sandboxes", {"templateID": t})
    assert code == 404, (t, code, err)
print("ok", flush=True)
"#;
    let out = s.python(script, &s.key());
    let said = stdout(&out);
    assert!(out.status.success(), "{said}{}\nserver said: {}", stderr(&out), s.stderr());
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 2, "{said}");
    let sid = lines[0];
    let ls = json(&w.sbx(&["--json", "ls"]));
    let ids: Vec<&str> = ls.as_array().unwrap().iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids, [sid], "nothing but the one sandbox was made: {ls}");
    assert_eq!(state_of(&w, sid), "running");
    assert_eq!(stdout(&w.sbx(&["checkpoints"])).lines().count(), 1, "no checkpoint was made (the header alone)");
    assert!(!w.state_dir.join("checkpoints").join(sid).exists(), "no checkpoint directory");
    assert_success(&w.sbx(&["destroy", sid]), "destroy");
    w.assert_nothing_left();
}

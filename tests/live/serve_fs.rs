//! `sbx serve`'s filesystem watching and downloads, driven by the real E2B
//! Python SDK: the sync client's `watch_dir` (CreateWatcher and friends),
//! the async client's (WatchDir's stream), hostile names, a flood of
//! events, and files that stat as empty but are not (/proc).

use super::support::serve::*;
use super::support::*;

/// Python helpers every script here shares: wait for events, check them
/// as an ordered subsequence, and find watch execs left on this host.
const PRELUDE: &str = r#"
import os, time
def pairs(events):
    return [(e.type.value, e.name) for e in events]
def subsequence(want, got):
    it = iter(got)
    return all(any(w == g for g in it) for w in want)
def watch_execs(_sandbox_id=None):
    """The helper watches this server runs (the docker clients below it)."""
    parent, args = {}, {}
    for pid in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{pid}/stat").read()
            args[pid] = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        parent[pid] = stat.rsplit(")", 1)[1].split()[1]
    def below(pid):
        while pid in parent:
            pid = parent[pid]
            if pid == os.environ["SBX_SERVE_PID"]:
                return True
        return False
    return [p for p, a in args.items() if b"/run/sbx/helper" in a and b"watch" in a and below(p)]
"#;

fn run(s: &Server, what: &str, script: &str) -> String {
    let out = s.sdk(&format!("{PRELUDE}\n{script}"), &s.key()).env("SBX_SERVE_PID", s.child.id().to_string()).output();
    let out = out.expect("spawn python");
    assert_success(&out, &format!("{what} (server said: {})", s.stderr()));
    stdout(&out)
}

/// The sync SDK's watch: create, write, chmod, rename and remove are seen
/// in order, below too with recursive; stop() ends it and its helper.
#[test]
fn the_sync_sdk_watches_a_directory_and_stops() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
from e2b import Sandbox, FileNotFoundException, InvalidArgumentException, SandboxException
sb = Sandbox.create("debian", timeout=120)
try:
    sb.commands.run("mkdir -p /tmp/w && echo x > /tmp/file")
    h = sb.files.watch_dir("/tmp/w")
    sb.commands.run("echo hi > /tmp/w/a; echo more >> /tmp/w/a; /bin/busybox chmod 600 /tmp/w/a;"
                    " /bin/busybox mv /tmp/w/a /tmp/w/b; /bin/busybox rm /tmp/w/b; mkdir /tmp/w/sub; echo n > /tmp/w/sub/deep")
    want = [("create", "a"), ("write", "a"), ("chmod", "a"), ("rename", "a"), ("create", "b"), ("remove", "b"), ("create", "sub")]
    got = []
    for _ in range(50):
        got += pairs(h.get_new_events())
        if subsequence(want, got):
            break
        time.sleep(0.2)
    assert subsequence(want, got), got
    assert not any(n.startswith("sub/") for _, n in got), f"not recursive, yet: {got}"
    assert len(watch_execs(sb.sandbox_id)) == 1, watch_execs(sb.sandbox_id)
    h.stop()
    try:
        h.get_new_events()
        raise AssertionError("a stopped watcher answered")
    except SandboxException as e:
        print("stopped", e)
    for _ in range(50):
        if not watch_execs(sb.sandbox_id):
            break
        time.sleep(0.2)
    assert not watch_execs(sb.sandbox_id), "stop() left the helper's exec running"

    r = sb.files.watch_dir("/tmp/w", recursive=True)
    # A new directory is watched once its create is seen: what is made in
    # it before that can be missed (inotify adds a watch per directory, as
    # envd's does), so the file comes after the directory's event.
    sb.commands.run("mkdir -p /tmp/w/sub/new")
    got = []
    for _ in range(50):
        got += pairs(r.get_new_events())
        if ("create", "sub/new") in got:
            break
        time.sleep(0.2)
    assert ("create", "sub/new") in got, got
    sb.commands.run("echo z > /tmp/w/sub/new/f; /bin/busybox rm -r /tmp/w/sub")
    want = [("create", "sub/new"), ("create", "sub/new/f"), ("write", "sub/new/f"), ("remove", "sub/new/f"), ("remove", "sub")]
    for _ in range(50):
        got += pairs(r.get_new_events())
        if subsequence(want, got):
            break
        time.sleep(0.2)
    assert subsequence(want, got), got
    r.stop()

    for path, exc in [("/tmp/nothing", FileNotFoundException), ("/tmp/file", InvalidArgumentException)]:
        try:
            sb.files.watch_dir(path)
            raise AssertionError(f"{path} was watched")
        except exc as e:
            print(exc.__name__, e)
    # A watcher never stopped: its sandbox's end removes it, and its exec.
    sb.files.watch_dir("/tmp/w")
    assert len(watch_execs()) == 1, watch_execs()
    sb.kill()
    for _ in range(100):
        if not watch_execs():
            break
        time.sleep(0.3)
    assert not watch_execs(), "a watcher outlived its sandbox"
finally:
    sb.kill()
print("ok")
"#;
    let out = run(&s, "sync watch_dir", script);
    assert!(out.contains("stopped") && out.ends_with("ok\n"), "{out}");
    assert!(out.contains("FileNotFoundException") && out.contains("InvalidArgumentException"), "{out}");
}

/// The async SDK's watch: on_event gets each change as it comes, recursive
/// included; stop() ends it; a sandbox killed under a watch ends it with
/// the SDK's SandboxNotRunningException, and leaves no exec behind.
#[test]
fn the_async_sdk_watches_with_on_event() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
import asyncio
from e2b import AsyncSandbox, FileNotFoundException, InvalidArgumentException
async def main():
    sb = await AsyncSandbox.create("debian", timeout=120)
    try:
        await sb.commands.run("mkdir -p /tmp/w/sub && echo x > /tmp/file")
        seen = []
        h = await sb.files.watch_dir("/tmp/w", lambda e: seen.append((e.type.value, e.name)), recursive=True)
        await sb.commands.run("echo hi > /tmp/w/sub/a; /bin/busybox mv /tmp/w/sub/a /tmp/w/b; /bin/busybox rm /tmp/w/b")
        want = [("create", "sub/a"), ("write", "sub/a"), ("rename", "sub/a"), ("create", "b"), ("remove", "b")]
        for _ in range(50):
            if subsequence(want, seen):
                break
            await asyncio.sleep(0.2)
        assert subsequence(want, seen), seen
        await h.stop()
        for path, exc in [("/tmp/nothing", FileNotFoundException), ("/tmp/file", InvalidArgumentException)]:
            try:
                await sb.files.watch_dir(path, lambda e: None)
                raise AssertionError(f"{path} was watched")
            except exc as e:
                print(exc.__name__, e)
        ended = asyncio.get_running_loop().create_future()
        await sb.files.watch_dir("/tmp/w", lambda e: None, on_exit=lambda err: ended.set_result(err), timeout=0)
        assert len(watch_execs(sb.sandbox_id)) == 1, watch_execs(sb.sandbox_id)
        sid = sb.sandbox_id
        await sb.kill()
        err = await asyncio.wait_for(ended, 30)
        print("ended", type(err).__name__)
        for _ in range(50):
            if not watch_execs(sid):
                break
            await asyncio.sleep(0.2)
        assert not watch_execs(sid), "a watch outlived its sandbox"
    finally:
        await sb.kill()
asyncio.run(main())
print("ok", flush=True)
# Past this point only the interpreter's teardown is left, and there the
# async SDK's HTTP client (connectrpc over pyqwest, native threads of its
# own) aborts in about half the runs once a watch stream it held has
# ended: "Fatal Python error: Aborted", after everything above passed.
os._exit(0)
"#;
    let out = run(&s, "async watch_dir", script);
    assert!(out.contains("ended SandboxNotRunningException"), "{out}");
    assert!(out.contains("FileNotFoundException") && out.contains("InvalidArgumentException"), "{out}");
    assert!(out.ends_with("ok\n"), "{out}");
}

/// Names with a newline, an escape sequence and bytes that are not UTF-8
/// are listed (to depth) and watched as valid JSON; WatchDir's raw stream
/// is a start, valid events and keepalives while idle.
#[test]
fn hostile_names_are_listed_and_watched_as_valid_json() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
import json, struct, http.client
from e2b import Sandbox
sb = Sandbox.create("debian", timeout=120)
NAME = "$(printf 'a\\nb\\033[31m\\377')"
try:
    sb.commands.run(f'mkdir -p "/tmp/h/{NAME}" && : > "/tmp/h/{NAME}/{NAME}"')
    top = [e.name for e in sb.files.list("/tmp/h")]
    deep = sorted(e.path for e in sb.files.list("/tmp/h", depth=2))
    bad = "a\nb\x1b[31m\ufffd"
    assert top == [bad], top
    assert deep == [f"/tmp/h/{bad}", f"/tmp/h/{bad}/{bad}"], deep
    h = sb.files.watch_dir("/tmp/h", recursive=True)
    sb.commands.run(f'echo x > "/tmp/h/{NAME}/new{NAME}"')
    got = []
    for _ in range(50):
        got += pairs(h.get_new_events())
        if ("create", f"{bad}/new{bad}") in got:
            break
        time.sleep(0.2)
    assert ("create", f"{bad}/new{bad}") in got, got
    h.stop()

    # The stream itself, frame by frame: each one JSON, control bytes escaped.
    c = http.client.HTTPConnection(os.environ["E2B_API_URL"].split("//")[1], timeout=30)
    msg = json.dumps({"path": "/tmp/h", "recursive": True}).encode()
    c.request("POST", "/filesystem.Filesystem/WatchDir", body=struct.pack(">BI", 0, len(msg)) + msg, headers={
        "Content-Type": "application/connect+json", "E2b-Sandbox-Id": sb.sandbox_id,
        "X-Access-Token": sb._envd_access_token, "Keepalive-Ping-Interval": "1"})
    r = c.getresponse()
    def frame():
        head = r.read(5)
        raw = r.read(struct.unpack(">I", head[1:])[0])
        assert b"\n" not in raw and b"\x1b" not in raw, raw
        return head[0], json.loads(raw)
    assert frame() == (0, {"start": {}})
    sb.commands.run(f'/bin/busybox rm "/tmp/h/{NAME}/new{NAME}"')
    events, keepalives = [], 0
    t = time.monotonic()
    while time.monotonic() - t < 8 and (keepalives < 2 or not events):
        flags, m = frame()
        assert flags == 0, m
        if "keepalive" in m:
            keepalives += 1
        else:
            events.append(m["filesystem"])
    assert {"name": f"{bad}/new{bad}", "type": "EVENT_TYPE_REMOVE"} in events, events
    assert keepalives >= 2, keepalives
    r.close(); c.close()
finally:
    sb.kill()
print("ok")
"#;
    let out = run(&s, "hostile names", script);
    assert_eq!(out, "ok\n");
}

/// A sandbox flooding a watcher nobody reads: its buffer stays bounded,
/// the SDK is told events were lost (not handed a list with a hole), and
/// another sandbox's requests are answered meanwhile.
#[test]
fn a_flood_of_events_is_bounded_and_said() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
from e2b import Sandbox, SandboxException
a = Sandbox.create("debian", timeout=120)
b = Sandbox.create("debian", timeout=120)
try:
    a.commands.run("mkdir -p /tmp/f")
    b.commands.run("mkdir -p /tmp/q")
    h = a.files.watch_dir("/tmp/f")
    # One process touching two files in turn: 12000 CHMOD events, no inodes used, none coalesced.
    a.commands.run("cd /tmp/f && : > a && : > b && /bin/busybox touch $(printf 'a b %.0s' {1..6000})", background=True)
    t = time.monotonic()
    for _ in range(20):
        b.files.list("/tmp/q")
    print("other sandbox answered", time.monotonic() - t < 20)
    for _ in range(100):
        if not watch_execs(a.sandbox_id):
            break
        time.sleep(0.3)
    assert not watch_execs(a.sandbox_id), "the flooded watcher's helper still runs"
    try:
        h.get_new_events()
        raise AssertionError("a flood was handed over whole")
    except SandboxException as e:
        print("lost", "DATA_LOSS" in str(e).upper() and "were lost" in str(e), e)
    h.stop()
finally:
    a.kill()
    b.kill()
"#;
    let out = run(&s, "a flood", script);
    assert!(out.starts_with("other sandbox answered True\nlost True "), "{out}");
    assert!(out.contains("10000 events"), "the buffer's bound, not the kernel's queue: {out}");
}

/// files.read of a /proc file (stat says 0 bytes) gives its content.
#[test]
fn a_proc_file_is_read_whole() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
from e2b import Sandbox
sb = Sandbox.create("debian", timeout=120)
try:
    want = sb.commands.run("cat /proc/version").stdout
    assert want.startswith("Linux"), want
    assert sb.files.get_info("/proc/version").size == 0
    assert sb.files.read("/proc/version") == want
    status = sb.files.read("/proc/self/status")
    assert "Name:" in status and "Uid:" in status, status
    sb.files.write("/tmp/empty", b"")
    assert sb.files.read("/tmp/empty", format="bytes") == b"", "an empty file is still empty"
finally:
    sb.kill()
print("ok")
"#;
    let out = run(&s, "/proc", script);
    assert_eq!(out, "ok\n");
}

//! `sbx serve` driven by the real E2B Python SDK (support/serve.rs: the
//! pinned SDK's venv, a Debian image with bash, the server on a free
//! loopback port).

use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

use super::support::serve::*;
use super::support::*;

#[test]
fn the_e2b_sdk_creates_runs_lists_and_kills() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    assert!(s.stderr().contains("serve/api-key"), "stderr says where the key is: {}", s.stderr());
    let out = s.python(&doc_example(), &s.key());
    assert_success(&out, &format!("the SDK example (server said: {})", s.stderr()));
    assert_eq!(stdout(&out).trim(), "ok");
    // Made through serve, an ordinary sbx sandbox: gone for `sbx ls` too.
    let ls = json(&w.sbx(&["ls", "--json"]));
    assert_eq!(ls, serde_json::json!([]), "kill destroyed it");
}

/// The SDK's own exceptions for a wrong key, an unknown template and
/// user="root"; and a create retried with its Idempotency-Key makes no second sandbox.
#[test]
fn the_e2b_sdk_gets_its_own_exceptions() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let wrong = s.python(
        r#"
from e2b import Sandbox, AuthenticationException
try:
    Sandbox.create("debian")
    raise SystemExit("a wrong key created a sandbox")
except AuthenticationException as e:
    print("auth", e)
"#,
        "sbx_not-the-key-0123456789abcdef",
    );
    assert_success(&wrong, &format!("wrong key (server said: {})", s.stderr()));
    assert!(stdout(&wrong).starts_with("auth 401"), "{}", stdout(&wrong));
    let script = r#"
from e2b import Sandbox, SandboxException
try:
    Sandbox.create("no-such-template")
    raise SystemExit("an unknown template created a sandbox")
except SandboxException as e:
    assert e.status_code == 404, e.status_code
    print("unknown", e)
sbx = Sandbox.create("debian", idempotency_key="retry-1")
try:
    again = Sandbox.create("debian", idempotency_key="retry-1")
    assert again.sandbox_id == sbx.sandbox_id, "a retried create made a second sandbox"
    print("sandboxes", len(Sandbox.list().next_items()))
    sbx.commands.run("id", user="root")
    raise SystemExit("user=root ran")
except SandboxException as e:
    print("root", e)
finally:
    sbx.kill()
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("exceptions (server said: {})", s.stderr()));
    let text = stdout(&out);
    assert!(text.contains("unknown 404: template 'no-such-template' not found"), "{text}");
    assert!(text.contains("root") && text.contains("sbx sandboxes have no root"), "{text}");
    assert!(text.contains("sandboxes 1\n"), "one sandbox for two creates with one Idempotency-Key: {text}");
    assert_eq!(json(&w.sbx(&["ls", "--json"])), serde_json::json!([]), "nothing left, nothing made by the refusals");
}

/// A sandbox's token reaches its own envd API only: not another
/// sandbox's, not the control plane; and a wrong one answers as a missing one.
#[test]
fn an_access_token_reaches_its_own_sandbox_only() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
import os, urllib.request, urllib.error
from e2b import Sandbox
url = os.environ["E2B_API_URL"]
def status(path, headers):
    try:
        return urllib.request.urlopen(urllib.request.Request(url + path, headers=headers)).status
    except urllib.error.HTTPError as e:
        return e.code
a, b = Sandbox.create("debian"), Sandbox.create("debian")
try:
    own = {"E2b-Sandbox-Id": a.sandbox_id, "X-Access-Token": a._envd_access_token}
    other = {"E2b-Sandbox-Id": b.sandbox_id, "X-Access-Token": a._envd_access_token}
    wrong = {"E2b-Sandbox-Id": a.sandbox_id, "X-Access-Token": "0" * 64}
    gone = {"E2b-Sandbox-Id": "sbx-000000000000", "X-Access-Token": a._envd_access_token}
    print(status("/health", own), status("/health", other), status("/health", wrong), status("/health", gone))
    print(status("/sandboxes/" + a.sandbox_id, {"X-API-KEY": a._envd_access_token}))
    assert a._envd_access_token != b._envd_access_token
finally:
    a.kill(); b.kill()
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("tokens (server said: {})", s.stderr()));
    assert_eq!(stdout(&out), "204 401 401 401\n401\n");
}

/// set_timeout, pause and connect (resume) through the SDK: `sbx ttl`,
/// `sbx pause` and `sbx resume` underneath, seen by `sbx ls` too.
#[test]
fn the_e2b_sdk_sets_the_timeout_pauses_and_connects() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
import datetime
from e2b import Sandbox
sbx = Sandbox.create("debian", timeout=60)
try:
    sbx.set_timeout(3600)
    left = sbx.get_info().end_at - datetime.datetime.now(datetime.timezone.utc)
    assert left > datetime.timedelta(minutes=50), left
    assert sbx.pause() is True
    assert sbx.get_info().state == "paused"
    assert sbx.pause() is False, "paused already"
    print(sbx.sandbox_id)
    again = Sandbox.connect(sbx.sandbox_id, timeout=60)
    assert again.get_info().state == "running"
    left = again.get_info().end_at - datetime.datetime.now(datetime.timezone.utc)
    assert left > datetime.timedelta(minutes=50), "connect never shortens the TTL"
    assert again.commands.run("echo back").stdout == "back\n"
    try:
        again.fork(count=2)
        raise AssertionError("a sandbox made without --snapshots was forked")
    except Exception as e:
        assert "--snapshots" in str(e), repr(e)
    assert len(Sandbox.list().next_items()) == 1, "a refused fork made a sandbox"
    print("ok")
finally:
    sbx.kill()
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("lifecycle (server said: {})", s.stderr()));
    assert!(stdout(&out).ends_with("ok\n"), "{}", stdout(&out));
}

/// SIGTERM: the server stops accepting, a command in flight still ends
/// with its output, the server exits 0, and the sandbox stays.
#[test]
fn sigterm_lets_a_command_in_flight_end_and_keeps_the_sandbox() {
    use std::io::BufRead;
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let mut s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
from e2b import Sandbox
sbx = Sandbox.create("debian", timeout=120)
h = sbx.commands.run("sleep 2; echo done", background=True)
print("started", sbx.sandbox_id)
print(h.wait().stdout, end="")
"#;
    let mut py = s.sdk(script, &s.key()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = std::io::BufReader::new(py.stdout.take().unwrap()).lines();
    let first = lines.next().expect("the script printed nothing").unwrap();
    let id = first.strip_prefix("started ").unwrap_or_else(|| panic!("{first}")).to_string();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(s.child.id() as i32), nix::sys::signal::SIGTERM).unwrap();
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let done = py.wait_with_output().unwrap();
    assert!(done.status.success(), "{}\nserver said: {}", stderr(&done), s.stderr());
    assert_eq!(rest, ["done"], "the command in flight ended with its output");
    let status = s.child.wait().unwrap();
    assert!(status.success(), "serve exits 0 on SIGTERM: {status:?}; {}", s.stderr());
    assert!(TcpStream::connect(&s.addr).is_err(), "nothing listens any more");
    let state = w.sbx(&["inspect", &id]);
    assert_eq!(json(&state)["state"], "running", "the sandbox outlives the server");
}

/// stderr comes as it is made too, a command's pid is its pid in the
/// sandbox, the SDK lists what runs, and its kill signals that process.
#[test]
fn stderr_streams_and_the_pid_is_the_sandboxes() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
import time
from e2b import Sandbox, CommandExitException
sbx = Sandbox.create("debian")
try:
    seen = []
    sbx.commands.run("echo a >&2; sleep 3; echo b >&2", on_stderr=lambda l: seen.append((l, time.monotonic())))
    ended = time.monotonic()
    assert [l for l, _ in seen] == ["a\n", "b\n"], seen
    assert ended - seen[0][1] > 1.5, "stderr came at the end"
    h = sbx.commands.run("sleep 3", background=True)
    comm = sbx.commands.run("cat /proc/%d/comm" % h.pid).stdout
    assert comm == "sleep\n", (h.pid, comm)
    assert h.wait().exit_code == 0
    h = sbx.commands.run("sleep 30", background=True)
    listed = {p.pid: p for p in sbx.commands.list()}
    assert h.pid in listed and listed[h.pid].cmd == "/bin/bash", listed
    assert listed[h.pid].args == ["-l", "-c", "sleep 30"], listed[h.pid].args
    assert h.kill() is True
    try:
        h.wait()
        raise AssertionError("a killed command ended well")
    except CommandExitException as e:
        assert e.exit_code == -1, e.exit_code
    assert sbx.commands.kill(h.pid) is False, "gone already"
    assert h.pid not in [p.pid for p in sbx.commands.list()]
    assert sbx.get_info().state == "running", "the sandbox outlives the command"
    print("ok")
finally:
    sbx.kill()
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("stderr and pid (server said: {})", s.stderr()));
    assert_eq!(stdout(&out), "ok\n");
}

/// files.read and files.write: bytes exactly (several MiB, through the
/// checked transfer code), the SDK's own exception for a missing file, a
/// directory or a link refused, never followed.
#[test]
fn the_e2b_sdk_reads_and_writes_files_byte_exact() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
import hashlib
from e2b import Sandbox, FileNotFoundException, SandboxException
sbx = Sandbox.create("debian")
try:
    sbx.commands.run("head -c 5000000 /dev/urandom > /tmp/big; printf 'a\\0b\\xff' > /tmp/small; ln -s /etc/passwd /tmp/link")
    data = sbx.files.read("/tmp/big", format="bytes")
    want = sbx.commands.run("sha256sum /tmp/big").stdout.split()[0]
    assert len(data) == 5000000 and hashlib.sha256(data).hexdigest() == want, len(data)
    assert sbx.files.read("/tmp/small", format="bytes") == b"a\0b\xff"
    try:
        sbx.files.read("/tmp/nothing")
        raise AssertionError("a missing file was read")
    except FileNotFoundException as e:
        print("missing", e)
    for p in ["/tmp", "/tmp/link"]:
        try:
            sbx.files.read(p)
            raise AssertionError(p + " was read")
        except SandboxException as e:
            print("refused", p, e)
    # Writes: bytes and str as multipart, a file object as an octet stream,
    # parents made, a link refused (never followed), read back byte-exact.
    import io, os
    blob = os.urandom(3 * 1024 * 1024)
    info = sbx.files.write("/tmp/new/dir/blob", blob)
    assert (info.path, info.name) == ("/tmp/new/dir/blob", "blob"), info
    assert sbx.files.read("/tmp/new/dir/blob", format="bytes") == blob
    sbx.files.write("/tmp/text", "h\u00e9llo\n")
    assert sbx.commands.run("cat /tmp/text").stdout == "h\u00e9llo\n"
    sbx.files.write("/tmp/stream", io.BytesIO(b"\x00\xffstreamed"))
    assert sbx.files.read("/tmp/stream", format="bytes") == b"\x00\xffstreamed"
    try:
        sbx.files.write("/tmp/link", "not through the link")
        raise AssertionError("wrote through a link")
    except SandboxException as e:
        assert "refusing to write through it" in str(e), e
    assert sbx.commands.run("ls -l /tmp/link").stdout.startswith("l"), "the link is left as it was"
    try:
        sbx.files.write("/tmp/x", "x", user="root")
        raise AssertionError("user=root wrote")
    except SandboxException as e:
        print("root", e)
    print("ok")
finally:
    sbx.kill()
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("files.read (server said: {})", s.stderr()));
    let text = stdout(&out);
    assert!(text.ends_with("ok\n") && text.contains("missing") && text.matches("refused").count() == 2, "{text}");
    assert!(text.contains("sbx sandboxes have no root"), "{text}");
}

#[test]
fn running_out_of_file_descriptors_never_stops_the_server() {
    let w = World::new();
    // 64 descriptors: more connections than that, at once, than it can hold.
    let s = Server::start_under(&w, &[], &["prlimit", "--nofile=64:64"]);
    let held: Vec<TcpStream> = (0..100).filter_map(|_| TcpStream::connect(&s.addr).ok()).collect();
    assert!(!held.is_empty());
    std::thread::sleep(Duration::from_millis(500));
    drop(held);
    let answered = until(Duration::from_secs(10), || {
        use std::io::{Read, Write};
        let Ok(mut c) = TcpStream::connect(&s.addr) else { return false };
        let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
        let mut got = String::new();
        let _ = c.write_all(b"GET /v2/sandboxes HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let _ = c.read_to_string(&mut got);
        got.starts_with("HTTP/1.1 401")
    });
    assert!(answered.is_some(), "the server stopped answering: {}", s.stderr());
}

/// files.read of what is not a regular file in the sandbox (a FIFO: never
/// opened, so nothing hangs) is the SDK's invalid-argument error, not a 500.
#[test]
fn reading_a_fifo_is_refused_at_once() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
import time
from e2b import Sandbox
from e2b.exceptions import InvalidArgumentException
sb = Sandbox.create("debian", timeout=120)
try:
    sb.commands.run("/bin/busybox mkfifo /tmp/fifo")
    t = time.monotonic()
    try:
        sb.files.read("/tmp/fifo")
        raise AssertionError("a FIFO was read")
    except InvalidArgumentException as e:
        print("refused", "not a regular file" in str(e), time.monotonic() - t < 10)
finally:
    sb.kill()
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("a FIFO (server said: {})", s.stderr()));
    assert_eq!(stdout(&out), "refused True True\n");
}

#[test]
fn the_e2b_sdk_lists_stats_makes_moves_and_removes() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
from e2b import Sandbox, FileNotFoundException, FileType
sbx = Sandbox.create("debian")
try:
    sbx.commands.run("mkdir -p /tmp/t/a/b /tmp/outside && echo keep > /tmp/outside/keep && echo hi > /tmp/t/a/f"
                     " && echo deep > /tmp/t/a/b/g && ln -s /tmp/outside /tmp/t/out && : > \"/tmp/t/$(printf 'bad\\xff')\"")
    top = {e.name: e for e in sbx.files.list("/tmp/t")}
    assert sorted(top) == ["a", "bad\ufffd", "out"], sorted(top)
    assert top["a"].type == FileType.DIR and top["a"].path == "/tmp/t/a", top["a"]
    out = top["out"]
    assert (out.type, out.symlink_target, out.path) == (FileType.SYMLINK, "/tmp/outside", "/tmp/t/out"), out
    deep = sorted(e.path for e in sbx.files.list("/tmp/t", depth=3))
    assert deep == ["/tmp/t/a", "/tmp/t/a/b", "/tmp/t/a/b/g", "/tmp/t/a/f", "/tmp/t/bad\ufffd", "/tmp/t/out"], deep
    assert sorted(e.path for e in sbx.files.list("/tmp/t", depth=2)) == [d for d in deep if d != "/tmp/t/a/b/g"]
    assert sbx.files.exists("/tmp/t/a/f") and not sbx.files.exists("/tmp/t/nothing")
    info = sbx.files.get_info("/tmp/t/a/f")
    assert (info.name, info.type, info.size, info.path) == ("f", FileType.FILE, 3, "/tmp/t/a/f"), info
    assert info.permissions.startswith("-rw") and info.modified_time.year >= 2024, info
    assert sbx.files.get_info("/tmp/t/out").type == FileType.SYMLINK, "a link is stat'ed itself"
    assert sbx.files.make_dir("/tmp/t/new/deeper") is True
    assert sbx.files.make_dir("/tmp/t/new/deeper") is False, "a second make_dir says it was there"
    assert sbx.files.exists("/tmp/t/new/deeper") and sbx.files.get_info("/tmp/t/new/deeper").type == FileType.DIR
    moved = sbx.files.rename("/tmp/t/a/f", "/tmp/t/new/moved/f2")
    assert (moved.name, moved.path, moved.type) == ("f2", "/tmp/t/new/moved/f2", FileType.FILE), moved
    assert not sbx.files.exists("/tmp/t/a/f") and sbx.files.read("/tmp/t/new/moved/f2") == "hi\n"
    # A link at the destination is replaced, never written through.
    sbx.commands.run("ln -s /tmp/outside/keep /tmp/t/lnk")
    sbx.files.rename("/tmp/t/new/moved/f2", "/tmp/t/lnk")
    assert sbx.files.get_info("/tmp/t/lnk").type == FileType.FILE
    assert sbx.files.read("/tmp/outside/keep") == "keep\n"
    for call in [lambda: sbx.files.get_info("/tmp/t/nothing"), lambda: sbx.files.list("/tmp/nothing"),
                 lambda: sbx.files.remove("/tmp/t/nothing"), lambda: sbx.files.rename("/tmp/t/nothing", "/tmp/t/x")]:
        try:
            call()
            raise AssertionError("a missing path was found")
        except FileNotFoundException as e:
            print("missing", e)
    # The link out of the tree goes, its target stays; so does the whole tree.
    sbx.files.remove("/tmp/t/out")
    assert not sbx.files.exists("/tmp/t/out") and sbx.files.exists("/tmp/outside/keep")
    sbx.commands.run("ln -s /tmp/outside /tmp/t/a/b/out2")
    sbx.files.remove("/tmp/t")
    assert not sbx.files.exists("/tmp/t")
    assert sbx.files.read("/tmp/outside/keep") == "keep\n", "nothing behind a link was removed"
    print("ok")
finally:
    sbx.kill()
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("files API (server said: {})", s.stderr()));
    let text = stdout(&out);
    assert!(text.ends_with("ok\n") && text.matches("missing").count() == 4, "{text}");
}

//! `sbx serve`'s `process.Process` beyond Start: stdin (SendInput,
//! StreamInput, CloseStdin), PTYs (Update, input, kill), Connect from a
//! second client, driven by the real E2B Python SDK; and as the attacker
//! would: another sandbox's pid, oversized input, input after the end,
//! bytes that are not UTF-8.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use super::support::serve::*;
use super::support::*;

/// The command sees exactly the bytes sent (SendInput and StreamInput, NUL,
/// 0xff and escapes included) and then EOF; what it prints that is not
/// UTF-8 arrives byte-exact in valid JSON.
#[test]
fn stdin_reaches_the_command_byte_exact_then_eof() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
import base64, hashlib, json, os, struct, urllib.request
from e2b import Sandbox
sb = Sandbox.create("debian", timeout=120)
try:
    h = sb.commands.run("sha256sum", stdin=True, background=True)
    sent = [b"hello ", b"\x00\xff\x1b[31m\r\n", b"x" * 200000]
    sb.commands.send_stdin(h.pid, sent[0])
    sb.commands.send_stdin(h.pid, sent[1])
    sb.commands.stream_input(h.pid, [sent[2][:100000], sent[2][100000:]])
    sb.commands.close_stdin(h.pid)
    r = h.wait()
    print(r.stdout.split()[0] == hashlib.sha256(b"".join(sent)).hexdigest(), r.exit_code)
    h = sb.commands.run("head -c 5", stdin=True, background=True)
    sb.commands.send_stdin(h.pid, "abcdefgh")
    print(repr(h.wait().stdout))
    # Raw bytes out: every frame is strict JSON, the bytes come back exact.
    msg = json.dumps({"process": {"cmd": "/bin/bash", "args": ["-c", r"printf '\xff\x00\x1b]0;t\x07\xc3'"]}}).encode()
    req = urllib.request.Request(os.environ["E2B_API_URL"] + "/process.Process/Start",
        data=struct.pack(">BI", 0, len(msg)) + msg, headers={"Content-Type": "application/connect+json",
        "E2b-Sandbox-Id": sb.sandbox_id, "X-Access-Token": sb._envd_access_token})
    body, out = urllib.request.urlopen(req).read(), b""
    while body:
        n = struct.unpack(">I", body[1:5])[0]
        ev = json.loads(body[5:5 + n].decode("utf-8")).get("event", {})
        out += base64.b64decode(ev.get("data", {}).get("stdout", ""))
        body = body[5 + n:]
    print(out == b"\xff\x00\x1b]0;t\x07\xc3")
finally:
    sb.kill()
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("stdin (server said: {})", s.stderr()));
    assert_eq!(stdout(&out), "True 0\n'abcde'\nTrue\n");
}

/// What an attacker (or a mistake) sends: input for another sandbox's pid
/// with its own token, input over the cap, input to a command started
/// without stdin, input after the end: each refused in the SDK's own
/// exceptions, and the command that did take input is unharmed.
#[test]
fn input_that_is_not_the_commands_own_is_refused() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
from e2b import Sandbox
def err(f):
    try:
        f()
        return "ok"
    except Exception as e:
        return type(e).__name__
a, b = Sandbox.create("debian", timeout=120), Sandbox.create("debian", timeout=120)
try:
    h = a.commands.run("cat", stdin=True, background=True)
    print(err(lambda: b.commands.send_stdin(h.pid, "evil")), err(lambda: b.commands.close_stdin(h.pid)))
    print(err(lambda: b.pty.resize(h.pid, __import__("e2b").PtySize(rows=5, cols=5))))
    print(err(lambda: b.commands.connect(h.pid, timeout=5)))
    print(err(lambda: a.commands.send_stdin(h.pid, b"x" * (300 * 1024))))
    print(err(lambda: a.commands.send_stdin(h.pid, b"y" * (256 * 1024))))
    quiet = a.commands.run("sleep 30", background=True)
    print(err(lambda: a.commands.send_stdin(quiet.pid, "z")))
    a.commands.send_stdin(h.pid, "fine\n")
    a.commands.close_stdin(h.pid)
    r = h.wait()
    print(len(r.stdout), r.stdout.endswith("yfine\n"))
    print(err(lambda: a.commands.send_stdin(h.pid, "late")), err(lambda: a.commands.close_stdin(h.pid)))
    print(err(lambda: a.commands.send_stdin(999999, "x")))
    quiet.kill()
finally:
    a.kill(); b.kill()
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("hostile input (server said: {})", s.stderr()));
    let want = format!(
        "NotFoundException NotFoundException\nNotFoundException\nNotFoundException\n{}\nok\n{}\n{}\nNotFoundException NotFoundException\nNotFoundException\n",
        "InvalidArgumentException",
        "SandboxException",
        format_args!("{} True", 256 * 1024 + 5),
    );
    assert_eq!(stdout(&out), want);
}

/// `sandbox.pty`: a login bash on a terminal of the asked size; input,
/// a resize the command sees (`stty size`), escapes and bytes that are
/// not UTF-8 back as they were; kill ends it.
#[test]
fn a_pty_takes_input_resizes_and_is_killed() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
import time
from e2b import Sandbox, PtySize
sb = Sandbox.create("debian", timeout=120)
try:
    h = sb.pty.create(PtySize(rows=24, cols=80), timeout=60)
    sb.pty.send_stdin(h.pid, b"busybox stty size; busybox tty\n")
    time.sleep(1)
    sb.pty.resize(h.pid, PtySize(rows=30, cols=100))
    sb.pty.send_stdin(h.pid, b"busybox stty size; printf '\\xff\\x1b[31mX\\n'; exit 3\n")
    got = bytearray()
    try:
        h.wait(on_pty=lambda b: got.extend(b))
    except Exception as e:
        print(type(e).__name__, e.exit_code)
    print(b"24 80" in got, b"/dev/pts/" in got, b"30 100" in got, b"\xff\x1b[31mX" in got)
    k = sb.pty.create(PtySize(rows=10, cols=40), timeout=60)
    print(sb.pty.kill(k.pid))
    try:
        k.wait()
    except Exception as e:
        print(type(e).__name__, e.exit_code)
    print(sb.pty.kill(k.pid), [p.pid for p in sb.commands.list()])
finally:
    sb.kill()
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("pty (server said: {})", s.stderr()));
    assert_eq!(stdout(&out), "CommandExitException 3\nTrue True True True\nTrue\nCommandExitException -1\nFalse []\n");
}

/// A second SDK client (another process) connects to a command the first
/// started: both get its output from then on; when the first goes away
/// the command lives on for the second, which can still feed it and sees
/// its end.
#[test]
fn a_second_client_connects_and_keeps_the_command() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let first = r#"
import sys
from e2b import Sandbox
sb = Sandbox.create("debian", timeout=120)
h = sb.commands.run("cat", stdin=True, background=True, timeout=0)
print(sb.sandbox_id, h.pid, flush=True)
for out, err, _ in h:
    if out:
        print("first:", out.strip(), flush=True)
"#;
    let mut a = s.sdk(first, &s.key()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(a.stdout.take().unwrap()).lines();
    let head = lines.next().expect("the first client says the sandbox and pid").unwrap();
    let (id, pid) = head.split_once(' ').unwrap();
    let second = format!(
        r#"
import sys, time
from e2b import Sandbox
sb = Sandbox.connect("{id}")
h = sb.commands.connect({pid}, timeout=60)
sb.commands.send_stdin({pid}, "one\n")
print("ready", flush=True)
sys.stdin.readline()
sb.commands.send_stdin({pid}, "two\n")
sb.commands.close_stdin({pid})
r = h.wait()
print(repr(r.stdout), r.exit_code, [p.pid for p in sb.commands.list()])
"#
    );
    let mut b = s.sdk(&second, &s.key()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut b_lines = BufReader::new(b.stdout.take().unwrap()).lines();
    assert_eq!(b_lines.next().map(Result::unwrap).as_deref(), Some("ready"), "{}", s.stderr());
    assert_eq!(lines.next().map(Result::unwrap).as_deref(), Some("first: one"), "the first client gets it too");
    // The first client goes; the second still watches, so cat runs on.
    let _ = a.kill();
    let _ = a.wait();
    std::thread::sleep(std::time::Duration::from_secs(1));
    writeln!(b.stdin.as_mut().unwrap()).unwrap();
    let end = b_lines.next().map(Result::unwrap);
    let _ = b.wait();
    assert_eq!(end.as_deref(), Some("'one\\ntwo\\n' 0 []"), "{}", s.stderr());
}

/// A command outlives its clients, as envd's do: a silent one whose
/// client went away still runs and is listed; `disconnect()` then
/// `connect(pid)` picks it up again (input and output); and a sandbox has
/// at most 16 commands nobody watches: the 17th left is killed at once.
#[test]
fn a_command_outlives_its_clients_up_to_a_cap() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
import os, json, struct, http.client, time
from e2b import Sandbox
sb = Sandbox.create("debian", timeout=120)
def start_and_leave(cmd):
    c = http.client.HTTPConnection(os.environ["E2B_API_URL"].split("//")[1], timeout=30)
    msg = json.dumps({"process": {"cmd": "/bin/bash", "args": ["-c", cmd]}}).encode()
    c.request("POST", "/process.Process/Start", body=struct.pack(">BI", 0, len(msg)) + msg, headers={
        "Content-Type": "application/connect+json", "E2b-Sandbox-Id": sb.sandbox_id, "X-Access-Token": sb._envd_access_token})
    r = c.getresponse()
    head = r.read(5)
    pid = json.loads(r.read(struct.unpack(">I", head[1:])[0]))["event"]["start"]["pid"]
    r.close(); c.close()
    return pid
alive = lambda pids: sb.commands.run(" ".join(f"test -e /proc/{p} && echo {p};" for p in pids) + " true").stdout.split()
try:
    pid = start_and_leave("sleep 1000")
    time.sleep(2)
    print(alive([pid]) == [str(pid)], pid in [p.pid for p in sb.commands.list()])
    print(sb.commands.kill(pid))
    h = sb.commands.run("read x; echo got $x", stdin=True, background=True)
    h.disconnect()
    time.sleep(1)
    h2 = sb.commands.connect(h.pid)
    sb.commands.send_stdin(h.pid, "back\n")
    print(repr(h2.wait().stdout))
    pids = [start_and_leave("sleep 1000") for _ in range(17)]
    for _ in range(50):
        if len(alive(pids)) <= 16:
            break
        time.sleep(0.2)
    time.sleep(1)
    print(alive(pids) == [str(p) for p in pids[:16]])
finally:
    sb.kill()
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("clients gone (server said: {})", s.stderr()));
    assert_eq!(stdout(&out), "True True\nTrue\n'got back\\n'\nTrue\n");
}

/// A server that dies (SIGKILL, no drain) leaves nothing of what it
/// started running: the helper sees its docker exec's stdin end and
/// kills the command, with stdin or without, on a pipe or a terminal.
#[test]
fn commands_end_when_the_server_dies() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let mut s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
from e2b import Sandbox, PtySize
sb = Sandbox.create("debian", timeout=120)
a = sb.commands.run("sleep 1000", background=True, timeout=0)
b = sb.commands.run("cat", stdin=True, background=True, timeout=0)
c = sb.pty.create(PtySize(rows=24, cols=80), timeout=0)
print(sb.sandbox_id, a.pid, b.pid, c.pid)
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("starting (server said: {})", s.stderr()));
    let said = stdout(&out);
    let mut words = said.split_whitespace();
    let id = words.next().unwrap().to_string();
    let pids: Vec<String> = words.map(str::to_string).collect();
    let check = format!("for p in {}; do test -e /proc/$p && echo $p; done; true", pids.join(" "));
    let alive = || stdout(&w.sbx(&["exec", &id, "--", "/bin/bash", "-c", &check]));
    assert_eq!(alive().split_whitespace().count(), 3, "all three outlive their client: {}", s.stderr());
    let _ = s.child.kill();
    let _ = s.child.wait();
    let gone = until(std::time::Duration::from_secs(10), || alive().trim().is_empty());
    assert!(gone.is_some(), "still running after the server died: {}", alive());
}

/// Killing a command takes what it started in the background too: a
/// child that holds the command's output open would otherwise keep the
/// helper, and the host's docker exec, running until the sandbox ends.
#[test]
fn a_kill_takes_the_commands_background_children() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
import time
from e2b import Sandbox
sb = Sandbox.create("debian", timeout=120)
h = sb.commands.run("sleep 1001 & sleep 1002", background=True)
time.sleep(1)
print(sb.sandbox_id)
print(h.kill())
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("kill (server said: {})", s.stderr()));
    let text = stdout(&out);
    let id = text.lines().next().unwrap().to_string();
    assert_eq!(text.lines().nth(1), Some("True"), "{text}");
    let left = until(std::time::Duration::from_secs(10), || {
        let top = stdout(&docker(&["top", &id]));
        !top.contains("sleep 100")
    });
    assert!(left.is_some(), "still running after the kill: {}", stdout(&docker(&["top", &id])));
}

//! `sbx serve` driven by the E2B SDK's other shapes: the async client
//! (`AsyncSandbox`), and many clients at once from one process.

use std::path::Path;

use super::support::serve::*;
use super::support::*;

/// Appended to an async SDK script, after everything it checks: the
/// interpreter's teardown is skipped, where the SDK's HTTP client
/// (connectrpc over pyqwest, native threads of its own) aborts now and
/// then ("Fatal Python error: Aborted", no Python frame; seen in CI after
/// the script had printed ok), as serve_fs's async watch does.
const TEARDOWN: &str = "\nimport os as _os, sys as _sys\n_sys.stdout.flush()\n_os._exit(0)\n";

/// The async client, as docs/serve.md shows it, then the whole round:
/// create, commands with sync and async callbacks, files, list, kill.
#[test]
fn the_async_sdk_creates_runs_writes_lists_and_kills() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/serve.md")).unwrap();
    let start = page.find("```py\n").expect("docs/serve.md has the async example") + "```py\n".len();
    let example = &page[start..start + page[start..].find("```").unwrap()];
    let out = s.python(&format!("{example}{TEARDOWN}"), &s.key());
    assert_success(&out, &format!("the async example (server said: {})", s.stderr()));
    assert_eq!(stdout(&out), "hi\n");
    let script = r#"
import asyncio, time
from e2b import AsyncSandbox, CommandExitException

async def main():
    sbx = await AsyncSandbox.create("debian", timeout=120, metadata={"shape": "async"})
    try:
        out, err = [], []
        async def on_out(line):
            await asyncio.sleep(0)
            out.append((line, time.monotonic()))
        r = await sbx.commands.run("echo one; echo warn >&2; sleep 2; echo two",
                                   on_stdout=on_out, on_stderr=err.append)
        ended = time.monotonic()
        assert (r.stdout, r.stderr, r.exit_code) == ("one\ntwo\n", "warn\n", 0), r
        assert [l for l, _ in out] == ["one\n", "two\n"] and err == ["warn\n"], (out, err)
        assert ended - out[0][1] > 1.0, "output came at the end, not as it was made"
        try:
            await sbx.commands.run("exit 7")
            raise AssertionError("a failing command did not raise")
        except CommandExitException as e:
            assert e.exit_code == 7, e
        await sbx.files.write("/tmp/dir/blob", b"\x00\xffasync")
        assert await sbx.files.read("/tmp/dir/blob", format="bytes") == b"\x00\xffasync"
        assert [e.name for e in await sbx.files.list("/tmp/dir")] == ["blob"]
        listed = await AsyncSandbox.list().next_items()
        assert [(x.sandbox_id, x.metadata) for x in listed] == [(sbx.sandbox_id, {"shape": "async"})], listed
    finally:
        assert await sbx.kill()
    assert await AsyncSandbox.list().next_items() == []
    print("ok")

asyncio.run(main())
"#;
    let script = format!("{script}{TEARDOWN}");
    let out = s.python(&script, &s.key());
    assert_success(&out, &format!("the async SDK (server said: {})", s.stderr()));
    assert_eq!(stdout(&out), "ok\n");
    assert_eq!(json(&w.sbx(&["ls", "--json"])), serde_json::json!([]), "kill destroyed them");
}

/// 20 SDK clients at once (asyncio tasks in one process), each with a
/// sandbox of its own: create, a command, a file written and read, kill.
/// Every one succeeds, each sees only its own, and nothing is left.
#[test]
fn twenty_sdk_clients_at_once() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    // Generous timeouts: 20 creates share a 2-core machine's docker with other work.
    let script = r#"
import asyncio
from e2b import AsyncSandbox

SLOW = dict(request_timeout=600)

async def client(i):
    sbx = await AsyncSandbox.create("debian", timeout=900, metadata={"client": str(i)}, **SLOW)
    try:
        r = await sbx.commands.run(f"echo client-{i}", timeout=600, **SLOW)
        assert (r.stdout, r.exit_code) == (f"client-{i}\n", 0), (i, r)
        await sbx.files.write(f"/tmp/f{i}", f"data-{i}", **SLOW)
        assert await sbx.files.read(f"/tmp/f{i}", **SLOW) == f"data-{i}", i
        assert await sbx.files.list("/tmp", **SLOW) and not await sbx.files.exists(f"/tmp/f{i + 1}", **SLOW)
        return sbx.sandbox_id
    finally:
        assert await sbx.kill(**SLOW), i

async def main():
    got = await asyncio.gather(*(client(i) for i in range(20)), return_exceptions=True)
    failed = [(i, repr(g)) for i, g in enumerate(got) if isinstance(g, BaseException)]
    assert not failed, failed
    assert len(set(got)) == 20, got
    assert await AsyncSandbox.list(**SLOW).next_items() == []
    print("ok", len(got))

asyncio.run(main())
"#;
    let script = format!("{script}{TEARDOWN}");
    let out = s.python(&script, &s.key());
    assert_success(&out, &format!("20 clients (server said: {})", s.stderr()));
    assert_eq!(stdout(&out), "ok 20\n");
    assert_eq!(json(&w.sbx(&["ls", "--json"])), serde_json::json!([]), "every sandbox gone");
}

/// A client's pool keeps an idle connection for minutes (the E2B SDK: 300
/// s). A server that closes it after its 30 s header timeout races the
/// client's next request on it, which then fails with "connection closed
/// before message completed": a served connection lives past that, one
/// only ever refused does not.
#[test]
fn a_served_connection_outlives_the_header_timeout() {
    use std::io::{Read, Write};
    let w = World::new();
    let s = Server::start(&w, &[]);
    let ask = |c: &mut std::net::TcpStream, key: &str| -> String {
        let req = format!("GET /v2/sandboxes HTTP/1.1\r\nHost: x\r\nX-API-KEY: {key}\r\n\r\n");
        if c.write_all(req.as_bytes()).is_err() {
            return String::new();
        }
        let mut buf = [0u8; 4096];
        let n = c.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let mut served = std::net::TcpStream::connect(&s.addr).unwrap();
    let mut refused = std::net::TcpStream::connect(&s.addr).unwrap();
    served.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    refused.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    assert!(ask(&mut served, &s.key()).starts_with("HTTP/1.1 200"), "{}", s.stderr());
    assert!(ask(&mut refused, "not-the-key-at-all").starts_with("HTTP/1.1 401"));
    std::thread::sleep(std::time::Duration::from_secs(35));
    let again = ask(&mut served, &s.key());
    assert!(again.starts_with("HTTP/1.1 200"), "the served connection was closed while idle: {again:?}");
    assert_eq!(ask(&mut refused, "not-the-key-at-all"), "", "a refused connection idled 35 s");
}

//! `sbx mcp` driven by the real MCP client: the `mcp` Python SDK 2.3.0
//! from PyPI, in the virtualenv scripts/test makes at [`VENV`] (made here
//! when missing, never skipped). The client starts `sbx mcp` itself, as
//! Claude Desktop or Claude Code would; the sandboxes come from the Debian
//! image with bash that the serve tests use (support/serve.rs).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::support::serve::{bash_image, venv_python};
use super::support::*;

pub const VENV: &str = "/var/cache/sbx-test/mcp-2.3.0";
pub const SDK: &str = "mcp==2.3.0";

/// The venv's python, with the pinned SDK importable (made once per machine).
fn mcp_python() -> PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| venv_python(VENV, SDK, "mcp.client.stdio")).clone()
}

/// Destroys what is left in the world's data dir when a test ends, however it ends.
struct Sweep<'w>(&'w World);

impl Drop for Sweep<'_> {
    fn drop(&mut self) {
        for id in ids(self.0) {
            let _ = self.0.sbx(&["destroy", &id]);
        }
    }
}

/// The ids `sbx ls --json` lists in the world's data dir.
fn ids(w: &World) -> Vec<String> {
    let out = w.sbx(&["ls", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(json!([]));
    v.as_array().into_iter().flatten().filter_map(|r| r["id"].as_str().map(str::to_string)).collect()
}

/// The client's side: connects with `mcp.Client` to `sbx mcp` (argv in
/// SBX_ARGV, JSON), runs `body` (an async function `body(c)`), prints what it returns as JSON.
const CLIENT: &str = r#"
import asyncio, base64, json, os, sys
from mcp import Client
from mcp.client.stdio import StdioServerParameters

argv = json.loads(os.environ["SBX_ARGV"])

async def call(c, name, args):
    r = await c.call_tool(name, args)
    return {"error": r.is_error, "sc": r.structured_content, "text": r.content[0].text}

async def main():
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with Client(params) as c:
        out = await body(c)
    print(json.dumps(out))

"#;

fn client(w: &World, extra: &[&str], body: &str) -> Value {
    let mut argv = vec![SBX.to_string()];
    argv.extend(w.dir_args().iter().map(|a| a.to_string_lossy().to_string()));
    argv.push("mcp".into());
    argv.extend(extra.iter().map(|s| s.to_string()));
    let script = format!("{CLIENT}\n{body}\nasyncio.run(main())\n");
    let out = Command::new(mcp_python())
        .args(["-u", "-c", &script])
        .env("SBX_ARGV", serde_json::to_string(&argv).unwrap())
        .stdin(Stdio::null())
        .output()
        .expect("spawn python");
    assert_success(&out, "the MCP client");
    let text = stdout(&out);
    serde_json::from_str(text.trim().lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The real client starts `sbx mcp`, lists the tools and calls each; what
/// the session made is destroyed when it ends, but what it kept.
#[test]
fn the_mcp_client_lists_the_tools_and_calls_each() {
    let _engine = loading_the_engine();
    let w = World::new();
    let _sweep = Sweep(&w);
    let img = bash_image(&w);
    let template = format!("debian={}", img.0);
    let body = r#"
async def body(c):
    o = {}
    o["tools"] = sorted(t.name for t in (await c.list_tools()).tools)
    o["described"] = all("Cannot" in t.description for t in (await c.list_tools()).tools)
    made = await call(c, "create_sandbox", {"template": "debian", "ttl": "10m"})
    assert not made["error"], made
    sid = made["sc"]["sandbox_id"]
    o["sid"] = sid
    kept = await call(c, "create_sandbox", {"template": "debian", "keep": True, "env": {"GREETING": "hi"}})
    o["kept"] = kept["sc"]["sandbox_id"]
    o["argv"] = (await call(c, "run_command", {"sandbox_id": sid, "argv": ["/bin/bash", "-c", "echo out; echo err >&2; exit 3"]}))["sc"]
    o["shell"] = (await call(c, "run_command", {"sandbox_id": o["kept"], "shell": "echo $GREETING from $(id -u)"}))["sc"]
    data = bytes(range(256)) * 4096 + b"\x00\xff end"
    w = await call(c, "write_file", {"sandbox_id": sid, "path": "/tmp/work/blob.bin", "base64": base64.b64encode(data).decode()})
    assert not w["error"], w
    r = await call(c, "read_file", {"sandbox_id": sid, "path": "/tmp/work/blob.bin", "encoding": "base64", "max_bytes": 2000000})
    o["blob_exact"] = base64.b64decode(r["sc"]["base64"]) == data
    o["sum"] = (await call(c, "run_command", {"sandbox_id": sid, "shell": "sha256sum /tmp/work/blob.bin"}))["sc"]["stdout"]
    import hashlib
    o["want_sum"] = hashlib.sha256(data).hexdigest()
    await call(c, "write_file", {"sandbox_id": sid, "path": "/tmp/work/note.txt", "text": "héllo\nwörld\n"})
    o["text"] = (await call(c, "read_file", {"sandbox_id": sid, "path": "/tmp/work/note.txt"}))["sc"]["text"]
    o["big"] = (await call(c, "read_file", {"sandbox_id": sid, "path": "/tmp/work/blob.bin", "max_bytes": 1000}))
    o["ls"] = (await call(c, "list_dir", {"sandbox_id": sid, "path": "/tmp/work"}))["sc"]["entries"]
    o["allow"] = await call(c, "allow_hosts", {"sandbox_id": sid, "hosts": ["pypi.org"]})
    o["listed"] = (await call(c, "list_sandboxes", {}))["sc"]["sandboxes"]
    o["foreign"] = await call(c, "run_command", {"sandbox_id": "sbx-0123456789ab", "argv": ["true"]})
    o["no_template"] = await call(c, "create_sandbox", {"template": "nope"})
    o["bad_arg"] = await call(c, "run_command", {"sandbox_id": sid, "argv": ["true"], "user": "root"})
    third = (await call(c, "create_sandbox", {"template": "debian"}))["sc"]["sandbox_id"]
    o["destroyed"] = (await call(c, "destroy_sandbox", {"sandbox_id": third}))["sc"]
    o["after"] = await call(c, "run_command", {"sandbox_id": third, "argv": ["true"]})
    return o
"#;
    let o = client(&w, &["--template", &template], body);
    let names: Vec<&str> = o["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(
        names,
        [
            "allow_hosts",
            "create_sandbox",
            "deny_hosts",
            "destroy_sandbox",
            "list_dir",
            "list_sandboxes",
            "read_file",
            "run_command",
            "write_file"
        ]
    );
    assert_eq!(o["described"], true, "each description says what it cannot do");
    assert_eq!(o["argv"]["exit_code"], 3, "{}", o["argv"]);
    assert_eq!((o["argv"]["stdout"].as_str(), o["argv"]["stderr"].as_str()), (Some("out\n"), Some("err\n")));
    let shell = o["shell"]["stdout"].as_str().unwrap();
    assert!(shell.starts_with("hi from ") && !shell.contains("from 0"), "the create's env, not root: {shell}");
    assert_eq!(o["blob_exact"], true, "base64 round trip byte-exact");
    assert!(o["sum"].as_str().unwrap().starts_with(o["want_sum"].as_str().unwrap()), "{o}");
    assert_eq!(o["text"], "héllo\nwörld\n");
    assert_eq!(o["big"]["error"], true, "over max_bytes is refused: {}", o["big"]);
    assert!(o["big"]["text"].as_str().unwrap().contains("over max_bytes 1000"), "{}", o["big"]);
    let ls: Vec<&str> = o["ls"].as_array().unwrap().iter().filter_map(|e| e["path"].as_str()).collect();
    assert_eq!(ls, ["/tmp/work/blob.bin", "/tmp/work/note.txt"], "{}", o["ls"]);
    assert_eq!(o["ls"][0]["size"], 256 * 4096 + 6);
    // Made without --allow (here or in the create): no gate, so no host can be allowed later.
    assert_eq!(o["allow"]["error"], true, "{}", o["allow"]);
    assert!(o["allow"]["text"].as_str().unwrap().contains("egress"), "{}", o["allow"]);
    assert_eq!(o["listed"].as_array().unwrap().len(), 2, "{}", o["listed"]);
    assert!(o["foreign"]["text"].as_str().unwrap().contains("not a sandbox of this session"), "{}", o["foreign"]);
    assert!(o["no_template"]["text"].as_str().unwrap().contains("no template \"nope\""), "{}", o["no_template"]);
    assert!(o["bad_arg"]["text"].as_str().unwrap().contains("no argument \"user\""), "{}", o["bad_arg"]);
    assert_eq!(o["destroyed"]["destroyed"], true);
    assert_eq!(o["after"]["error"], true, "a destroyed sandbox is no longer the session's");
    // The session is over: what it made is gone, but the one it kept.
    let (sid, kept) = (o["sid"].as_str().unwrap(), o["kept"].as_str().unwrap());
    assert_eq!(ids(&w), [kept.to_string()], "only the kept sandbox is left (not {sid})");
    let expiry = json(&w.sbx(&["inspect", kept]));
    assert!(expiry["expires_at"].is_string(), "a kept sandbox still has its TTL: {expiry}");
}

/// What a hostile command sends back comes back valid and bounded: bytes
/// that are not UTF-8, escape sequences, 10 MiB on stdout, a file name
/// with a newline; a command that ignores its timeout is killed with all it started.
#[test]
fn hostile_output_comes_back_valid_bounded_and_noted() {
    let _engine = loading_the_engine();
    let w = World::new();
    let _sweep = Sweep(&w);
    let img = bash_image(&w);
    let template = format!("debian={}", img.0);
    let body = r#"
async def body(c):
    o = {}
    sid = (await call(c, "create_sandbox", {"template": "debian"}))["sc"]["sandbox_id"]
    hostile = "printf 'a\\xff\\xfe\\x1b[31mred\\x1b]0;title\\x07\\n'; head -c 10485760 /dev/zero; printf 'x\\x1b[2J' >&2"
    o["hostile"] = await call(c, "run_command", {"sandbox_id": sid, "shell": hostile})
    o["raw"] = await call(c, "run_command", {"sandbox_id": sid, "shell": "printf 'a\\xff\\x1b'", "encoding": "base64"})
    await call(c, "run_command", {"sandbox_id": sid, "argv": ["/bin/bash", "-c", "mkdir -p /tmp/h && : > /tmp/h/$'evil\\nname\\x1b[0m'"]})
    o["ls"] = await call(c, "list_dir", {"sandbox_id": sid, "path": "/tmp/h"})
    import time
    t = time.monotonic()
    o["slow"] = await call(c, "run_command", {"sandbox_id": sid, "shell": "sleep 300 & sleep 300", "timeout_secs": 2})
    # A child that drops the kill's tag from its environment is still killed: the kill takes the group.
    o["untagged"] = await call(c, "run_command", {"sandbox_id": sid, "shell": "(unset SBX_EXEC; exec sleep 301) & sleep 300", "timeout_secs": 2})
    o["slow_secs"] = time.monotonic() - t
    o["left"] = (await call(c, "run_command", {"sandbox_id": sid, "shell": "for p in /proc/[0-9]*/cmdline; do cat $p; echo; done"}))["sc"]["stdout"]
    return o
"#;
    let o = client(&w, &["--template", &template], body);
    let h = &o["hostile"]["sc"];
    assert_eq!(o["hostile"]["error"], false, "{}", o["hostile"]["text"]);
    assert_eq!(h["exit_code"], 0);
    assert_eq!(h["stdout_truncated"], true);
    assert_eq!(h["stdout_bytes"], 10_485_760 + 22, "every byte counted");
    let out = h["stdout"].as_str().unwrap();
    assert!(out.len() <= 64 * 1024, "bounded: {} bytes", out.len());
    assert!(out.starts_with("a\u{fffd}\u{fffd}\\u{1b}[31mred\\u{1b}]0;title\\u{7}\n"), "{:?}", &out[..40]);
    assert!(!out.contains('\u{1b}'), "no raw ESC reaches the client");
    assert_eq!(h["stderr"], "x\\u{1b}[2J");
    let notes = h["notes"].to_string();
    assert!(notes.contains("stdout was 10485782 bytes: cut to max_output_bytes (65536"), "{notes}");
    assert!(notes.contains("not all UTF-8"), "{notes}");
    assert_eq!(o["raw"]["sc"]["stdout"], "Yf8b", "base64 gives the exact bytes");
    let names: Vec<&str> =
        o["ls"]["sc"]["entries"].as_array().unwrap().iter().filter_map(|e| e["path"].as_str()).collect();
    assert_eq!(names, ["/tmp/h/evil\\nname\\u{1b}[0m"], "{}", o["ls"]);
    assert_eq!(o["slow"]["sc"]["timed_out"], true, "{}", o["slow"]);
    assert_eq!(o["untagged"]["sc"]["timed_out"], true, "{}", o["untagged"]);
    assert!(o["slow_secs"].as_f64().unwrap() < 15.0, "the timeout bounds the call: {}", o["slow_secs"]);
    let left = o["left"].as_str().unwrap();
    assert!(left.contains("idle") && !left.contains("300"), "all it started was killed: {left}");
    assert!(ids(&w).is_empty(), "the session's end destroyed its sandbox");
}

/// Raw JSON-RPC as any client sends it: stdout carries nothing but
/// JSON-RPC lines, and SIGTERM ends the session, destroying what it made.
#[test]
fn sigterm_ends_the_session_and_destroys_its_sandboxes() {
    let _engine = loading_the_engine();
    let w = World::new();
    let _sweep = Sweep(&w);
    let img = bash_image(&w);
    let mut child = Command::new(SBX)
        .args(w.dir_args())
        .args(["mcp", "--template", &format!("debian={}", img.0)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sbx mcp");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = |msg: Value| -> Value {
        writeln!(stdin, "{msg}").unwrap();
        let line = lines.next().expect("an answer").unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout carries only JSON-RPC ({e}): {line:?}"))
    };
    let init = ask(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}));
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    let made = ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "create_sandbox", "arguments": {"template": "debian"}}}));
    let sid =
        made["result"]["structuredContent"]["sandbox_id"].as_str().unwrap_or_else(|| panic!("{made}")).to_string();
    assert_eq!(ids(&w), std::slice::from_ref(&sid));
    let ran = ask(json!({"jsonrpc": "2.0", "id": "r", "method": "tools/call",
        "params": {"name": "run_command", "arguments": {"sandbox_id": sid, "argv": ["/bin/echo", "hi"]}}}));
    assert_eq!(ran["id"], "r");
    assert_eq!(ran["result"]["structuredContent"]["stdout"], "hi\n", "{ran}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "sbx mcp did not end on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{status:?}: {err}");
    assert!(err.contains(&format!("destroyed {sid}")), "stderr says what it destroyed: {err}");
    assert!(ids(&w).is_empty(), "SIGTERM destroyed the session's sandbox");
    assert!(lines.next().is_none(), "nothing more on stdout");
}

/// With mcp's own create defaults (its gate's network and DNS), a sandbox
/// made with `allow` reaches that host only; allow_hosts and deny_hosts
/// change what it reaches, as `sbx allow`/`deny` do.
#[test]
fn create_allow_and_the_egress_tools_decide_what_a_sandbox_reaches() {
    use super::support::egress::fetch;
    use super::support::internet::{tools_image, EVIL, FILES};
    let _engine = loading_the_engine();
    let w = World::new();
    let _sweep = Sweep(&w);
    let inet = Internet::start();
    let template = format!("tools={}", tools_image());
    let extra = [
        "--template",
        template.as_str(),
        "--egress-network",
        inet.net.name.as_str(),
        "--egress-dns",
        inet.dns_ip.as_str(),
    ];
    // The stand-ins' address is private: a name rule reaches it beside a CIDR rule only.
    let web = format!("{}/32:80", inet.web_ip);
    let body = format!(
        r#"
async def body(c):
    made = await call(c, "create_sandbox", {{"template": "tools", "allow": ["{FILES}:80", "{web}"], "keep": True}})
    assert not made["error"], made
    sid = made["sc"]["sandbox_id"]
    o = {{"sid": sid, "created": made["sc"].get("allow")}}
    o["allow"] = await call(c, "allow_hosts", {{"sandbox_id": sid, "hosts": ["{EVIL}:80"]}})
    o["deny"] = await call(c, "deny_hosts", {{"sandbox_id": sid, "hosts": ["{FILES}:80"]}})
    return o
"#
    );
    let o = client(&w, &extra, &body);
    assert!(o["created"].to_string().contains(FILES), "{o}");
    assert_eq!(o["allow"]["error"], false, "{}", o["allow"]);
    assert_eq!(o["deny"]["error"], false, "{}", o["deny"]);
    let sb = w.adopt(o["sid"].as_str().unwrap());
    assert_eq!(fetch(&sb, &format!("http://{FILES}/small.txt"), &[]).code, 403, "denied by deny_hosts");
    let evil = fetch(&sb, &format!("http://{EVIL}/small.txt"), &[]).code;
    let log = stdout(&w.sbx(&["egress", "log", &sb.id]));
    assert_eq!(evil, 200, "allowed by allow_hosts: {o}\n{log}");
}

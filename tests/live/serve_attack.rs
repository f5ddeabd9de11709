//! `sbx serve` under attack from both sides: hostile requests (oversized
//! bodies, another sandbox's files with a sandbox's own token), a sandbox
//! reaching for the server or for the credentials, and a sandbox whose
//! commands never answer while others are served.

use std::path::Path;
use std::time::Duration;

use super::support::serve::*;
use super::support::*;

/// Oversized and malformed requests are refused in E2B's error shape and
/// create nothing.
#[test]
fn oversized_and_malformed_requests_create_nothing() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
import json, os, urllib.request, urllib.error
url, key = os.environ["E2B_API_URL"], os.environ["E2B_API_KEY"]
def post(path, body, ctype="application/json"):
    req = urllib.request.Request(url + path, data=body, method="POST",
                                 headers={"X-API-KEY": key, "Content-Type": ctype})
    try:
        r = urllib.request.urlopen(req); return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
def show(status, body):
    v = json.loads(body)
    assert v["code"] == status and isinstance(v["message"], str), v
    print(status, v["message"][:60])
show(*post("/v2/sandboxes", b'{"templateID": "debian", "metadata": {"a": "' + b"x" * (2 << 20) + b'"}}'))
show(*post("/v2/sandboxes", b'{"templateID": "debian", "metadata": ' + json.dumps({str(i): "v" for i in range(500)}).encode() + b'}'))
show(*post("/v2/sandboxes", json.dumps({"templateID": "debian", "envVars": {"A=B": "c"}}).encode()))
show(*post("/v2/sandboxes", json.dumps({"templateID": "debian", "envVars": {"A": "x" * 40000}}).encode()))
show(*post("/v2/sandboxes", json.dumps({"templateID": "../../etc/passwd"}).encode()))
show(*post("/v2/sandboxes", json.dumps({"templateID": "debian", "timeout": -5}).encode()))
show(*post("/v2/sandboxes", b"[1, 2"))
show(*post("/v2/sandboxes", b"\xff\xfe not json"))
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("hostile creates (server said: {})", s.stderr()));
    let lines: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    let codes: Vec<&str> = lines.iter().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(codes, ["413", "400", "400", "400", "404", "400", "400", "400"], "{lines:#?}");
    // The world's own data dir: ls lists every sandbox this server made.
    assert_eq!(json(&w.sbx(&["ls", "--json"])), serde_json::json!([]), "nothing was created");
}

/// With its own token a sandbox's client reaches none of another
/// sandbox's files or filesystem calls; and `sbx ls --json` shows the E2B
/// metadata serve keeps, never a token.
#[test]
fn a_token_never_reads_another_sandboxes_files_and_ls_shows_no_token() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let script = r#"
import json, os, urllib.request, urllib.error
from e2b import Sandbox
url = os.environ["E2B_API_URL"]
def status(path, headers, data=None):
    req = urllib.request.Request(url + path, headers=headers, data=data, method="POST" if data else "GET")
    try:
        return urllib.request.urlopen(req).status
    except urllib.error.HTTPError as e:
        return e.code
a = Sandbox.create("debian", metadata={"owner": "alice"})
b = Sandbox.create("debian", metadata={"owner": "bob"})
b.files.write("/tmp/secret.txt", "bob's")
mine = {"E2b-Sandbox-Id": b.sandbox_id, "X-Access-Token": a._envd_access_token}
print(status("/files?path=/tmp/secret.txt", mine),
      status("/files?path=/tmp/x", mine, data=b"x"),
      status("/filesystem.Filesystem/Stat", dict(mine, **{"Content-Type": "application/json"}),
             data=json.dumps({"path": "/tmp/secret.txt"}).encode()))
print(a.sandbox_id, b.sandbox_id, a._envd_access_token, b._envd_access_token)
"#;
    let out = s.python(script, &s.key());
    assert_success(&out, &format!("cross-sandbox (server said: {})", s.stderr()));
    let text = stdout(&out);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("401 401 401"), "{text}");
    let ids: Vec<&str> = lines.next().unwrap().split(' ').collect();
    let ls = w.sbx(&["ls", "--json"]);
    let listed = stdout(&ls);
    for token in &ids[2..] {
        assert!(!listed.contains(token), "ls printed an access token: {listed}");
    }
    let v = json(&ls);
    let owner =
        |id: &str| v.as_array().unwrap().iter().find(|r| r["id"] == id).map(|r| r["e2b"]["metadata"]["owner"].clone());
    assert_eq!(owner(ids[0]), Some(serde_json::json!("alice")), "{listed}");
    assert_eq!(owner(ids[1]), Some(serde_json::json!("bob")), "{listed}");
    assert_eq!(v[0]["e2b"]["template"], "debian", "{listed}");
}

/// Inside, the sandbox has no way to the server (no network: 127.0.0.1
/// is its own) and holds neither the API key nor its access token.
#[test]
fn a_sandbox_reaches_neither_the_server_nor_a_credential() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let s = Server::start(&w, &[format!("debian={}", img.0)]);
    let port = s.addr.rsplit(':').next().unwrap().to_string();
    let script = format!(
        r#"
from e2b import Sandbox
box = Sandbox.create("debian")
try:
    r = box.commands.run("(exec 3<>/dev/tcp/127.0.0.1/{port} && echo reached) 2>&1; echo rc=$?", timeout=30)
    print("tcp", r.stdout.strip().splitlines()[-1])
    env = box.commands.run("cat /proc/self/environ /proc/1/environ 2>/dev/null; true").stdout
    found = [n for n, v in (("key", "{key}"), ("token", box._envd_access_token)) if v in env]
    print("found", found)
    listing = box.commands.run("ls -la /run /run/sbx 2>&1").stdout
    print("leaked", "{key}" in listing or box._envd_access_token in listing)
finally:
    box.kill()
"#,
        key = s.key()
    );
    let out = s.python(&script, &s.key());
    assert_success(&out, &format!("sandbox side (server said: {})", s.stderr()));
    let text = stdout(&out);
    assert!(text.contains("tcp rc=1"), "the sandbox reached the server: {text}");
    assert!(!text.contains("reached"), "{text}");
    assert!(text.contains("found []"), "{text}");
    assert!(text.contains("leaked False"), "{text}");
}

/// A sandbox whose `docker exec`s never answer (here: held by a docker
/// stand-in) never stalls another's commands, files or a new create.
#[test]
fn one_hung_sandbox_never_stalls_the_others() {
    let _engine = loading_the_engine();
    let w = World::new();
    let img = bash_image(&w);
    let dir = Path::new("/tmp").join(format!("sbxt-{}-hang", w.case));
    std::fs::create_dir_all(&dir).unwrap();
    let shim = dir.join("docker");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\nheld=$(cat '{d}/held' 2>/dev/null)\n\
             if [ \"$1\" = exec ]; then for h in $held; do case \" $* \" in *\" $h \"*)\n\
             : > '{d}/reached'; while [ ! -e '{d}/release' ]; do sleep 0.05; done ;; esac; done; fi\n\
             exec docker \"$@\"\n",
            d = dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let _cleanup = RemoveDir(dir.clone());
    let env = format!("SBX_DOCKER={}", shim.display());
    let s = Server::start_under(&w, &[format!("debian={}", img.0)], &["env", &env]);
    let script = format!(
        r#"
import threading, time, sys
from e2b import Sandbox
a, b = Sandbox.create("debian"), Sandbox.create("debian")
import os, subprocess
full = subprocess.run(["docker", "inspect", "--format", "{{{{.Id}}}}", a.sandbox_id], capture_output=True, text=True).stdout
open("{d}/held", "w").write(a.sandbox_id + " " + full.strip())
hung = threading.Thread(target=lambda: a.commands.run("echo never", timeout=120), daemon=True)
hung.start()
deadline = time.time() + 60
while not os.path.exists("{d}/reached"):
    if time.time() > deadline: raise SystemExit("the held exec never reached the stand-in")
    time.sleep(0.05)
t0 = time.time()
for i in range(3):
    assert b.commands.run(f"echo {{i}}").stdout == f"{{i}}\n"
b.files.write("/tmp/f", "x" * 100000)
assert b.files.read("/tmp/f") == "x" * 100000
c = Sandbox.create("debian")
assert c.commands.run("echo c").stdout == "c\n"
print("others took", round(time.time() - t0, 1), "hung still", hung.is_alive())
open("{d}/release", "w").close()
hung.join(60)
print("released", not hung.is_alive())
for x in (a, b, c): x.kill()
"#,
        d = dir.display()
    );
    let out = s.python(&script, &s.key());
    assert_success(&out, &format!("one hung sandbox (server said: {})", s.stderr()));
    let text = stdout(&out);
    assert!(text.contains("hung still True"), "{text}");
    assert!(text.contains("released True"), "{text}");
}

struct RemoveDir(std::path::PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("release"), b"");
        std::thread::sleep(Duration::from_millis(200));
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

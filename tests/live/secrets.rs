//! Secrets: credentials the sandbox never holds. A sandbox of the stock
//! Debian image gets `NAME=<placeholder>`; its gate terminates TLS for the
//! secret's host and puts the real value into the named header, in the
//! forms `Bearer <ph>`, `<ph>` and `Basic base64(user:<ph>)`. One test per
//! promise, with ordinary clients (curl, Python's requests and urllib, git,
//! pip) against the stand-in API (`support::standin_api`), whose own log
//! says what really arrived.

use std::process::Output;

use serde_json::Value;

use crate::support::egress::{log_until, strings};
use crate::support::standin_api::*;
use crate::support::*;

/// The real values: only ever in sbx's environment and at the stand-in.
const REAL: &str = "real-api-token-5d1c8e0f9a7b4c2e";
const REAL_GIT: &str = "real-git-token-93b7a1e4c0d2f685";

/// `bash -c SCRIPT` in a plain container of the Debian image on `inet`
/// (no sbx), with `env` and the test CA at /ca.pem.
fn plain_client(inet: &Internet, api: &StandinApi, env: &[(&str, &str)], script: &str) -> Output {
    let ca = format!("{}:/ca.pem:ro", api.ca_pem().display());
    let mut args = vec!["run", "--rm", "--label", TEST_LABEL, "--network", &inet.net.name, "--dns", &inet.dns_ip];
    args.extend(["-v", &ca]);
    let pairs: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    for p in &pairs {
        args.extend(["-e", p]);
    }
    args.extend([debian_image(), "bash", "-c", script]);
    docker(&args)
}

/// The value after `LABEL: ` on the line of `text` that starts with it.
fn line<'a>(text: &'a str, label: &str) -> &'a str {
    let start = format!("{label}: ");
    text.lines().find_map(|l| l.strip_prefix(start.as_str())).unwrap_or_else(|| panic!("no {label:?} line in:\n{text}"))
}

const CLIENTS: &str = r#"
set -u
c() { curl -sS --max-time 20 --cacert /ca.pem "$@"; }
echo "v1: $(c -H "Authorization: Bearer $TOKEN" https://api.example/v1/models)"
echo "echo: $(c -H 'X-Probe: probe-1' https://api.example/echo)"
echo "echo-header: $(c -H "Authorization: Bearer $TOKEN" -D - -o /dev/null https://api.example/echo | grep -i '^x-echo-authorization' | tr -d '\r')"
echo "keepalive: $(c -o /dev/null -o /dev/null -w '%{num_connects} ' https://api.example/v1/a https://api.example/v1/b)"
refs='https://git.example/org/repo.git/info/refs?service=git-upload-pack'
echo "git-none: $(c -o /dev/null -w '%{http_code}' "$refs")"
echo "git-bad: $(c -o /dev/null -w '%{http_code}' -u x:wrong "$refs")"
echo "pip-none: $(c -o /dev/null -w '%{http_code}' https://api.example/simple/sbxdemo/)"
export GIT_SSL_CAINFO=/ca.pem GIT_TERMINAL_PROMPT=0
git clone -q "https://x:$GIT_TOKEN@git.example/org/repo.git" /tmp/r && echo "clone: $(cat /tmp/r/README)"
cd /tmp/r && echo more >> README && git -c user.name=t -c user.email=t@t commit -qam second \
  && git push -q origin HEAD:main && echo "push: ok"
cd /
pip install -q --disable-pip-version-check --no-cache-dir --target /tmp/p --cert /ca.pem \
  --index-url "https://__token__:$TOKEN@api.example/simple/" sbxdemo \
  && echo "pip: $(PYTHONPATH=/tmp/p python3 -c 'import sbxdemo; print(sbxdemo.VALUE)')"
python3 - <<'PY'
import os, ssl, urllib.request, requests
auth = {"Authorization": "Bearer " + os.environ["TOKEN"]}
r = requests.get("https://api.example/v1/models", headers=auth, verify="/ca.pem", timeout=20)
print("requests:", r.status_code, r.text.strip())
ctx = ssl.create_default_context(cafile="/ca.pem")
req = urllib.request.Request("https://api.example/v1/models", headers=auth)
print("urllib:", urllib.request.urlopen(req, context=ctx, timeout=20).read().decode().strip())
PY
"#;

#[test]
fn the_stand_in_api_answers_curl_git_and_pip_with_the_real_token() {
    // The stage alone, with a plain container (no sbx): the other tests'
    // failures then point at sbx, not at the stand-in.
    let (inet, api) = StandinApi::on_internet(&[REAL, REAL_GIT]);
    let out = plain_client(&inet, &api, &[("TOKEN", REAL), ("GIT_TOKEN", REAL_GIT)], CLIENTS);
    let text = stdout(&out);
    let all = format!("{text}\nstderr: {}", stderr(&out));
    assert_eq!(line(&text, "v1"), r#"{"object":"standin","ok":true}"#, "{all}");
    let echo: Value = serde_json::from_str(line(&text, "echo")).unwrap_or_else(|e| panic!("{e}: {all}"));
    assert!(echo["headers"].as_array().unwrap().iter().any(|kv| kv[0] == "X-Probe" && kv[1] == "probe-1"), "{echo}");
    assert_eq!(line(&text, "echo-header"), format!("X-Echo-Authorization: Bearer {REAL}"), "{all}");
    assert_eq!(line(&text, "keepalive").trim(), "1 0", "two requests, one connection: {all}");
    assert_eq!(line(&text, "git-none"), "401", "{all}");
    assert_eq!(line(&text, "git-bad"), "403", "{all}");
    assert_eq!(line(&text, "pip-none"), "401", "{all}");
    assert_eq!(line(&text, "clone"), "hello from the stand-in's repository", "{all}");
    assert_eq!(line(&text, "push"), "ok", "{all}");
    assert_eq!(line(&text, "pip"), "sbxdemo from the stand-in", "{all}");
    assert_eq!(line(&text, "requests"), r#"200 {"object":"standin","ok":true}"#, "{all}");
    assert_eq!(line(&text, "urllib"), r#"{"object":"standin","ok":true}"#, "{all}");

    // Its log: every request, with the header exactly as sent.
    let reqs = api.requests();
    let v1 = api.requests_to(API, "/v1/models");
    assert_eq!(v1.len(), 3, "curl, requests, urllib: {v1:#?}");
    for r in &v1 {
        assert_eq!(headers(r, "authorization"), [format!("Bearer {REAL}")], "{r}");
        assert_eq!(r["sni"], API, "{r}");
        assert_eq!(r["status"], 200, "{r}");
    }
    let kept: Vec<_> = api.requests_to(API, "/v1/").into_iter().filter(|r| r["path"] != "/v1/models").collect();
    assert_eq!(kept.len(), 2, "{kept:#?}");
    assert_eq!((&kept[0]["conn"], &kept[0]["n"], &kept[1]["n"]), (&kept[1]["conn"], &Value::from(1), &Value::from(2)));
    let git = api.requests_to(GIT, "/org/repo.git/");
    let pushed = git.iter().filter(|r| r["path"] == "/org/repo.git/git-receive-pack" && r["status"] == 200).count();
    assert_eq!(pushed, 1, "{git:#?}");
    assert!(git.iter().any(|r| header(r, "authorization") == Some(basic("x", REAL_GIT))), "{git:#?}");
    let pip = api.requests_to(API, "/packages/");
    assert!(pip.iter().any(|r| header(r, "authorization") == Some(basic("__token__", REAL))), "{pip:#?}");
    // Nothing of a request but /echo's headers is ever answered back: the
    // stand-in's answers are fixed.
    assert!(reqs.iter().all(|r| r["status"].is_u64()), "{reqs:#?}");
}

/// One test's stage: the stand-in API on its internet, and a world. Declare
/// sandboxes after it (they are destroyed first).
struct Stage {
    api: StandinApi,
    inet: Internet,
    w: World,
}

/// The variables sbx's own environment holds the real values in.
const ENV: &[(&str, &str)] = &[("REAL_TOKEN", REAL), ("REAL_GIT_TOKEN", REAL_GIT)];
const API_SECRET: &str = "API_KEY@api.example=env:REAL_TOKEN";
const GIT_SECRET: &str = "GIT_TOKEN@git.example=env:REAL_GIT_TOKEN";

impl Stage {
    fn new() -> Self {
        let w = World::new();
        let (inet, api) = StandinApi::on_internet(&[REAL, REAL_GIT]);
        Stage { api, inet, w }
    }

    /// `sbx create` of the Debian image on this internet (the stand-in's
    /// address allowed, its CA given as `--egress-ca`) with `extra`, sbx's
    /// environment holding [`ENV`] and `env`; it runs `sleep infinity`.
    fn try_create(&self, extra: &[&str], env: &[(&str, &str)]) -> Output {
        let label = self.w.case_label();
        let mut args: Vec<String> = strings(&["create", "--image", debian_image(), "--label", &label]);
        args.extend(self.inet.create_args(&[]));
        args.extend(strings(&["--allow", &self.api.rule(), "--egress-ca", self.api.ca_pem().to_str().unwrap()]));
        args.extend(strings(extra));
        args.extend(strings(&["--socket-wait", "0", "--", "sleep", "infinity"]));
        let all: Vec<(&str, &str)> = ENV.iter().chain(env).copied().collect();
        self.w.sbx_env(&args.iter().map(String::as_str).collect::<Vec<_>>(), &all)
    }

    fn create(&self, extra: &[&str]) -> Sandbox {
        let out = self.try_create(extra, &[]);
        assert_success(&out, &format!("sbx create {extra:?}"));
        self.w.adopt(stdout(&out).trim())
    }

    /// `sbx exec ID -- bash -c SCRIPT`.
    fn sh(&self, sb: &Sandbox, script: &str) -> Output {
        self.w.sbx(&["exec", &sb.id, "--", "bash", "-c", script])
    }

    /// [`Stage::sh`] with `input` on stdin (`exec -i`): how a needle the
    /// sandbox must not learn from its argv gets in.
    fn sh_fed(&self, sb: &Sandbox, script: &str, input: &[u8]) -> Output {
        self.w.sbx_stdin(&["exec", "-i", &sb.id, "--", "bash", "-c", script], input)
    }

    /// The value of `var` in the sandbox (what `docker exec` sees too).
    fn var(&self, sb: &Sandbox, var: &str) -> String {
        let out = self.sh(sb, &format!("printf %s \"${{{var}:-}}\""));
        assert_success(&out, &format!("reading ${var} in the sandbox"));
        stdout(&out)
    }

    /// Copy the stand-in's CA into the sandbox at /tmp/standin-ca.pem: for
    /// end-to-end TLS to a host without a secret (the CA is no secret).
    fn give_ca(&self, sb: &Sandbox) {
        let pem = std::fs::read(self.api.ca_pem()).unwrap();
        assert_success(&self.sh_fed(sb, "cat > /tmp/standin-ca.pem", &pem), "copying the stand-in CA in");
    }
}

/// Every encoded form of the real values a leak could take: the values and
/// the Basic tokens the clients here send.
fn needles() -> Vec<String> {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    vec![REAL.into(), REAL_GIT.into(), b64(&format!("x:{REAL_GIT}")), b64(&format!("__token__:{REAL}"))]
}

/// Which of [`needles`] `text` holds.
fn leaked(text: &str) -> Vec<String> {
    needles().into_iter().filter(|n| text.contains(n.as_str())).collect()
}

/// Where the real value arrived at the stand-in: every part of every
/// logged request that holds it.
fn arrivals(api: &StandinApi, value: &str) -> Vec<(String, String)> {
    let mut at = Vec::new();
    for r in api.requests() {
        for part in found_in(&r, value) {
            at.push((r["path"].as_str().unwrap_or("").to_string(), part));
        }
    }
    at
}

const OK_JSON: &str = r#"{"object":"standin","ok":true}"#;

/// (a) curl, requests and urllib with `Bearer $API_KEY` reach the stand-in,
/// which got the real value exactly there; the sandbox holds a placeholder,
/// and /echo shows it only that.
#[test]
fn ordinary_clients_send_the_placeholder_and_the_host_gets_the_value() {
    let st = Stage::new();
    let sb = st.create(&["--secret", API_SECRET]);
    let ph = st.var(&sb, "API_KEY");
    assert!(!ph.is_empty() && ph != REAL && !ph.contains(REAL), "the sandbox's API_KEY: {ph:?}");
    assert!(leaked(&ph).is_empty(), "{ph:?}");
    let script = r#"
set -u
auth="Authorization: Bearer $API_KEY"
for v in SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO PIP_CERT; do
  [ -r "${!v:-/nonexistent}" ] || missing="${missing:-} $v"
done
echo "bundle vars missing: ${missing:-}"
echo "curl: $(curl -sS --max-time 20 -H "$auth" https://api.example/v1/models)"
echo "echo: $(curl -sS --max-time 20 -H "$auth" https://api.example/echo)"
echo "echo-header: $(curl -sS --max-time 20 -H "$auth" -D - -o /dev/null https://api.example/echo | grep -i '^x-echo-authorization' | tr -d '\r')"
echo "echo-basic: $(curl -sS --max-time 20 -u "x:$API_KEY" https://api.example/echo)"
python3 - <<'PY'
import os, urllib.request, requests
auth = {"Authorization": "Bearer " + os.environ["API_KEY"]}
r = requests.get("https://api.example/v1/models", headers=auth, timeout=20)
print("requests:", r.status_code, r.text.strip())
req = urllib.request.Request("https://api.example/v1/models", headers=auth)
print("urllib:", urllib.request.urlopen(req, timeout=20).read().decode().strip())
PY
"#;
    let out = st.sh(&sb, script);
    let text = stdout(&out);
    let all = format!("{text}\nstderr: {}", stderr(&out));
    assert_eq!(line(&text, "bundle vars missing").trim(), "", "the CA bundle's variables: {all}");
    assert_eq!(line(&text, "curl"), OK_JSON, "{all}");
    assert_eq!(line(&text, "requests"), format!("200 {OK_JSON}"), "{all}");
    assert_eq!(line(&text, "urllib"), OK_JSON, "{all}");
    // What the stand-in reflected, as the sandbox got it: the placeholder.
    let echo: Value = serde_json::from_str(line(&text, "echo")).unwrap_or_else(|e| panic!("{e}: {all}"));
    let auth: Vec<_> = echo["headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|kv| kv[0].as_str().is_some_and(|k| k.eq_ignore_ascii_case("authorization")))
        .collect();
    assert_eq!(auth.len(), 1, "{echo}");
    assert_eq!(auth[0][1], format!("Bearer {ph}"), "/echo through the sandbox: {echo}");
    // The same in a response header, and for the Basic form the gate made.
    let reflected = line(&text, "echo-header").split_once(':').map(|(_, v)| v.trim().to_string());
    assert_eq!(reflected, Some(format!("Bearer {ph}")), "{all}");
    let echo: Value = serde_json::from_str(line(&text, "echo-basic")).unwrap_or_else(|e| panic!("{e}: {all}"));
    assert!(echo.to_string().contains(&basic("x", &ph)), "/echo of Basic through the sandbox: {echo}");
    assert!(leaked(&all).is_empty(), "the sandbox saw a real value: {all}");
    let b64 = |s: &str| basic("x", s).trim_start_matches("Basic ").to_string();
    assert!(!all.contains(&b64(REAL)), "the sandbox saw the Basic form of the value: {all}");

    // The stand-in's own log: the value, exactly in that header, only there.
    let v1 = st.api.requests_to(API, "/v1/models");
    assert_eq!(v1.len(), 3, "curl, requests, urllib: {v1:#?}");
    for r in &v1 {
        assert_eq!(headers(r, "authorization"), [format!("Bearer {REAL}")], "{r}");
        assert!(found_in(r, &ph).is_empty(), "the placeholder arrived too: {r}");
    }
    // Responses are asked for unencoded, so the gate can read what it scrubs.
    let by_requests = v1.iter().find(|r| header(r, "user-agent").is_some_and(|u| u.starts_with("python-requests")));
    let by_requests = by_requests.unwrap_or_else(|| panic!("no request from requests: {v1:#?}"));
    assert_eq!(headers(by_requests, "accept-encoding"), ["identity"], "{by_requests:#}");
    let echoed = st.api.requests_to(API, "/echo");
    assert_eq!(echoed.len(), 3, "{echoed:#?}");
    assert_eq!(headers(&echoed[0], "authorization"), [format!("Bearer {REAL}")], "{:#}", echoed[0]);
    assert_eq!(headers(&echoed[2], "authorization"), [basic("x", REAL)], "{:#}", echoed[2]);
    let at = arrivals(&st.api, REAL);
    assert!(at.iter().all(|(_, part)| part == "header authorization"), "the value arrived elsewhere: {at:?}");
    assert_eq!(at.len(), 5, "{at:?}");

    // Placeholders are per sandbox; a prefix is kept for clients that check it.
    let prefixed = st.create(&["--secret", API_SECRET, "--secret-prefix", "sk-"]);
    let other = st.var(&prefixed, "API_KEY");
    assert!(other.starts_with("sk-") && other.len() >= 3 + 16, "with --secret-prefix sk-: {other:?}");
    assert_ne!(other, ph, "two sandboxes share a placeholder");
}

/// Reads every needle (one a line) from stdin, then every file it can
/// (but /proc, /sys and /dev), and every other process's environment and
/// argv; prints `hits: PATH...`, the files holding a private key (`keys:`;
/// the stock image has none) and how much it read. The needles never
/// travel in its argv or environment.
const WALKER: &str = r#"
import os, re, sys
# A PEM private key file (libraries hold the marker, and gnutls a test key).
KEY = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----\r?\n[A-Za-z0-9+/=]{16}")
needles = [l.strip().encode() for l in sys.stdin if l.strip()]
me = str(os.getpid())
hits, keys, files = [], [], 0
def scan(path):
    global files
    try:
        with open(path, "rb") as f:
            data = f.read(64 << 20)
    except OSError:
        return
    files += 1
    if any(n in data for n in needles):
        hits.append(path)
    if not data.startswith(b"\x7fELF") and KEY.search(data):
        keys.append(path)
for root, dirs, names in os.walk("/"):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    for n in names:
        p = os.path.join(root, n)
        if os.path.isfile(p) and not os.path.islink(p):
            scan(p)
for pid in os.listdir("/proc"):
    if pid.isdigit() and pid != me:
        for part in ("environ", "cmdline"):
            scan("/proc/%s/%s" % (pid, part))
print("needles:", len(needles))
print("files:", files)
print("hits:", " ".join(hits))
print("keys:", " ".join(keys))
"#;

/// Files under `dir` holding any of [`needles`].
fn files_holding_a_value(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let (p, t) = (e.path(), e.file_type().unwrap());
            if t.is_dir() {
                todo.push(p);
            } else if t.is_file() && std::fs::read(&p).is_ok_and(|b| !leaked(&String::from_utf8_lossy(&b)).is_empty()) {
                found.push(p);
            }
        }
    }
    found
}

/// (b) The sandbox, reading everything it can after using both secrets,
/// never finds a value; nor does anything sbx or docker shows of it or of
/// its gate; sbx's own copy is 0600 and goes with destroy.
#[test]
fn no_value_is_readable_from_inside_or_in_anything_sbx_or_docker_shows() {
    let st = Stage::new();
    let sb = st.create(&["--secret", API_SECRET, "--secret", GIT_SECRET]);
    let (ph, ph_git) = (st.var(&sb, "API_KEY"), st.var(&sb, "GIT_TOKEN"));
    assert!(!ph.is_empty() && !ph_git.is_empty() && ph != ph_git, "{ph:?} {ph_git:?}");
    // Every response kept where the walker reads it.
    let script = r#"
set -u
mkdir -p /tmp/seen && cd /tmp/seen
curl -sS -i --max-time 20 -H "Authorization: Bearer $API_KEY" https://api.example/echo > echo.txt
curl -sS -i --max-time 20 -H "Authorization: Bearer $API_KEY" 'https://api.example/v1/models?q=query-marker' > v1.txt
git clone -q "https://x:$GIT_TOKEN@git.example/org/repo.git" /tmp/seen/repo 2> clone.err
GIT_CURL_VERBOSE=1 GIT_TRACE_CURL=1 git -C /tmp/seen/repo fetch -q 2> fetch-trace.txt
env > env.txt
echo "echo: $(tail -n 1 echo.txt)"
echo "clone: $(cat /tmp/seen/repo/README)"
"#;
    let out = st.sh(&sb, script);
    let text = stdout(&out);
    let all = format!("{text}\nstderr: {}", stderr(&out));
    assert!(line(&text, "echo").contains(&format!("Bearer {ph}")), "{all}");
    assert_eq!(line(&text, "clone"), "hello from the stand-in's repository", "{all}");
    // The values did arrive, so there was something to find.
    assert_eq!(st.api.requests_to(API, "/echo").len(), 1);
    assert!(!arrivals(&st.api, REAL_GIT).is_empty() || !arrivals(&st.api, &needles()[2]).is_empty());

    let input = needles().join("\n") + "\n";
    let out = st.w.sbx_stdin(&["exec", "-i", &sb.id, "--", "python3", "-c", WALKER], input.as_bytes());
    assert_success(&out, "the walker in the sandbox");
    let text = stdout(&out);
    assert_eq!(line(&text, "needles"), "4", "{text}");
    assert!(line(&text, "files").parse::<usize>().unwrap() > 1000, "the walker read almost nothing: {text}");
    assert_eq!(line(&text, "hits"), "", "the sandbox can read a real value there");
    assert_eq!(line(&text, "keys"), "", "the sandbox can read a private key (its CA's?) there");

    // Everything shown outside.
    let gate = format!("{}-gate", sb.id);
    let gate_image = docker_ok(&["inspect", "--format", "{{.Image}}", &gate]);
    let mut shown: Vec<(String, String)> = Vec::new();
    let mut show = |what: &str, out: Output| {
        shown.push((what.to_string(), format!("{}{}", stdout(&out), stderr(&out))));
    };
    show("docker inspect (sandbox)", docker(&["inspect", &sb.id]));
    show("docker inspect (gate)", docker(&["inspect", &gate]));
    show("docker logs (gate)", docker(&["logs", &gate]));
    show("docker logs (sandbox)", docker(&["logs", &sb.id]));
    show("docker image inspect (gate)", docker(&["image", "inspect", &gate_image]));
    show("docker history (gate)", docker(&["history", "--no-trunc", &gate_image]));
    show("sbx inspect", st.w.sbx(&["inspect", &sb.id]));
    show("sbx inspect --json", st.w.sbx(&["inspect", &sb.id, "--json"]));
    show("sbx ls --json", st.w.sbx(&["ls", "--json"]));
    show("sbx ls", st.w.sbx(&["ls"]));
    show("sbx egress log", st.w.sbx(&["egress", "log", &sb.id]));
    show("sbx egress log --json", st.w.sbx(&["egress", "log", &sb.id, "--json"]));
    show("sbx egress policy", st.w.sbx(&["egress", "policy", &sb.id]));
    for (what, text) in &shown {
        assert!(leaked(text).is_empty(), "{what} shows a real value: {text}");
    }
    // Shown, never the value: each secret's name, host, header, source kind.
    let rec = &shown.iter().find(|(w, _)| w == "sbx inspect --json").unwrap().1;
    for want in ["API_KEY", "api.example", "GIT_TOKEN", "git.example", "Authorization", "env"] {
        assert!(rec.contains(want), "sbx inspect --json does not show {want}: {rec}");
    }
    // The decision log names the secret put in, never a placeholder or the query.
    let lines =
        log_until(&st.w, &sb.id, |l| l.iter().any(|x| x["host"] == API && x.to_string().contains("/v1/models")));
    let v1 = lines.iter().find(|x| x["host"] == API && x.to_string().contains("/v1/models")).unwrap();
    assert!(v1.to_string().contains("API_KEY"), "the decision line does not name the secret: {v1}");
    for l in &lines {
        let s = l.to_string();
        assert!(!s.contains(&ph) && !s.contains(&ph_git) && !s.contains("query-marker"), "{s}");
    }
    // sbx's own copy, for pushing again after a restart: its owner's alone.
    let copies = files_holding_a_value(&st.w.state_dir);
    for c in &copies {
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(c).unwrap().permissions());
        assert_eq!(mode & 0o077, 0, "{} holds a value and others can read it", c.display());
    }
    let id = sb.id.clone();
    drop(sb);
    assert_eq!(files_holding_a_value(&st.w.state_dir), Vec::<std::path::PathBuf>::new(), "destroy of {id} left a copy");
}

/// A docker that records every call and runs the real one: (dir, log).
fn recording_docker(w: &World) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::path::Path::new("/tmp").join(format!("sbxt-{}-rec", w.case));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("called");
    let script = dir.join("docker");
    std::fs::write(&script, format!("#!/bin/sh\necho \"$@\" >> '{}'\nexec docker \"$@\"\n", rec.display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (dir, rec)
}

/// (h) A value on the command line, a wildcard or address host, port 80, a
/// header that is not a token, a file others can read, a method that is
/// none: exit 2, in sbx's words, with no value in them, nothing created.
#[test]
fn bad_secret_input_exits_2_and_creates_nothing() {
    let w = World::new();
    let (dir, rec) = recording_docker(&w);
    let shared = dir.join("shared-token");
    std::fs::write(&shared, REAL).unwrap();
    std::fs::set_permissions(&shared, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let group = dir.join("group-token");
    std::fs::write(&group, REAL).unwrap();
    std::fs::set_permissions(&group, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let (shared_src, group_src) = (
        format!("API_KEY@api.example=file:{}", shared.display()),
        format!("API_KEY@api.example=file:{}", group.display()),
    );
    let img = debian_image();
    // Refused by their text alone: before any docker call.
    let syntax: Vec<String> = [
        format!("API_KEY@api.example={REAL}"),
        format!("API_KEY@api.example=literal:{REAL}"),
        format!("API_KEY@api.example={REAL_GIT}"),
        "API_KEY@*.example=env:REAL_TOKEN".into(),
        "API_KEY@*=env:REAL_TOKEN".into(),
        "API_KEY@10.0.0.1=env:REAL_TOKEN".into(),
        "API_KEY@[::1]=env:REAL_TOKEN".into(),
        "API_KEY@api.example:80=env:REAL_TOKEN".into(),
        "API_KEY@api.example/Bad Header=env:REAL_TOKEN".into(),
        "API_KEY@api.example/X:Y=env:REAL_TOKEN".into(),
        "API_KEY@api.example/=env:REAL_TOKEN".into(),
        "API_KEY@api.example=env:".into(),
        "API_KEY@=env:REAL_TOKEN".into(),
        "api key@api.example=env:REAL_TOKEN".into(),
        "API_KEY@api.example".into(),
    ]
    .into();
    let docker_env = [("SBX_DOCKER", dir.join("docker").to_str().unwrap().to_string())];
    let mut env: Vec<(&str, &str)> = ENV.to_vec();
    env.push((docker_env[0].0, docker_env[0].1.as_str()));
    let label = w.case_label();
    let mut cases: Vec<Vec<String>> =
        syntax.iter().map(|s| strings(&["create", "--image", img, "--label", &label, "--secret", s])).collect();
    cases.push(strings(&["create", "--image", img, "--label", &label, "--allow", "api.example b"]));
    cases.push(strings(&["create", "--image", img, "--label", &label, "--allow", "api.example G(T /v1/"]));
    for case in &cases {
        let args: Vec<&str> = case.iter().map(String::as_str).collect();
        let out = w.sbx_env(&args, &env);
        assert_exit(&out, 2, &format!("{case:?}"));
        let err = stderr(&out);
        assert!(!err.trim().is_empty(), "{case:?}: no message");
        assert!(
            leaked(&err).is_empty() && leaked(&stdout(&out)).is_empty(),
            "{case:?}: the value is in the message: {err}"
        );
    }
    let called = std::fs::read_to_string(&rec).unwrap_or_default();
    assert_eq!(called, "", "docker was called for input refused by its text");
    // Refused once the source is looked at (a file others can read, a
    // variable sbx's environment lacks): still exit 2 and nothing made.
    for source in [shared_src.as_str(), group_src.as_str(), "API_KEY@api.example=env:SBX_TEST_NO_SUCH_VARIABLE"] {
        let label = w.case_label();
        let out = w.sbx_env(&["create", "--image", img, "--label", &label, "--secret", source], &env);
        assert_exit(&out, 2, source);
        let err = stderr(&out);
        assert!(!err.trim().is_empty(), "{source}: no message");
        assert!(leaked(&err).is_empty(), "{source}: the value is in the message: {err}");
    }
    let called = std::fs::read_to_string(&rec).unwrap_or_default();
    for l in called.lines() {
        let verb = l.split_whitespace().next().unwrap_or("");
        assert!(
            !["run", "create", "network", "volume", "exec", "cp"].contains(&verb),
            "a bad source made something: {l}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    w.assert_nothing_left();
    assert_eq!(files_holding_a_value(&w.state_dir), Vec::<std::path::PathBuf>::new(), "a copy of a refused value");
}

const CLONE: &str = r#"
set -u
cd /tmp
git clone -q "https://x:$GIT_TOKEN@git.example/org/repo.git" repo 2>&1 && echo "clone: $(cat repo/README)"
cd repo && echo change >> README && git -c user.name=t -c user.email=t@t commit -qam change
git push -q origin HEAD:main 2>&1; echo "push: $?"
"#;

/// (d) git over HTTPS with Basic credentials: clone and push work; with
/// rules for clone's two requests alone, clone works and push is refused
/// (403) before it reaches the host.
#[test]
fn git_uses_basic_credentials_and_a_method_path_rule_lets_clone_through_but_not_push() {
    let st = Stage::new();
    let rules = [
        "--allow",
        "git.example GET /org/repo.git/info/refs",
        "--allow",
        "git.example POST /org/repo.git/git-upload-pack",
    ];
    let mut args = vec!["--secret", GIT_SECRET];
    args.extend(rules);
    let ruled = st.create(&args);
    let out = st.sh(&ruled, CLONE);
    let text = stdout(&out);
    assert_eq!(line(&text, "clone"), "hello from the stand-in's repository", "{text}");
    assert_ne!(line(&text, "push"), "0", "push went through a clone-only rule: {text}");
    assert!(text.contains("403"), "git does not say the push was refused (403): {text}");
    assert!(leaked(&text).is_empty(), "{text}");
    let pushes = st.api.requests_to(GIT, "/org/repo.git/git-receive-pack");
    assert_eq!(pushes.len(), 0, "a push reached the host: {pushes:#?}");
    let lines = log_until(&st.w, &ruled.id, |l| l.iter().any(|x| x.to_string().contains("git-receive-pack")));
    let refused = lines.iter().find(|x| x.to_string().contains("git-receive-pack")).unwrap().to_string();
    assert!(refused.contains("403") || refused.contains("deny"), "the refusal's decision line: {refused}");
    drop(ruled);

    let open = st.create(&["--secret", GIT_SECRET]);
    let ph = st.var(&open, "GIT_TOKEN");
    let out = st.sh(&open, CLONE);
    let text = stdout(&out);
    assert_eq!(line(&text, "clone"), "hello from the stand-in's repository", "{text}");
    assert_eq!(line(&text, "push"), "0", "{text}");
    let pushes = st.api.requests_to(GIT, "/org/repo.git/git-receive-pack");
    assert_eq!(pushes.len(), 1, "{pushes:#?}");
    for r in st.api.requests_to(GIT, "/org/repo.git/") {
        if let Some(auth) = header(&r, "authorization") {
            assert_eq!(auth, basic("x", REAL_GIT), "{r}");
        }
        assert!(found_in(&r, &ph).is_empty(), "the placeholder reached the git host: {r}");
    }
}

/// (e) pip installs from a private index with the token in its URL
/// (`Basic __token__:<ph>`), the value read from a file only its owner can read.
#[test]
fn pip_installs_from_an_index_that_wants_the_token() {
    let st = Stage::new();
    let file = st.api.dir().join("api-token");
    std::fs::write(&file, format!("{REAL}\n")).unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let sb = st.create(&["--secret", &format!("API_KEY@api.example=file:{}", file.display())]);
    let script = r#"
pip install -q --disable-pip-version-check --no-cache-dir --target /tmp/p \
  --index-url "https://__token__:$API_KEY@api.example/simple/" sbxdemo 2>&1
echo "pip: $(PYTHONPATH=/tmp/p python3 -c 'import sbxdemo; print(sbxdemo.VALUE)')"
"#;
    let out = st.sh(&sb, script);
    let text = stdout(&out);
    assert_eq!(line(&text, "pip"), "sbxdemo from the stand-in", "{text}\n{}", stderr(&out));
    assert!(leaked(&text).is_empty(), "{text}");
    let wheel = st.api.requests_to(API, "/packages/");
    assert!(
        wheel.iter().any(|r| r["status"] == 200 && header(r, "authorization") == Some(basic("__token__", REAL))),
        "{wheel:#?}"
    );
    let index = st.api.requests_to(API, "/simple/sbxdemo/");
    assert!(index.iter().any(|r| r["status"] == 200), "{index:#?}");
}

/// `CODE` of `curl -o /dev/null -w %{http_code}` lines: label, then the code.
const ELSEWHERE: &str = r#"
set -u
c() { curl -sS --max-time 20 -o /dev/null -w '%{http_code}' "$@"; }
ok="Authorization: Bearer $API_KEY"
echo "other: $(c --cacert /tmp/standin-ca.pem -H "$ok" -H "X-Key: $API_KEY" -d "key=$API_KEY" https://other.example/echo)"
echo "header: $(c -H "X-Key: $API_KEY" https://api.example/v1/c-header)"
echo "both: $(c -H "$ok" -H "X-Key: $API_KEY" https://api.example/v1/c-both)"
echo "path: $(c -H "$ok" "https://api.example/v1/c-path/$API_KEY")"
echo "body: $(c -H "$ok" -d "key=$API_KEY" https://api.example/v1/c-body)"
echo "query: $(c -H "$ok" "https://api.example/v1/c-query?key=$API_KEY")"
echo "form: $(c -H "Authorization: Token $API_KEY" https://api.example/v1/c-form)"
echo "cookie: $(c -H "$ok" -H "Cookie: k=$API_KEY" https://api.example/v1/c-cookie)"
b=$(printf 'x:%s' "$API_KEY" | base64 -w0)
echo "basic-lower: $(c -H "Authorization: basic $b" https://api.example/v1/c-basic-lower)"
echo "basic-nopad: $(c -H "Authorization: Basic $(printf %s "$b" | tr -d =)" https://api.example/v1/c-basic-nopad)"
echo "basic-space: $(c -H "Authorization: Basic  $b" https://api.example/v1/c-basic-space)"
echo "git: $(c -u "x:$API_KEY" 'https://git.example/org/repo.git/info/refs?service=git-upload-pack')"
"#;

/// (c) The placeholder sent anywhere but its header to its host: to
/// another allowed host it arrives unchanged; to its own host in another
/// header, the body, the query or another form it is refused (403); to
/// another secret's host it stays a placeholder or is refused.
#[test]
fn the_placeholder_anywhere_else_is_refused_or_arrives_unchanged() {
    let st = Stage::new();
    let sb = st.create(&["--secret", API_SECRET, "--secret", GIT_SECRET, "--allow", OTHER]);
    st.give_ca(&sb);
    let ph = st.var(&sb, "API_KEY");
    let out = st.sh(&sb, ELSEWHERE);
    let text = stdout(&out);
    let all = format!("{text}\nstderr: {}", stderr(&out));
    assert_eq!(line(&text, "other"), "200", "{all}");
    let other = st.api.requests_to(OTHER, "/echo");
    assert_eq!(other.len(), 1, "{other:#?}");
    assert_eq!(header(&other[0], "authorization"), Some(format!("Bearer {ph}")), "{:#}", other[0]);
    assert_eq!(header(&other[0], "x-key"), Some(ph.clone()), "{:#}", other[0]);
    assert_eq!(other[0]["body"], format!("key={ph}"), "{:#}", other[0]);
    for case in
        ["header", "both", "path", "body", "query", "form", "cookie", "basic-lower", "basic-nopad", "basic-space"]
    {
        assert_eq!(line(&text, case), "403", "the placeholder in the {case} to its host: {all}");
        let got = st.api.requests_to(API, &format!("/v1/c-{case}"));
        assert_eq!(got.len(), 0, "a refused request ({case}) reached the host: {got:#?}");
    }
    // Another secret's host: the stand-in answers 403 to a wrong token, so
    // its log says whether the gate let it through, and with what.
    assert_eq!(line(&text, "git"), "403", "{all}");
    for r in st.api.requests_to(GIT, "/org/repo.git/") {
        assert_eq!(
            header(&r, "authorization"),
            Some(basic("x", &ph)),
            "API_KEY's placeholder became something else: {r}"
        );
    }
    let at = arrivals(&st.api, REAL);
    assert_eq!(at, Vec::<(String, String)>::new(), "the value went out where it does not belong");
    let lines = log_until(&st.w, &sb.id, |l| l.iter().any(|x| x.to_string().contains("/v1/c-body")));
    for l in &lines {
        assert!(!l.to_string().contains(&ph), "the decision log shows a placeholder: {l}");
    }
}

/// (f) `sbx secret set` rotates a value on a running sandbox: the host gets
/// the new one within a second, the placeholder stays; `sbx deny` of the
/// host ends the secret's use.
#[test]
fn secret_set_rotates_the_value_and_deny_ends_its_use() {
    let st = Stage::new();
    let sb = st.create(&["--secret", API_SECRET]);
    let ph = st.var(&sb, "API_KEY");
    let get = |path: &str| {
        let out = st.sh(
            &sb,
            &format!("curl -sS --max-time 20 -H \"Authorization: Bearer $API_KEY\" https://api.example{path}"),
        );
        (out.status.code(), stdout(&out))
    };
    assert_eq!(get("/v1/before"), (Some(0), format!("{OK_JSON}\n")));
    const NEW: &str = "rotated-api-token-0c7e2b91d4a6f358";
    let out = st.w.sbx_env(&["secret", "set", &sb.id, "API_KEY", "env:ROTATED"], &[("ROTATED", NEW)]);
    assert_success(&out, "sbx secret set");
    assert!(!stdout(&out).contains(NEW) && !stderr(&out).contains(NEW), "{out:?}");
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(get("/v1/after"), (Some(0), format!("{OK_JSON}\n")));
    let after = st.api.requests_to(API, "/v1/after");
    assert_eq!(after.len(), 1, "{after:#?}");
    assert_eq!(
        headers(&after[0], "authorization"),
        [format!("Bearer {NEW}")],
        "a second after secret set: {:#}",
        after[0]
    );
    assert_eq!(st.var(&sb, "API_KEY"), ph, "rotation changed the sandbox's placeholder");
    let before = st.api.requests_to(API, "/v1/before");
    assert_eq!(headers(&before[0], "authorization"), [format!("Bearer {REAL}")]);
    for (what, text) in [
        ("inspect --json", stdout(&st.w.sbx(&["inspect", &sb.id, "--json"]))),
        ("docker inspect (gate)", docker_ok(&["inspect", &format!("{}-gate", sb.id)])),
    ] {
        assert!(!text.contains(NEW), "{what} shows the rotated value: {text}");
    }

    assert_success(&st.w.sbx(&["deny", &sb.id, API]), "sbx deny api.example");
    std::thread::sleep(std::time::Duration::from_secs(1));
    let (code, body) = get("/v1/denied");
    assert_ne!(code, Some(0), "a denied host answered: {body}");
    assert_eq!(st.api.requests_to(API, "/v1/denied").len(), 0, "a request reached a denied host");
}

/// The sandbox as attacker, with raw sockets: through its proxy to the
/// terminated host, each trick on its own connection; prints `NAME: CODES`
/// (the status of every response it got, or `nothing`).
const TRICKS: &str = r#"
import os, socket, ssl, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
ph = os.environ["API_KEY"]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["http/1.1"])
A = "Authorization: Bearer " + ph + "\r\n"

def dial():
    return socket.create_connection((proxy.hostname, proxy.port or 3128), timeout=10)

def tunnel(sni):
    s = dial()
    s.sendall(b"CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            raise OSError("the proxy closed")
        head += b
    if head.split()[1] != b"200":
        raise OSError("CONNECT " + head.split()[1].decode())
    return ctx.wrap_socket(s, server_hostname=sni)

def codes(s, raw):
    s.sendall(raw)
    s.settimeout(5)
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except (OSError, ssl.SSLError):
        pass
    got = [l.split()[1].decode() for l in data.split(b"\r\n") if l.startswith(b"HTTP/1.") and len(l.split()) > 1]
    return " ".join(got) or "nothing"

def trick(name, raw, sni="api.example", plain=False):
    try:
        s = dial() if plain else tunnel(sni)
        print(name + ": " + codes(s, raw.encode()), flush=True)
    except Exception as e:
        print(name + ": nothing (" + type(e).__name__ + ")", flush=True)

def req(target, host="api.example", extra="", method="GET", body="", close=True):
    end = "Connection: close\r\n" if close else ""
    return method + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\n" + A + extra + end + "\r\n" + body

trick("control", req("/v1/g-control"))
trick("sni", req("/v1/g-sni"), sni="other.example")
trick("sni-ph", req("/v1/g-sni-ph"), sni=ph + ".example")
trick("host", req("/v1/g-host", host="other.example"))
trick("host-port", req("/v1/g-host-port", host="api.example:8443"))
trick("absolute", req("https://other.example/v1/g-absolute"))
trick("h2c", "GET /v1/g-h2c HTTP/1.1\r\nHost: api.example\r\n" + A
      + "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
smuggled = "GET /v1/g-tecl-smuggled HTTP/1.1\r\nHost: api.example\r\n" + A + "\r\n"
trick("te-cl", req("/v1/g-tecl", method="POST", close=False,
      extra="Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % (5 + len(smuggled)), body="0\r\n\r\n" + smuggled))
trick("cl-cl", req("/v1/g-clcl", method="POST", extra="Content-Length: 4\r\nContent-Length: 40\r\n", body="abcd"))
trick("obs-fold", req("/v1/g-fold", extra="X-Fold: a\r\n b\r\n"))
trick("bare-lf", "GET /v1/g-lf HTTP/1.1\nHost: api.example\n" + A.replace("\r\n", "\n") + "Connection: close\n\n")
trick("keep-alive", req("/v1/g-keep-1", close=False) + req("/v1/g-keep-2", host="other.example"))
trick("keep-alive-abs", req("/v1/g-keepabs-1", close=False) + req("https://other.example/v1/g-keepabs-2"))
trick("dot-dot", req("/v1/%2e%2e/echo"))
trick("dot-dot-raw", req("/v1/../echo"))
trick("dot-dot-semi", req("/v1/..;/echo"))
trick("method-override", req("/v1/g-override", extra="X-HTTP-Method-Override: DELETE\r\n"))
trick("url-override", req("/v1/g-url-override", extra="X-Original-URL: /admin\r\n"))
trick("semi-param", req("/v1;x/../echo"))
trick("slash", req("/v1%2f..%2fecho"))
trick("backslash", req("/v1/..\\echo"))
trick("plain-http", req("http://api.example:443/v1/g-plain"), plain=True)
"#;

/// (g) TLS and HTTP tricks against the gate, from inside: another SNI,
/// another Host, an absolute-form URL to another host, `Upgrade: h2c`,
/// TE with CL, a request smuggled on a kept-alive connection, `%2e%2e` and
/// `%2f` paths. Each gets 4xx or nothing, and none reaches the host with
/// the value (nor reaches it at all, but the control and a first request).
#[test]
fn tls_and_http_tricks_against_the_gate_get_nothing_more() {
    let st = Stage::new();
    let sb = st.create(&["--secret", API_SECRET, "--allow", "api.example GET,POST /v1/", "--allow", OTHER]);
    let out = st.w.sbx(&["exec", &sb.id, "--", "python3", "-c", TRICKS]);
    let text = stdout(&out);
    let all = format!("{text}\nstderr: {}", stderr(&out));
    assert_eq!(line(&text, "control"), "200", "the harness's own request: {all}");
    let refused = |got: &str| got.starts_with("nothing") || got.split(' ').all(|c| c.starts_with('4'));
    for name in [
        "sni",
        "sni-ph",
        "host",
        "host-port",
        "absolute",
        "te-cl",
        "cl-cl",
        "obs-fold",
        "bare-lf",
        "dot-dot",
        "dot-dot-raw",
        "dot-dot-semi",
        "semi-param",
        "method-override",
        "url-override",
        "slash",
        "backslash",
        "plain-http",
    ] {
        assert!(refused(line(&text, name)), "{name}: {all}");
    }
    // A first request on the connection may pass; the one after it may not.
    for name in ["keep-alive", "keep-alive-abs"] {
        let got = line(&text, name);
        assert!(got == "200" || got.starts_with("200 4") || got.starts_with("nothing"), "{name}: {all}");
    }
    // h2c: refused, or stripped (then the host never saw it asked for).
    let h2c = line(&text, "h2c");
    assert!(!h2c.contains("101"), "the gate let an upgrade through: {all}");
    for r in st.api.requests_to(API, "/v1/g-h2c") {
        assert!(header(&r, "upgrade").is_none() && header(&r, "http2-settings").is_none(), "{r}");
    }
    let reqs = st.api.requests();
    let passed = ["/v1/g-control", "/v1/g-keep-1", "/v1/g-keepabs-1", "/v1/g-h2c"];
    for r in &reqs {
        let path = r["path"].as_str().unwrap_or("");
        assert!(passed.contains(&path), "a trick reached the host: {r:#}");
        let host = header(r, "host").unwrap_or_default();
        assert!(host == API || host == format!("{API}:443"), "{r:#}");
    }
    assert!(st.api.log_lines().iter().all(|l| l.get("bad").is_none()), "the host got a request it could not parse");
    let at = arrivals(&st.api, REAL);
    assert!(at.iter().all(|(path, part)| passed.contains(&path.as_str()) && part == "header authorization"), "{at:?}");
    // A server name holding the placeholder is logged scrubbed.
    let ph = st.var(&sb, "API_KEY").to_ascii_lowercase();
    let lines = log_until(&st.w, &sb.id, |l| l.iter().any(|x| x.to_string().contains("sbx-redacted.example")));
    for l in &lines {
        assert!(!l.to_string().to_ascii_lowercase().contains(&ph), "the decision log shows a placeholder: {l}");
    }
}

/// (i) `sbx create --secret` killed at each step, then `gc`: no container,
/// no gate, and no copy of the value left under the data dir.
#[test]
fn create_killed_at_each_step_leaves_no_copy_of_a_value_after_gc() {
    use std::process::{Command, Stdio};
    use std::time::Duration;
    let _load = loading_the_engine();
    let (inet, api) = StandinApi::on_internet(&[REAL]);
    for (verb, after) in [("network", true), ("run", false), ("run", true), ("exec", false), ("exec", true)] {
        let w = World::new();
        let shim = Shim::new(&w, verb, after);
        let label = w.case_label();
        let mut child = Command::new(SBX)
            .args(w.dir_args())
            .args(["create", "--image", debian_image(), "--label", &label])
            .args(inet.create_args(&[]))
            .args(["--allow", &api.rule(), "--egress-ca", api.ca_pem().to_str().unwrap(), "--secret", API_SECRET])
            .args(["--socket-wait", "0", "--", "sleep", "infinity"])
            .env("SBX_DOCKER", shim.path())
            .env("REAL_TOKEN", REAL)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        until(Duration::from_secs(60), || shim.reached()).unwrap_or_else(|| panic!("create never reached {verb}"));
        child.kill().unwrap();
        child.wait().unwrap();
        shim.release();
        until(Duration::from_secs(30), || !shim.busy()).expect("the released docker calls never finished");
        let ids = shim.ids();
        eprintln!("killed at {verb} (after={after}); sandbox ids in its docker calls: {ids:?}");
        let out = w.sbx(&["gc"]);
        assert_success(&out, &format!("gc after kill -9 at {verb} (after={after})"));
        for id in &ids {
            crate::support::egress::assert_no_egress_left(&w, id);
        }
        w.assert_nothing_left();
        let left = files_holding_a_value(&w.state_dir);
        assert_eq!(left, Vec::<std::path::PathBuf>::new(), "a copy of the value after kill -9 at {verb} and gc");
        let secrets = w.state_dir.join("secrets");
        let entries: Vec<_> = std::fs::read_dir(&secrets).into_iter().flatten().flatten().map(|e| e.path()).collect();
        assert_eq!(entries, Vec::<std::path::PathBuf>::new(), "{} after gc", secrets.display());
    }
}

/// A stopped and started sandbox's gate is a new process with an empty
/// vault: sbx pushes the values again from its own copy, so the host
/// still gets the real one, and the sandbox keeps its placeholder.
#[test]
fn a_restarted_sandbox_s_gate_gets_its_values_again() {
    let st = Stage::new();
    let sb = st.create(&["--secret", API_SECRET]);
    let ph = st.var(&sb, "API_KEY");
    let get = |path: &str| {
        let cmd = format!("curl -sS --max-time 20 -H \"Authorization: Bearer $API_KEY\" https://api.example{path}");
        let out = st.sh(&sb, &cmd);
        (out.status.code(), stdout(&out))
    };
    assert_eq!(get("/v1/first"), (Some(0), format!("{OK_JSON}\n")));
    assert_success(&st.w.sbx(&["stop", &sb.id]), "sbx stop");
    assert_success(&st.w.sbx(&["start", "--socket-wait", "0", &sb.id]), "sbx start");
    assert_eq!(st.var(&sb, "API_KEY"), ph, "the placeholder changed across a restart");
    assert_eq!(get("/v1/again"), (Some(0), format!("{OK_JSON}\n")));
    let again = st.api.requests_to(API, "/v1/again");
    assert_eq!(again.len(), 1, "{again:#?}");
    assert_eq!(headers(&again[0], "authorization"), [format!("Bearer {REAL}")], "{:#}", again[0]);
    let gate = docker_ok(&["inspect", &format!("{}-gate", sb.id)]);
    assert!(leaked(&gate).is_empty(), "the restarted gate's inspect shows a value: {gate}");
}

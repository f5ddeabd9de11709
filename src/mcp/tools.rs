//! What each tool does, through the operations the CLI and `sbx serve`
//! use: create through `serve::make` (the spec, the driver and the TTL
//! watchdog of serve's create), the rest through `Driver` and `workbench`.
//! Arguments are checked before any docker call; a sandbox this session
//! did not make is refused by id, never looked up. Errors are sbx's own
//! messages, given back as the tool's result.

use std::time::Duration;

use base64::Engine;
use serde_json::{json, Map, Value};

use super::catalog::{
    DEFAULT_OUTPUT, DEFAULT_READ, DEFAULT_TIMEOUT_SECS, MAX_ENTRIES, MAX_FILE, MAX_OUTPUT, MAX_TIMEOUT_SECS,
};
use super::output::{stream_fields, Capped, Encoding};
use super::{Made, Session};
use crate::spec::egress::AllowRule;
use crate::workbench::{ExecOpts, RunEnd, RunEvent, Target};

/// A tool's failure: what the model is told.
pub type Failed = String;

fn msg(e: impl std::fmt::Display) -> Failed {
    e.to_string()
}

pub fn call(session: &Session, name: &str, args: &Value) -> Result<Value, Failed> {
    let a = Args(args);
    if let Some(unknown) = args.as_object().and_then(|o| o.keys().find(|k| !known(name, k))) {
        return Err(format!("{name} takes no argument {unknown:?} (tools/list gives its arguments)"));
    }
    match name {
        "create_sandbox" => create(session, &a),
        "run_command" => run(session, &a),
        "read_file" => read(session, &a),
        "write_file" => write(session, &a),
        "list_dir" => list_dir(session, &a),
        "allow_hosts" => egress(session, &a, false),
        "deny_hosts" => egress(session, &a, true),
        "destroy_sandbox" => destroy(session, &a),
        "list_sandboxes" => list(session),
        other => Err(format!("no tool {other:?}")),
    }
}

/// Whether tool `name` takes argument `k` (its schema's properties).
fn known(name: &str, k: &str) -> bool {
    let args: &[&str] = match name {
        "create_sandbox" => &["template", "ttl", "allow", "env", "keep"],
        "run_command" => &["sandbox_id", "argv", "shell", "cwd", "env", "timeout_secs", "max_output_bytes", "encoding"],
        "read_file" => &["sandbox_id", "path", "encoding", "max_bytes"],
        "write_file" => &["sandbox_id", "path", "text", "base64"],
        "list_dir" => &["sandbox_id", "path", "depth"],
        "allow_hosts" | "deny_hosts" => &["sandbox_id", "hosts"],
        "destroy_sandbox" => &["sandbox_id"],
        _ => &[],
    };
    args.contains(&k)
}

/// A call's arguments, read with the checks each kind needs.
struct Args<'v>(&'v Value);

impl Args<'_> {
    fn str(&self, k: &str) -> Result<Option<&str>, Failed> {
        match &self.0[k] {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            _ => Err(format!("{k} must be a string")),
        }
    }

    fn need(&self, k: &str) -> Result<&str, Failed> {
        self.str(k)?.ok_or_else(|| format!("{k} is required"))
    }

    fn strings(&self, k: &str) -> Result<Option<Vec<String>>, Failed> {
        match &self.0[k] {
            Value::Null => Ok(None),
            Value::Array(a) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string).ok_or_else(|| format!("{k} must be strings")))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            _ => Err(format!("{k} must be an array of strings")),
        }
    }

    fn int(&self, k: &str, min: u64, max: u64) -> Result<Option<u64>, Failed> {
        match &self.0[k] {
            Value::Null => Ok(None),
            v => match v.as_u64() {
                Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
                _ => Err(format!("{k} must be a whole number from {min} to {max}")),
            },
        }
    }

    /// `env` as checked `K=V` pairs, as `--env` takes them.
    fn env(&self) -> Result<Vec<(String, String)>, Failed> {
        match &self.0["env"] {
            Value::Null => Ok(Vec::new()),
            Value::Object(m) => {
                if m.len() > 256 {
                    return Err("env has more than 256 variables".into());
                }
                m.iter()
                    .map(|(k, v)| {
                        let v = v.as_str().ok_or_else(|| format!("env.{k} must be a string"))?;
                        crate::serve::env_var(k, v).map_err(msg)
                    })
                    .collect()
            }
            _ => Err("env must be an object of strings".into()),
        }
    }

    /// The sandbox `sandbox_id` names, when this session made it.
    fn sandbox(&self, session: &Session) -> Result<String, Failed> {
        let id = self.need("sandbox_id")?;
        let parsed: crate::model::names::SandboxId = id.parse().map_err(msg)?;
        if !session.owns(parsed.as_str()) {
            return Err(format!(
                "{id} is not a sandbox of this session: these tools reach only the sandboxes create_sandbox made here \
                 (list_sandboxes names them)"
            ));
        }
        Ok(parsed.to_string())
    }

    fn path(&self, k: &'static str) -> Result<String, Failed> {
        crate::workbench::sandbox_path(k, self.need(k)?).map_err(msg)
    }
}

fn open<'s>(session: &'s Session, id: &str) -> Result<Target<'s>, Failed> {
    session.ops.open(id).map_err(msg)
}

fn create(session: &Session, a: &Args) -> Result<Value, Failed> {
    let template = a.need("template")?.to_string();
    let ttl = match a.str("ttl")? {
        Some(t) => crate::spec::parse_ttl(t).map_err(msg)?,
        None => session.ttl,
    };
    let allow = a.strings("allow")?.unwrap_or_default();
    let rules = allow.iter().map(|r| AllowRule::parse(r, false)).collect::<Result<Vec<_>, _>>().map_err(msg)?;
    let keep = match &a.0["keep"] {
        Value::Null => false,
        Value::Bool(b) => *b,
        _ => return Err("keep must be true or false".into()),
    };
    let env = a.env()?;
    // The allow rules go to the gate at create, as a create's allowOut.
    let new = crate::serve::NewSandbox {
        template: template.clone(),
        timeout_secs: ttl.as_secs(),
        env,
        metadata: Default::default(),
        network: crate::serve::NetworkAsk { allow_out: allow.clone(), ..Default::default() },
    };
    let made = crate::serve::create_recorded(&session.ops, &session.shared, new).map_err(|r| {
        if r.0 != hyper::StatusCode::NOT_FOUND {
            return r.1;
        }
        let known = session.templates.keys().cloned().collect::<Vec<_>>().join(", ");
        format!(
            "no template {template:?}: the templates are {known} (or an image pinned by digest, or a warm pool's name)"
        )
    })?;
    let id = made["sandboxID"].as_str().ok_or("the create named no sandbox")?.to_string();
    session
        .made
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id.clone(), Made { template: template.clone(), keep });
    let mut answer = json!({ "sandbox_id": id, "template": template, "ttl": humantime::format_duration(ttl).to_string(), "keep": keep });
    if !rules.is_empty() {
        let policy = session.ops.driver.egress_policy(&id).map_err(msg)?;
        answer["allow"] = json!(policy.rules.iter().map(ToString::to_string).collect::<Vec<_>>());
    }
    Ok(answer)
}

fn destroy_id(session: &Session, id: &str) -> Result<bool, Failed> {
    let done = session.ops.driver.destroy(&[id.to_string()]).map_err(msg)?;
    session.made.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    Ok(!done.removed.is_empty())
}

fn destroy(session: &Session, a: &Args) -> Result<Value, Failed> {
    let id = a.sandbox(session)?;
    let removed = destroy_id(session, &id)?;
    Ok(json!({ "sandbox_id": id, "destroyed": true, "was_gone": !removed }))
}

fn list(session: &Session) -> Result<Value, Failed> {
    let made = session.made.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if made.is_empty() {
        return Ok(json!({ "sandboxes": [] }));
    }
    let records = session.ops.driver.list().map_err(msg)?;
    let rows: Vec<Value> = made
        .iter()
        .map(|(id, m)| {
            let r = records.iter().find(|r| &r.id == id);
            json!({
                "sandbox_id": id,
                "template": m.template,
                "state": r.map_or("gone", |r| r.state.as_str()),
                "expires_at": r.and_then(|r| r.expires_at.clone()),
                "keep": m.keep,
            })
        })
        .collect();
    Ok(json!({ "sandboxes": rows }))
}

/// What run_command runs: `argv`, or `shell` through /bin/sh -c.
fn command(a: &Args) -> Result<Vec<String>, Failed> {
    match (a.strings("argv")?, a.str("shell")?) {
        (Some(argv), None) if !argv.is_empty() && !argv[0].is_empty() => Ok(argv),
        (None, Some(line)) if !line.trim().is_empty() => Ok(vec!["/bin/sh".into(), "-c".into(), line.into()]),
        (Some(_), Some(_)) => Err("give argv or shell, not both".into()),
        (None, None) => Err("give argv (the program and its arguments) or shell (a command line)".into()),
        _ => Err("the command is empty".into()),
    }
}

fn run(session: &Session, a: &Args) -> Result<Value, Failed> {
    let id = a.sandbox(session)?;
    let cmd = command(a)?;
    let timeout = Duration::from_secs(a.int("timeout_secs", 1, MAX_TIMEOUT_SECS)?.unwrap_or(DEFAULT_TIMEOUT_SECS));
    let max = a.int("max_output_bytes", 0, MAX_OUTPUT)?.unwrap_or(DEFAULT_OUTPUT) as usize;
    let enc = Encoding::parse(&a.0["encoding"])?;
    let workdir = a.str("cwd")?.map(|c| crate::workbench::sandbox_path("cwd", c)).transpose().map_err(msg)?;
    let mut env = a.env()?;
    // The tag reaches the command and all it starts: a timeout kills them all.
    let token = format!("{:016x}{:016x}", rand::random::<u64>(), rand::random::<u64>());
    env.push((crate::workbench::exec::TAG_VAR.to_string(), token.clone()));
    let opts = ExecOpts { env, workdir, ..Default::default() };
    let target = open(session, &id)?;
    let (mut out, mut err) = (Capped::new(max), Capped::new(max));
    let started = std::time::Instant::now();
    let (ran, timed_out) = std::thread::scope(|s| {
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let (t, tag) = (&target, &token);
        let timer = s.spawn(move || {
            let expired = matches!(wait.recv_timeout(timeout), Err(std::sync::mpsc::RecvTimeoutError::Timeout));
            if expired {
                let _ = crate::workbench::kill_tagged(t, tag, 9, Duration::ZERO);
            }
            expired
        });
        let mut relay = |ev: RunEvent<'_>| {
            match ev {
                RunEvent::Started(_) => {}
                RunEvent::Stdout(b) => out.push(b),
                RunEvent::Stderr(b) => err.push(b),
            }
            Ok(())
        };
        let ran = crate::workbench::exec_streamed(
            &target,
            &opts,
            &cmd,
            crate::workbench::RunIo { input: None, stdin: false, pty: None },
            &mut relay,
        );
        let _ = done.send(());
        (ran, timer.join().unwrap_or(false))
    });
    let mut r = Map::new();
    r.insert("sandbox_id".into(), json!(id));
    match ran {
        Ok(RunEnd::Code(c)) => r.insert("exit_code".into(), json!(c)),
        Ok(RunEnd::Signal(s)) => r.insert("signal".into(), json!(s)),
        // Killed for its timeout, the helper may not say how it ended.
        Err(_) if timed_out => None,
        Err(e) => return Err(msg(e)),
    };
    let mut notes = Vec::new();
    if timed_out {
        r.insert("timed_out".into(), json!(true));
        notes.push(format!("killed after timeout_secs {} with all it started", timeout.as_secs()));
    }
    notes.extend(stream_fields("stdout", &out, enc, &mut r));
    notes.extend(stream_fields("stderr", &err, enc, &mut r));
    r.insert("seconds".into(), json!((started.elapsed().as_millis() as f64 / 1000.0)));
    if !notes.is_empty() {
        r.insert("notes".into(), json!(notes));
    }
    Ok(Value::Object(r))
}

fn read(session: &Session, a: &Args) -> Result<Value, Failed> {
    let id = a.sandbox(session)?;
    let path = a.path("path")?;
    let enc = Encoding::parse(&a.0["encoding"])?;
    let max = a.int("max_bytes", 1, MAX_FILE)?.unwrap_or(DEFAULT_READ);
    let target = open(session, &id)?;
    // `max` is checked here, in the tool's words; the cap is the caller's.
    let limits = crate::workbench::transfer::Limits { max_bytes: u64::MAX, max_entries: 1 };
    let mut data = Vec::new();
    let mut sized = |n: u64| match n > max {
        true => Err(std::io::Error::other(format!("{path} is {n} bytes, over max_bytes {max}"))),
        false => Ok(()),
    };
    let mut sink = |b: &[u8]| {
        if (data.len() + b.len()) as u64 > max {
            return Err(std::io::Error::other(format!("{path} is over max_bytes {max}")));
        }
        data.extend_from_slice(b);
        Ok(())
    };
    crate::workbench::read_file(&target, &path, &limits, &mut sized, &mut sink).map_err(msg)?;
    let mut r = json!({ "sandbox_id": id, "path": path, "bytes": data.len() });
    match enc {
        Encoding::Base64 => r["base64"] = json!(base64::engine::general_purpose::STANDARD.encode(&data)),
        Encoding::Text => match String::from_utf8(data) {
            Ok(text) => r["text"] = json!(text),
            Err(e) => {
                r["text"] = json!(String::from_utf8_lossy(e.as_bytes()));
                r["notes"] = json!(["the file is not all UTF-8: shown with U+FFFD; encoding base64 gives its bytes"]);
            }
        },
    }
    Ok(r)
}

fn write(session: &Session, a: &Args) -> Result<Value, Failed> {
    let id = a.sandbox(session)?;
    let path = a.path("path")?;
    let data = match (a.str("text")?, a.str("base64")?) {
        (Some(t), None) => t.as_bytes().to_vec(),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|e| format!("base64 is not base64 (standard alphabet, padded): {e}"))?,
        (Some(_), Some(_)) => return Err("give text or base64, not both".into()),
        (None, None) => return Err("give the content as text or as base64".into()),
    };
    if data.len() as u64 > MAX_FILE {
        return Err(format!("the content is {} bytes, over {MAX_FILE}", data.len()));
    }
    let target = open(session, &id)?;
    crate::workbench::write_file(&target, &path, &data).map_err(msg)?;
    Ok(json!({ "sandbox_id": id, "path": path, "bytes": data.len() }))
}

fn list_dir(session: &Session, a: &Args) -> Result<Value, Failed> {
    use crate::model::text::inert_name;
    use crate::workbench::listing::{self, Item, ListOpts};
    let id = a.sandbox(session)?;
    let path = a.path("path")?;
    let depth = a.int("depth", 1, listing::MAX_DEPTH as u64)?.unwrap_or(1) as u32;
    let target = open(session, &id)?;
    let mut entries = Vec::new();
    let sum = listing::list(&target, &path, ListOpts { max_depth: depth, limit: MAX_ENTRIES }, &mut |i| {
        if let Item::Entry(e) = i {
            let mut v = json!({
                "path": inert_name(&e.path.under(&path)),
                "type": e.kind.word(),
                "size": e.size,
                "mode": format!("{:o}", e.mode),
                "mtime": e.mtime,
            });
            if let Some(t) = &e.target {
                v["target"] = json!(inert_name(t));
            }
            entries.push(v);
        }
        Ok(())
    })
    .map_err(msg)?;
    if !sum.root_is_dir {
        return Err(format!("{path} is not a directory (a symlink is never followed)"));
    }
    let mut r = json!({ "sandbox_id": id, "path": path, "entries": entries });
    let mut notes = Vec::new();
    if sum.truncated {
        notes.push(format!("stopped at {MAX_ENTRIES} entries: list a directory below, or less depth"));
    }
    if sum.cut > 0 {
        notes.push(format!("{} directories at depth {depth} were not listed into", sum.cut));
    }
    if sum.unreadable_count > 0 {
        notes.push(format!("{} entries could not be read", sum.unreadable_count));
    }
    if !notes.is_empty() {
        r["notes"] = json!(notes);
    }
    Ok(r)
}

/// allow_hosts / deny_hosts: the policy changed as `sbx allow` / `sbx deny` change it.
fn egress(session: &Session, a: &Args, deny: bool) -> Result<Value, Failed> {
    let id = a.sandbox(session)?;
    let hosts = a.strings("hosts")?.filter(|h| !h.is_empty()).ok_or("hosts is required: one rule at least")?;
    let rules = hosts.iter().map(|r| AllowRule::parse(r, false)).collect::<Result<Vec<_>, _>>().map_err(msg)?;
    let (policy, removed) = session
        .ops
        .driver
        .change_egress(&id, |p| {
            if deny {
                p.deny(&rules)
            } else {
                p.allow(&rules);
                Vec::new()
            }
        })
        .map_err(msg)?;
    let allow: Vec<String> = policy.rules.iter().map(ToString::to_string).collect();
    let mut r = json!({ "sandbox_id": id, "allow": allow });
    if deny {
        let missing: Vec<String> = rules.iter().filter(|x| !removed.contains(x)).map(ToString::to_string).collect();
        r["not_allowed"] = json!(missing);
    }
    Ok(r)
}

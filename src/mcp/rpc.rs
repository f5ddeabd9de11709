//! MCP's JSON-RPC 2.0 over stdio, as the specification's handshake era
//! has it (2024-11-05 to 2025-11-25): `initialize`, `ping`, `tools/list`,
//! `tools/call`, and the client's notifications, which get no answer.
//! Every line is checked before anything is done: not JSON, not an object
//! of JSON-RPC 2.0, an id that is neither a string nor an integer, a batch
//! (none since 2025-06-18) each get JSON-RPC's own error. A tool's failure
//! is a result with `isError`, so the model sees what went wrong.

use serde_json::{json, Value};

use super::{Replies, Session, MAX_CALLS};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;

/// The protocol versions served, newest first: the handshake's era.
/// Newer clients first probe `server/discover` (the per-request era) and,
/// told it is not a method here, fall back to `initialize`.
pub const VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// One message from the client, checked.
#[derive(Debug, PartialEq)]
pub enum Message {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
    },
    /// An answer to a request of ours (sbx sends none): ignored.
    Reply,
}

pub fn error(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

fn result(id: Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// A line as a message; Err is the error to answer with.
pub fn parse(line: &[u8]) -> Result<Message, Value> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let v: Value = serde_json::from_slice(line)
        .map_err(|e| error(Value::Null, PARSE_ERROR, &format!("the line is not JSON (one message a line): {e}")))?;
    let invalid = |id: Value, m: &str| error(id, INVALID_REQUEST, m);
    let o = match v {
        Value::Object(o) => o,
        Value::Array(_) => {
            return Err(invalid(Value::Null, "a batch: MCP has none since 2025-06-18; send one message a line"))
        }
        _ => return Err(invalid(Value::Null, "a message must be a JSON object")),
    };
    let id = match o.get("id") {
        None => None,
        Some(i @ Value::String(_)) => Some(i.clone()),
        Some(i @ Value::Number(n)) if n.is_i64() || n.is_u64() => Some(i.clone()),
        Some(_) => return Err(invalid(Value::Null, "id must be a string or an integer")),
    };
    if o.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(invalid(id.unwrap_or(Value::Null), "jsonrpc must be \"2.0\""));
    }
    let Some(method) = o.get("method") else {
        if o.contains_key("result") || o.contains_key("error") {
            return Ok(Message::Reply);
        }
        return Err(invalid(id.unwrap_or(Value::Null), "a request needs a method"));
    };
    let Some(method) = method.as_str().map(str::to_string) else {
        return Err(invalid(id.unwrap_or(Value::Null), "method must be a string"));
    };
    let params = o.get("params").cloned().unwrap_or(Value::Null);
    Ok(match id {
        Some(id) => Message::Request { id, method, params },
        None => Message::Notification { method },
    })
}

/// Answer one line: a tool call on a thread of its own (at most
/// [`MAX_CALLS`] at once), everything else at once.
pub fn serve_line<'scope>(
    session: &'scope Session<'_>,
    line: &[u8],
    replies: &'scope Replies<'_>,
    s: &'scope std::thread::Scope<'scope, '_>,
) {
    use std::sync::atomic::Ordering::SeqCst;
    match parse(line) {
        Err(e) => {
            replies.send(&e);
        }
        Ok(Message::Request { id, method, params }) if method == "tools/call" => {
            if session.calls.fetch_add(1, SeqCst) >= MAX_CALLS {
                session.calls.fetch_sub(1, SeqCst);
                replies.send(&error(
                    id,
                    INVALID_REQUEST,
                    &format!("{MAX_CALLS} tool calls are running; wait for one to end"),
                ));
                return;
            }
            s.spawn(move || {
                let answer = call(session, id, &params);
                session.calls.fetch_sub(1, SeqCst);
                replies.send(&answer);
            });
        }
        Ok(m) => {
            if let Some(a) = answer(session, m) {
                replies.send(&a);
            }
        }
    }
}

/// What a message is answered with (None: a notification or a reply),
/// tool calls included, on this thread.
pub fn answer(session: &Session, m: Message) -> Option<Value> {
    let (id, method, params) = match m {
        Message::Request { id, method, params } => (id, method, params),
        Message::Notification { .. } | Message::Reply => return None,
    };
    Some(match method.as_str() {
        "initialize" => result(id, initialize(session, &params)),
        "ping" => result(id, json!({})),
        "tools/list" => result(id, json!({ "tools": super::catalog::tools(session) })),
        "tools/call" => call(session, id, &params),
        m => error(
            id,
            METHOD_NOT_FOUND,
            &format!("{m:?} is not served: sbx mcp serves tools only (initialize, ping, tools/list, tools/call)"),
        ),
    })
}

/// The handshake: the client's version when it is one of ours, else our newest.
fn initialize(session: &Session, params: &Value) -> Value {
    let asked = params["protocolVersion"].as_str().unwrap_or("");
    let version = VERSIONS.iter().find(|v| **v == asked).copied().unwrap_or(VERSIONS[0]);
    *session.version.lock().unwrap_or_else(|p| p.into_inner()) = Some(version.to_string());
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": { "name": "sbx", "title": "sbx sandboxes", "version": env!("CARGO_PKG_VERSION") },
        "instructions": super::catalog::INSTRUCTIONS,
    })
}

/// `tools/call {name, arguments}`: the tool's result, `isError` when it
/// failed; a call that names no tool of ours is a protocol error.
fn call(session: &Session, id: Value, params: &Value) -> Value {
    let Some(name) = params["name"].as_str() else {
        return error(id, INVALID_PARAMS, "tools/call needs params.name, a tool's name (tools/list names them)");
    };
    let args = match &params["arguments"] {
        Value::Null => json!({}),
        a @ Value::Object(_) => a.clone(),
        _ => return error(id, INVALID_PARAMS, "params.arguments must be an object"),
    };
    if !super::catalog::NAMES.contains(&name) {
        let known = super::catalog::NAMES.join(", ");
        return error(id, INVALID_PARAMS, &format!("no tool {name:?}; the tools are {known}"));
    }
    let outcome = super::tools::call(session, name, &args);
    let (text, structured, is_error) = match outcome {
        Ok(v) => (serde_json::to_string_pretty(&v).expect("JSON serializes"), v, false),
        Err(message) => (message.clone(), json!({ "error": message }), true),
    };
    result(
        id,
        json!({
            "content": [{ "type": "text", "text": text }],
            "structuredContent": structured,
            "isError": is_error,
        }),
    )
}

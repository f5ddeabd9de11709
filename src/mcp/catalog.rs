//! The tools as `tools/list` describes them to a model: what each does,
//! what it cannot do, and its arguments as a JSON Schema.

use serde_json::{json, Value};

use super::Session;

/// Every tool, in the order `tools/list` gives them.
pub const NAMES: &[&str] = &[
    "create_sandbox",
    "run_command",
    "read_file",
    "write_file",
    "list_dir",
    "allow_hosts",
    "deny_hosts",
    "destroy_sandbox",
    "list_sandboxes",
];

pub const INSTRUCTIONS: &str = "sbx runs your commands in disposable, hardened sandboxes on this machine. \
Call create_sandbox first and pass its sandbox_id to the other tools. A sandbox has no network unless hosts \
are allowed, no root and a read-only root file system: write under /tmp or /state/workspace. Sandboxes are \
destroyed when this session ends unless created with keep.";

/// The most a run_command waits for its command.
pub const MAX_TIMEOUT_SECS: u64 = 3600;
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// What one stream of a command's output keeps, by default and at most.
pub const DEFAULT_OUTPUT: u64 = 64 * 1024;
pub const MAX_OUTPUT: u64 = 1024 * 1024;
/// The largest file read_file and write_file carry.
pub const MAX_FILE: u64 = 16 * 1024 * 1024;
pub const DEFAULT_READ: u64 = 1024 * 1024;
/// The most entries one list_dir answers with.
pub const MAX_ENTRIES: u64 = 10_000;

fn id_arg() -> Value {
    json!({ "type": "string", "description": "The sandbox_id create_sandbox returned (sbx-<12 hex>)." })
}

fn tool(name: &str, title: &str, description: String, properties: Value, required: &[&str], hints: Value) -> Value {
    let mut annotations = hints;
    annotations["title"] = json!(title);
    json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        },
        "annotations": annotations,
    })
}

/// The `tools/list` answer's tools; create_sandbox names this session's templates and TTL.
pub fn tools(session: &Session) -> Vec<Value> {
    let templates = match session.templates.keys().cloned().collect::<Vec<_>>() {
        t if t.is_empty() => {
            "none were given (sbx mcp --template NAME=IMAGE); an image pinned by digest (sha256:<64 hex>) still is one"
                .to_string()
        }
        t => t.join(", "),
    };
    let ttl = humantime::format_duration(session.ttl).to_string();
    let path =
        |what: &str| json!({ "type": "string", "description": format!("Absolute path in the sandbox of the {what}.") });
    let rules = json!({
        "type": "array", "items": { "type": "string" }, "minItems": 1,
        "description": "HOST[:PORT] (port 443 unless given), *.SUFFIX[:PORT] or CIDR:PORT, e.g. pypi.org or files.pythonhosted.org:443.",
    });
    vec![
        tool(
            "create_sandbox",
            "Create a sandbox",
            format!(
                "Create a fresh, disposable sandbox from a template and return its sandbox_id. Templates: {templates}. \
                 It is a hardened container: no root, no capabilities, a read-only root file system (write under /tmp \
                 and /state/workspace), and no network at all unless `allow` names hosts. It lives for `ttl` (default \
                 {ttl}) and is destroyed when this session ends, unless `keep` is true (then only its TTL ends it). \
                 Cannot: use an image that is not a template or pinned by digest, run anything as root, mount host \
                 files, publish ports, or reach a host that is not allowed; `allow` works only where sbx mcp gives its \
                 sandboxes an egress gate."
            ),
            json!({
                "template": { "type": "string", "description": "A template name (see above), or an image pinned by digest." },
                "ttl": { "type": "string", "description": format!("How long it may live, e.g. 30m, 2h (1s to 366d; default {ttl}).") },
                "allow": { "type": "array", "items": { "type": "string" }, "description": "Hosts it may reach through its egress gate, as allow_hosts takes them." },
                "env": { "type": "object", "additionalProperties": { "type": "string" }, "description": "Environment variables for every command run in it." },
                "keep": { "type": "boolean", "description": "Leave it running (until its TTL) when this session ends. Default false." },
            }),
            &["template"],
            json!({ "readOnlyHint": false, "destructiveHint": false, "openWorldHint": false }),
        ),
        tool(
            "run_command",
            "Run a command",
            format!(
                "Run one command in a sandbox and return its exit code (or the signal that ended it), stdout and \
                 stderr. Give `argv` (run as it is, no shell) or `shell` (one line for /bin/sh -c; the image must have \
                 /bin/sh). Each stream keeps its first `max_output_bytes` (default {DEFAULT_OUTPUT}, at most \
                 {MAX_OUTPUT}); the rest is counted and dropped, and the result says so. Output that is not UTF-8 is \
                 shown with U+FFFD and control characters escaped; ask `encoding: base64` for the exact bytes. After \
                 `timeout_secs` (default {DEFAULT_TIMEOUT_SECS}, at most {MAX_TIMEOUT_SECS}) the command and all it \
                 started are killed. Cannot: read stdin (it is empty), allocate a terminal, run as another user, or \
                 keep running after it returns (start a background job with `shell` and nohup, within its TTL)."
            ),
            json!({
                "sandbox_id": id_arg(),
                "argv": { "type": "array", "items": { "type": "string" }, "minItems": 1, "description": "The program and its arguments." },
                "shell": { "type": "string", "description": "A shell command line, run as /bin/sh -c LINE." },
                "cwd": { "type": "string", "description": "Absolute working directory (default: the image's)." },
                "env": { "type": "object", "additionalProperties": { "type": "string" }, "description": "Extra environment variables." },
                "timeout_secs": { "type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_SECS },
                "max_output_bytes": { "type": "integer", "minimum": 0, "maximum": MAX_OUTPUT },
                "encoding": { "type": "string", "enum": ["text", "base64"], "description": "How stdout and stderr come back (default text)." },
            }),
            &["sandbox_id"],
            json!({ "readOnlyHint": false, "destructiveHint": true, "openWorldHint": false }),
        ),
        tool(
            "read_file",
            "Read a file",
            format!(
                "Read one regular file of a sandbox, byte-exact: as text (UTF-8; other bytes are shown as U+FFFD and \
                 the result says so) or as base64. A symlink is never followed. Cannot: read more than `max_bytes` \
                 (default {DEFAULT_READ}, at most {MAX_FILE}; a larger file is refused, not cut), read a directory \
                 (list_dir does) or parts of a file."
            ),
            json!({
                "sandbox_id": id_arg(),
                "path": path("file"),
                "encoding": { "type": "string", "enum": ["text", "base64"], "description": "Default text." },
                "max_bytes": { "type": "integer", "minimum": 1, "maximum": MAX_FILE },
            }),
            &["sandbox_id", "path"],
            json!({ "readOnlyHint": true, "openWorldHint": false }),
        ),
        tool(
            "write_file",
            "Write a file",
            format!(
                "Write one regular file in a sandbox (made, or replaced; its missing parent directories are made; mode \
                 0644) from `text` or from `base64`, exactly one of them. A symlink at the path is replaced, never \
                 written through. Cannot: write more than {MAX_FILE} bytes, write where the sandbox's user may not \
                 (its root file system is read-only: use /tmp or /state/workspace), or append."
            ),
            json!({
                "sandbox_id": id_arg(),
                "path": path("file"),
                "text": { "type": "string", "description": "The file's content, as UTF-8." },
                "base64": { "type": "string", "description": "The file's content, base64 (standard alphabet, padded)." },
            }),
            &["sandbox_id", "path"],
            json!({ "readOnlyHint": false, "destructiveHint": true, "openWorldHint": false }),
        ),
    ]
    .into_iter()
    .chain(more_tools(rules))
    .collect()
}

/// The tools after write_file: listing, egress, destroy and list.
fn more_tools(rules: Value) -> Vec<Value> {
    let path =
        |what: &str| json!({ "type": "string", "description": format!("Absolute path in the sandbox of the {what}.") });
    vec![
        tool(
            "list_dir",
            "List a directory",
            format!(
                "List a directory of a sandbox: each entry's path, type, size, mode, modification time and, for a \
                 symlink, its target (never followed). Names that are not printable UTF-8 are shown escaped (\\xNN, \
                 \\n). Cannot: list more than {MAX_ENTRIES} entries (the result says when it stopped) or go deeper \
                 than {} levels.",
                crate::workbench::listing::MAX_DEPTH
            ),
            json!({
                "sandbox_id": id_arg(),
                "path": path("directory"),
                "depth": { "type": "integer", "minimum": 1, "maximum": crate::workbench::listing::MAX_DEPTH, "description": "1 (default): the directory's own entries." },
            }),
            &["sandbox_id", "path"],
            json!({ "readOnlyHint": true, "openWorldHint": false }),
        ),
        tool(
            "allow_hosts",
            "Allow hosts",
            "Let a running sandbox reach more hosts through its egress gate (within a second) and return its whole \
             allowlist. Cannot: give network to a sandbox made without an egress gate (it has none at all), or allow \
             loopback, link-local or the Docker host's own addresses."
                .to_string(),
            json!({ "sandbox_id": id_arg(), "hosts": rules.clone() }),
            &["sandbox_id", "hosts"],
            json!({ "readOnlyHint": false, "destructiveHint": false, "openWorldHint": true }),
        ),
        tool(
            "deny_hosts",
            "Deny hosts",
            "Take hosts off a sandbox's allowlist (its open connections to them are cut) and return the allowlist \
             left, and which of the hosts were not on it. Cannot: act on a sandbox without an egress gate."
                .to_string(),
            json!({ "sandbox_id": id_arg(), "hosts": rules }),
            &["sandbox_id", "hosts"],
            json!({ "readOnlyHint": false, "destructiveHint": true, "openWorldHint": false }),
        ),
        tool(
            "destroy_sandbox",
            "Destroy a sandbox",
            "Destroy a sandbox this session made, with everything in it (its files are gone). Cannot: be undone, or \
             destroy a sandbox another session or the sbx CLI made."
                .to_string(),
            json!({ "sandbox_id": id_arg() }),
            &["sandbox_id"],
            json!({ "readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false }),
        ),
        tool(
            "list_sandboxes",
            "List sandboxes",
            "List the sandboxes this session made and still has: id, template, state, expiry, whether kept. \
             Cannot: show sandboxes of other sessions or of the sbx CLI."
                .to_string(),
            json!({}),
            &[],
            json!({ "readOnlyHint": true, "openWorldHint": false }),
        ),
    ]
}

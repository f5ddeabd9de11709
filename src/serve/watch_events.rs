//! What both kinds of watch (WatchDir's stream, CreateWatcher's buffer)
//! share: the request, envd's events of the helper's lines, and how a
//! watch ends in Connect's words.

use serde_json::{json, Value};

use super::fs::{code_of, Refused};
use crate::workbench::lines::{Change, WatchLine};
use crate::workbench::{listing, WatchEnd};

/// The signal a watch is stopped with (the client went, or stopped it).
pub const STOP: i32 = 15;

/// What a WatchDir or CreateWatcher request asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub path: String,
    pub recursive: bool,
}

/// A request field by its JSON name or its proto name (Connect takes both).
fn field<'a>(msg: &'a Value, json: &str, proto: &str) -> &'a Value {
    match &msg[json] {
        Value::Null => &msg[proto],
        v => v,
    }
}

/// The message of a WatchDir or CreateWatcher request, checked.
pub fn parse(msg: &Value) -> Result<Asked, Refused> {
    let bad = |m: String| ("invalid_argument", m);
    let s = msg["path"].as_str().ok_or_else(|| bad("path is required".into()))?;
    let path = listing::sandbox_path("path", s).map_err(|e| bad(e.to_string()))?;
    let flag = |json: &str, proto: &str| match field(msg, json, proto) {
        Value::Null => Ok(false),
        Value::Bool(b) => Ok(*b),
        v => Err(bad(format!("{proto} {v} is not a boolean"))),
    };
    let recursive = flag("recursive", "recursive")?;
    // Past envd 0.5.7 (what sbx reports): the SDK itself refuses both first.
    if flag("includeEntry", "include_entry")? {
        return Err(bad("include_entry is not supported by sbx serve yet: watch without it".into()));
    }
    if flag("allowNetworkMounts", "allow_network_mounts")? {
        return Err(bad("allow_network_mounts is not supported by sbx serve yet: watch without it".into()));
    }
    Ok(Asked { path, recursive })
}

/// envd's events for one line of the helper's: `{"name", "type"}` each.
/// None for lines that are no event (READY, LIMIT, OVERFLOW, W).
pub fn events_of(l: &WatchLine) -> Option<Vec<Value>> {
    let ev = |name: &[u8], t: &str| json!({ "name": String::from_utf8_lossy(name), "type": t });
    Some(match l {
        WatchLine::Changed { change, path, .. } => {
            let t = match change {
                Change::Created => "EVENT_TYPE_CREATE",
                Change::Modified => "EVENT_TYPE_WRITE",
                Change::Deleted => "EVENT_TYPE_REMOVE",
                Change::Attrib => "EVENT_TYPE_CHMOD",
            };
            vec![ev(&path.joined(), t)]
        }
        WatchLine::Moved { from, to } => {
            vec![ev(&from.joined(), "EVENT_TYPE_RENAME"), ev(&to.joined(), "EVENT_TYPE_CREATE")]
        }
        WatchLine::Gone => vec![ev(b".", "EVENT_TYPE_REMOVE")],
        WatchLine::Ready | WatchLine::Overflow | WatchLine::Limit(_) | WatchLine::Unreadable { .. } => return None,
    })
}

/// What ends a watch that the helper's lines decide: events lost, or the
/// watch limit reached (changes below `path`'s subdirectory not seen).
pub fn fatal(l: &WatchLine, path: &str) -> Option<Refused> {
    match l {
        WatchLine::Overflow => Some((
            "data_loss",
            format!("changes below {path} came faster than they were read and some were lost; watch again"),
        )),
        WatchLine::Limit(p) => Some((
            "resource_exhausted",
            format!(
                "the inotify watch limit was reached at {}: changes below it would not be seen; \
                 watch less (no recursive), or raise fs.inotify.max_user_watches on the host",
                String::from_utf8_lossy(&p.under(path))
            ),
        )),
        _ => None,
    }
}

/// How a watch that ended on its own says so: None for a clean end.
pub fn end_of(id: &str, end: crate::error::Result<WatchEnd>) -> Option<Refused> {
    match end {
        Ok(WatchEnd::Gone | WatchEnd::Closed | WatchEnd::Signal(_)) => None,
        // "was not found": what the SDK takes for a sandbox gone (SandboxNotRunningException).
        Ok(WatchEnd::SandboxEnded) => {
            Some(("unavailable", format!("sandbox {id} was not found: it ended (destroyed, or its TTL ran out)")))
        }
        Err(e) => Some(code_of(&e)),
    }
}

//! sbx's own messages on stderr besides the final error: warnings and
//! notes. One channel, so that under `--json` each is one JSON object per
//! line (`{"warning":{"kind":..,"message":..}}`, `{"note":{..}}`) and no
//! plain prose mixes into a machine-read stream (issue 10 item 6).
//! The command's own output (`exec`, `logs`, `--setup`) is not sbx's and
//! does not go through here.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static JSON: AtomicBool = AtomicBool::new(false);

/// Set once by `run` from `--json`.
pub fn set_json(on: bool) {
    JSON.store(on, Ordering::Relaxed);
}

pub fn json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// The line `warn`/`note` print, as a pure function for tests.
pub fn render(level: &str, kind: &str, message: &str, json: bool) -> String {
    if json {
        serde_json::json!({ level: { "kind": kind, "message": message } }).to_string()
    } else if level == "warning" {
        // Messages may quote what a sandbox wrote: never raw to the terminal.
        format!("sbx: warning: {}", crate::error::for_terminal(message))
    } else {
        format!("sbx: {}", crate::error::for_terminal(message))
    }
}

/// Something the user should know; the command goes on.
pub fn warn(kind: &str, message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", render("warning", kind, message, json()));
}

/// Progress or a remark (not a problem).
pub fn note(kind: &str, message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", render("note", kind, message, json()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_messages_are_one_object_per_line() {
        let line = render("warning", "tier_lowered", "a \"quoted\"\nmessage", true);
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["warning"]["kind"], "tier_lowered");
        assert_eq!(v["warning"]["message"], "a \"quoted\"\nmessage");
        assert_eq!(render("warning", "k", "m", false), "sbx: warning: m");
        assert_eq!(render("note", "k", "m", false), "sbx: m");
    }
}

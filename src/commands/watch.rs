//! `sbx watch ID PATH`: one line per change below a sandbox directory
//! (text, or with --json one object per line) until Ctrl-C, the directory
//! or the sandbox goes.

use super::Context;
use crate::cli::WatchArgs;
use crate::error::{Error, Result};
use crate::model::text::inert_name;
use crate::workbench::lines::{RelPath, WatchLine};
use crate::workbench::{self, WatchEnd};

pub fn exec(a: &WatchArgs, ctx: &Context) -> Result<u8> {
    let id = &a.id;
    let path = workbench::sandbox_path("path", &a.path)?;
    let target = ctx.driver.open(id)?;
    let signals = (ctx.watch_signals)().map_err(|e| Error::io("watching for signals", e))?;
    let shown_root = inert_name(path.as_bytes());
    let json = ctx.json();
    let mut sink = |l: &WatchLine| -> std::io::Result<()> {
        if let WatchLine::Ready = l {
            let how = if a.recursive { " and below" } else { "" };
            ctx.out.note("watching", &format!("watching {id}:{shown_root}{how} (Ctrl-C to stop)"));
            return Ok(());
        }
        let text = if json { format!("{}\n", event_json(l, &path)) } else { event_row(l, &path) };
        if text.is_empty() {
            return Ok(());
        }
        ctx.out.stream(&text)
    };
    let end = workbench::watch(&target, &path, a.recursive, &signals, &mut sink)?;
    Ok(match end {
        WatchEnd::Signal(sig) => (128 + sig).clamp(0, 255) as u8,
        WatchEnd::Gone => {
            ctx.out.note("watch_ended", &format!("{shown_root} was deleted, moved or unmounted; the watch ended"));
            0
        }
        WatchEnd::SandboxEnded => {
            ctx.out.note("watch_ended", &format!("sandbox {id} ended; the watch is over"));
            0
        }
        WatchEnd::Closed => 0,
    })
}

fn shown(p: &RelPath, root: &str, dir: bool) -> String {
    let mut s = inert_name(&p.under(root));
    if dir {
        s.push('/');
    }
    s
}

/// `created   /tmp/w/a` (a directory with a trailing '/'); names escaped.
pub fn event_row(l: &WatchLine, root: &str) -> String {
    match l {
        WatchLine::Changed { change, dir, path } => format!("{:<9} {}\n", change.word(), shown(path, root, *dir)),
        WatchLine::Moved { from, to } => {
            format!("moved     {} -> {}\n", shown(from, root, false), shown(to, root, false))
        }
        WatchLine::Overflow => {
            "overflow  events were lost (changes came faster than they were read); list again with `sbx files`\n".into()
        }
        WatchLine::Limit(p) => format!(
            "limit     {}: the inotify watch limit was reached; changes below it are not seen\n",
            shown(p, root, true)
        ),
        WatchLine::Unreadable { path, errno } => {
            format!("unwatched {}: {}\n", shown(path, root, true), std::io::Error::from_raw_os_error(*errno))
        }
        WatchLine::Ready | WatchLine::Gone => String::new(),
    }
}

fn put_path(m: &mut serde_json::Map<String, serde_json::Value>, key: &str, p: &RelPath, root: &str) {
    let b = p.under(root);
    m.insert(key.into(), String::from_utf8_lossy(&b).into_owned().into());
    if std::str::from_utf8(&b).is_err() {
        m.insert(format!("{key}_hex"), b.iter().map(|x| format!("{x:02x}")).collect::<String>().into());
    }
}

pub fn event_json(l: &WatchLine, root: &str) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    let event = match l {
        WatchLine::Changed { change, dir, path } => {
            put_path(&mut m, "path", path, root);
            m.insert("type".into(), if *dir { "dir" } else { "file" }.into());
            change.word()
        }
        WatchLine::Moved { from, to } => {
            put_path(&mut m, "from", from, root);
            put_path(&mut m, "to", to, root);
            "moved"
        }
        WatchLine::Overflow => "overflow",
        WatchLine::Limit(p) => {
            put_path(&mut m, "path", p, root);
            "watch_limit"
        }
        WatchLine::Unreadable { path, errno } => {
            put_path(&mut m, "path", path, root);
            m.insert("errno".into(), (*errno).into());
            m.insert("reason".into(), std::io::Error::from_raw_os_error(*errno).to_string().into());
            "unwatched"
        }
        WatchLine::Ready => "ready",
        WatchLine::Gone => "gone",
    };
    m.insert("event".into(), event.into());
    serde_json::Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workbench::lines::Change;

    #[test]
    fn events_are_one_escaped_line_each() {
        let p = RelPath(vec![b"d".to_vec(), b"a\ncreated   /etc/passwd\x1b]0;x\x07".to_vec()]);
        let l = WatchLine::Changed { change: Change::Created, dir: false, path: p.clone() };
        let row = event_row(&l, "/tmp/w");
        assert_eq!(row, "created   /tmp/w/d/a\\ncreated   /etc/passwd\\u{1b}]0;x\\u{7}\n");
        assert_eq!(row.lines().count(), 1);
        let j = event_json(&l, "/tmp/w");
        assert_eq!(j["path"], "/tmp/w/d/a\ncreated   /etc/passwd\u{1b}]0;x\u{7}");
        assert_eq!(j["event"], "created");
        let m = WatchLine::Moved { from: RelPath(vec![b"\xff".to_vec()]), to: p };
        let j = event_json(&m, "/");
        assert_eq!((j["from"].as_str(), j["from_hex"].as_str()), (Some("/\u{fffd}"), Some("2fff")));
        assert_eq!(event_row(&WatchLine::Overflow, "/").split_whitespace().next(), Some("overflow"));
    }
}

//! `sbx files ID PATH` and `sbx mkdir ID PATH`: a sandbox directory's
//! entries (streamed: a table like `ls -l`, or with --json one array, an
//! object per line) and a new directory.

use super::Context;
use crate::cli::{FilesArgs, MkdirArgs};
use crate::error::{Invalid, Result};
use crate::model::text::inert_name;
use crate::workbench::lines::{Entry, Kind};
use crate::workbench::listing::{Item, DEFAULT_DEPTH, MAX_DEPTH, MAX_LIMIT};
use crate::workbench::{self, ListOpts};

pub fn files(a: &FilesArgs, ctx: &Context) -> Result<()> {
    let path = workbench::sandbox_path("path", &a.path)?;
    let max_depth = match a.max_depth {
        Some(n) if !(1..=MAX_DEPTH).contains(&n) => {
            return Err(Invalid::new("--max-depth", n.to_string(), format!("give 1 to {MAX_DEPTH}")).into())
        }
        // A depth above 1 is a recursive listing, asked or not.
        Some(n) => n,
        None if a.recursive => DEFAULT_DEPTH,
        None => 1,
    };
    if !(1..=MAX_LIMIT).contains(&a.limit) {
        return Err(Invalid::new("--limit", a.limit.to_string(), format!("give 1 to {MAX_LIMIT}")).into());
    }
    let opts = ListOpts { max_depth, limit: a.limit };
    let target = ctx.driver.open(&a.id)?;
    let json = ctx.json();
    let mut root_is_dir = true;
    let mut first = true;
    let mut sink = |item: Item<'_>| -> std::io::Result<()> {
        let text = match item {
            Item::Root(k) => {
                root_is_dir = k == Kind::Dir;
                if !json {
                    return Ok(());
                }
                "[".to_string()
            }
            Item::Entry(e) if json => {
                let sep = if first { "\n" } else { ",\n" };
                first = false;
                format!("{sep}{}", entry_json(e, &path, root_is_dir))
            }
            Item::Entry(e) => format!("{}\n", entry_row(e, &path, root_is_dir)),
        };
        write_out(ctx, &text)
    };
    let sum = workbench::list(&target, &path, opts, &mut sink)?;
    if json {
        match write_out(ctx, if first { "]\n" } else { "\n]\n" }) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                return Err(crate::error::Error::io("writing to stdout", e))
            }
            _ => {}
        }
    }
    for (p, errno) in &sum.unreadable {
        let shown = inert_name(&p.under(&path));
        ctx.out.warn("unreadable", &format!("cannot read {shown}: {}", std::io::Error::from_raw_os_error(*errno)));
    }
    if sum.unreadable_count > sum.unreadable.len() as u64 {
        let more = sum.unreadable_count - sum.unreadable.len() as u64;
        ctx.out.warn("unreadable", &format!("{more} more entries could not be read"));
    }
    if sum.truncated {
        ctx.out.warn(
            "truncated",
            &format!("the listing stopped at {} entries (--limit); the first in name order were listed", sum.count),
        );
    }
    // A plain listing never descends, so its subdirectories are not news.
    if sum.cut > 0 && (a.recursive || a.max_depth.is_some()) {
        let what = if sum.cut == 1 { "directory at depth {d} was" } else { "directories at depth {d} were" };
        ctx.out.note(
            "depth_limit",
            &format!("{} {} not descended into (--max-depth)", sum.cut, what.replace("{d}", &max_depth.to_string())),
        );
    }
    Ok(())
}

/// Data on stdout as an io result, so a closed pipe stops the helper.
fn write_out(ctx: &Context, text: &str) -> std::io::Result<()> {
    ctx.out.stream(text)
}

/// `drwxr-xr-x`, with setuid/setgid/sticky as `ls` shows them.
pub fn permissions(kind: Kind, mode: u32) -> String {
    let mut s = String::with_capacity(10);
    s.push(kind.letter());
    let bit = |m: u32, c: char| if mode & m != 0 { c } else { '-' };
    let special = |x: u32, sp: u32, on: char, off: char| match (mode & x != 0, mode & sp != 0) {
        (true, true) => on,
        (false, true) => off,
        (true, false) => 'x',
        (false, false) => '-',
    };
    s.push(bit(0o400, 'r'));
    s.push(bit(0o200, 'w'));
    s.push(special(0o100, 0o4000, 's', 'S'));
    s.push(bit(0o040, 'r'));
    s.push(bit(0o020, 'w'));
    s.push(special(0o010, 0o2000, 's', 'S'));
    s.push(bit(0o004, 'r'));
    s.push(bit(0o002, 'w'));
    s.push(special(0o001, 0o1000, 't', 'T'));
    s
}

fn time(mtime: i64) -> String {
    // humantime shows 1970 to 9999 (and panics before 1970); anything else is said as seconds.
    match u64::try_from(mtime) {
        Ok(s) if s < 253_402_300_800 => {
            humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(s)).to_string()
        }
        _ => format!("@{mtime}"),
    }
}

/// One `ls -l`-like line; every name escaped, so one entry is one line.
pub fn entry_row(e: &Entry, path: &str, root_is_dir: bool) -> String {
    let name = if root_is_dir { inert_name(&e.path.joined()) } else { inert_name(path.as_bytes()) };
    let link = match (&e.target, e.kind) {
        (Some(t), _) => format!(" -> {}", inert_name(t)),
        (None, Kind::Symlink) => " -> ?".to_string(),
        _ => String::new(),
    };
    format!("{} {:04o} {:>12} {:<20} {name}{link}", permissions(e.kind, e.mode), e.mode, e.size, time(e.mtime))
}

/// A string field, plus `<key>_hex` with the exact bytes when they are not UTF-8.
fn put_bytes(m: &mut serde_json::Map<String, serde_json::Value>, key: &str, b: &[u8]) {
    m.insert(key.into(), String::from_utf8_lossy(b).into_owned().into());
    if std::str::from_utf8(b).is_err() {
        m.insert(format!("{key}_hex"), b.iter().map(|x| format!("{x:02x}")).collect::<String>().into());
    }
}

/// One entry as JSON; `path` is absolute (PATH itself when it is not a directory).
pub fn entry_json(e: &Entry, path: &str, root_is_dir: bool) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    let full = if root_is_dir { e.path.under(path) } else { path.as_bytes().to_vec() };
    put_bytes(&mut m, "path", &full);
    put_bytes(&mut m, "name", e.path.name());
    m.insert("type".into(), e.kind.word().into());
    m.insert("size".into(), e.size.into());
    m.insert("mode".into(), format!("{:04o}", e.mode).into());
    m.insert("permissions".into(), permissions(e.kind, e.mode).into());
    m.insert("mtime".into(), e.mtime.into());
    m.insert("modified".into(), time(e.mtime).into());
    m.insert("depth".into(), if root_is_dir { e.path.0.len() } else { 0 }.into());
    match &e.target {
        Some(t) => put_bytes(&mut m, "target", t),
        None => {
            m.insert("target".into(), serde_json::Value::Null);
        }
    }
    serde_json::Value::Object(m)
}

pub fn mkdir(a: &MkdirArgs, ctx: &Context) -> Result<()> {
    let path = workbench::sandbox_path("path", &a.path)?;
    if path == "/" {
        return Err(Invalid::new("path", &a.path, "name a directory below /").into());
    }
    let created = workbench::mkdir(&ctx.driver.open(&a.id)?, &path, a.parents)?;
    if ctx.json() {
        return ctx.out.json_line(&serde_json::json!({ "path": path, "created": created }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workbench::lines::RelPath;

    #[test]
    fn rows_escape_and_json_is_exact() {
        let e = Entry {
            kind: Kind::Symlink,
            mode: 0o777,
            size: 4,
            mtime: 0,
            path: RelPath(vec![b"d".to_vec(), b"x\nE f 644 \x1b[2J\xff".to_vec()]),
            target: Some(b"/etc\n".to_vec()),
        };
        let row = entry_row(&e, "/tmp", true);
        assert_eq!(row, r"lrwxrwxrwx 0777            4 1970-01-01T00:00:00Z d/x\nE f 644 \u{1b}[2J\xff -> /etc\n");
        let j = entry_json(&e, "/tmp", true);
        assert_eq!(j["name_hex"], "780a45206620363434201b5b324aff");
        assert_eq!(j["path"], "/tmp/d/x\nE f 644 \u{1b}[2J\u{fffd}");
        assert_eq!(j["target"], "/etc\n");
        assert!(j.get("target_hex").is_none());
        assert_eq!(
            (j["type"].as_str(), j["mode"].as_str(), j["depth"].as_u64()),
            (Some("symlink"), Some("0777"), Some(2))
        );
        assert_eq!(permissions(Kind::Dir, 0o1777), "drwxrwxrwt");
        assert_eq!(permissions(Kind::File, 0o6644), "-rwSr-Sr--");
        assert_eq!(time(-1), "@-1");
        assert_eq!(time(i64::MAX), format!("@{}", i64::MAX));
    }
}

//! `sbx allow`, `sbx deny` (change a running sandbox's allowlist),
//! `sbx egress log` (the gate's decisions) and `sbx egress policy` (the
//! --allow flags the log suggests). The gate's log is the gate's word, and
//! a gate is exposed to the sandbox: every line is parsed as a decision
//! record and printed from sbx's own fields, never raw.

use std::io::{BufRead, Read};

use super::Context;
use crate::cli::{EgressAction, EgressRulesArgs};
use crate::docker::argv;
use crate::error::Result;
use crate::model::names::SandboxId;
use crate::model::text::inert_chars;
use crate::spec::egress::{suggested_allows, AllowRule, LogLine};

/// A gate line longer than this is not a decision record.
const MAX_LINE: u64 = 16 * 1024;

/// `sbx allow ID RULE...` (`deny` false) or `sbx deny ID RULE...`.
pub fn change(a: &EgressRulesArgs, deny: bool, ctx: &Context) -> Result<()> {
    let id = &a.id;
    // Every rule is checked before anything changes (exit 2).
    let rules = a.rules.iter().map(|r| AllowRule::parse(r, a.allow_unsafe_cidr)).collect::<Result<Vec<_>, _>>()?;
    let (policy, removed) = ctx.driver.change_egress(id, |p| {
        if deny {
            p.deny(&rules)
        } else {
            p.allow(&rules);
            Vec::new()
        }
    })?;
    if deny {
        let ended = ctx.driver.secrets_follow(id, &policy)?;
        if !ended.is_empty() {
            ctx.out
                .note("secrets_ended", &format!("the gate of {id} holds these secrets no more: {}", ended.join(" ")));
        }
        let missing: Vec<String> = rules.iter().filter(|r| !removed.contains(r)).map(ToString::to_string).collect();
        if !missing.is_empty() {
            ctx.out.note("not_allowed", &format!("not on the allowlist of {id}: {}", missing.join(" ")));
        }
    }
    let allow: Vec<String> = policy.rules.iter().map(ToString::to_string).collect();
    if ctx.json() {
        return ctx
            .out
            .json_line(&serde_json::json!({ "id": id, "mode": argv::mode_name(policy.mode), "allow": allow }));
    }
    ctx.out.data(&allow.iter().map(|r| format!("{r}\n")).collect::<String>())
}

pub fn exec(action: &EgressAction, ctx: &Context) -> Result<()> {
    match action {
        EgressAction::Log { id, follow } => log(id, *follow, ctx),
        EgressAction::Policy { id } => policy(id, ctx),
    }
}

fn log(id: &SandboxId, follow: bool, ctx: &Context) -> Result<()> {
    let source = source(ctx, id)?;
    if !ctx.json() {
        ctx.out.data(&row(&COLUMNS.map(|c| c.0.to_string())))?;
    }
    let mut skipped = 0usize;
    read_log(ctx, &source, follow, &mut |line| {
        match line {
            Some(l) if ctx.json() => ctx.out.json_line(&l)?,
            Some(l) => ctx.out.data(&row(&cells(&l)))?,
            None => skipped += 1,
        }
        Ok(())
    })?;
    if skipped > 0 {
        ctx.out.warn("gate_log", &format!("{skipped} line(s) of the gate's log were not decision records; skipped"));
    }
    Ok(())
}

fn policy(id: &SandboxId, ctx: &Context) -> Result<()> {
    let source = source(ctx, id)?;
    let mut lines = Vec::new();
    read_log(ctx, &source, false, &mut |l| {
        lines.extend(l);
        Ok(())
    })?;
    let allows = suggested_allows(&lines);
    if ctx.json() {
        return ctx.out.json_line(&serde_json::json!({ "id": id, "allow": allows }));
    }
    ctx.out.data(&allows.iter().map(|a| format!("--allow {a}\n")).collect::<String>())
}

/// Where a sandbox's decisions are: its running gate, or, once the gate is
/// gone (destroyed, revoked, reaped), the log sbx kept on the host.
enum Source {
    Gate(String),
    Kept(std::path::PathBuf),
}

fn source(ctx: &Context, id: &str) -> Result<Source> {
    match ctx.driver.gate_of(id) {
        Ok(gate) => Ok(Source::Gate(gate)),
        Err(e) => {
            let kept = crate::host::egress::kept_log(&ctx.driver.state()?.state.dir, id);
            if kept.is_file() {
                Ok(Source::Kept(kept))
            } else {
                Err(e)
            }
        }
    }
}

/// The decision records, each line handed to `each` (None: a line that is
/// not one): `docker logs [--follow] GATE`, or the kept log (`-f` has
/// nothing to follow there).
fn read_log(
    ctx: &Context,
    source: &Source,
    follow: bool,
    each: &mut dyn FnMut(Option<LogLine>) -> Result<()>,
) -> Result<()> {
    let gate = match source {
        Source::Gate(gate) => gate,
        Source::Kept(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| crate::error::Error::io(format!("reading {}", path.display()), e))?;
            for l in text.lines() {
                each(LogLine::parse(l).ok())?;
            }
            return Ok(());
        }
    };
    let args = argv::logs(gate, follow, None);
    let mut failed: Option<crate::error::Error> = None;
    let mut output = |r: &mut dyn Read| -> std::io::Result<()> {
        let mut r = std::io::BufReader::new(r);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let n = (&mut r).take(MAX_LINE).read_until(b'\n', &mut buf)?;
            if n == 0 {
                return Ok(());
            }
            let whole = buf.ends_with(b"\n");
            if !whole {
                // Over-long: drop the rest of this line.
                let mut rest = Vec::new();
                r.read_until(b'\n', &mut rest)?;
            }
            let parsed = whole.then(|| serde_json::from_slice::<LogLine>(&buf).ok()).flatten();
            if let Err(e) = each(parsed) {
                failed = Some(e);
                return Err(std::io::Error::other("stopped"));
            }
        }
    };
    let done = match ctx.driver.docker().run_stream(&args, None, &mut output) {
        // `-f` cut by the runner's watch when its gate went (docker/real/watch.rs):
        // the log is over, as when docker ends it itself.
        Err(crate::docker::DockerError::Ended { .. }) => return failed.map_or(Ok(()), Err),
        other => other?,
    };
    if let Some(e) = failed {
        return Err(e);
    }
    if done.status != 0 {
        let out = crate::docker::Output { status: done.status, stdout: Vec::new(), stderr: done.stderr };
        return Err(crate::docker::status_error(&args, &out).into());
    }
    done.output.map_err(|e| crate::error::Error::io(format!("reading the log of {gate}"), e))
}

/// The table's columns: width and right alignment. Fixed, not measured, so
/// `-f` prints each row as its record arrives. The free-text RULE/REASON is
/// last and never cut (a reason carries its `--allow` hint); a longer
/// HOST:PORT is cut (`--json` has it whole), any other longer cell pushes its row.
const COLUMNS: [(&str, usize, bool); 8] = [
    ("TIME", 24, false),
    ("DECISION", 8, false),
    ("HOST:PORT", 40, false),
    ("ADDRESS", 15, false),
    ("UP", 10, true),
    ("DOWN", 10, true),
    ("MS", 7, true),
    ("RULE/REASON", 0, false),
];
const HOST: usize = 2;
fn cells(l: &LogLine) -> [String; 8] {
    [
        l.time.clone(),
        l.decision.clone(),
        format!("{}:{}", l.host, l.port),
        l.addr.clone().unwrap_or_else(|| "-".into()),
        l.bytes_up.to_string(),
        l.bytes_down.to_string(),
        l.duration_ms.to_string(),
        why(l),
    ]
}

/// An allowed connection's rule; a refused one's reason, even when a rule
/// allowed its name first (the address was refused, or a change cut it).
fn why(l: &LogLine) -> String {
    let (rule, reason) = (l.rule.clone(), l.reason.clone());
    let shown = if l.decision == "deny" { reason.or(rule) } else { rule.or(reason) };
    shown.unwrap_or_else(|| "-".into())
}

/// One aligned row, every cell made safe for a terminal first (the host
/// names are the sandbox's choice).
fn row(cells: &[String; 8]) -> String {
    let mut line = String::new();
    for (i, (cell, &(_, width, right))) in cells.iter().zip(&COLUMNS).enumerate() {
        let mut c = inert_chars(cell).replace(['\t', '\n'], " ");
        if i == HOST {
            c = cut_host(&c, width);
        }
        if i > 0 {
            line.push_str("  ");
        }
        let pad = " ".repeat(width.saturating_sub(c.chars().count()));
        if right {
            line.push_str(&pad);
            line.push_str(&c);
        } else {
            line.push_str(&c);
            line.push_str(&pad);
        }
    }
    format!("{}\n", line.trim_end())
}

/// `host:port` in `width` characters: the host's head, `…`, the port.
fn cut_host(c: &str, width: usize) -> String {
    if c.chars().count() <= width {
        return c.to_string();
    }
    let port = c.rfind(':').map_or("", |i| &c[i..]);
    let keep = width.saturating_sub(port.chars().count() + 1);
    format!("{}…{port}", c.chars().take(keep).collect::<String>())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_refusal_shows_its_reason_even_after_a_rule_allowed_its_name() {
        let line = |decision: &str, rule: Option<&str>, reason: Option<&str>| crate::spec::egress::LogLine {
            time: "2026-01-01T00:00:00.000Z".into(),
            sandbox: "sbx-0123456789ab".into(),
            host: "192.0.2.2".into(),
            port: 80,
            addr: Some("192.0.2.2".into()),
            decision: decision.into(),
            rule: rule.map(Into::into),
            reason: reason.map(Into::into),
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 1,
            method: None,
            path: None,
            status: None,
            secrets: Vec::new(),
        };
        let refused = line("deny", Some("observe"), Some("192.0.2.2 is the Docker host's own address"));
        assert_eq!(super::why(&refused), "192.0.2.2 is the Docker host's own address");
        assert_eq!(super::why(&line("allow", Some("observe"), None)), "observe");
        assert_eq!(super::why(&line("deny", None, None)), "-");
    }

    #[test]
    fn a_long_host_is_cut_keeping_its_port() {
        let long = format!("{}.example:8443", "a".repeat(60));
        let cut = super::cut_host(&long, 40);
        assert_eq!(cut, format!("{}…:8443", "a".repeat(34)));
        assert_eq!(cut.chars().count(), 40);
        assert_eq!(super::cut_host("pypi.org:443", 40), "pypi.org:443");
    }
}

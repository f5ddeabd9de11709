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
use crate::model::text::inert_chars;
use crate::spec::egress::{suggested_allows, AllowRule, LogLine};
use crate::spec::parse_id;

/// A gate line longer than this is not a decision record.
const MAX_LINE: u64 = 16 * 1024;

/// `sbx allow ID RULE...` (`deny` false) or `sbx deny ID RULE...`.
pub fn change(a: &EgressRulesArgs, deny: bool, ctx: &Context) -> Result<()> {
    let id = parse_id(&a.id)?;
    // Every rule is checked before anything changes (exit 2).
    let rules = a.rules.iter().map(|r| AllowRule::parse(r, a.allow_unsafe_cidr)).collect::<Result<Vec<_>, _>>()?;
    let (policy, removed) = ctx.driver.change_egress(&id, |p| {
        if deny {
            p.deny(&rules)
        } else {
            p.allow(&rules);
            Vec::new()
        }
    })?;
    if deny {
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

fn log(id: &str, follow: bool, ctx: &Context) -> Result<()> {
    let id = parse_id(id)?;
    let gate = ctx.driver.gate_of(&id)?;
    if !ctx.json() {
        ctx.out.data(&row(&HEADER.map(String::from)))?;
    }
    let mut skipped = 0usize;
    read_log(ctx, &gate, follow, &mut |line| {
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

fn policy(id: &str, ctx: &Context) -> Result<()> {
    let id = parse_id(id)?;
    let gate = ctx.driver.gate_of(&id)?;
    let mut lines = Vec::new();
    read_log(ctx, &gate, false, &mut |l| {
        lines.extend(l);
        Ok(())
    })?;
    let allows = suggested_allows(&lines);
    if ctx.json() {
        return ctx.out.json_line(&serde_json::json!({ "id": id, "allow": allows }));
    }
    ctx.out.data(&allows.iter().map(|a| format!("--allow {a}\n")).collect::<String>())
}

/// `docker logs [--follow] GATE`, each stdout line handed to `each` as a
/// decision record (None: a line that is not one).
fn read_log(
    ctx: &Context,
    gate: &str,
    follow: bool,
    each: &mut dyn FnMut(Option<LogLine>) -> Result<()>,
) -> Result<()> {
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
    let done = ctx.driver.docker().run_stream(&args, None, &mut output)?;
    if let Some(e) = failed {
        return Err(e);
    }
    if done.status != 0 {
        let out = crate::docker::Output { status: done.status, stdout: Vec::new(), stderr: done.stderr };
        return Err(crate::docker::status_error(&args, &out).into());
    }
    done.output.map_err(|e| crate::error::Error::io(format!("reading the log of {gate}"), e))
}

const HEADER: [&str; 7] = ["TIME", "DECISION", "HOST:PORT", "ADDRESS", "RULE/REASON", "BYTES UP/DOWN", "MS"];

fn cells(l: &LogLine) -> [String; 7] {
    [
        l.time.clone(),
        l.decision.clone(),
        format!("{}:{}", l.host, l.port),
        l.addr.clone().unwrap_or_else(|| "-".into()),
        l.rule.clone().or_else(|| l.reason.clone()).unwrap_or_else(|| "-".into()),
        format!("{}/{}", l.bytes_up, l.bytes_down),
        l.duration_ms.to_string(),
    ]
}

/// One tab-separated row, every cell made safe for a terminal (the host
/// names are the sandbox's choice).
fn row(cells: &[String; 7]) -> String {
    let safe: Vec<String> = cells.iter().map(|c| inert_chars(c).replace(['\t', '\n'], " ")).collect();
    format!("{}\n", safe.join("\t"))
}

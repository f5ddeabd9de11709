//! `sbx audit ID`: one line per CIS runtime rule, pass or fail.

use crate::error::{Error, Result};
use crate::spec::parse_id;
use crate::{Dirs, Env};

pub fn exec(id: &str, json: bool, env: &Env, dirs: &Dirs) -> Result<()> {
    let id = parse_id(id)?;
    let report = crate::checks::audit::of_sandbox(&crate::real_driver(env, dirs), &id)?;
    if json {
        super::json_line(&report)?;
    } else {
        let mut text = String::new();
        for r in &report.rules {
            let tag = if r.pass { "PASS" } else { "FAIL" };
            text.push_str(&format!("{tag}  {:<12} {:<42} {}\n", r.id, r.title, r.detail));
        }
        super::out(&text)?;
    }
    if report.passed {
        Ok(())
    } else {
        let failed = report.rules.iter().filter(|r| !r.pass).map(|r| format!("{} {}", r.id, r.title)).collect();
        Err(Error::AuditFailed { id, failed })
    }
}

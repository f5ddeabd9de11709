//! `sbx doctor`: check this host end to end and say how to fix what fails.

use std::collections::BTreeSet;

use super::Context;
use crate::checks::doctor::{Doctor, Status};
use crate::error::CheckError;
use crate::error::{Error, Invalid, Result};
use crate::spec::Route;

pub fn exec(routes: &[String], runtime: Option<&str>, ctx: &Context) -> Result<()> {
    let runtime = crate::spec::parse_runtime(runtime.or(ctx.env.runtime.as_deref()))?;
    let runtime = runtime.as_str();
    let mut parsed = Vec::new();
    let mut kinds = BTreeSet::new();
    for r in routes {
        let route = Route::parse(r)?;
        if !kinds.insert(route.kind.clone()) {
            return Err(Invalid::new("route", r, "the kind is given twice").into());
        }
        parsed.push(route);
    }
    (ctx.catch_signals)();
    let driver = &ctx.driver;
    let exe = std::env::current_exe().map_err(|e| Error::io("finding the sbx executable", e))?;
    let report = Doctor { driver, exec: driver.docker(), exe: &exe, runtime }.run(&parsed);
    if ctx.json() {
        ctx.out.json_line(&report)?;
    } else {
        let mut text = String::new();
        for c in &report.checks {
            let tag = match c.status {
                Status::Ok => "ok",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
                Status::Skip => "skip",
            };
            text.push_str(&format!("{tag:<5} {:<18} {}\n", c.name, c.detail));
            if let Some(f) = &c.fix {
                text.push_str(&format!("{:<24} fix: {f}\n", ""));
            }
        }
        text.push_str(if report.ok {
            "sbx doctor: everything checked holds\n"
        } else {
            "sbx doctor: some checks failed (see FAIL above)\n"
        });
        ctx.out.data(&text)?;
    }
    if report.ok {
        Ok(())
    } else {
        Err(Error::Check(CheckError::DoctorFailed {
            failed: report.checks.iter().filter(|c| c.status == Status::Fail).map(|c| c.name.clone()).collect(),
        }))
    }
}

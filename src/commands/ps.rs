//! `sbx ps ID` and `sbx kill ID HANDLE`: background processes from `exec -d`.

use super::Context;
use crate::cli::KillArgs;
use crate::error::Result;
use crate::spec::parse_id;
use crate::workbench;

pub fn ps(id: &str, ctx: &Context) -> Result<()> {
    let id = parse_id(id)?;
    let driver = &ctx.driver;
    let target = driver.owned(&id)?;
    let list = workbench::ps(driver.docker(), &target).map_err(|e| super::named(e, &target, &id))?;
    if ctx.json() {
        return ctx.out.json_line(&list);
    }
    let mut text = String::from("HANDLE     PID     STATUS          COMMAND\n");
    for p in &list {
        let status = p.status();
        let pid = p.pid.map(|p| p.to_string()).unwrap_or("-".into());
        text.push_str(&format!(
            "{:<10} {:<7} {:<15} {}\n",
            p.handle,
            pid,
            status,
            crate::model::text::for_terminal(&p.command.join(" "))
        ));
    }
    ctx.out.data(&text)
}

pub fn kill(a: &KillArgs, ctx: &Context) -> Result<()> {
    let id = parse_id(&a.id)?;
    workbench::validate_handle(&a.handle)?;
    let sig = workbench::parse_signal(&a.signal)?;
    let driver = &ctx.driver;
    let target = driver.owned(&id)?;
    workbench::kill(driver.docker(), &target, &a.handle, sig).map_err(|e| super::named(e, &target, &id))
}

//! `sbx ps ID` and `sbx kill ID HANDLE`: background processes from `exec -d`.

use crate::cli::KillArgs;
use crate::error::Result;
use crate::spec::parse_id;
use crate::workbench;
use crate::{Dirs, Env};

pub fn ps(id: &str, json: bool, env: &Env, dirs: &Dirs) -> Result<()> {
    let id = parse_id(id)?;
    let driver = crate::real_driver(env, dirs);
    let target = super::owned(&driver, &id)?;
    let list = workbench::ps(driver.docker(), &target).map_err(|e| super::named(e, &target, &id))?;
    if json {
        return super::json_line(&list);
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
            crate::error::for_terminal(&p.command.join(" "))
        ));
    }
    super::out(&text)
}

pub fn kill(a: &KillArgs, env: &Env, dirs: &Dirs) -> Result<()> {
    let id = parse_id(&a.id)?;
    workbench::validate_handle(&a.handle)?;
    let sig = workbench::parse_signal(&a.signal)?;
    let driver = crate::real_driver(env, dirs);
    let target = super::owned(&driver, &id)?;
    workbench::kill(driver.docker(), &target, &a.handle, sig).map_err(|e| super::named(e, &target, &id))
}

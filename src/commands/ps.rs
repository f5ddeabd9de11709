//! `sbx ps ID` and `sbx kill ID HANDLE`: background processes from `exec -d`.

use super::Context;
use crate::cli::KillArgs;
use crate::error::Result;
use crate::model::names::SandboxId;
use crate::model::text::{for_terminal, inert_name};
use crate::workbench;

pub fn ps(id: &SandboxId, ctx: &Context) -> Result<()> {
    let found = workbench::ps(&ctx.driver.open(id)?)?;
    if found.foreign > 0 {
        ctx.out.warn(
            "foreign_records",
            &format!(
                "left out {} record(s) in {id}'s /run/sbx-bg that `sbx exec -d` did not make (not a handle of its shape)",
                found.foreign
            ),
        );
    }
    if ctx.json() {
        return ctx.out.json_line(&found.processes);
    }
    ctx.out.data(&table(&found.processes))
}

/// The table `ps` prints. Every cell from the sandbox is shown inert (the
/// handle is sbx's shape already; the command is the sandbox's bytes, one
/// row per record: a newline in it continues under `  | `, never as a row).
pub fn table(list: &[workbench::BgProcess]) -> String {
    let mut text = String::from("HANDLE     PID     STATUS          COMMAND\n");
    for p in list {
        let pid = p.pid.map(|p| p.to_string()).unwrap_or("-".into());
        text.push_str(&format!(
            "{:<10} {:<7} {:<15} {}\n",
            inert_name(p.handle.as_bytes()),
            pid,
            p.status(),
            for_terminal(&p.command.join(" "))
        ));
    }
    text
}

pub fn kill(a: &KillArgs, ctx: &Context) -> Result<()> {
    workbench::validate_handle(&a.handle)?;
    let sig = workbench::parse_signal(&a.signal)?;
    workbench::kill(&ctx.driver.open(&a.id)?, &a.handle, sig)
}

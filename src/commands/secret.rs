//! `sbx secret set ID NAME SOURCE`: rotate a running sandbox's secret.

use super::Context;
use crate::cli::SecretAction;
use crate::error::Result;
use crate::spec::egress::SecretSource;

pub fn exec(action: &SecretAction, ctx: &Context) -> Result<()> {
    match action {
        SecretAction::Set { id, name, source } => {
            // Checked before any docker call (exit 2), never echoed.
            let source = SecretSource::parse_flag(source)?;
            let done = ctx.driver.set_secret(id, name, &source)?;
            if ctx.json() {
                return ctx.out.json_line(&done);
            }
            let msg = format!("{}: {} for {}:{} has its new value", done.id, done.name, done.host, done.port);
            ctx.out.note("secret_set", &msg);
            Ok(())
        }
    }
}

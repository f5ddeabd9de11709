//! `sbx connect ID`: relay stdin/stdout through the sandbox's channel
//! (its socket on the host, or the relayed channel: see `channel`).

use super::Context;
use crate::error::Result;
use crate::host::relay;
use crate::spec::{parse_duration, parse_id};

pub fn exec(id: &str, timeout: &str, ctx: &Context) -> Result<()> {
    let id = parse_id(id)?;
    let timeout = parse_duration("--timeout", timeout)?;
    let driver = &ctx.driver;
    let channel = driver.channel(&id)?;
    let conn = channel.open(driver.docker(), timeout)?;
    relay::conn_stdio(conn, &id)
}

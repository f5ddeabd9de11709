//! `sbx connect ID`: relay stdin/stdout through the sandbox's channel
//! (its socket on the host, or the relayed channel: see `channel`).

use crate::error::Result;
use crate::spec::{parse_duration, parse_id};
use crate::{host::relay, Dirs, Env};

pub fn exec(id: &str, timeout: &str, env: &Env, dirs: &Dirs) -> Result<()> {
    let id = parse_id(id)?;
    let timeout = parse_duration("--timeout", timeout)?;
    let driver = crate::real_driver(env, dirs);
    let channel = driver.channel(&id)?;
    let conn = channel.open(driver.docker(), timeout)?;
    relay::conn_stdio(conn, &id)
}

//! `sbx connect ID`: relay stdin/stdout through the sandbox's channel
//! (its socket on the host, or the relayed channel: see `channel`).

use super::Context;
use crate::error::Result;
use crate::host::channel::Channel;
use crate::host::relay;
use crate::model::names::{ContainerId, SandboxId};
use crate::spec::parse_duration;
use crate::workbench::helper::or_ended;
use crate::workbench::Target;

pub fn exec(id: &SandboxId, timeout: &str, ctx: &Context) -> Result<()> {
    let timeout = parse_duration("--timeout", timeout)?;
    let driver = &ctx.driver;
    let channel = driver.channel(id)?;
    let conn = channel.open(driver.docker(), timeout)?;
    let Channel::Exec { container, .. } = &channel else {
        return relay::conn_stdio(conn, id);
    };
    // The relayed channel is a `docker exec -i` stream, which the runner
    // cuts when its sandbox stops or goes (under runsc on engine 20.10 it
    // need not close then: a connect hung after `sbx destroy`); a relay that
    // fails for no reason sbx can name is the sandbox's end when it has ended.
    let target = Target::new(driver.docker(), id.clone(), ContainerId::known(container.as_str()));
    relay::conn_stdio(conn, id).map_err(|e| or_ended(&target, e))
}

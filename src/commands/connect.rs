//! `sbx connect ID`: relay stdin/stdout through the sandbox's channel
//! (its socket on the host, or the relayed channel: see `channel`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::Context;
use crate::error::{Error, Result, SandboxError};
use crate::host::channel::{Channel, Conn};
use crate::host::relay;
use crate::spec::{parse_duration, parse_id};

pub fn exec(id: &str, timeout: &str, ctx: &Context) -> Result<()> {
    let id = parse_id(id)?;
    let timeout = parse_duration("--timeout", timeout)?;
    let driver = &ctx.driver;
    let channel = driver.channel(&id)?;
    let conn = channel.open(driver.docker(), timeout)?;
    let Channel::Exec { container, .. } = &channel else {
        return relay::conn_stdio(conn, &id);
    };
    // The relayed channel is a `docker exec -i` stream, which under runsc
    // on engine 20.10 need not close when the sandbox stops (a connect hung
    // after `sbx destroy`): `docker wait` ends when the container stops or
    // is gone, and cuts the relay then.
    let watch = driver.docker().open_pipe(&crate::docker::argv::wait_exit(container))?;
    let ended = Arc::new(AtomicBool::new(false));
    let Conn { reader, writer, end, stop } = conn;
    let stop: Arc<dyn Fn() + Send + Sync> = Arc::from(stop);
    let (cut, fired) = (Arc::clone(&stop), Arc::clone(&ended));
    let mut waited = watch.stdout;
    let watcher = std::thread::spawn(move || {
        let _ = std::io::copy(&mut waited, &mut std::io::sink());
        fired.store(true, Ordering::SeqCst);
        cut();
    });
    let relayed = relay::conn_stdio(Conn { reader, writer, end, stop: Box::new(move || stop()) }, &id);
    let sandbox_ended = ended.load(Ordering::SeqCst);
    (watch.stop)();
    let _ = watcher.join();
    let _ = (watch.wait)();
    match relayed {
        Err(_) if sandbox_ended => {
            Err(Error::Sandbox(SandboxError::NotRunning { id: id.clone(), state: "stopped or removed".into() }))
        }
        other => other,
    }
}

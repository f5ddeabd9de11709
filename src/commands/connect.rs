//! `sbx connect ID`: relay stdin/stdout through the sandbox's channel
//! (its socket on the host, or the relayed channel: see `channel`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;

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
    // is gone, and cuts the relay then. Started after a second, so a short
    // exchange pays nothing for it (over ssh it is a session of its own).
    let Conn { reader, writer, end, stop } = conn;
    let stop: Arc<dyn Fn() + Send + Sync> = Arc::from(stop);
    let ended = Arc::new(AtomicBool::new(false));
    let (done_tx, done) = std::sync::mpsc::channel::<()>();
    let (cut, fired, docker, container) =
        (Arc::clone(&stop), Arc::clone(&ended), driver.docker_handle(), container.clone());
    let watcher = std::thread::spawn(move || {
        if done.recv_timeout(WATCH_AFTER) != Err(RecvTimeoutError::Timeout) {
            return;
        }
        let Ok(watch) = docker.open_pipe(&crate::docker::argv::wait_exit(&container)) else { return };
        let (mut out, kill) = (watch.stdout, watch.stop);
        let reader = std::thread::spawn(move || {
            let _ = std::io::copy(&mut out, &mut std::io::sink());
        });
        // Whichever comes first: the relay's end (kill `docker wait`), or the sandbox's.
        loop {
            if reader.is_finished() {
                fired.store(true, Ordering::SeqCst);
                cut();
                break;
            }
            if done.recv_timeout(POLL) != Err(RecvTimeoutError::Timeout) {
                kill();
                break;
            }
        }
        let _ = reader.join();
        let _ = (watch.wait)();
    });
    let relayed = relay::conn_stdio(Conn { reader, writer, end, stop: Box::new(move || stop()) }, &id);
    let _ = done_tx.send(());
    let _ = watcher.join();
    match relayed {
        Err(_) if ended.load(Ordering::SeqCst) => {
            Err(Error::Sandbox(SandboxError::NotRunning { id: id.clone(), state: "stopped or removed".into() }))
        }
        other => other,
    }
}

/// How long a relayed connect runs before `docker wait` watches its sandbox.
const WATCH_AFTER: Duration = Duration::from_secs(1);
/// How often the watcher looks whether `docker wait` or the relay ended.
const POLL: Duration = Duration::from_millis(100);

//! `sbx connect ID`: relay stdin/stdout through the sandbox's socket.

use std::time::{Duration, Instant};

use crate::error::{Result, SocketError};
use crate::spec::{parse_duration, parse_id};
use crate::{relay, socket, Dirs, Env};

/// Between bind() and listen() a connect is refused; give the sandbox a moment.
const REFUSED_GRACE: Duration = Duration::from_secs(2);

pub fn exec(id: &str, timeout: &str, env: &Env, dirs: &Dirs) -> Result<()> {
    let id = parse_id(id)?;
    let timeout = parse_duration("--timeout", timeout)?;
    let (path, owners) = crate::real_driver(env, dirs).channel(&id)?;
    let started = Instant::now();
    let stream = loop {
        // One deadline for the whole connect, refused retries included.
        match socket::connect_within(&path, &owners, timeout.saturating_sub(started.elapsed())) {
            Err(SocketError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::ConnectionRefused && started.elapsed() < REFUSED_GRACE =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            // Say the deadline the user gave, not what was left of it.
            Err(SocketError::NotAccepting { path, .. }) => {
                let waited = humantime::format_duration(timeout).to_string();
                return Err(SocketError::NotAccepting { path, waited }.into());
            }
            other => break other?,
        }
    };
    relay::stdio(stream).map_err(|e| crate::error::Error::io(format!("relaying to {}", path.display()), e))
}

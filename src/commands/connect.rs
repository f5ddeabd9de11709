//! `sbx connect ID`: relay stdin/stdout through the sandbox's socket.

use std::time::{Duration, Instant};

use crate::error::{Result, SocketError};
use crate::spec::parse_id;
use crate::{relay, socket, Dirs, Env};

/// Between bind() and listen() a connect is refused; give the sandbox a moment.
const REFUSED_GRACE: Duration = Duration::from_secs(2);

pub fn exec(id: &str, env: &Env, dirs: &Dirs) -> Result<()> {
    let id = parse_id(id)?;
    let (path, owners) = crate::real_driver(env, dirs).channel(&id)?;
    let started = Instant::now();
    let stream = loop {
        match socket::connect_checked(&path, &owners) {
            Err(SocketError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::ConnectionRefused && started.elapsed() < REFUSED_GRACE =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => break other?,
        }
    };
    relay::stdio(stream).map_err(|e| crate::error::Error::io(format!("relaying to {}", path.display()), e))
}

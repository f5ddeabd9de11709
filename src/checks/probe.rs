//! The probe `sbx doctor` runs as a real sandbox, in sbx's own image (see
//! `host::self_image`). Inside the sandbox `sbx __probe TARGET...` binds
//! the socket, answers one connection with what the process actually got,
//! and waits for doctor to remove the sandbox.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixListener;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::docker::argv::SANDBOX_SOCKET;
use crate::error::{Error, HostError, Result};

/// What the probe saw from inside.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The bytes the host sent, returned, proving the channel carries data both ways.
    pub echo: String,
    pub uid: String,
    pub gid: String,
    pub cap_eff: String,
    pub cap_prm: String,
    pub cap_bnd: String,
    pub cap_amb: String,
    pub no_new_privs: String,
    pub seccomp: String,
    pub read_only_root: bool,
    pub tmp_writable: bool,
    pub state_writable: bool,
    pub interfaces: Vec<String>,
    pub routes: Vec<RouteCheck>,
    /// The kernel's banner (/proc/version): the host's under runc, gVisor's under runsc.
    #[serde(default)]
    pub kernel: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteCheck {
    pub target: String,
    pub reached: bool,
    pub detail: String,
}

/// How long the probe stays once it has answered.
const LINGER: Duration = Duration::from_secs(120);

/// In the sandbox: bind, answer one connection, wait to be removed.
pub fn serve(targets: &[String]) -> Result<()> {
    let io = |e| Error::io("probe", e);
    let listener = UnixListener::bind(SANDBOX_SOCKET).map_err(io)?;
    let (mut conn, _) = listener.accept().map_err(io)?;
    let mut request = Vec::new();
    conn.read_to_end(&mut request).map_err(io)?;
    let mut report = observe(targets);
    report.echo = String::from_utf8_lossy(&request).into_owned();
    let body = serde_json::to_vec(&report).map_err(|source| HostError::Json { context: "probe".into(), source })?;
    conn.write_all(&body).map_err(io)?;
    let _ = conn.shutdown(std::net::Shutdown::Write);
    // Stay until doctor destroys the sandbox (it does so right after the
    // exchange; at most LINGER): the probe is the sandbox's main process,
    // and its exit stopped the sandbox, and with it the relaying helper,
    // before the helper passed the report on (seen under gVisor over the
    // relayed channel).
    std::thread::sleep(LINGER);
    Ok(())
}

/// Read what this process is allowed to do, from the kernel's point of view.
pub fn observe(targets: &[String]) -> Report {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> String {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
            .map(|v| v.split_whitespace().next().unwrap_or_default().to_string())
            .unwrap_or_default()
    };
    let writable = |p: &str| {
        let ok = std::fs::write(p, b"probe").is_ok();
        let _ = std::fs::remove_file(p);
        ok
    };
    let dev = std::fs::read_to_string("/proc/net/dev").unwrap_or_default();
    let interfaces = dev.lines().skip(2).filter_map(|l| l.split(':').next()).map(|s| s.trim().to_string()).collect();
    Report {
        echo: String::new(),
        uid: field("Uid"),
        gid: field("Gid"),
        cap_eff: field("CapEff"),
        cap_prm: field("CapPrm"),
        cap_bnd: field("CapBnd"),
        cap_amb: field("CapAmb"),
        no_new_privs: field("NoNewPrivs"),
        seccomp: field("Seccomp"),
        read_only_root: !writable("/.sbx-probe"),
        tmp_writable: writable("/tmp/.sbx-probe"),
        state_writable: writable("/state/.sbx-probe"),
        interfaces,
        routes: targets.iter().map(|t| dial(t)).collect(),
        kernel: std::fs::read_to_string("/proc/version").unwrap_or_default().trim().to_string(),
    }
}

fn dial(target: &str) -> RouteCheck {
    let result = (|| -> Result<String, String> {
        let addrs: Vec<_> = target.to_socket_addrs().map_err(|e| format!("cannot resolve: {e}"))?.collect();
        let mut last = String::from("no address");
        for a in addrs {
            match TcpStream::connect_timeout(&a, Duration::from_secs(3)) {
                Ok(_) => return Ok(format!("connected to {a}")),
                Err(e) => last = format!("{a}: {e}"),
            }
        }
        Err(last)
    })();
    match result {
        Ok(detail) => RouteCheck { target: target.to_string(), reached: true, detail },
        Err(detail) => RouteCheck { target: target.to_string(), reached: false, detail },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observe_reads_this_process() {
        let r = observe(&[]);
        assert!(!r.uid.is_empty() && !r.cap_eff.is_empty() && !r.interfaces.is_empty());
    }
}

//! The channel seam: how sbx reaches the program in a sandbox.
//!
//! - [`Channel::Direct`]: the sandbox's socket directory is a host directory
//!   bind-mounted at /run/sandbox; sbx connects to the socket itself (see
//!   `socket` for how it is checked). Needs a caller who may write a socket
//!   the sandbox user bound: root.
//! - [`Channel::Exec`]: /run/sandbox is a small tmpfs inside the container
//!   and sbx relays through `docker exec -i ID /run/sbx/helper connect
//!   /run/sandbox/sandbox.sock`; the helper refuses anything there that is
//!   not a socket. Works for any caller the engine lets `docker exec`: a
//!   non-root user in the docker group, and remote engines.
//!
//! `create` chooses one ([`Choice::resolve`]) and records it in the
//! `sbx.channel` label, so `connect` and `doctor` use the same path.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::docker::{argv, DockerExec};
use crate::error::SandboxError;
use crate::error::{Error, Result, SocketError};
use crate::host::helper::SANDBOX_PATH;
use crate::host::socket;
pub use crate::model::channel::{Choice, Kind};

/// Exit codes of the helper's `probe-socket` and `connect` (helper/sbx_helper.rs).
pub const HELPER_NO_SOCKET: i32 = 3;
pub const HELPER_NOT_A_SOCKET: i32 = 4;
pub const HELPER_CONNECT_FAILED: i32 = 5;
pub const HELPER_NOT_ACCEPTING: i32 = 6;

/// The helper's socket probe in `container` (see `argv::helper_probe_socket`).
pub fn probe_argv(container: &str, wait: Duration) -> Vec<std::ffi::OsString> {
    argv::helper_probe_socket(container, SANDBOX_PATH, wait)
}

/// Between bind() and listen() a connect is refused; give the sandbox a moment.
const REFUSED_GRACE: Duration = Duration::from_secs(2);

/// How sbx reaches one running sandbox's program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Channel {
    /// The socket's path on the host, the owners it may have, and the
    /// sandbox's container id (see `socket::connect_within`).
    Direct { path: PathBuf, owners: Vec<u32>, container: Option<String> },
    /// The sandbox's id (for messages) and its container id (what
    /// `docker exec` is given: never a name a later container could take).
    Exec { id: String, container: String },
}

/// An open connection: bytes both ways, and half-close (dropping `writer`).
pub struct Conn {
    pub reader: Box<dyn Read + Send>,
    pub writer: Box<dyn Write + Send>,
    /// After `reader` hit EOF: how the channel ended (the relayed one
    /// reports a refused or missing socket only here).
    pub end: Box<dyn FnOnce() -> Result<()> + Send>,
    /// Cut the channel now, from another thread (a deadline): `reader`
    /// then ends.
    pub stop: Box<dyn Fn() + Send + Sync>,
}

impl Channel {
    pub fn kind(&self) -> Kind {
        match self {
            Channel::Direct { .. } => Kind::Direct,
            Channel::Exec { .. } => Kind::Exec,
        }
    }

    /// Connect, waiting at most `timeout` for the sandbox to accept.
    pub fn open(&self, docker: &dyn DockerExec, timeout: Duration) -> Result<Conn> {
        match self {
            Channel::Direct { path, owners, container } => {
                let stream = direct(path, owners, container.as_deref(), timeout)?;
                let reader =
                    stream.try_clone().map_err(|e| Error::io(format!("connecting to {}", path.display()), e))?;
                let cut = stream.try_clone().map_err(|e| Error::io(format!("connecting to {}", path.display()), e))?;
                let stop = Box::new(move || {
                    let _ = cut.shutdown(std::net::Shutdown::Both);
                });
                Ok(Conn {
                    reader: Box::new(reader),
                    writer: Box::new(HalfClose(stream)),
                    end: Box::new(|| Ok(())),
                    stop,
                })
            }
            Channel::Exec { id, container } => {
                let p = docker.open_pipe(&argv::helper_connect(container, SANDBOX_PATH, timeout))?;
                let (id, wait) = (id.clone(), p.wait);
                let end = Box::new(move || {
                    let (code, stderr) = wait()?;
                    relay_status(&id, code, &stderr, timeout)
                });
                Ok(Conn { reader: p.stdout, writer: p.stdin, end, stop: p.stop })
            }
        }
    }
}

fn direct(
    path: &std::path::Path,
    owners: &[u32],
    container: Option<&str>,
    timeout: Duration,
) -> Result<std::os::unix::net::UnixStream> {
    let started = Instant::now();
    loop {
        // One deadline for the whole connect, refused retries included.
        match socket::connect_within(path, owners, container, timeout.saturating_sub(started.elapsed())) {
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
            other => return Ok(other?),
        }
    }
}

/// How `docker exec ... helper connect` ended, in sbx's words. The helper's
/// codes are its own (docker's are 1 and 125-127); its stderr is the
/// sandbox's side of the story and only quoted.
pub fn relay_status(id: &str, code: i32, stderr: &str, timeout: Duration) -> Result<()> {
    let path = PathBuf::from(argv::SANDBOX_SOCKET);
    // The helper runs as the sandbox user, which could tamper with what it
    // says: only printable text reaches the terminal, and a hostile entry is
    // named from a fixed list.
    let said: String =
        stderr.trim().trim_start_matches("sbx-helper: ").chars().filter(|c| !c.is_control()).take(300).collect();
    let e: SocketError = match code {
        0 => return Ok(()),
        HELPER_NO_SOCKET => SocketError::NotBound { path },
        HELPER_NOT_A_SOCKET => {
            let what = ["a symlink", "a FIFO", "a regular file", "a directory"]
                .into_iter()
                .find(|w| said.ends_with(&format!(" is {w}, not a unix socket")))
                .unwrap_or("something other than a unix socket");
            SocketError::Hostile { path, reason: format!("it is {what}, not a unix socket") }
        }
        HELPER_NOT_ACCEPTING => {
            SocketError::NotAccepting { path, waited: humantime::format_duration(timeout).to_string() }
        }
        HELPER_CONNECT_FAILED => SocketError::Relay { id: id.to_string(), detail: said },
        _ if stderr.contains("is paused, unpause the container") => {
            return Err(crate::error::Explained::Paused { id: id.to_string() }.into())
        }
        _ if crate::docker::parse::no_such_container(stderr) => {
            return Err(Error::Sandbox(SandboxError::NotFound { id: id.to_string() }))
        }
        _ if stderr.contains("is not running") => {
            return Err(Error::Sandbox(SandboxError::NotRunning { id: id.to_string(), state: "not running".into() }))
        }
        _ => SocketError::Relay {
            id: id.to_string(),
            detail: if said.is_empty() { format!("docker exec exited with {code}") } else { said },
        },
    };
    Err(e.into())
}

/// A socket whose writer half-closes when dropped, as a pipe's does.
struct HalfClose(std::os::unix::net::UnixStream);

impl Write for HalfClose {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Drop for HalfClose {
    fn drop(&mut self) {
        let _ = self.0.shutdown(std::net::Shutdown::Write);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::fake::FakeDocker;
    use crate::docker::Output;

    #[test]
    fn auto_is_direct_only_for_root() {
        assert_eq!(Choice::Auto.resolve(0), Kind::Direct);
        assert_eq!(Choice::Auto.resolve(1001), Kind::Exec);
        assert_eq!(Choice::Exec.resolve(0), Kind::Exec);
        assert_eq!(Choice::Direct.resolve(1001), Kind::Direct);
        assert_eq!(Kind::from_label(Kind::Exec.label()), Kind::Exec);
        assert_eq!(Kind::from_label(Kind::Direct.label()), Kind::Direct);
        assert_eq!(Kind::from_label(Some("other")), Kind::Direct);
    }

    #[test]
    fn the_relay_runs_the_helper_on_the_container_id_and_half_closes() {
        let fake = FakeDocker::new();
        fake.push(Output::ok("echo: hi\n"));
        let ch = Channel::Exec { id: "sbx-0123456789ab".into(), container: "c0ffee".into() };
        let mut conn = ch.open(&fake, Duration::from_secs(10)).unwrap();
        conn.writer.write_all(b"hi\n").unwrap();
        drop(conn.writer);
        let mut got = String::new();
        conn.reader.read_to_string(&mut got).unwrap();
        (conn.end)().unwrap();
        assert_eq!(got, "echo: hi\n");
        assert_eq!(
            fake.calls(),
            vec![vec![
                "exec",
                "-i",
                "--",
                "c0ffee",
                "/run/sbx/helper",
                "connect",
                "/run/sandbox/sandbox.sock",
                "10000"
            ]]
        );
        assert_eq!(fake.inputs(), vec![(0, b"hi\n".to_vec())]);
    }

    #[test]
    fn helper_codes_become_sbx_errors() {
        let t = Duration::from_secs(10);
        let id = "sbx-0123456789ab";
        assert!(relay_status(id, 0, "", t).is_ok());
        let e = relay_status(
            id,
            HELPER_NOT_A_SOCKET,
            "sbx-helper: /run/sandbox/sandbox.sock is a FIFO, not a unix socket",
            t,
        )
        .unwrap_err();
        assert!(
            matches!(&e, Error::Socket(SocketError::Hostile { reason, .. }) if reason == "it is a FIFO, not a unix socket"),
            "{e}"
        );
        assert!(matches!(
            relay_status(id, HELPER_NOT_ACCEPTING, "", t),
            Err(Error::Socket(SocketError::NotAccepting { waited, .. })) if waited == "10s"
        ));
        assert!(matches!(relay_status(id, HELPER_NO_SOCKET, "", t), Err(Error::Socket(SocketError::NotBound { .. }))));
        let e = relay_status(id, 1, "Error response from daemon: Container abc is not running", t).unwrap_err();
        assert!(matches!(e, Error::Sandbox(SandboxError::NotRunning { .. })), "{e}");
        let e = relay_status(id, HELPER_NOT_A_SOCKET, "\x1b]0;pwned\x07 is a sock, not a unix socket", t).unwrap_err();
        assert!(e.to_string().contains("it is something other than a unix socket"), "{e}");
        let e = relay_status(id, HELPER_CONNECT_FAILED, "sbx-helper: refused\x1b[2J", t).unwrap_err();
        assert!(!e.to_string().contains('\x1b'), "{e}");
        let e = relay_status(id, 137, "", t).unwrap_err();
        assert!(e.to_string().contains("docker exec exited with 137"), "{e}");
    }
}

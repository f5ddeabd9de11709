//! `sbx port-forward ID [LOCAL:]PORT...` and `sbx wait-port ID PORT`.
//!
//! Each connection to 127.0.0.1:LOCAL becomes one `docker exec -i` of the
//! helper's relay inside the sandbox, which connects to the sandbox's own
//! loopback: no published port, no network needed (kubectl port-forward
//! works the same way).

use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use super::Context;
use crate::cli::WaitPortArgs;
use crate::docker::{DockerError, DockerExec, Piped};
use crate::error::{Error, Invalid, Result};
use crate::model::names::SandboxId;
use crate::output::Printer;
use crate::spec::parse_duration;
use crate::workbench::{self, Target};

fn parse_spec(s: &str) -> std::result::Result<(u16, u16), Invalid> {
    let bad = || Invalid::new("port", s, "write [LOCAL:]PORT with ports from 1 to 65535 (LOCAL 0: any free port)");
    let (local, remote) = match s.split_once(':') {
        Some((l, r)) => (l.parse::<u16>().map_err(|_| bad())?, r),
        None => (0, s),
    };
    let remote: u16 = remote.parse().ok().filter(|p| *p != 0).ok_or_else(bad)?;
    Ok((local, remote))
}

pub fn exec(id: &SandboxId, specs: &[String], ctx: &Context) -> Result<()> {
    let pairs = specs.iter().map(|s| parse_spec(s)).collect::<Result<Vec<_>, _>>()?;
    // The sandbox must exist and run; the relays then need no more checks.
    let driver = &ctx.driver;
    driver.channel(id)?;
    let target = driver.open(id)?;
    (ctx.catch_signals)();
    let live = Relays::default();
    let lines = listen(&pairs, &target, driver.docker_handle(), &ctx.out, &live)?;
    // Runs until Ctrl-C, or until its sandbox stops or goes: `docker wait`
    // beside it says when (a forward to nothing must not run on for ever).
    let (ended, stop_wait) = until_ended(&target)?;
    ctx.out.data(&lines)?;
    ctx.out.note("forwarding", "forwarding; Ctrl-C to stop");
    let gone = loop {
        if crate::host::interrupt::pending().is_some() {
            break false;
        }
        if ended.is_finished() {
            break true;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if !gone {
        stop_wait();
        return Ok(());
    }
    // Its open connections' `docker exec`s are killed: none outlives sbx
    // (under runsc one need not end when its container goes).
    for stop in live.lock().unwrap_or_else(|e| e.into_inner()).values() {
        stop();
    }
    match ended.join() {
        // A hung engine: the watch's start deadline, said as such.
        Ok(Err(e @ DockerError::Timeout { .. })) => Err(e.into()),
        _ => Err(crate::workbench::helper::ended(&target)),
    }
}

/// The `stop` of each open connection's relay, by a number of its own.
type Relays = Arc<std::sync::Mutex<std::collections::HashMap<u64, Arc<dyn Fn() + Send + Sync>>>>;

/// `docker wait -- CONTAINER` in the background: the handle is finished
/// once the container has stopped or is gone (or the engine did not
/// answer); the closure kills it (Ctrl-C: no `docker wait` outlives sbx).
#[allow(clippy::type_complexity)]
fn until_ended(
    target: &Target,
) -> Result<(std::thread::JoinHandle<std::result::Result<(i32, String), DockerError>>, Box<dyn Fn() + Send + Sync>)> {
    let Piped { stdout, wait, stop, .. } =
        target.docker.open_pipe(&crate::docker::argv::wait_exit(&target.container))?;
    let handle = std::thread::spawn(move || {
        let mut out = stdout;
        let _ = std::io::copy(&mut out, &mut std::io::sink());
        wait()
    });
    Ok((handle, stop))
}

/// Listens on 127.0.0.1 for each (local, remote) pair and relays every
/// connection to `target` in a thread of its own (through `docker`, the
/// same engine, shared); returns the `ADDR -> ID:PORT` lines to print.
fn listen(
    pairs: &[(u16, u16)],
    target: &Target,
    docker: Arc<dyn DockerExec>,
    out: &Printer,
    live: &Relays,
) -> Result<String> {
    let mut lines = String::new();
    for &(local, remote) in pairs {
        let listener = TcpListener::bind(("127.0.0.1", local))
            .map_err(|e| Error::io(format!("listening on 127.0.0.1:{local}"), e))?;
        let addr = listener.local_addr().map_err(|e| Error::io("reading the local address", e))?;
        lines.push_str(&format!("{addr} -> {}:{remote}\n", target.sandbox));
        let ids = (target.sandbox.clone(), target.container.clone());
        let (docker, out, live) = (docker.clone(), out.clone(), live.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (docker, (sandbox, container), out, live) =
                    (docker.clone(), ids.clone(), out.clone(), live.clone());
                std::thread::spawn(move || {
                    relay(conn, &Target::new(docker.as_ref(), sandbox, container), remote, &out, &live)
                });
            }
        });
    }
    Ok(lines)
}

/// One connection: TCP <-> `docker exec -i CONTAINER helper relay PORT`, with
/// half-close passed on in both directions. Both directions copy with
/// `relay::copy` (read/write, no splice).
fn relay(conn: TcpStream, target: &Target, port: u16, out: &Printer, live: &Relays) {
    // A hung engine ends this connection at the start deadline.
    let Ok(Piped { mut stdin, mut stdout, wait, stop }) = target.docker.open_pipe(&workbench::relay_argv(target, port))
    else {
        return;
    };
    let key = rand::random::<u64>();
    live.lock().unwrap_or_else(|e| e.into_inner()).insert(key, Arc::from(stop));
    let _forget = Forget(live, key);
    let Ok(mut up) = conn.try_clone() else { return };
    let upload = std::thread::spawn(move || {
        let _ = crate::host::relay::copy(&mut up, &mut stdin);
        // Dropping stdin is the half-close the sandbox side sees as EOF.
    });
    let mut down = conn;
    let _ = crate::host::relay::copy(&mut stdout, &mut down);
    let _ = down.shutdown(Shutdown::Write);
    let _ = upload.join();
    if let Err(e @ DockerError::Timeout { .. }) = wait() {
        out.warn("engine_timeout", &format!("connection to port {port} closed: {e}"));
    }
}

/// Takes a relay off the list when it ends, however it ends.
struct Forget<'a>(&'a Relays, u64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.1);
    }
}

pub fn wait_port(a: &WaitPortArgs, ctx: &Context) -> Result<()> {
    if a.port == 0 {
        return Err(Invalid::new("port", "0", "ports run from 1 to 65535").into());
    }
    let timeout = match &a.timeout {
        Some(t) => parse_duration("--timeout", t)?,
        None => Duration::from_secs(30),
    };
    if workbench::wait_port(&ctx.driver.open(&a.id)?, a.port, timeout)? {
        Ok(())
    } else {
        Err(crate::error::Explained::PortTimeout {
            id: a.id.to_string(),
            port: a.port,
            waited: humantime::format_duration(timeout).to_string(),
        }
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::fake::{Call, FakeDocker};
    use crate::docker::{ModeKind, Output};
    use crate::model::names::ContainerId;

    #[test]
    fn port_specs() {
        assert_eq!(parse_spec("8080").unwrap(), (0, 8080));
        assert_eq!(parse_spec("9000:80").unwrap(), (9000, 80));
        assert_eq!(parse_spec("0:80").unwrap(), (0, 80));
        for bad in ["", "0", "x", "80:", ":80", "1:2:3", "70000", "-1"] {
            assert!(parse_spec(bad).is_err(), "{bad}");
        }
    }

    /// One connection through the fake: what the client sends is docker's
    /// stdin, what docker prints comes back, and both half-closes pass.
    #[test]
    fn a_connection_is_one_piped_helper_relay() {
        use std::io::{Read, Write};
        let fake = FakeDocker::new();
        fake.push(Output::ok("pong"));
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (conn, _) = listener.accept().unwrap();
        client.write_all(b"ping").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let (out, printed) = crate::output::capture(false);
        let t = Target::test(&fake, "sbx-0123456789ab");
        relay(conn, &t, 8080, &out, &Relays::default());
        assert_eq!(printed.stderr(), "");
        let mut back = String::new();
        client.read_to_string(&mut back).unwrap();
        assert_eq!(back, "pong");
        let args = workbench::relay_argv(&t, 8080);
        let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(fake.invocations(), vec![Call { args, stdin: Some(b"ping".to_vec()), mode: ModeKind::Piped }]);
    }

    /// The whole path `exec` sets up: a listener on a free port, the line
    /// it prints, and one client connection relayed through the driver's docker.
    #[test]
    fn a_forwarded_port_relays_a_connection_through_the_docker_it_is_given() {
        use std::io::{Read, Write};
        let fake = FakeDocker::new();
        fake.push(Output::ok("pong"));
        let (out, printed) = crate::output::capture(false);
        let target = Target::new(&fake, "sbx-0123456789ab".parse().unwrap(), ContainerId::known("0".repeat(64)));
        let live = Relays::default();
        let lines = listen(&[(0, 8080)], &target, Arc::new(fake.clone()), &out, &live).unwrap();
        let (addr, rest) = lines.split_once(" -> ").unwrap();
        assert_eq!(rest, "sbx-0123456789ab:8080\n");
        assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"), "{lines}");
        let mut client = TcpStream::connect(addr).unwrap();
        client.write_all(b"ping").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut back = String::new();
        client.read_to_string(&mut back).unwrap();
        assert_eq!(back, "pong");
        let args = workbench::relay_argv(&target, 8080);
        let args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        // The relay thread records stdin as it comes: wait for the half-close.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while fake.invocations().first().and_then(|c| c.stdin.clone()) != Some(b"ping".to_vec()) {
            assert!(std::time::Instant::now() < deadline, "{:?}", fake.invocations());
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(fake.invocations(), vec![Call { args, stdin: Some(b"ping".to_vec()), mode: ModeKind::Piped }]);
        assert_eq!(printed.stderr(), "");
    }

    /// A forward's end: `docker wait` on the container id, which returns
    /// when the sandbox stops or goes (the fake answers at once).
    #[test]
    fn a_forward_ends_when_docker_wait_returns() {
        let fake = FakeDocker::new();
        fake.push(Output::ok("137\n"));
        let target = "0".repeat(64);
        let t = Target::new(&fake, "sbx-0123456789ab".parse().unwrap(), ContainerId::known(target.as_str()));
        let (ended, _stop) = until_ended(&t).unwrap();
        assert_eq!(ended.join().unwrap().unwrap().0, 0);
        assert_eq!(fake.calls(), vec![vec!["wait".to_string(), "--".into(), target]]);
    }

    /// A docker that opens the pipe, then reports the engine's deadline.
    struct TimesOutAfterOpening;

    impl DockerExec for TimesOutAfterOpening {
        fn execute(
            &self,
            _: crate::docker::Invocation<'_>,
        ) -> std::result::Result<crate::docker::Outcome, DockerError> {
            Ok(crate::docker::Outcome::Piped(Piped {
                stdin: Box::new(std::io::sink()),
                stdout: Box::new(std::io::empty()),
                wait: Box::new(|| Err(DockerError::Timeout { command: "exec".into(), after: Duration::from_secs(30) })),
                stop: Box::new(|| {}),
            }))
        }
    }

    #[test]
    fn a_relay_cut_off_by_the_engine_deadline_warns_through_the_printer() {
        for (json, want) in [
            (
                false,
                "sbx: warning: connection to port 8080 closed: the Docker engine did not answer `exec` within 30s\n",
            ),
            (
                true,
                "{\"warning\":{\"kind\":\"engine_timeout\",\"message\":\"connection to port 8080 closed: \
                 the Docker engine did not answer `exec` within 30s\"}}\n",
            ),
        ] {
            let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
            let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (conn, _) = listener.accept().unwrap();
            client.shutdown(Shutdown::Write).unwrap();
            let (out, printed) = crate::output::capture(json);
            relay(conn, &Target::test(&TimesOutAfterOpening, "sbx-0123456789ab"), 8080, &out, &Relays::default());
            assert_eq!(printed.stderr(), want);
            assert_eq!(printed.stdout(), "");
        }
    }
}

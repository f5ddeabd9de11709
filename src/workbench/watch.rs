//! `sbx watch`: changes below a sandbox directory as they happen, from the
//! helper's inotify `watch` (helper/fsops.rs) over `docker exec -i`.
//!
//! Stopping: the helper ends when its stdin does, so sbx closes the exec's
//! stdin on SIGINT/SIGTERM/SIGHUP and docker passes the close on. (The
//! `kill-exec` token of `sbx exec` cannot find the helper: it is
//! non-dumpable, so its /proc environ is closed to the sandbox's user.)
//! The close also comes when sbx dies, since docker's client goes with it.

use std::io::BufReader;

use crate::error::Result;
use crate::host::interrupt::Watch;

use super::helper::{helper_argv, helper_failure, sandbox_error, still_runs, transfer_failure};
use super::lines::{self, WatchLine};
use super::transfer::wire::refused;
use super::Target;

/// How a watch ended, when not with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEnd {
    /// SIGINT/SIGTERM/SIGHUP: the helper was stopped; sbx exits 128+n.
    Signal(i32),
    /// The watched directory was deleted, moved or unmounted.
    Gone,
    /// The sandbox stopped or was destroyed.
    SandboxEnded,
    /// Our stdout was closed (`sbx watch ... | head -3`).
    Closed,
}

/// Watch `path` (canonical) in sandbox `id` until a signal, the directory
/// or the sandbox goes. `sink` gets each checked line (READY first).
pub fn watch(
    t: &Target,
    path: &str,
    recursive: bool,
    signals: &Watch,
    sink: &mut dyn FnMut(&WatchLine) -> std::io::Result<()>,
) -> Result<WatchEnd> {
    watch_with(t, path, WatchOpts { recursive, attrib: false }, signals, sink)
}

/// What a watch sees besides the directory's own entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchOpts {
    /// Everything below, directories made later included.
    pub recursive: bool,
    /// Attribute changes (chmod, touch) too, as [`Change::Attrib`](super::lines::Change).
    pub attrib: bool,
}

/// [`watch`] with its options. A signal raised on `signals` (or the end of
/// `sink`'s reader) stops it: the helper's stdin is closed, and should the
/// exec outlive that by 5 seconds, its docker client is killed.
pub fn watch_with(
    t: &Target,
    path: &str,
    opts: WatchOpts,
    signals: &Watch,
    sink: &mut dyn FnMut(&WatchLine) -> std::io::Result<()>,
) -> Result<WatchEnd> {
    let mut args = vec!["watch", path];
    if opts.recursive {
        args.push("-r");
    }
    if opts.attrib {
        args.push("-a");
    }
    // -i: the helper reads its stdin only to learn when to stop.
    let argv = helper_argv(t, true, &args);
    let piped = t.docker.open_pipe(&argv)?;
    let (stdin, stdout, wait, stop) = (piped.stdin, piped.stdout, piped.wait, piped.stop);
    let (read, signal) = std::thread::scope(|s| {
        let stopper = s.spawn(move || {
            let sig = signals.next();
            drop(stdin); // EOF: the helper ends, and with it the exec
                         // docker exec ends with the helper; should it not, end it here
                         // (a server watching for many clients must not wait on one).
            if sig.is_some() && !signals.finished_within(std::time::Duration::from_secs(5)) {
                stop();
            }
            sig
        });
        let read = read_events(stdout, sink);
        signals.finish();
        (read, stopper.join().unwrap_or(None))
    });
    let (status, stderr) = match wait() {
        // Cut by the watch on its sandbox (docker/real/watch.rs).
        Err(crate::docker::DockerError::Ended { .. }) if signal.is_none() => return Ok(WatchEnd::SandboxEnded),
        other => other?,
    };
    if let Some(sig) = signal {
        return Ok(WatchEnd::Signal(sig));
    }
    let (ready, gone) = match read {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(WatchEnd::Closed),
        // A cut-off or garbled line: the helper killed mid-write by its
        // sandbox's end (a destroy while it floods events; under gVisor the
        // stream's last bytes came as a whole line no helper writes, seen
        // in a full CI run, with the exec's status not 0). The lines before
        // it were checked and given; with the sandbox gone this is its end,
        // while it runs, or after a helper that exited well, a refusal.
        Err(e)
            if (e.kind() == std::io::ErrorKind::UnexpectedEof
                || (e.kind() == std::io::ErrorKind::InvalidData && status != 0))
                && !still_runs(t)? =>
        {
            return Ok(WatchEnd::SandboxEnded)
        }
        Err(e) => return Err(transfer_failure(format!("watching {}:{path}", t.sandbox), e)),
    };
    if gone {
        return Ok(WatchEnd::Gone);
    }
    if ready {
        // The stream ended without the helper's word: the sandbox went, or
        // the helper did. Asked before docker's words are: a destroy ends
        // the exec with "No such container" or "is not running" on stderr,
        // which is this end, not a failure (seen under a loaded engine).
        if !still_runs(t)? {
            return Ok(WatchEnd::SandboxEnded);
        }
    }
    if let Some(e) = sandbox_error(t, &stderr) {
        return Err(e);
    }
    Err(helper_failure(t, &argv, if status == 0 { 1 } else { status }, &stderr))
}

/// Read lines until the helper's stdout ends. Ok((ready, gone)); a last
/// line cut off is `UnexpectedEof`, any other malformed line `InvalidData`.
fn read_events(
    stdout: Box<dyn std::io::Read + Send>,
    sink: &mut dyn FnMut(&WatchLine) -> std::io::Result<()>,
) -> std::io::Result<(bool, bool)> {
    let bad = |m: String| refused(std::io::ErrorKind::InvalidData, format!("refusing the helper's events: {m}"));
    let mut r = BufReader::new(stdout);
    let mut buf = Vec::new();
    let (mut ready, mut gone) = (false, false);
    let read = |r: &mut BufReader<_>, buf: &mut Vec<u8>| {
        lines::read_line(r, buf).map_err(|m| {
            use std::io::ErrorKind::{InvalidData, UnexpectedEof};
            let kind = if m.0 == lines::CUT_OFF { UnexpectedEof } else { InvalidData };
            refused(kind, format!("refusing the helper's events: {}", m.0))
        })
    };
    while read(&mut r, &mut buf)?.is_some() {
        let line = lines::parse_watch(&buf).map_err(|m| bad(m.0))?;
        match (&line, ready) {
            (WatchLine::Ready, true) => return Err(bad("READY twice".into())),
            (WatchLine::Ready, false) => ready = true,
            (WatchLine::Gone, _) => gone = true,
            (WatchLine::Changed { .. } | WatchLine::Moved { .. } | WatchLine::Overflow, false) => {
                return Err(bad("a change before READY".into()))
            }
            _ => {}
        }
        sink(&line)?;
        if gone {
            break;
        }
    }
    Ok((ready, gone))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::fake::FakeDocker;
    use crate::docker::Output;
    use crate::workbench::lines::{Change, RelPath};

    const ID: &str = "sbx-0123456789ab";

    fn run(f: &FakeDocker, recursive: bool) -> (Result<WatchEnd>, Vec<WatchLine>) {
        let signals = Watch::manual().unwrap();
        let mut got = Vec::new();
        let r = watch(&Target::test(f, ID), "/tmp/w", recursive, &signals, &mut |l| {
            got.push(l.clone());
            Ok(())
        });
        (r, got)
    }

    #[test]
    fn events_stream_until_the_directory_goes() {
        let f = FakeDocker::new();
        f.push(Output::ok("READY\nEV created f 61\nMV 61 62\nOVERFLOW\nLIMIT 64\nGONE\n"));
        let (r, got) = run(&f, true);
        assert_eq!(r.unwrap(), WatchEnd::Gone);
        assert_eq!(f.calls()[0], ["exec", "-i", "--", ID, "/run/sbx/helper", "watch", "/tmp/w", "-r"]);
        assert_eq!(
            got[1],
            WatchLine::Changed { change: Change::Created, dir: false, path: RelPath(vec![b"a".to_vec()]) }
        );
        assert_eq!(got.len(), 6);
    }

    /// Docker says the sandbox runs each time sbx asks.
    fn still_running(f: &FakeDocker) {
        for _ in 0..crate::workbench::helper::STILL_RUNS_ASKS {
            f.push(Output::ok("running 0"));
        }
    }

    #[test]
    fn the_end_of_the_sandbox_ends_the_watch() {
        let f = FakeDocker::new();
        // Cut by the runner's watch on its sandbox (runsc: the exec hung): no look-up.
        f.push_ended("READY\n", ID);
        assert_eq!(run(&f, false).0.unwrap(), WatchEnd::SandboxEnded);
        assert_eq!(f.remaining(), 0);
        f.push(Output { status: 137, stdout: b"READY\n".to_vec(), stderr: vec![] });
        f.push(Output::ok("exited 137"));
        assert_eq!(run(&f, false).0.unwrap(), WatchEnd::SandboxEnded);
        // Destroyed under the exec: docker says so on stderr, and that is the same end.
        for said in [
            format!("Error response from daemon: No such container: {ID}"),
            format!("Error response from daemon: Container {ID} is not running"),
        ] {
            f.push(Output { status: 1, stdout: b"READY\n".to_vec(), stderr: said.into_bytes() });
            f.push(Output::fail(1, &format!("Error: No such object: {ID}")));
            assert_eq!(run(&f, false).0.unwrap(), WatchEnd::SandboxEnded);
        }
        // Killed by `docker rm -f` a moment before docker stops saying running.
        f.push(Output { status: 137, stdout: b"READY\n".to_vec(), stderr: vec![] });
        f.push(Output::ok("running 0"));
        f.push(Output::fail(1, &format!("Error: No such object: {ID}")));
        assert_eq!(run(&f, false).0.unwrap(), WatchEnd::SandboxEnded);
        // Destroyed while the helper wrote a line: the cut-off line is
        // dropped, the events before it delivered, and the watch is over.
        f.push(Output { status: 137, stdout: b"READY\nEV created f 61\nEV crea".to_vec(), stderr: vec![] });
        f.push(Output::fail(1, &format!("Error: No such object: {ID}")));
        let (r, got) = run(&f, false);
        assert_eq!((r.unwrap(), got.len()), (WatchEnd::SandboxEnded, 2));
        // Cut off while it still runs: a failure, not an end.
        f.push(Output { status: 1, stdout: b"READY\nEV crea".to_vec(), stderr: vec![] });
        still_running(&f);
        assert!(run(&f, false).0.is_err());
        // Still running: the helper itself failed.
        f.push(Output { status: 1, stdout: b"READY\n".to_vec(), stderr: b"sbx-helper: boom".to_vec() });
        still_running(&f);
        assert_eq!(run(&f, false).0.unwrap_err().kind(), "helper_failed");
        // Each watch, then the look-ups that judged how it ended.
        let asks = crate::workbench::helper::STILL_RUNS_ASKS;
        let (w, i) = (format!("exec -i -- {ID} /run/sbx/helper watch /tmp/w"), format!("container inspect -- {ID}"));
        let want: Vec<String> = [0, 1, 1, 1, 2, 1, asks, asks]
            .into_iter()
            .flat_map(|n| std::iter::once(w.clone()).chain(std::iter::repeat_n(i.clone(), n)))
            .collect();
        assert_eq!(f.brief(), want);
    }

    #[test]
    fn failures_and_hostile_lines() {
        use crate::workbench::helper_exit::*;
        let f = FakeDocker::new();
        f.push(Output::fail(NOT_A_DIRECTORY, ""));
        assert_eq!(run(&f, false).0.unwrap_err().kind(), "not_a_directory");
        f.push(Output::fail(WATCH_LIMIT, ""));
        assert_eq!(run(&f, false).0.unwrap_err().kind(), "watch_limit");
        f.push(Output::fail(1, "Error response from daemon: Container 0123abcd is not running"));
        assert_eq!(run(&f, false).0.unwrap_err().kind(), "not_running");
        let hostile = ["EV created f 61\n", "READY\nREADY\n", "READY\nEV created f 2f\n", "READY\nEV created f 61"];
        for out in hostile.iter().chain(&["READY\nEV crea\n", "READY\nZZ\n"]) {
            f.push(Output::ok(out));
            if out.ends_with('1') {
                still_running(&f); // cut off while the sandbox runs
            }
            let e = run(&f, false).0.unwrap_err();
            assert!(e.to_string().contains("refusing the helper's events"), "{out:?}: {e}");
        }
        // Garbled by a helper killed while the sandbox runs: a refusal.
        f.push(Output { status: 137, stdout: b"READY\nZZ\n".to_vec(), stderr: vec![] });
        still_running(&f);
        assert!(run(&f, false).0.unwrap_err().to_string().contains("an unknown line"));
        // The same lines with the sandbox gone: its end, the lines before given.
        for out in ["READY\nEV created f 61\nEV crea\n", "READY\nEV created f 61\nZZ\n"] {
            f.push(Output { status: 137, stdout: out.as_bytes().to_vec(), stderr: vec![] });
            f.push(Output::fail(1, &format!("Error: No such object: {ID}")));
            let (r, got) = run(&f, false);
            assert_eq!((r.unwrap(), got.len()), (WatchEnd::SandboxEnded, 2), "{out:?}");
        }
        // A look-up only where the helper died or was cut off.
        let asks = crate::workbench::helper::STILL_RUNS_ASKS;
        let (w, i) = (format!("exec -i -- {ID} /run/sbx/helper watch /tmp/w"), format!("container inspect -- {ID}"));
        let want: Vec<String> = [0, 0, 0, 0, 0, 0, asks, 0, 0, asks, 1, 1]
            .into_iter()
            .flat_map(|n| std::iter::once(w.clone()).chain(std::iter::repeat_n(i.clone(), n)))
            .collect();
        assert_eq!(f.brief(), want);
    }

    #[test]
    fn attribute_changes_are_asked_for_with_dash_a() {
        let f = FakeDocker::new();
        f.push(Output::ok("READY\nEV attrib f 61\nGONE\n"));
        let signals = Watch::manual().unwrap();
        let mut got = Vec::new();
        let opts = WatchOpts { recursive: true, attrib: true };
        let r = watch_with(&Target::test(&f, ID), "/tmp/w", opts, &signals, &mut |l| {
            got.push(l.clone());
            Ok(())
        });
        assert_eq!(r.unwrap(), WatchEnd::Gone);
        assert_eq!(f.calls()[0], ["exec", "-i", "--", ID, "/run/sbx/helper", "watch", "/tmp/w", "-r", "-a"]);
        assert_eq!(
            got[1],
            WatchLine::Changed { change: Change::Attrib, dir: false, path: RelPath(vec![b"a".to_vec()]) }
        );
    }

    #[test]
    fn a_signal_closes_the_helpers_stdin() {
        let f = FakeDocker::new();
        f.push(Output::ok("READY\n"));
        let signals = Watch::manual().unwrap();
        signals.raise(2);
        let r = watch(&Target::test(&f, ID), "/tmp/w", false, &signals, &mut |_| Ok(()));
        assert_eq!(r.unwrap(), WatchEnd::Signal(2));
        assert_eq!(f.calls(), [["exec", "-i", "--", ID, "/run/sbx/helper", "watch", "/tmp/w"]]);
        assert_eq!(f.invocations()[0].mode, crate::docker::ModeKind::Piped);
    }
}

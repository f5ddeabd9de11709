//! `events`: the lifecycle events of this host's sandboxes as they happen,
//! from the engine (`docker events`, kept and mapped by
//! `parse::EventMapper`) merged with sbx's own journal (`host::journal`:
//! revoked, expired).
//!
//! Merging: a replay (`--since`) holds the journal's past lines back and
//! prints each before the first engine event that is later, and the rest
//! once the engine's replay is over (no line for [`TICK`]); live, both are
//! printed as they come, the journal polled every [`TICK`] and before each
//! engine event (so what sbx journaled just before it comes first).

use std::io::{BufRead, Read};
use std::sync::mpsc::{sync_channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::docker::parse::{self, DockerEvent, EventMapper, MAX_EVENT_LINE};
use crate::docker::{argv, status_error, Output};
use crate::error::{Error, Result};
use crate::host::journal::Follower;
use crate::model::event::{Event, Kind};
use crate::sandbox::Driver;
use crate::spec::EventQuery;

/// How often the journal, the stop condition and the end of a replay are checked.
pub const TICK: Duration = Duration::from_millis(200);

/// What the reader thread hands over.
enum Msg {
    Event(DockerEvent),
    /// A line over `MAX_EVENT_LINE`, or not a container event.
    Skipped,
    End(std::io::Result<()>),
}

/// Whether `events` goes on after an event (`each` says).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    More,
    Done,
}

impl Driver {
    /// Call `each` with every event `q` selects, in time order as far as
    /// the two sources allow, until `--until` passes, `each` says
    /// [`Flow::Done`] or `stop` says so (checked every [`TICK`]: Ctrl-C, a
    /// closed stdout); then `docker events` is killed, never left behind.
    /// An engine that ends the stream otherwise is an error.
    pub fn events(
        &self,
        q: &EventQuery,
        stop: &dyn Fn() -> bool,
        each: &mut dyn FnMut(&Event) -> Result<Flow>,
    ) -> Result<()> {
        let host = self.state()?;
        let mut mapper = EventMapper::new(&host.key);
        let mut journal = Follower::new(&host.state.dir, q.since);
        let args = argv::events(q.since, q.until);
        let pipe = self.docker.open_pipe(&args)?;
        drop(pipe.stdin);
        let stop_docker = pipe.stop;
        let (tx, rx) = sync_channel::<Msg>(256);
        let mut stdout = pipe.stdout;
        let reader = std::thread::spawn(move || {
            let end = read_events(&mut *stdout, &mut |m| tx.send(m).is_ok());
            let _ = tx.send(Msg::End(end));
        });
        let until_ok = |e: &Event| q.until.is_none_or(|u| e.at() <= u) && q.wants(&e.id);
        let mut held: Vec<Event> = if q.since.is_some() { journal.poll() } else { Vec::new() };
        let mut replaying = q.since.is_some();
        let mut polled = Instant::now();
        let mut skipped = 0usize;
        // The emitting closure: Ok(false) once `each` is done.
        let mut emit = |e: &Event| -> Result<bool> {
            if !until_ok(e) {
                return Ok(true);
            }
            Ok(each(e)? == Flow::More)
        };
        // In a closure, so an error of `each` still ends `docker events` below.
        let result = (|| -> Result<bool> {
            loop {
                if stop() {
                    break Ok(true);
                }
                let msg = rx.recv_timeout(TICK);
                let quiet = msg.is_err();
                let mut go = true;
                match msg {
                    Ok(Msg::Event(de)) => {
                        if let Some(mut e) = mapper.map(&de) {
                            if q.wants(&e.id) {
                                if e.event == Kind::Died {
                                    self.correct_exit(&de, &mut e);
                                }
                                // What sbx journaled just before (gc's `expired`
                                // before its `docker rm`) goes first, not a tick later.
                                held.extend(journal.poll());
                                held.sort_by_key(Event::at);
                                while go && held.first().is_some_and(|h| h.at() <= e.at()) {
                                    go = emit(&held.remove(0))?;
                                }
                                go = go && emit(&e)?;
                            }
                        }
                    }
                    Ok(Msg::Skipped) => skipped += 1,
                    Ok(Msg::End(r)) => break r.map(|()| false).map_err(|e| Error::io("reading docker events", e)),
                    Err(RecvTimeoutError::Timeout) => replaying = false,
                    Err(RecvTimeoutError::Disconnected) => break Ok(false),
                }
                if go && (quiet || polled.elapsed() >= TICK) {
                    polled = Instant::now();
                    held.extend(journal.poll());
                    if !replaying {
                        held.sort_by_key(Event::at);
                        for e in std::mem::take(&mut held) {
                            if go {
                                go = emit(&e)?;
                            }
                        }
                    }
                }
                if !go {
                    break Ok(true);
                }
            }
        })();
        // Ours to end (stopped, done, an error here): kill it; else it ended itself.
        let ours = !matches!(result, Ok(false));
        (stop_docker)();
        // The reader may be blocked on a full channel: dropping it frees the reader.
        drop(rx);
        let _ = reader.join();
        let (status, stderr) = (pipe.wait)()?;
        if skipped > 0 {
            self.warn(
                "events_skipped",
                &format!(
                    "{skipped} docker event line(s) over {MAX_EVENT_LINE} bytes or not container events were skipped"
                ),
            );
        }
        if ours {
            return result.map(drop);
        }
        result?;
        // The stream ended by itself: `--until` passed (docker exits 0), or the engine went away.
        if status == 0 && q.until.is_some() {
            held.extend(journal.poll());
            held.sort_by_key(Event::at);
            for e in held {
                if !emit(&e)? {
                    break;
                }
            }
            return Ok(());
        }
        let said = if stderr.trim().is_empty() {
            "the engine ended the event stream (is dockerd still running?)".to_string()
        } else {
            stderr
        };
        let out =
            Output { status: if status == 0 { 1 } else { status }, stdout: Vec::new(), stderr: said.into_bytes() };
        Err(status_error(&args, &out).into())
    }

    /// A die's exit code and OOM flag as the engine recorded them, when the
    /// container is still there and that record is this die's (the
    /// attribute can be an image's label, see `parse::events`).
    fn correct_exit(&self, de: &DockerEvent, e: &mut Event) {
        let Ok(out) = self.docker.run(&argv::exit_state(&de.container)) else { return };
        if out.status != 0 {
            return;
        }
        if let Some(st) = parse::container_state(&out.stdout_str()).filter(|s| s.is_of(de.at)) {
            e.exit_code = Some(st.exit_code);
            e.oom_killed = Some(st.oom_killed || e.oom_killed == Some(true));
        }
    }
}

/// Read `docker events` lines, at most `MAX_EVENT_LINE` bytes each (the
/// rest of a longer line is dropped), handing each on until `send` says
/// the receiver is gone.
fn read_events(r: &mut dyn Read, send: &mut dyn FnMut(Msg) -> bool) -> std::io::Result<()> {
    let mut r = std::io::BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = (&mut r).take(MAX_EVENT_LINE as u64 + 1).read_until(b'\n', &mut buf)?;
        if n == 0 {
            return Ok(());
        }
        let msg = if buf.ends_with(b"\n") {
            parse::parse_event(&buf).map_or(Msg::Skipped, Msg::Event)
        } else if n > MAX_EVENT_LINE {
            let mut rest = Vec::new();
            let _ = skip_line(&mut r, &mut rest);
            Msg::Skipped
        } else {
            // The last line, unterminated: the stream was cut.
            parse::parse_event(&buf).map_or(Msg::Skipped, Msg::Event)
        };
        if !send(msg) {
            return Ok(());
        }
    }
}

/// Drop the rest of an over-long line without holding it.
fn skip_line(r: &mut dyn BufRead, scratch: &mut Vec<u8>) -> std::io::Result<()> {
    loop {
        scratch.clear();
        let n = (&mut *r).take(64 * 1024).read_until(b'\n', scratch)?;
        if n == 0 || scratch.ends_with(b"\n") {
            return Ok(());
        }
    }
}

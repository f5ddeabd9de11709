//! Marks: what sbx did to a sandbox that docker's own state cannot say.

use super::State;
use crate::error::Result;

/// What sbx did to a sandbox that docker's own state cannot say: a file per
/// sandbox, written before the docker call and cleared after its opposite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// `sbx stop`: docker reports `exited` for it and for a program that
    /// ended on its own; `ls` says `stopped` only for this one.
    Stopped,
    /// `sbx pause`: `docker rm -f` of a frozen gVisor sandbox waits out a
    /// 10 s kill timeout (measured on 20.10 with runsc), so destroy thaws it first.
    Paused,
    /// `sbx hibernate`: saved to a checkpoint, then exited; `resume` restores it.
    Hibernated,
}

impl Mark {
    pub(super) fn kind(self) -> &'static str {
        match self {
            Mark::Stopped => "stopped",
            Mark::Paused => "paused",
            Mark::Hibernated => "hibernated",
        }
    }
}

impl State {
    pub fn mark(&self, id: &str, m: Mark) -> Result<()> {
        self.put(m.kind(), id, "")
    }

    pub fn unmark(&self, id: &str, m: Mark) {
        self.drop_file(m.kind(), id);
    }

    pub fn marked(&self, id: &str, m: Mark) -> bool {
        self.file(m.kind(), id).exists()
    }

    /// `sbx stop`'s mark for the run it ended, named by that run's
    /// `State.StartedAt`: a later look tells it from a sandbox started
    /// again outside sbx (`docker start`) without writing anything.
    pub fn mark_stopped_run(&self, id: &str, started_at: &str) -> Result<()> {
        self.put(Mark::Stopped.kind(), id, started_at)
    }

    /// Whether sbx stopped the run docker now reports, whose `StartedAt` is
    /// `started_at` (None: not known, as from `docker ps`). A mark naming
    /// another run is stale: the sandbox was started outside sbx since, and
    /// its program's own exit is what shows. An empty mark (a failed start's,
    /// or an older sbx's) names no run and holds.
    pub fn stopped_by_sbx(&self, id: &str, started_at: Option<&str>) -> bool {
        self.get(Mark::Stopped.kind(), id).is_some_and(|run| stopped_this_run(&run, started_at))
    }

    /// The run a Stopped mark names, if it names one.
    pub fn stopped_run(&self, id: &str) -> Option<String> {
        self.get(Mark::Stopped.kind(), id).filter(|r| !r.is_empty())
    }

    /// Every sandbox with a mark: gc forgets those whose container is gone
    /// (removed with docker itself).
    pub fn marked_ids(&self) -> Vec<String> {
        let mut v = self.ids(Mark::Stopped.kind());
        v.extend(self.ids(Mark::Paused.kind()));
        v.extend(self.ids(Mark::Hibernated.kind()));
        v
    }
}

/// Whether a Stopped mark naming `run` holds for the run whose `StartedAt`
/// is `started_at` (see [`State::stopped_by_sbx`]).
pub(super) fn stopped_this_run(run: &str, started_at: Option<&str>) -> bool {
    run.is_empty() || started_at.is_none_or(|s| s == run)
}

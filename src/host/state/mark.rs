//! Marks: what sbx did to a sandbox that docker's own state cannot say.

use super::State;
use crate::error::Result;

/// What sbx did to a sandbox that docker's own state cannot say: an empty
/// file per sandbox, written before the docker call and cleared after its opposite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// `sbx stop`: docker reports `exited` for it and for a program that
    /// ended on its own; `ls` says `stopped` only for this one.
    Stopped,
    /// `sbx pause`: `docker rm -f` of a frozen gVisor sandbox waits out a
    /// 10 s kill timeout (measured on 20.10 with runsc), so destroy thaws it first.
    Paused,
}

impl Mark {
    fn kind(self) -> &'static str {
        match self {
            Mark::Stopped => "stopped",
            Mark::Paused => "paused",
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

    /// Every sandbox with a mark: gc forgets those whose container is gone
    /// (removed with docker itself).
    pub fn marked_ids(&self) -> Vec<String> {
        let mut v = self.ids(Mark::Stopped.kind());
        v.extend(self.ids(Mark::Paused.kind()));
        v
    }
}

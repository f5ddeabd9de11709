//! Working inside a sandbox: exec, background processes, logs, shell,
//! files, stats, ports. Everything goes through `docker exec` and the
//! in-sandbox helper (`helper`), so it works on a read-only, networkless,
//! capability-less sandbox whose image has nothing but its own program.
//!
//! Every operation takes a [`Target`] (`Driver::open` makes it): docker
//! calls name its container, errors its sandbox id.
//!
//! One file per area: [`exec`](mod@exec) (foreground commands, shell),
//! [`ps`](mod@ps) (background processes and logs), [`files`] (cp, backup,
//! restore over [`transfer`]), [`listing`] (files, mkdir),
//! [`paths`] (stat, remove, move of one path) and
//! [`watch`](mod@watch) over the strict [`lines`] parser,
//! [`stats`](mod@stats), [`ports`]; [`helper`]
//! is how they all call the in-sandbox helper and word its failures. The
//! docker argv and parsers they use are in `docker::argv` and `docker::parse`.

pub mod exec;
pub mod files;
pub mod helper;
pub mod lines;
pub mod listing;
pub mod mux;
pub mod paths;
pub mod ports;
pub mod ps;
pub mod stats;
pub mod target;
pub mod transfer;
pub mod watch;

pub use crate::docker::argv::ExecOpts;
pub use exec::{
    exec, exec_streamed, exec_watched, kill_tagged, shell, signal_pid, RunEnd, RunEvent, RunInput, RunIo, SIGNAL_GRACE,
};
pub use files::{backup, cp, parse_cp_side, read_file, restore, write_file, CpSide, WORKSPACE};
pub use helper::helper_exit;
pub use listing::{list, mkdir, sandbox_path, ListOpts};
pub use ports::{relay_argv, wait_port};
pub use ps::{
    exec_detached, is_handle, kill, logs, new_handle, parse_signal, ps, signal_name, validate_handle, BgProcess, PsList,
};
pub use stats::{stats, stats_present, Stats};
pub use target::Target;
pub use watch::{watch, watch_with, WatchEnd, WatchOpts};

//! This machine's side of a sandbox: the state dir (ownership key, expiry,
//! records labels cannot hold), egress policy files, socket dirs and the checked connect, the
//! persistent session volumes' host dirs, the helper binary sbx mounts, the
//! seccomp profile file, sbx's own image (`self_image`: doctor's probe and the
//! egress gate), how sbx reaches a sandbox's socket (`channel`:
//! direct or relayed), gVisor's gofer (`gvisor`), the byte relay and signal handling, the ids no sandbox may run as
//! (`invoker`), the host's RAM for the default `--memory` (`memory`), what sbx reads
//! from its environment and the global options' dirs (`env`). Everything a
//! sandbox can touch from inside is opened by descriptor and checked here
//! before sbx acts on it.

pub mod channel;
pub mod checkpoints;
pub mod containerd;
pub mod egress;
pub mod engine;
pub mod env;
pub mod gvisor;
pub mod helper;
pub mod host_addrs;
pub mod init_pid;
pub mod interrupt;
pub mod invoker;
pub mod journal;
pub mod lockfile;
pub mod memory;
pub mod mounts;
pub mod persist;
pub mod pool;
pub mod relay;
pub mod seccomp;
pub mod secrets;
pub mod self_image;
pub mod socket;
pub mod state;
pub mod tarball;
pub mod uids;

//! The host side of the sandbox channel: where socket directories live, how
//! they are made and removed, and how sbx checks and connects to a socket
//! that the (untrusted) sandbox controls.
//!
//! The sandbox owns its socket directory, so it can swap `sandbox.sock` for
//! a symlink, a FIFO or someone else's socket at any moment. Checking a path
//! and then connecting to the same path is a race it can win; instead sbx
//! opens the entry once with `O_PATH|O_NOFOLLOW`, checks that inode with
//! `fstat`, connects through `/proc/self/fd/N` (the same inode, whatever the
//! path now names), and checks the peer's credentials after connecting.
//!
//! - `root`: where socket roots come from, making and removing one sandbox's directory;
//! - `remove`: removing a tree the sandbox wrote, with bounded descriptors;
//! - `connect`: the checked open and connect;
//! - `stale`: clearing the last run's socket before `sbx start`.

mod connect;
mod remove;
mod root;
mod stale;

pub use connect::{
    allowed_owners, connect_checked, connect_within, may_connect, not_yours, open_checked, CONNECT_TIMEOUT,
};
pub use remove::remove_tree;
/// Opening a directory relative to another's descriptor, and listing one, for
/// other walks of trees the sandbox wrote (`persist::du`).
pub(crate) use remove::{names as dir_names, open_dir as open_dir_at};
pub use root::{check_path_len, is_bounded, make_dir, make_marker_dir, remove_dir, socket_path, RootChoice};
pub use stale::{clear_stale, Stale};

pub const SOCKET_NAME: &str = "sandbox.sock";

/// What a file of `mode` is when it is not the unix socket expected at the
/// socket path (None: it is one), in words for the refusal.
fn not_a_socket(mode: nix::sys::stat::mode_t) -> Option<&'static str> {
    use nix::sys::stat::SFlag;
    match SFlag::from_bits_truncate(mode) & SFlag::S_IFMT {
        SFlag::S_IFSOCK => None,
        SFlag::S_IFLNK => Some("a symlink"),
        SFlag::S_IFREG => Some("a regular file"),
        SFlag::S_IFIFO => Some("a FIFO"),
        SFlag::S_IFDIR => Some("a directory"),
        _ => Some("not a socket"),
    }
}
/// sun_path is 108 bytes including the terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;

/// A fresh directory under the system temp dir, for tests.
#[cfg(test)]
fn tmp(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("sbx-sock-{tag}-{}-{}", std::process::id(), rand::random::<u32>()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

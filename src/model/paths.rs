//! Fixed paths inside every sandbox, which sbx mounts there and then refers
//! to from the argv it builds, the helper calls and the checks.

/// Where the sandbox sees its socket directory, and the socket in it.
pub const SANDBOX_SOCKET_DIR: &str = "/run/sandbox";
pub const SANDBOX_SOCKET: &str = "/run/sandbox/sandbox.sock";
/// Where sandboxes see the helper's directory (a read-only mount point).
pub const HELPER_DIR: &str = "/run/sbx";
/// Where sandboxes see the helper.
pub const HELPER_PATH: &str = "/run/sbx/helper";
/// Where the helper keeps background processes' state (a tmpfs of its own;
/// `BG` in helper/sbx_helper.rs).
pub const HELPER_BG_DIR: &str = "/run/sbx-bg";

/// What the sandbox writes to /run/sandbox lands on the
/// host (often a RAM-backed /run). As root, each socket directory is its
/// own tmpfs: 1 MiB and 64 inodes hold a socket and a few small files, far
/// from filling the host; nosuid,nodev,noexec since nothing there is run.
/// Without root the directory stays unbounded (`sbx doctor` says so). The
/// relayed channel's in-sandbox tmpfs has the same bounds.
pub const SOCKET_TMPFS_OPTIONS: &str = "size=1m,nr_inodes=64";

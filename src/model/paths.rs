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

/// Where a sandbox whose gate terminates TLS sees its CA bundle's
/// directory (read-only), and the bundle: the usual roots plus its own CA.
pub const CA_BUNDLE_DIR: &str = "/run/sbx-ca";
pub const CA_BUNDLE_FILE: &str = "ca-bundle.pem";
pub const CA_BUNDLE_PATH: &str = "/run/sbx-ca/ca-bundle.pem";
/// The variables clients read a CA bundle from: OpenSSL (and so curl, git,
/// Python's urllib), curl, Python's requests, git, pip, Node.
pub const CA_BUNDLE_VARS: &[&str] =
    &["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT", "NODE_EXTRA_CA_CERTS"];

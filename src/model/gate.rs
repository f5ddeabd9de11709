//! The names of a sandbox's egress gate: its container, its
//! per-sandbox internal network and the alias the sandbox reaches it by,
//! the proxy URL the sandbox is given, and the host-wide egress network.

/// The gate's proxy port inside its container.
pub const PORT: u16 = 3128;
/// The name the sandbox reaches its gate by, on its internal network.
pub const ALIAS: &str = "sbx-egress";
/// What HTTP_PROXY, HTTPS_PROXY and ALL_PROXY say in the sandbox.
pub const PROXY_URL: &str = "http://sbx-egress:3128";
/// sbx's own egress network, made on first use, removed by gc when no gate uses it.
pub const DEFAULT_NETWORK: &str = "sbx-egress-net";
/// Where the policy directory is mounted in the gate (read-only).
pub const POLICY_DIR: &str = "/policy";
pub const POLICY_FILE: &str = "/policy/policy.json";
/// The gate's limits: memory, CPU (its work runs outside the sandbox's
/// --cpus; CIS 5.12), processes, and open files (the connection target of
/// 500 concurrent connections takes two descriptors each). One CPU: a host
/// whose TLS the gate terminates costs it a decryption and an encryption
/// of every byte, and at half a CPU the quota throttled a 200 MiB download
/// to half of what the same gate tunnels.
pub const MEMORY: &str = "128m";
pub const CPUS: &str = "1";
pub const PIDS: u32 = 64;
pub const NOFILE: &str = "nofile=4096:4096";
/// The decision log's bound on the host (docker's json-file rotation): a
/// compromised gate cannot write more than 16 MiB there.
pub const LOG_MAX_SIZE: &str = "8m";
pub const LOG_MAX_FILES: &str = "2";

/// The gate container of sandbox `id`.
pub fn container(id: &str) -> String {
    format!("{id}-gate")
}

/// The internal network between sandbox `id` and its gate.
pub fn network(id: &str) -> String {
    format!("{id}-egress")
}

/// The gate's control channel: an abstract unix socket, so it exists only
/// in the gate's own network namespace (never the sandbox's) and in no file
/// system; sbx reaches it through `docker exec GATE /sbx __gate-vault`,
/// which feeds it a `spec::egress::vault::Vault` from its stdin.
pub const VAULT_SOCKET: &str = "sbx-gate-vault";

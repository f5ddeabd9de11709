//! The container is the record: everything later commands need is written
//! as labels at create time and read back from `docker inspect`/`docker ps`.
//! Labels are immutable, so what can change (revoked routes, state) is read
//! from the live container, never from the labels alone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const MANAGED: &str = "sbx.managed";
pub const ID: &str = "sbx.id";
pub const SESSION: &str = "sbx.session";
pub const IMAGE: &str = "sbx.image";
pub const TIER: &str = "sbx.tier";
pub const SOCKET: &str = "sbx.socket";
pub const ROUTES: &str = "sbx.routes";
pub const TARGETS: &str = "sbx.targets";
pub const USER: &str = "sbx.user";
pub const CREATED: &str = "sbx.created";
pub const VERSION: &str = "sbx.version";
/// HMAC of the id and the other sbx labels under the host's key (see
/// `token::record_token`; networks and volumes carry `token::owner_token`).
pub const OWNER: &str = "sbx.owner";
/// On a private route network sbx made: the sandbox it belongs to.
pub const PRIVATE_FOR: &str = "sbx.private-for";
/// On a private route network: the service container sbx attached to it.
pub const SERVICE: &str = "sbx.service";
/// On a sandbox: JSON {private network: service container} sbx must detach and remove.
pub const PRIVATE: &str = "sbx.private";
/// On a sandbox: the persistent /state volume it uses (`create --persist`).
pub const VOLUME: &str = "sbx.volume";
/// On a sandbox with a persistent /state: the most it may hold on the host,
/// in bytes (a file system of the session's own), or `unbounded`
/// (`--persist-size unbounded`, which `sbx audit` fails).
pub const PERSIST_SIZE: &str = "sbx.persist-size";
/// Expiry given at create (RFC 3339); `sbx ttl` moves it in the state dir.
pub const EXPIRES: &str = "sbx.expires";
/// `exec` when the sandbox's channel is relayed (see `channel`); absent: direct.
pub const CHANNEL: &str = "sbx.channel";

/// The engine's OCI runtime the sandbox runs under (`create --runtime`);
/// absent on sandboxes made before sbx recorded it: runc.
pub const RUNTIME: &str = "sbx.runtime";
/// The sandbox's `--memory` in MiB, so `ls` can sum the limits from its one `docker ps`.
pub const MEMORY: &str = "sbx.memory";

/// On a warm pool's member: the pool's name (`sbx pool create`). Labels
/// cannot change, so who claimed it is host state (`host::pool`).
pub const POOL: &str = "sbx.pool";

/// On a sandbox with an egress gate: `enforce` or `observe`; absent: no egress.
pub const EGRESS: &str = "sbx.egress";
/// On a sandbox with an egress gate: the network the gate reaches out through.
pub const EGRESS_NETWORK: &str = "sbx.egress-network";
/// On a sandbox with secrets: a JSON list of each one's name, host, port,
/// header and source kind (never a value, a placeholder or a path).
pub const SECRETS: &str = "sbx.secrets";
/// On a `--snapshots` sandbox: what `fork` makes its children from, JSON
/// `{"request": <the create request, as checked>, "idle": <its helper idles>}`.
pub const REMAKE: &str = "sbx.remake";
/// On a gate container (never `sbx.managed`: it is not a sandbox): its sandbox.
pub const GATE_OF: &str = "sbx.gate-of";
/// On a private route's forwarder (never `sbx.managed`: it is not a
/// sandbox): its sandbox. With `sbx.owner`, what finds it (`model::forward`).
pub const FORWARD_OF: &str = "sbx.forward-of";
/// On audit's status probe (never `sbx.managed`: it is not a sandbox):
/// the sandbox it reads. With `sbx.owner` and `sbx.expires`, what gc reaps
/// a probe left behind by.
pub const AUDIT_OF: &str = "sbx.audit-of";
/// The file in the data dir that says this host has run audit probes, so
/// gc lists them only there (no extra docker call elsewhere).
pub const AUDIT_PROBES_MARK: &str = "audit-probes";
/// On sbx's own egress network (`model::gate::DEFAULT_NETWORK`), so gc never
/// removes an operator's `--egress-network`.
pub const EGRESS_NET: &str = "sbx.egress-net";

/// The session of `sbx doctor`'s probe sandbox: what tells `sbx events` it
/// is no sandbox of the operator's (no `--session` may name it, and the
/// owner token covers it).
pub const PROBE_SESSION: &str = "sbx-doctor";

/// Label keys sbx reads, as prefixes: its record (`sbx.*`) and what older
/// builds marked their own image with (`sbx-probe.*`). An image carrying
/// one is refused: containers inherit image labels, and an image that
/// labelled itself `sbx-probe.hash` was taken for sbx's own.
pub const RESERVED_PREFIXES: &[&str] = &["sbx.", "sbx-probe."];

/// Whole keys in the same namespaces. (`exitCode`, which overwrites the
/// attribute of docker's `die` event, is not refused: `sbx events` reads a
/// die's code from the engine's record instead.)
pub const RESERVED_KEYS: &[&str] = &["sbx", "sbx-probe"];

/// Whether `key` is one sbx reads (case-insensitively: refusing `SBX.x`
/// too costs nothing, and docker's keys are case-sensitive).
pub fn is_reserved_label(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    RESERVED_KEYS.contains(&k.as_str()) || RESERVED_PREFIXES.iter().any(|p| k.starts_with(p))
}

/// Every label sbx writes, so `docker ps` can be asked for exactly these.
pub const ALL: &[&str] = &[
    MANAGED,
    MEMORY,
    ID,
    SESSION,
    IMAGE,
    TIER,
    SOCKET,
    ROUTES,
    TARGETS,
    USER,
    CREATED,
    VERSION,
    OWNER,
    EXPIRES,
    PRIVATE,
    VOLUME,
    PERSIST_SIZE,
    CHANNEL,
    EGRESS,
    EGRESS_NETWORK,
    SECRETS,
    RUNTIME,
    POOL,
    REMAKE,
];

/// One sandbox, as `inspect`, `ls` and `--json` report it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    pub id: String,
    pub session: String,
    pub image: String,
    pub tier: u8,
    pub socket: String,
    /// The engine's OCI runtime it runs under, e.g. `runc` or `runsc` (gVisor).
    pub runtime: String,
    /// `direct`, or `exec`: relayed, and `socket` is inside the sandbox.
    pub channel: super::channel::Kind,
    /// Live routes only: a revoked route's network is no longer attached.
    pub routes: BTreeMap<String, String>,
    pub created_at: String,
    pub state: String,
    pub user: String,
    /// RFC 3339, when the sandbox has a TTL.
    pub expires_at: Option<String>,
    /// e.g. "29m 59s"; "0s" once expired.
    pub time_left: Option<String>,
    /// Past its expiry (the watchdog or `sbx gc` removes it).
    pub expired: bool,
    /// Once it has stopped: its exit code, and why it stopped in words.
    pub exit_code: Option<i64>,
    pub oom_killed: bool,
    pub reason: Option<String>,
    #[serde(skip)]
    pub targets: BTreeMap<String, String>,
    /// Its memory limit in MiB (the engine's HostConfig), for `ls`'s sum.
    #[serde(skip)]
    pub memory_mib: Option<u64>,
    /// Every network the container is really on, whoever attached it
    /// (another sandbox's `--private-routes` could add one).
    pub networks: Vec<AttachedNetwork>,
    /// Why the tier is lower than at create, e.g. a network attached outside sbx.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<String>,
    /// A persistent /state's bound: bytes, or `unbounded` (absent without --persist).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persist_size: Option<String>,
    /// The egress gate, when the sandbox has one (absent from JSON otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<Egress>,
}

/// A sandbox's egress: the mode and network from its labels, the allowlist
/// from the policy file on the host (None when it could not be read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Egress {
    /// `enforce` or `observe`.
    pub mode: String,
    pub network: String,
    /// False once `revoke ID egress` cut it.
    pub active: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// Its secrets (`sbx.secrets`): name, host, port, header, source kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secrets: Option<Vec<SecretInfo>>,
}

/// One secret of a sandbox as its `sbx.secrets` label, `inspect` and
/// `ls --json` show it: no value, no placeholder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SecretInfo {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub header: String,
    /// `env` or `file`.
    pub source: String,
}

/// A network a sandbox is on, and whether sbx put it there (one of its routes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttachedNetwork {
    pub name: String,
    pub by_sbx: bool,
}

/// The network a route puts the sandbox on (`kind` as in `--route KIND:..`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteNetwork {
    pub kind: String,
    pub network: String,
}

/// A private route network sbx made for one sandbox, and the service
/// container it attached there. Serialized as `[network, service]`, the
/// shape sandbox records on disk have always had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "(String, String)", into = "(String, String)")]
pub struct PrivateRoute {
    pub network: String,
    pub service: String,
}

impl From<(String, String)> for PrivateRoute {
    fn from((network, service): (String, String)) -> Self {
        PrivateRoute { network, service }
    }
}

impl From<PrivateRoute> for (String, String) {
    fn from(p: PrivateRoute) -> Self {
        (p.network, p.service)
    }
}

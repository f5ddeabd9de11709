//! `--allow`, `--egress`, `--egress-dns`, `--egress-network`: what a
//! sandbox may reach outside, through its egress gate, and the
//! pure decisions the gate makes with it. Everything here is checked before
//! any docker call (exit 2) and is shared by the host side (create, `sbx
//! allow`/`deny`, `egress policy`) and the gate (`gate/`), so both judge a
//! name and an address the same way.
//!
//! `rule`: `--allow` parsing and display; `policy`: the gate's decisions, live
//! changes and the policy file; `addr`: the address classes refused by
//! default; `flags`: create's flags into an `EgressSpec`; `log`: the decision
//! log's lines and `sbx egress policy`'s suggestions.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

mod addr;
mod flags;
mod log;
mod policy;
mod request_rule;
mod rule;
mod secret;
#[cfg(test)]
mod tests;
pub mod vault;

pub use flags::{check_ca, parse_secrets, pem_certificates, DEFAULT_NETWORK};
pub use log::{suggested_allows, LogLine, ALLOW, DENY, MAX_LINE};
pub use policy::{MAX_POLICY_BYTES, OBSERVE, PUBLIC};
pub use request_rule::{normal_path, RequestRule, Terminated};
pub use secret::{SecretSource, SecretSpec, DEFAULT_HEADER, MAX_VALUE};

/// The port an `--allow HOST` without one allows (TLS).
pub const DEFAULT_PORT: u16 = 443;

/// One `--allow` rule, in canonical form when displayed (`HOST:PORT`,
/// `*.SUFFIX:PORT`, `CIDR:PORT`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum AllowRule {
    /// Exactly this name (lower case, no trailing dot).
    Host { name: String, port: u16 },
    /// Any name ending in `.SUFFIX` (not SUFFIX itself).
    Wildcard { suffix: String, port: u16 },
    /// Literal addresses in this network (its network address, prefix).
    Cidr { addr: IpAddr, prefix: u8, port: u16 },
}

/// Enforce the allowlist, or observe: allow every name (still refusing the
/// address classes) and log, to learn the allowlist.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Enforce,
    Observe,
}

/// The policy a gate enforces: what create wrote, changed by `sbx allow` /
/// `sbx deny`. Written by the host into the gate's read-only policy dir as
/// JSON; the gate reloads it when it changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub mode: Mode,
    pub rules: Vec<AllowRule>,
    /// The Docker host's own addresses, gathered by sbx on the host when
    /// the gate is made (the gate, in its own namespace, cannot see them):
    /// traffic from the egress bridge to one enters the host's INPUT chain,
    /// past any cloud firewall, so only a rule naming exactly it reaches one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_addrs: Vec<IpAddr>,
    /// Hosts whose TLS the gate terminates (a secret or a request rule
    /// names them); every other host stays an end-to-end tunnel.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub terminate: Vec<Terminated>,
}

/// What a sandbox's egress is, validated (`SandboxSpec::egress`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressSpec {
    pub policy: Policy,
    /// The resolver the gate asks (`--egress-dns`); None: the engine's.
    pub dns: Option<IpAddr>,
    /// The egress network (`--egress-network`); None: sbx's own, made once per host.
    pub network: Option<String>,
    /// `--secret`s (each implies `--allow HOST:PORT` and a `terminate` entry).
    pub secrets: Vec<SecretSpec>,
    /// `--secret-prefix`: kept at the start of every placeholder (e.g. `sk-`).
    pub secret_prefix: Option<String>,
    /// `--egress-ca FILE`: a CA the gate also trusts upstream (PEM, read at create).
    pub extra_ca: Option<std::path::PathBuf>,
}

/// A decision on a name or an address, with the rule that allowed it or the
/// reason it was refused (both go to the decision log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow { rule: String },
    Deny { reason: String },
}

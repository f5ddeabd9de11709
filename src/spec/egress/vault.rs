//! What sbx pushes into a gate's memory over its control channel (never a
//! file, an argv, a label or an environment variable of the gate): each
//! secret's value and placeholder, a certificate for each terminated host,
//! and the roots the gate verifies upstreams with. Its `Debug` never shows
//! a value or a key.

use serde::{Deserialize, Serialize};

/// The largest vault the gate reads (roots are the bulk: ~200 KiB).
pub const MAX_VAULT: usize = 4 << 20;

#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vault {
    pub secrets: Vec<SecretValue>,
    pub certs: Vec<HostCert>,
    /// PEM: this machine's trust store at create, plus `--egress-ca`.
    pub roots_pem: String,
}

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretValue {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub header: String,
    pub placeholder: String,
    pub value: String,
}

/// The leaf certificate (and its key) the gate shows the sandbox for `host`,
/// signed by the sandbox's own CA (whose key never leaves the host).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCert {
    pub host: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.secrets.iter().map(|s| s.name.as_str()).collect();
        let hosts: Vec<&str> = self.certs.iter().map(|c| c.host.as_str()).collect();
        write!(f, "Vault {{ secrets: {names:?}, certs: {hosts:?}, roots: {} bytes }}", self.roots_pem.len())
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretValue {{ {}@{}:{}/{} }}", self.name, self.host, self.port, self.header)
    }
}

impl std::fmt::Debug for HostCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostCert {{ {} }}", self.host)
    }
}

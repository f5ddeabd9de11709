//! A sandbox's secrets on this machine: its own CA (made at create, its key
//! never in the sandbox nor in the gate), the placeholders, the values read
//! from their sources, and this machine's trust store, kept in
//! `<data dir>/secrets/<id>.json` (0600 in a 0700 directory) only to push
//! the gate's vault again after a gate or engine restart and on rotation;
//! and the sandbox's CA bundle (the trust store plus its CA's certificate)
//! in `<data dir>/secrets-ca/<id>/`, bind-mounted read-only into it.
//!
//! `ca`: the CA and the leaf certificates; `store`: the files.

mod ca;
mod store;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use rand::distributions::{Alphanumeric, DistString};

use crate::model::invalid::Invalid;
use crate::spec::egress::{vault::SecretValue, vault::Vault, EgressSpec};

pub use store::{bundle_dir, ids, load, remove, remove_all_but, save, set_value, write};

use crate::model::paths::CA_BUNDLE_VARS as BUNDLE_VARS;
pub use crate::model::paths::{
    CA_BUNDLE_DIR as BUNDLE_DIR, CA_BUNDLE_FILE as BUNDLE_FILE, CA_BUNDLE_PATH as BUNDLE_PATH,
};
/// Random characters of a placeholder after its prefix (~190 bits).
const PLACEHOLDER_CHARS: usize = 32;

/// Where a trust store usually is (Debian/Ubuntu, Fedora/RHEL, openSUSE, Alpine).
const TRUST_STORES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// What create keeps for a sandbox with secrets or request rules; its
/// `Debug` shows no value and no key.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kept {
    pub ca: ca::Ca,
    pub secrets: Vec<SecretValue>,
    /// This machine's trust store at create, plus `--egress-ca`.
    pub roots_pem: String,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.secrets.iter().map(|s| s.name.as_str()).collect();
        write!(f, "Kept {{ hosts: {:?}, secrets: {names:?} }}", self.ca.hosts)
    }
}

/// What the sandbox gets: its bundle's directory on this machine and each
/// secret's `NAME=<placeholder>` (not secret).
#[derive(Debug, Clone)]
pub struct Trust {
    pub bundle_dir: PathBuf,
    pub env: Vec<(String, String)>,
}

/// Everything of `e`'s secrets made before anything of the sandbox exists:
/// each value read (exit 2 when one cannot be: nothing made yet), a
/// placeholder each, the CA for the terminated hosts, the trust store.
/// None when `e` terminates no host.
pub fn prepare(id: &str, e: &EgressSpec, warnings: &mut Vec<String>) -> crate::error::Result<Option<Kept>> {
    if e.policy.terminate.is_empty() {
        return Ok(None);
    }
    let mut secrets = Vec::with_capacity(e.secrets.len());
    for s in &e.secrets {
        let value = s.source.read("--secret", &s.name)?;
        let placeholder = placeholder(e.secret_prefix.as_deref(), secrets.iter().map(|v: &SecretValue| &v.placeholder));
        secrets.push(SecretValue {
            name: s.name.clone(),
            host: s.host.clone(),
            port: s.port,
            header: s.header.clone(),
            placeholder,
            value,
        });
    }
    let hosts: Vec<String> = {
        let mut h: Vec<String> = e.policy.terminate.iter().map(|t| t.host.clone()).collect();
        h.sort();
        h.dedup();
        h
    };
    let roots_pem = roots(e.extra_ca.as_deref(), warnings)?;
    let ca = ca::Ca::make(id, &hosts)?;
    Ok(Some(Kept { ca, secrets, roots_pem }))
}

/// A new placeholder: `prefix` then random letters and digits, unlike the others.
fn placeholder<'a>(prefix: Option<&str>, others: impl Iterator<Item = &'a String> + Clone) -> String {
    loop {
        let p = format!(
            "{}{}",
            prefix.unwrap_or(""),
            Alphanumeric.sample_string(&mut rand::rngs::OsRng, PLACEHOLDER_CHARS)
        );
        if !others.clone().any(|o| *o == p) {
            return p;
        }
    }
}

/// This machine's trust store (the first of `TRUST_STORES` there is) and
/// `--egress-ca`, as PEM. No store is not an error: with `--egress-ca` the
/// gate trusts that alone, and without, no upstream will verify (said).
fn roots(extra: Option<&Path>, warnings: &mut Vec<String>) -> crate::error::Result<String> {
    let mut pem = String::new();
    let store = TRUST_STORES.iter().find_map(|p| std::fs::read_to_string(p).ok().map(|t| (p, t)));
    match store {
        Some((_, text)) => pem.push_str(&text),
        None => warnings.push(format!(
            "no trust store found on this machine ({}): the gate verifies terminated hosts only against --egress-ca{}",
            TRUST_STORES.join(", "),
            if extra.is_none() { ", and there is none, so none will verify" } else { "" }
        )),
    }
    if let Some(path) = extra {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Invalid::new("--egress-ca", path.display().to_string(), format!("it cannot be read: {e}")))?;
        crate::spec::egress::pem_certificates(text.as_bytes())
            .map_err(|r| Invalid::new("--egress-ca", path.display().to_string(), r))?;
        if !pem.is_empty() && !pem.ends_with('\n') {
            pem.push('\n');
        }
        pem.push_str(&text);
    }
    Ok(pem)
}

impl Kept {
    /// The gate's vault: the values, a fresh leaf certificate for each
    /// terminated host (signed now, so each push renews them), the roots.
    pub fn vault(&self) -> crate::error::Result<Vault> {
        let certs = self.ca.leaves()?;
        Ok(Vault { secrets: self.secrets.clone(), certs, roots_pem: self.roots_pem.clone() })
    }

    /// The sandbox's bundle: the roots it would trust anyway, then its CA.
    pub fn bundle(&self) -> String {
        let mut b = self.roots_pem.clone();
        if !b.is_empty() && !b.ends_with('\n') {
            b.push('\n');
        }
        b.push_str(&self.ca.cert_pem);
        b
    }

    /// The sandbox's `NAME=<placeholder>`s and bundle variables.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> =
            BUNDLE_VARS.iter().map(|k| (k.to_string(), BUNDLE_PATH.to_string())).collect();
        env.extend(self.secrets.iter().map(|s| (s.name.clone(), s.placeholder.clone())));
        env
    }
}

//! The host's ownership tokens: what proves a container, network or volume
//! is one sbx made on this host (the key lives in `host::state`).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The ownership token written as a label: HMAC-SHA256(key, id). An image
/// can carry any label (and containers inherit them), but without the host's
/// key it cannot carry the right token for a given name.
pub fn owner_token(key: &[u8], id: &str) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(b"sbx-owner-v1:");
    mac.update(id.as_bytes());
    mac.finalize().into_bytes().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// The ownership token a sandbox container carries: an
/// HMAC over its id and every sbx label value sbx reads (`record::ALL` but
/// the token itself), in key order, so a label inherited from the image or
/// changed after create makes the container fail `is_sbx`. Empty values are
/// left out: `docker ps` cannot tell them from absent labels.
pub fn record_token(key: &[u8], id: &str, labels: &std::collections::BTreeMap<String, String>) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(b"sbx-record-v2:");
    mac.update(&(id.len() as u64).to_be_bytes());
    mac.update(id.as_bytes());
    for (k, v) in labels {
        if v.is_empty() || k == crate::model::record::OWNER || !crate::model::record::ALL.contains(&k.as_str()) {
            continue;
        }
        // Length-prefixed, so no two label sets encode alike.
        for part in [k, v] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
    }
    mac.finalize().into_bytes().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

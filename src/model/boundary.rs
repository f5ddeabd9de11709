//! What a route really lets a sandbox reach: the gaps, and the tier they
//! leave. `sandbox::shared::boundary::assess` finds the gaps of a sandbox's routes.
//!
//! `--internal` alone does not contain a sandbox. On engine 20.10 (and
//! later) a sandbox on an internal network still reaches:
//! - the host, through the bridge's own address (any host service bound to
//!   0.0.0.0), unless the bridge has no IPv4 address
//!   (`com.docker.network.bridge.inhibit_ipv4=true`);
//! - every other container on that network, other agents' sandboxes
//!   included, unless the network is private to this sandbox;
//! - the outside world by DNS, through the embedded resolver forwarding
//!   upstream from the host (CVE-2024-29018, engines before 26.0.0 /
//!   25.0.4 / 23.0.11). sbx closes that one for every sandbox whose routes
//!   are all internal by giving it `--dns 127.0.0.1`: the embedded resolver
//!   then forwards from the sandbox's own namespace, where it reaches
//!   nothing, while names on the route network still resolve.
//!
//! Tier 2 means no gap at all: every route reaches nothing but its target.

use serde::Serialize;

/// The resolver `--dns` points routed sandboxes at (see the module docs).
pub const CONTAINED_DNS: &str = "127.0.0.1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gap {
    /// Route kinds on this network.
    pub routes: Vec<String>,
    pub network: String,
    /// `egress`, `host` or `shared`.
    pub property: &'static str,
    pub detail: String,
    pub fix: String,
}

pub fn tier(gaps: &[Gap]) -> u8 {
    if gaps.is_empty() {
        2
    } else {
        1
    }
}

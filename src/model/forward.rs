//! The names of a private route's forwarder: the container of sbx's own
//! image that the sandbox reaches under the route's host name, on the
//! sandbox's private route network, and that relays only the route's ports
//! to the service over a second network of its own (docker filters no ports
//! on a network, so the service is never on the sandbox's network).
//!
//! Both networks are private route networks (`record::PrivateRoute`): the
//! sandbox's `<network>` with the forwarder as its service, and the
//! upstream `<network>.up` with the route's service on it under
//! [`UPSTREAM_ALIAS`]. A route kind cannot contain '.', so neither name can
//! be another route's.

use super::record::PrivateRoute;

/// The name the forwarder dials the service by, on the upstream network
/// only (the route's own host name is the forwarder's, on the sandbox's).
pub const UPSTREAM_ALIAS: &str = "sbx-upstream";
/// Connections relayed at once per forwarder; the next one is closed.
pub const MAX_CONNECTIONS: usize = 256;
/// The forwarder's limits: memory, CPU, processes, open files (two per
/// connection, a resolver socket each while it connects, listeners, stdio).
pub const MEMORY: &str = "64m";
pub const CPUS: &str = "0.5";
pub const PIDS: u32 = 16;
pub const NOFILE: &str = "nofile=1024:1024";
/// It logs only its own failures: 2 x 1 MiB on the host at most.
pub const LOG_MAX_SIZE: &str = "1m";
pub const LOG_MAX_FILES: &str = "2";
/// The data dir's file that says this host has made forwarders, so gc
/// lists them only there (no extra docker call elsewhere).
pub const MARK: &str = "forwarders";

/// The forwarder of the private route network `network` (`<id>-<kind>`).
pub fn container(network: &str) -> String {
    format!("{network}.fwd")
}

/// The network between the forwarder of `network` and the service.
pub fn upstream(network: &str) -> String {
    format!("{network}.up")
}

/// A private route network whose service is its forwarder.
pub fn is_forwarder(p: &PrivateRoute) -> bool {
    p.service == container(&p.network)
}

/// The private route networks of the route on `network`: its own and its
/// forwarder's upstream one.
pub fn of_route<'a>(private: &'a [PrivateRoute], network: &'a str) -> impl Iterator<Item = &'a PrivateRoute> + 'a {
    let up = upstream(network);
    private.iter().filter(move |p| p.network == network || p.network == up)
}

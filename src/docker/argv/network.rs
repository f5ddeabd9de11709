//! `docker network ...`: inspecting the networks routes name, and the
//! private route networks sbx makes, labels and removes.

use std::ffi::OsString;

use super::{os, with_tail};
use crate::docker::parse;
use crate::model::record;

pub fn network_inspect<S: AsRef<str>>(networks: &[S]) -> Vec<OsString> {
    with_tail(&["network", "inspect", "--format", parse::NETWORK_FORMAT, "--"], networks)
}

pub fn network_connect(network: &str, id: &str) -> Vec<OsString> {
    os(&["network", "connect", "--", network, id])
}

/// `--alias`: the service answers to the route's host name on the private network.
pub fn network_connect_alias(network: &str, container: &str, alias: &str) -> Vec<OsString> {
    os(&["network", "connect", "--alias", alias, "--", network, container])
}

/// A private route network: internal, and no IPv4 address on the host's
/// bridge, so neither the outside nor the host can be reached through it.
pub fn private_network(name: &str, id: &str, service: &str, owner: &str) -> Vec<OsString> {
    os(&[
        "network",
        "create",
        "--internal",
        "--opt",
        "com.docker.network.bridge.inhibit_ipv4=true",
        "--label",
        &format!("{}={id}", record::PRIVATE_FOR),
        "--label",
        &format!("{}={service}", record::SERVICE),
        "--label",
        &format!("{}={owner}", record::OWNER),
        "--",
        name,
    ])
}

/// Who is on each network: `[name, {endpoint: {"Name": container, ...}}]` per line.
pub fn network_members<S: AsRef<str>>(networks: &[S]) -> Vec<OsString> {
    with_tail(&["network", "inspect", "--format", "[{{json .Name}},{{json .Containers}}]", "--"], networks)
}

pub fn network_remove<S: AsRef<str>>(networks: &[S]) -> Vec<OsString> {
    with_tail(&["network", "rm", "--"], networks)
}

/// sbx's private route networks: `[name, sandbox id, service, owner token]` per line.
pub fn private_networks() -> Vec<OsString> {
    let format = format!(
        "[{{{{json .Name}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{}\")}}}}]",
        record::PRIVATE_FOR,
        record::SERVICE,
        record::OWNER
    );
    vec![
        "network".into(),
        "ls".into(),
        "--filter".into(),
        format!("label={}", record::PRIVATE_FOR).into(),
        "--format".into(),
        format.into(),
    ]
}

pub fn network_disconnect(network: &str, id: &str) -> Vec<OsString> {
    os(&["network", "disconnect", "--force", "--", network, id])
}

#[cfg(test)]
mod tests {
    use super::super::strs;
    use super::*;

    #[test]
    fn network_builders() {
        assert_eq!(
            strs(network_inspect(&["sbx-a", "sbx-b"])),
            ["network", "inspect", "--format", parse::NETWORK_FORMAT, "--", "sbx-a", "sbx-b"]
        );
        assert_eq!(
            strs(network_disconnect("sbx-a", "sbx-1")),
            ["network", "disconnect", "--force", "--", "sbx-a", "sbx-1"]
        );
    }
}

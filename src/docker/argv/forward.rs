//! A private route's forwarder (see `model::forward`): its `docker run` on
//! the sandbox's private route network under the route's host name, and
//! the listing destroy, revoke and gc find forwarders by.

use std::ffi::OsString;
use std::path::Path;

use super::os;
use crate::model::{forward, record};

/// Everything create has resolved for one forwarder.
#[derive(Debug, Clone)]
pub struct ForwardPlan<'a> {
    /// The sandbox's id.
    pub id: &'a str,
    /// The owner token of the sandbox (`token::owner_token`).
    pub owner: &'a str,
    /// sbx's own image (`host::self_image`).
    pub image: &'a str,
    /// sbx's seccomp profile file.
    pub seccomp: &'a Path,
    /// The sandbox's private route network (`<id>-<kind>`).
    pub network: &'a str,
    /// The route's host: the name the sandbox reaches the forwarder by.
    pub alias: &'a str,
    /// The routes' ports to relay, each to the same port of the service.
    pub ports: &'a [u16],
    /// The uid (= gid) it runs as: the sandbox's services' own (`host::uids`).
    pub uid: u32,
}

/// `docker run -d` of the forwarder, hardened like the egress gate: no
/// capabilities, no new privileges, sbx's seccomp profile, read-only root,
/// its own uid, bounded memory, CPU, processes, files and log, no healthcheck.
/// Only the sandbox's network at start: the forwarder listens on the
/// addresses it has then, and is connected upstream afterwards.
pub fn forward_run(p: &ForwardPlan) -> Vec<OsString> {
    let mut a = os(&["run", "-d", "--name", &forward::container(p.network)]);
    super::gate::own_service(
        &mut a,
        &super::gate::OwnService {
            of: (record::FORWARD_OF, p.id),
            owner: p.owner,
            seccomp: p.seccomp,
            log: (forward::LOG_MAX_SIZE, forward::LOG_MAX_FILES),
            limits: (forward::MEMORY, forward::CPUS, forward::PIDS, forward::NOFILE),
            network: (p.network, p.alias),
            uid: p.uid,
        },
    );
    a.extend(os(&["--entrypoint", "/sbx", "--", p.image, "__forward", "--upstream", forward::UPSTREAM_ALIAS]));
    for port in p.ports {
        a.extend(os(&["--port", &port.to_string()]));
    }
    a
}

/// Every forwarder: `[name, sandbox id, owner token, container id]` per line.
pub fn forwarders() -> Vec<OsString> {
    let format = format!(
        "[{{{{json .Names}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{}\")}}}},{{{{json .ID}}}}]",
        record::FORWARD_OF,
        record::OWNER
    );
    os(&["ps", "-a", "--no-trunc", "--filter", &format!("label={}", record::FORWARD_OF), "--format", &format])
}

#[cfg(test)]
mod tests {
    use super::super::strs;
    use super::*;

    #[test]
    fn the_forwarder_runs_hardened_on_the_sandboxs_network_under_the_routes_name() {
        let p = ForwardPlan {
            id: "sbx-0123456789ab",
            owner: "tok",
            image: "sha256:abc",
            seccomp: Path::new("/var/lib/sbx/seccomp/sbx-seccomp-0123.json"),
            network: "sbx-0123456789ab-inference",
            alias: "proxy",
            ports: &[8080, 9000],
            uid: 1879048201,
        };
        assert_eq!(
            strs(forward_run(&p)),
            [
                "run",
                "-d",
                "--name",
                "sbx-0123456789ab-inference.fwd",
                "--label",
                "sbx.forward-of=sbx-0123456789ab",
                "--label",
                "sbx.owner=tok",
                "--restart",
                "no",
                "--no-healthcheck",
                "--cap-drop",
                "ALL",
                "--security-opt",
                "no-new-privileges",
                "--security-opt",
                "seccomp=/var/lib/sbx/seccomp/sbx-seccomp-0123.json",
                "--log-driver",
                "json-file",
                "--log-opt",
                "max-size=1m",
                "--log-opt",
                "max-file=2",
                "--user",
                "1879048201:1879048201",
                "--memory",
                "64m",
                "--memory-swap",
                "64m",
                "--cpus",
                "0.5",
                "--pids-limit",
                "16",
                "--ulimit",
                "nofile=1024:1024",
                "--ulimit",
                "core=0:0",
                "--network",
                "sbx-0123456789ab-inference",
                "--network-alias",
                "proxy",
                "--read-only",
                "--entrypoint",
                "/sbx",
                "--",
                "sha256:abc",
                "__forward",
                "--upstream",
                "sbx-upstream",
                "--port",
                "8080",
                "--port",
                "9000",
            ]
        );
        assert!(!strs(forward_run(&p)).iter().any(|a| a == "sbx.managed=1"), "a forwarder is not a sandbox");
        assert_eq!(strs(forwarders())[..5], ["ps", "-a", "--no-trunc", "--filter", "label=sbx.forward-of"]);
    }
}

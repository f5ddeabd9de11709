//! The egress gate's docker calls: its `docker run`, the
//! host-wide egress network, and the listings gc reads. The internal
//! network between a sandbox and its gate is a private route network
//! (`network::private_network`) whose service is the gate.

use std::ffi::OsString;
use std::path::Path;

use super::os;
use crate::model::{gate, record};

/// Everything create has resolved for one gate.
#[derive(Debug, Clone)]
pub struct GatePlan<'a> {
    /// The sandbox's id.
    pub id: &'a str,
    /// The owner token of the sandbox (`token::owner_token`).
    pub owner: &'a str,
    /// sbx's own image (`host::self_image`).
    pub image: &'a str,
    /// Where /policy comes from: this machine's directory, or (a remote
    /// engine) a volume of the gate's own that sbx fills.
    pub policy: PolicySource<'a>,
    /// sbx's seccomp profile file.
    pub seccomp: &'a Path,
    /// The resolver the gate asks (`--egress-dns`).
    pub dns: Option<&'a str>,
    /// The uid (= gid) it runs as: the sandbox's services' own (`host::uids`).
    pub uid: u32,
}

/// Where the gate's /policy comes from.
#[derive(Debug, Clone, Copy)]
pub enum PolicySource<'a> {
    /// The policy directory on this machine, bind-mounted read-only.
    Dir(&'a Path),
    /// An anonymous volume of the gate's (removed with it by `rm -v`),
    /// filled with `docker cp` before the gate starts and on every change:
    /// no path of this machine in the argv. Mounted read-write, since
    /// docker refuses a `docker cp` into a read-only mount; the files are
    /// root's and the gate runs as its own uid without capabilities, so it still
    /// cannot change its own policy.
    Volume,
}

/// `docker run -d` of the gate on the sandbox's internal network, under the
/// alias the sandbox's proxy variables name; hardened like a sandbox, with
/// limits sized for the gate (see `model::gate`) and its decision log on
/// stdout, bounded by json-file rotation.
pub fn gate_run(p: &GatePlan) -> Vec<OsString> {
    gate_args(p, &["run", "-d"])
}

/// `docker create` of the gate, for a remote engine: its policy volume is
/// filled before `docker start` (the gate reads the policy at start).
pub fn gate_create(p: &GatePlan) -> Vec<OsString> {
    gate_args(p, &["create"])
}

/// What sbx's own long-running containers (the egress gate, a private
/// route's forwarder) are made of after their name.
pub(super) struct OwnService<'a> {
    /// The label naming the sandbox it serves, and that sandbox.
    pub of: (&'a str, &'a str),
    pub owner: &'a str,
    pub seccomp: &'a Path,
    /// The log's max-size and max-file.
    pub log: (&'a str, &'a str),
    /// Memory, CPUs, processes and the open-files ulimit.
    pub limits: (&'a str, &'a str, u32, &'a str),
    /// The one network it starts on, and its alias there.
    pub network: (&'a str, &'a str),
    /// The uid (= gid) it runs as.
    pub uid: u32,
}

/// Its ownership labels, sbx's hardening, its own uid, bounded memory, CPU,
/// processes, files and core dumps, one network under an alias, and a
/// read-only root.
pub(super) fn own_service(a: &mut Vec<OsString>, s: &OwnService) {
    let label = |k: &str, v: &str| format!("{k}={v}");
    a.extend(os(&["--label", &label(s.of.0, s.of.1), "--label", &label(record::OWNER, s.owner)]));
    super::run::harden(a, s.seccomp, s.log.0, s.log.1);
    let (memory, cpus, pids, nofile) = s.limits;
    let pids = pids.to_string();
    let user = format!("{0}:{0}", s.uid);
    a.extend(os(&["--user", &user, "--memory", memory, "--memory-swap", memory, "--cpus", cpus]));
    a.extend(os(&["--pids-limit", &pids, "--ulimit", nofile, "--ulimit", "core=0:0"]));
    a.extend(os(&["--network", s.network.0, "--network-alias", s.network.1, "--read-only"]));
}

fn gate_args(p: &GatePlan, head: &[&str]) -> Vec<OsString> {
    let name = gate::container(p.id);
    let mut a = os(head);
    a.extend(os(&["--name", &name]));
    let network = gate::network(p.id);
    own_service(
        &mut a,
        &OwnService {
            of: (record::GATE_OF, p.id),
            owner: p.owner,
            seccomp: p.seccomp,
            log: (gate::LOG_MAX_SIZE, gate::LOG_MAX_FILES),
            limits: (gate::MEMORY, gate::CPUS, gate::PIDS, gate::NOFILE),
            network: (&network, gate::ALIAS),
            uid: p.uid,
        },
    );
    let mut push = |k: &str, v: String| {
        a.push(k.into());
        a.push(v.into());
    };
    match p.policy {
        PolicySource::Dir(d) => {
            push("--mount", format!("type=bind,src={},dst={},readonly", d.display(), gate::POLICY_DIR))
        }
        PolicySource::Volume => push("--mount", format!("type=volume,dst={},volume-nocopy", gate::POLICY_DIR)),
    }
    push("--entrypoint", "/sbx".into());
    a.push("--".into());
    a.push(p.image.into());
    let port = gate::PORT.to_string();
    a.extend(os(&["__gate", "--policy", gate::POLICY_FILE, "--sandbox", p.id, "--port", &port]));
    if let Some(dns) = p.dns {
        a.extend(os(&["--dns", dns]));
    }
    a
}

/// `docker exec -i -- GATE /sbx __gate-vault`: the vault (secrets and
/// certificates) goes on stdin to the gate's control socket, never into an
/// argv. As the gate's own uid (exec's default: the container's user), the
/// one its socket accepts.
pub fn gate_vault(gate: &str) -> Vec<OsString> {
    os(&["exec", "-i", "--", gate, "/sbx", "__gate-vault"])
}

/// sbx's own egress network: a bridge that reaches out (not internal),
/// with inter-container traffic off so gates cannot reach each other.
pub fn egress_network_create(name: &str) -> Vec<OsString> {
    os(&[
        "network",
        "create",
        "--driver",
        "bridge",
        "--opt",
        "com.docker.network.bridge.enable_icc=false",
        "--label",
        &format!("{}=1", record::EGRESS_NET),
        "--",
        name,
    ])
}

/// sbx's own egress networks (by label): one name per line.
pub fn egress_networks() -> Vec<OsString> {
    os(&["network", "ls", "--filter", &format!("label={}", record::EGRESS_NET), "--format", "{{json .Name}}"])
}

/// Every gate container: `[name, sandbox id, owner token, container id]` per line.
pub fn gates() -> Vec<OsString> {
    let format = format!(
        "[{{{{json .Names}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{}\")}}}},{{{{json .ID}}}}]",
        record::GATE_OF,
        record::OWNER
    );
    os(&["ps", "-a", "--no-trunc", "--filter", &format!("label={}", record::GATE_OF), "--format", &format])
}

/// `docker run --rm --network host` of sbx's image printing the engine
/// host's addresses (`host::host_addrs`), for a remote engine's gate: in the
/// host's network namespace, as 65534 without capabilities, read-only, with
/// small limits; it only lists interfaces.
pub fn host_addrs_run(image: &str, seccomp: &Path) -> Vec<OsString> {
    let mut a = os(&["run", "--rm"]);
    super::run::harden(&mut a, seccomp, "1m", "1");
    a.extend(os(&["--network", "host", "--user", "65534:65534", "--read-only"]));
    a.extend(os(&["--cpus", "0.5", "--memory", "64m", "--memory-swap", "64m", "--pids-limit", "16"]));
    a.extend(os(&["--entrypoint", "/sbx", "--", image, "__host-addrs"]));
    a
}

#[cfg(test)]
mod tests {
    use super::super::strs;
    use super::*;

    const ID: &str = "sbx-0123456789ab";

    fn plan(dns: Option<&'static str>) -> GatePlan<'static> {
        GatePlan {
            id: ID,
            owner: "tok",
            image: "sha256:abc",
            policy: PolicySource::Dir(Path::new("/var/lib/sbx/egress/sbx-0123456789ab")),
            seccomp: Path::new("/var/lib/sbx/seccomp/sbx-seccomp-0123.json"),
            dns,
            uid: 1879048200,
        }
    }

    #[test]
    fn gate_runs_hardened_on_the_internal_network() {
        assert_eq!(
            strs(gate_run(&plan(Some("10.0.0.53")))),
            [
                "run",
                "-d",
                "--name",
                "sbx-0123456789ab-gate",
                "--label",
                "sbx.gate-of=sbx-0123456789ab",
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
                "max-size=8m",
                "--log-opt",
                "max-file=2",
                "--user",
                "1879048200:1879048200",
                "--memory",
                "128m",
                "--memory-swap",
                "128m",
                "--cpus",
                "1",
                "--pids-limit",
                "64",
                "--ulimit",
                "nofile=4096:4096",
                "--ulimit",
                "core=0:0",
                "--network",
                "sbx-0123456789ab-egress",
                "--network-alias",
                "sbx-egress",
                "--read-only",
                "--mount",
                "type=bind,src=/var/lib/sbx/egress/sbx-0123456789ab,dst=/policy,readonly",
                "--entrypoint",
                "/sbx",
                "--",
                "sha256:abc",
                "__gate",
                "--policy",
                "/policy/policy.json",
                "--sandbox",
                "sbx-0123456789ab",
                "--port",
                "3128",
                "--dns",
                "10.0.0.53",
            ]
        );
        let no_dns = strs(gate_run(&plan(None)));
        assert_eq!(no_dns.last().unwrap(), "3128");
        assert!(
            !no_dns.iter().any(|a| a == "sbx.managed=1"),
            "a gate is not a sandbox: ls and gc list sandboxes by it"
        );
    }

    /// A remote engine's gate: created, not run, with its policy in a
    /// volume of its own; otherwise the same argv.
    #[test]
    fn a_remote_gate_is_created_with_a_policy_volume_of_its_own() {
        let local = strs(gate_run(&plan(None)));
        let remote = strs(gate_create(&GatePlan { policy: PolicySource::Volume, ..plan(None) }));
        assert_eq!(remote[0], "create");
        assert!(remote.contains(&"type=volume,dst=/policy,volume-nocopy".to_string()), "{remote:?}");
        assert!(!remote.iter().any(|a| a.contains("/var/lib/sbx/egress")), "{remote:?}");
        let strip = |v: &[String], skip: usize| -> Vec<String> {
            v[skip..].iter().filter(|a| !a.starts_with("type=")).cloned().collect()
        };
        assert_eq!(strip(&local, 2), strip(&remote, 1));
    }

    #[test]
    fn the_host_addresses_run_is_hardened_on_the_host_network() {
        assert_eq!(
            strs(host_addrs_run("sha256:abc", Path::new("/var/lib/sbx/seccomp/p.json"))),
            [
                "run",
                "--rm",
                "--restart",
                "no",
                "--no-healthcheck",
                "--cap-drop",
                "ALL",
                "--security-opt",
                "no-new-privileges",
                "--security-opt",
                "seccomp=/var/lib/sbx/seccomp/p.json",
                "--log-driver",
                "json-file",
                "--log-opt",
                "max-size=1m",
                "--log-opt",
                "max-file=1",
                "--network",
                "host",
                "--user",
                "65534:65534",
                "--read-only",
                "--cpus",
                "0.5",
                "--memory",
                "64m",
                "--memory-swap",
                "64m",
                "--pids-limit",
                "16",
                "--entrypoint",
                "/sbx",
                "--",
                "sha256:abc",
                "__host-addrs",
            ]
        );
    }

    #[test]
    fn egress_network_and_listings() {
        assert_eq!(
            strs(egress_network_create("sbx-egress-net")),
            [
                "network",
                "create",
                "--driver",
                "bridge",
                "--opt",
                "com.docker.network.bridge.enable_icc=false",
                "--label",
                "sbx.egress-net=1",
                "--",
                "sbx-egress-net"
            ]
        );
        assert_eq!(
            strs(gates()),
            [
                "ps",
                "-a",
                "--no-trunc",
                "--filter",
                "label=sbx.gate-of",
                "--format",
                r#"[{{json .Names}},{{json (.Label "sbx.gate-of")}},{{json (.Label "sbx.owner")}},{{json .ID}}]"#
            ]
        );
    }
}

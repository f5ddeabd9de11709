//! Create's runtime (issue 13): the engine must have the runtime `--runtime`
//! names, registered so that sbx's promises hold under it; and where
//! Docker's embedded DNS does not answer (gVisor), sbx writes the route
//! hosts' addresses into the sandbox's /etc/hosts itself.

use super::super::Driver;
use super::routes::RouteNets;
use crate::docker::{argv, parse, Background};
use crate::error::{Error, Result, RouteError, RuntimeError};
use crate::model::gate;
use crate::model::runtime::{Family, Registered, DEFAULT};
use crate::spec::SandboxSpec;

/// The lowest `--pids` a gVisor sandbox gets (issue 13): the cgroup's pids
/// limit counts the Sentry's and gofer's threads too.
pub(super) const GVISOR_MIN_PIDS: u32 = 128;

impl Driver {
    /// `docker info`'s runtimes, asked while the image is looked up; None for runc.
    pub(super) fn spawn_runtime_check(&self, spec: &SandboxSpec) -> Result<Option<Box<dyn Background>>> {
        if spec.runtime == DEFAULT {
            return Ok(None);
        }
        Ok(Some(self.exec.spawn(&argv::runtimes())?))
    }

    /// The registration of `spec.runtime`, checked against what this
    /// sandbox needs (a network for its routes or gate, a socket on the
    /// host for the direct channel).
    pub(super) fn check_runtime(
        &self,
        spec: &SandboxSpec,
        job: Option<Box<dyn Background>>,
        needs_network: bool,
        direct: bool,
    ) -> Result<Registered> {
        let Some(job) = job else {
            return Ok(Registered { name: DEFAULT.into(), path: DEFAULT.into(), args: vec![] });
        };
        let out = job.wait()?;
        if out.status != 0 {
            return Err(crate::docker::status_error(&argv::runtimes(), &out).into());
        }
        let all = parse::runtimes(&out.stdout_str()).ok_or_else(|| RuntimeError::Unreadable {
            reason: format!("not a JSON object: {:?}", out.stdout_str().trim()),
        })?;
        let Some(reg) = all.get(&spec.runtime) else {
            let have = all.keys().cloned().collect::<Vec<_>>().join(", ");
            return Err(RuntimeError::Missing { name: spec.runtime.clone(), have }.into());
        };
        if reg.family() == Family::Gvisor && spec.pids < GVISOR_MIN_PIDS {
            return Err(crate::error::Invalid::new(
                "--pids",
                spec.pids.to_string(),
                format!(
                    "under gVisor the limit also counts the runtime's own threads (46 in an idle sandbox here; \
                     `docker run` fails below about 64), so it must be at least {GVISOR_MIN_PIDS}"
                ),
            )
            .hint(format!("give --pids {GVISOR_MIN_PIDS} or more (the default is 512)"))
            .into());
        }
        let problems = reg.problems(needs_network, direct);
        if !problems.is_empty() {
            return Err(RuntimeError::Misconfigured { name: reg.name.clone(), path: reg.path.clone(), problems }.into());
        }
        Ok(reg.clone())
    }

    /// Each route host's address on its route network, and the gate's on
    /// its own, from one `docker container inspect` of the services (engine
    /// data; never anything the sandbox wrote). Under gVisor the embedded
    /// resolver does not answer, so these become `--add-host` entries; the
    /// sandbox's `--dns` stays contained.
    pub(super) fn route_hosts(
        &self,
        id: &str,
        spec: &SandboxSpec,
        routes: &RouteNets,
    ) -> Result<Vec<(String, String)>> {
        // (name in the sandbox, container, network)
        let mut wanted: Vec<(String, String, String)> = Vec::new();
        for (route, net) in spec.routes.iter().zip(&routes.networks) {
            if route.host.parse::<std::net::IpAddr>().is_err() && !wanted.iter().any(|w| w.0 == route.host) {
                wanted.push((route.host.clone(), route.host.clone(), net.network.clone()));
            }
        }
        if spec.egress.is_some() {
            wanted.push((gate::ALIAS.into(), gate::container(id), gate::network(id)));
        }
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let mut names: Vec<String> = wanted.iter().map(|w| w.1.clone()).collect();
        names.dedup();
        let args = argv::inspect(&names);
        let out = self.exec.run(&args)?;
        // Missing containers are named below; only output that is not JSON fails here.
        let found = parse::parse_inspect(&out.stdout_str(), &crate::docker::render(&args)).unwrap_or_default();
        let mut hosts = Vec::new();
        for (host, container, network) in wanted {
            let ip = found
                .iter()
                .find(|c| c.name == container)
                .and_then(|c| c.full["NetworkSettings"]["Networks"][&network]["IPAddress"].as_str())
                .filter(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok());
            match ip {
                Some(ip) => hosts.push((host, ip.to_string())),
                None => {
                    return Err(Error::Route(RouteError::Unresolved { host, network, runtime: spec.runtime.clone() }))
                }
            }
        }
        Ok(hosts)
    }
}

/// Whether sbx must resolve route hosts itself under this runtime.
pub(super) fn needs_hosts(reg: &Registered) -> bool {
    reg.family() == Family::Gvisor
}

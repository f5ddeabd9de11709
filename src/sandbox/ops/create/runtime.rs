//! Create's runtime: the engine must have the runtime `--runtime`
//! names, registered so that sbx's promises hold under it; and where
//! Docker's embedded DNS does not answer (gVisor), sbx writes the route
//! hosts' addresses into the sandbox's /etc/hosts itself.

use super::routes::RouteNets;
use crate::docker::{argv, parse, run_ok, Background};
use crate::error::{Error, Result, RouteError, RuntimeError};
use crate::model::gate;
use crate::model::runtime::{Family, Registered, DEFAULT};
use crate::sandbox::Driver;
use crate::spec::SandboxSpec;

/// The lowest `--pids` a gVisor sandbox gets: the cgroup's pids
/// limit counts the Sentry's and gofer's threads too.
pub(super) const GVISOR_MIN_PIDS: u32 = 128;

impl Driver {
    /// `docker info`'s runtimes, asked while the image is looked up; none
    /// for runc, and none when a registration that passed was seen under
    /// the engine's current key (`state::engine_key`): the answer, or the job.
    pub(super) fn spawn_runtime_check(&self, spec: &SandboxSpec) -> Result<RuntimeCheck> {
        if spec.runtime == DEFAULT {
            return Ok(RuntimeCheck::Runc);
        }
        let key = crate::host::state::engine_key(self.engine()?.default);
        if let Some(seen) = key.as_deref().and_then(|k| self.state().ok()?.state.runtimes(k)) {
            return Ok(RuntimeCheck::Seen(seen));
        }
        Ok(RuntimeCheck::Asked(self.docker.spawn(&argv::runtimes())?, key))
    }

    /// The registration of `spec.runtime`, checked against what this
    /// sandbox needs (a network for its routes or gate, a socket on the
    /// host for the direct channel).
    pub(super) fn check_runtime(
        &self,
        spec: &SandboxSpec,
        check: RuntimeCheck,
        needs_network: bool,
        direct: bool,
    ) -> Result<Registered> {
        let (text, key) = match check {
            RuntimeCheck::Runc => return Ok(Registered { name: DEFAULT.into(), path: DEFAULT.into(), args: vec![] }),
            RuntimeCheck::Seen(text) => match self.registered(spec, &text, needs_network, direct) {
                Ok(reg) => return Ok(reg),
                // Only what passed is trusted from memory: ask the engine again.
                Err(_) => (
                    run_ok(&*self.docker, &argv::runtimes())?.stdout_str(),
                    crate::host::state::engine_key(self.engine()?.default),
                ),
            },
            RuntimeCheck::Asked(job, key) => {
                let out = job.wait()?;
                if out.status != 0 {
                    return Err(crate::docker::status_error(&argv::runtimes(), &out).into());
                }
                (out.stdout_str(), key)
            }
        };
        let reg = self.registered(spec, &text, needs_network, direct)?;
        if let (Some(k), Ok(hs)) = (key, self.state()) {
            hs.state.set_runtimes(&k, &text);
        }
        Ok(reg)
    }

    /// `spec.runtime` in `docker info`'s answer `text`, checked.
    fn registered(&self, spec: &SandboxSpec, text: &str, needs_network: bool, direct: bool) -> Result<Registered> {
        let all = parse::runtimes(text)
            .ok_or_else(|| RuntimeError::Unreadable { reason: format!("not a JSON object: {:?}", text.trim()) })?;
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
                // A private route's name is its forwarder's.
                let container = match routes.forwards.iter().any(|f| f.network == net.network) {
                    true => crate::model::forward::container(&net.network),
                    false => route.host.clone(),
                };
                wanted.push((route.host.clone(), container, net.network.clone()));
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
        let out = self.docker.run(&args)?;
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

/// What create knows of the engine's runtimes before it checks one.
pub(super) enum RuntimeCheck {
    /// runc: every engine has it; nothing to ask.
    Runc,
    /// `docker info`'s answer as last seen under the engine's current key.
    Seen(String),
    /// Asked now; the key to remember the answer under, if any.
    Asked(Box<dyn Background>, Option<String>),
}

/// Whether sbx must resolve route hosts itself under this runtime.
pub(super) fn needs_hosts(reg: &Registered) -> bool {
    reg.family() == Family::Gvisor
}

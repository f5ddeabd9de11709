//! Create's egress gate: sbx's own image and the egress network
//! made ready before anything of the sandbox exists, the gate's internal
//! network joined to the route networks (kind `egress`, a private network
//! whose service is the gate), and the gate started while the sandbox
//! starts, then connected to the egress network before `--setup` runs.

use std::path::Path;

use super::routes::RouteNets;
use crate::docker::parse::NetInfo;
use crate::docker::{argv, parse, run_ok, status_error, Background, DockerError};
use crate::error::{EgressError, Error, Result};
use crate::model::gate;
use crate::model::record::{PrivateRoute, RouteNetwork};
use crate::sandbox::Driver;
use crate::spec::egress::{EgressSpec, Policy};
use crate::spec::EGRESS_KIND;

/// What the gate needs that create resolves before the sandbox exists.
pub(super) struct GateReady {
    pub(super) image: String,
    /// The policy the gate starts with: create's, with the Docker host's
    /// own addresses (`host::host_addrs`).
    pub(super) policy: Policy,
    /// sbx's own seccomp profile (the gate never takes `--seccomp-profile`).
    pub(super) seccomp: std::path::PathBuf,
}

/// What the gate's `docker run`/`create` is made of, but its image.
pub(super) struct GateArgs<'a> {
    pub(super) id: &'a str,
    pub(super) owner: &'a str,
    pub(super) e: &'a EgressSpec,
    pub(super) ready: &'a GateReady,
    pub(super) policy_dir: &'a Path,
    pub(super) remote: bool,
    /// The uid it runs as (the sandbox's services').
    pub(super) uid: u32,
}

impl GateArgs<'_> {
    fn plan<'b>(&'b self, image: &'b str, dns: &'b Option<String>) -> argv::GatePlan<'b> {
        let policy = if self.remote { argv::PolicySource::Volume } else { argv::PolicySource::Dir(self.policy_dir) };
        let (id, owner, seccomp) = (self.id, self.owner, self.ready.seccomp.as_path());
        argv::GatePlan { id, owner, image, policy, seccomp, dns: dns.as_deref(), uid: self.uid }
    }

    fn dns(&self) -> Option<String> {
        self.e.dns.map(|d| d.to_string())
    }
}

/// The gate started in the background, with what runs it again.
pub(super) struct GateJob<'a> {
    job: Box<dyn Background>,
    args: GateArgs<'a>,
}

impl RouteNets {
    /// The sandbox's side of its gate: an internal network of its own, with
    /// the gate as its one service, like a private route's.
    pub(super) fn add_gate(&mut self, id: &str) {
        let net = gate::network(id);
        self.info.insert(
            net.clone(),
            NetInfo { internal: true, driver: "bridge".into(), inhibit_ipv4: true, private_for: Some(id.to_string()) },
        );
        self.networks.push(RouteNetwork { kind: EGRESS_KIND.into(), network: net.clone() });
        self.private.push(PrivateRoute { network: net, service: gate::container(id) });
    }
}

impl Driver {
    /// sbx's image (imported on first use), the egress network (sbx's own
    /// made on first use; an operator's must exist) and the host's addresses.
    pub(super) fn prepare_gate(&self, e: &EgressSpec, data: &Path) -> Result<GateReady> {
        // Marks this host as one that uses egress, so gc looks for its leftovers.
        let root = crate::host::egress::root(data);
        std::fs::create_dir_all(&root).map_err(|e| Error::io(format!("creating {}", root.display()), e))?;
        let image = self.self_image()?;
        let name = argv::egress_network(e);
        let args = argv::network_inspect(&[name]);
        let out = self.docker.run(&args)?;
        if out.status != 0 {
            if !parse::no_such_network(&out.stderr_str()) {
                return Err(status_error(&args, &out).into());
            }
            if e.network.is_some() {
                return Err(EgressError::NetworkMissing { network: name.to_string() }.into());
            }
            self.make_egress_network(name)?;
        }
        let seccomp = crate::host::seccomp::install(data)?;
        let mut ready = GateReady { image, policy: e.policy.clone(), seccomp };
        // After the egress network exists: its bridge's gateway is one of them.
        let hosts = self.host_addrs(data, &ready)?;
        ready.policy.set_host_addrs(hosts);
        Ok(ready)
    }

    /// The Docker host's own addresses (`host::host_addrs`): this machine's
    /// interfaces for a local engine (no docker call); for a remote one,
    /// what sbx's image prints on the engine host's network, cached per
    /// endpoint for `host_addrs::TTL`.
    fn host_addrs(&self, data: &Path, ready: &GateReady) -> Result<Vec<std::net::IpAddr>> {
        use crate::host::host_addrs;
        let engine = self.engine()?;
        if !engine.is_remote() {
            return host_addrs::interfaces().map_err(|e| Error::io("listing this machine's addresses", e));
        }
        let now = std::time::SystemTime::now();
        if let Some(addrs) = host_addrs::cached(data, &engine.endpoint, now) {
            return Ok(addrs);
        }
        let list = |image: &str| -> Result<String> {
            Ok(run_ok(&*self.docker, &argv::host_addrs_run(image, &ready.seccomp))?.stdout_str())
        };
        let failed = |reason: String| EgressError::HostAddrs { endpoint: engine.endpoint.clone(), reason };
        let text = self.again_if_image_gone(list(&ready.image), ready, list).map_err(|e| failed(e.to_string()))?;
        let addrs = host_addrs::parse(&text).map_err(failed)?;
        host_addrs::remember(data, &engine.endpoint, &addrs, now);
        Ok(addrs)
    }

    /// sbx's own egress network; another create may have made it meanwhile.
    fn make_egress_network(&self, name: &str) -> Result<()> {
        let args = argv::egress_network_create(name);
        let out = self.docker.run(&args)?;
        if out.status != 0 && !out.stderr_str().contains("already exists") {
            return Err(status_error(&args, &out).into());
        }
        Ok(())
    }

    /// Start the gate in the background; the sandbox starts meanwhile.
    pub(super) fn spawn_gate<'a>(&self, args: GateArgs<'a>) -> Result<GateJob<'a>> {
        let dns = args.dns();
        if !args.remote {
            let job = self.docker.spawn(&argv::gate_run(&args.plan(&args.ready.image, &dns)))?;
            return Ok(GateJob { job, args });
        }
        // A remote engine cannot bind this machine's directory:
        // the gate is created, its own volume filled, then started (it
        // reads the policy at start). `docker start` prints the id it was
        // given, which `gate_started` reads as `docker run -d`'s answer.
        let create = |image: &str| -> Result<String> {
            let argv = argv::gate_create(&args.plan(image, &dns));
            Ok(run_ok(&*self.docker, &argv)?.stdout_str().trim().to_string())
        };
        let cid = self.again_if_image_gone(create(&args.ready.image), args.ready, create)?;
        self.publish_policy(args.id, &cid, &args.ready.policy)?;
        let job = self.docker.spawn(&argv::start(&cid))?;
        Ok(GateJob { job, args })
    }

    /// `self_image::again_if_gone` for the gate: another sbx build on this
    /// engine may drop sbx's image between `prepare_gate` and the gate's
    /// create or run.
    fn again_if_image_gone(
        &self,
        first: Result<String>,
        ready: &GateReady,
        retry: impl FnOnce(&str) -> Result<String>,
    ) -> Result<String> {
        self.self_image_again(first, &ready.image, retry)
    }

    /// The gate's `docker run` answered: its container id, once it is on
    /// the egress network too.
    pub(super) fn gate_started(&self, g: GateJob<'_>) -> Result<String> {
        let GateJob { job, args: gate } = g;
        let (id, e) = (gate.id, gate.e);
        let out = job.wait()?;
        let started = match out.status {
            0 => Ok(out.stdout_str().trim().to_string()),
            status => {
                let command = "starting the egress gate (`docker run`)".into();
                Err(DockerError::Status { command, status, stderr: out.stderr_str() }.into())
            }
        };
        // A remote gate's image was taken at its create (`spawn_gate`).
        let cid = match gate.remote {
            true => started?,
            false => self.again_if_image_gone(started, gate.ready, |image| {
                let dns = gate.dns();
                let argv = argv::gate_run(&gate.plan(image, &dns));
                Ok(run_ok(&*self.docker, &argv)?.stdout_str().trim().to_string())
            })?,
        };
        self.check_interrupt()?;
        let name = argv::egress_network(e);
        let args = argv::network_connect(name, &gate::container(id));
        let out = self.docker.run(&args)?;
        if out.status != 0 {
            // Another host's sbx gc (its own gates gone) may remove sbx's
            // network between `prepare_gate` and here: make it again, once.
            if e.network.is_some() || !parse::no_such_network(&out.stderr_str()) {
                return Err(status_error(&args, &out).into());
            }
            self.make_egress_network(name)?;
            run_ok(&*self.docker, &args)?;
        }
        Ok(cid)
    }
}

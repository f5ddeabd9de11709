//! Create's egress gate (issue 12): sbx's own image and the egress network
//! made ready before anything of the sandbox exists, the gate's internal
//! network joined to the route networks (kind `egress`, a private network
//! whose service is the gate), and the gate started while the sandbox
//! starts, then connected to the egress network before `--setup` runs.

use std::path::Path;

use super::super::Driver;
use super::routes::RouteNets;
use crate::docker::parse::NetInfo;
use crate::docker::{argv, parse, run_ok, status_error, Background, DockerError};
use crate::error::{EgressError, Error, Result};
use crate::model::gate;
use crate::model::record::{PrivateRoute, RouteNetwork};
use crate::spec::egress::EgressSpec;
use crate::spec::EGRESS_KIND;

/// What the gate needs that create resolves before the sandbox exists.
pub(super) struct GateReady {
    pub(super) image: String,
    /// sbx's own seccomp profile (the gate never takes `--seccomp-profile`).
    pub(super) seccomp: std::path::PathBuf,
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
    /// sbx's image (imported on first use) and the egress network (sbx's
    /// own made on first use; an operator's must exist).
    pub(super) fn prepare_gate(&self, e: &EgressSpec, data: &Path) -> Result<GateReady> {
        // Marks this host as one that uses egress, so gc looks for its leftovers.
        let root = crate::host::egress::root(data);
        std::fs::create_dir_all(&root).map_err(|e| Error::io(format!("creating {}", root.display()), e))?;
        let image = crate::host::self_image::ensure_cached(&*self.exec, &self.exe, Some(&data.join("self-image")))?;
        let name = argv::egress_network(e);
        let args = argv::network_inspect(&[name]);
        let out = self.exec.run(&args)?;
        if out.status != 0 {
            if !parse::no_such_network(&out.stderr_str()) {
                return Err(status_error(&args, &out).into());
            }
            if e.network.is_some() {
                return Err(EgressError::NetworkMissing { network: name.to_string() }.into());
            }
            self.make_egress_network(name)?;
        }
        Ok(GateReady { image, seccomp: crate::host::seccomp::install(data)? })
    }

    /// sbx's own egress network; another create may have made it meanwhile.
    fn make_egress_network(&self, name: &str) -> Result<()> {
        let args = argv::egress_network_create(name);
        let out = self.exec.run(&args)?;
        if out.status != 0 && !out.stderr_str().contains("already exists") {
            return Err(status_error(&args, &out).into());
        }
        Ok(())
    }

    /// Start the gate in the background; the sandbox starts meanwhile.
    pub(super) fn spawn_gate(
        &self,
        id: &str,
        owner: &str,
        e: &EgressSpec,
        ready: &GateReady,
        policy_dir: &Path,
        remote: bool,
    ) -> Result<Box<dyn Background>> {
        let dns = e.dns.map(|d| d.to_string());
        let policy = if remote { argv::PolicySource::Volume } else { argv::PolicySource::Dir(policy_dir) };
        let plan =
            argv::GatePlan { id, owner, image: &ready.image, policy, seccomp: &ready.seccomp, dns: dns.as_deref() };
        if !remote {
            return Ok(self.exec.spawn(&argv::gate_run(&plan))?);
        }
        // A remote engine cannot bind this machine's directory (issue 16):
        // the gate is created, its own volume filled, then started (it
        // reads the policy at start). `docker start` prints the id it was
        // given, which `gate_started` reads as `docker run -d`'s answer.
        let cid = run_ok(&*self.exec, &argv::gate_create(&plan))?.stdout_str().trim().to_string();
        self.publish_policy(id, &cid, &e.policy)?;
        Ok(self.exec.spawn(&argv::start(&cid))?)
    }

    /// Copy `policy` into sandbox `id`'s remote gate's /policy volume
    /// (`container`: the gate's id).
    pub(in crate::sandbox) fn publish_policy(
        &self,
        id: &str,
        container: &str,
        policy: &crate::spec::egress::Policy,
    ) -> Result<()> {
        let args = argv::remote::copy_in(container, gate::POLICY_DIR);
        let out = self.exec.run_input(&args, &crate::host::egress::tar(policy))?;
        if out.status != 0 {
            let reason = format!("`docker cp` into the gate failed: {}", out.stderr_str().trim());
            return Err(EgressError::Publish { id: id.to_string(), reason }.into());
        }
        Ok(())
    }

    /// The gate's `docker run` answered: its container id, once it is on
    /// the egress network too.
    pub(super) fn gate_started(&self, id: &str, e: &EgressSpec, job: Box<dyn Background>) -> Result<String> {
        let out = job.wait()?;
        if out.status != 0 {
            let command = "starting the egress gate (`docker run`)".into();
            return Err(DockerError::Status { command, status: out.status, stderr: out.stderr_str() }.into());
        }
        let cid = out.stdout_str().trim().to_string();
        self.check_interrupt()?;
        let name = argv::egress_network(e);
        let args = argv::network_connect(name, &gate::container(id));
        let out = self.exec.run(&args)?;
        if out.status != 0 {
            // Another host's sbx gc (its own gates gone) may remove sbx's
            // network between `prepare_gate` and here: make it again, once.
            if e.network.is_some() || !parse::no_such_network(&out.stderr_str()) {
                return Err(status_error(&args, &out).into());
            }
            self.make_egress_network(name)?;
            run_ok(&*self.exec, &args)?;
        }
        Ok(cid)
    }
}

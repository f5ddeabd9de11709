//! Steps of `create_once`, each named for what it decides or makes, so
//! the operation reads as a sequence.

use std::path::{Path, PathBuf};

use super::routes::RouteNets;
use super::volume::Persisted;
use crate::docker::parse::RawContainer;
use crate::docker::{argv, parse, Background};
use crate::error::{Error, ImageError, Result, RouteError, SandboxError};
use crate::host::channel::Kind;
use crate::host::socket;
use crate::host::state::{ProcId, SandboxRecord, State};
use crate::host::uids::Holder;
use crate::model::boundary::{self, Gap};
use crate::sandbox::boundary::assess;
use crate::sandbox::shared::uids::Lease;
use crate::sandbox::{unique, Driver};
use crate::spec::{PersistSize, SandboxSpec, UserSpec};

/// What of this machine a sandbox mounts: the helper (a directory here, or
/// a remote engine's volume) and the seccomp profile the CLI reads.
pub(super) struct HostFiles {
    pub(super) helper: Option<PathBuf>,
    pub(super) helper_volume: Option<String>,
    pub(super) seccomp: PathBuf,
}

/// What create decides before its first docker call, having refused what
/// it must refuse with nothing made (exit 2).
pub(super) struct Refusals {
    pub(super) root: PathBuf,
    pub(super) id: String,
    pub(super) remote: bool,
    pub(super) bound: Option<PersistSize>,
    /// The socket's path in the sandbox's record.
    pub(super) sock: PathBuf,
    /// `--user`, checked against the reserved ids.
    pub(super) flag_user: Option<UserSpec>,
}

/// Who the gate and forwarders run for, and how.
pub(super) struct Services<'a> {
    pub(super) id: &'a str,
    pub(super) owner: &'a str,
    pub(super) uid: u32,
    pub(super) routes: &'a RouteNets,
    pub(super) remote: bool,
}

impl Driver {
    /// The sandbox's id and socket path, and the refusals no docker call
    /// is needed for: an unboundable `--persist`, a socket path too long,
    /// a mount of sbx's own directories, an explicit `--user` naming the
    /// caller's ids. A remote engine's sandbox gets the relayed channel,
    /// its socket inside the sandbox (no path of this machine in its
    /// labels) and the helper from a volume there (refused cases:
    /// `refuse_remote`).
    pub(super) fn refusals(&self, spec: &SandboxSpec) -> Result<Refusals> {
        let root = self.roots.resolve()?;
        let id = (self.new_id)();
        let remote = self.engine()?.is_remote();
        let bound = self.persist_bound(spec)?;
        let sock = match remote {
            true => PathBuf::from(argv::SANDBOX_SOCKET),
            false => socket::socket_path(&root, &id),
        };
        socket::check_path_len(&sock)?;
        let state = &self.state()?.state;
        crate::spec::check_not_sbx_dirs(&spec.mounts, spec.state_dir.as_ref(), &state.dir, &root)?;
        let reserved = self.reserved_ids()?;
        let flag_user = spec.user.map(|u| u.not_reserved(&reserved)).transpose()?;
        self.check_interrupt()?;
        Ok(Refusals { root, id, remote, bound, sock, flag_user })
    }

    /// The forwarders and the gate, started; where sbx resolves route hosts
    /// (gVisor) the gate must be on its network first, so it is waited for
    /// here and the hosts resolved; elsewhere both start while the sandbox
    /// starts and are waited for after it.
    #[allow(clippy::type_complexity)]
    pub(super) fn spawn_services<'a>(
        &self,
        s: &Services<'a>,
        spec: &'a SandboxSpec,
        forward_ready: Option<&'a super::forward::ForwardReady>,
        gate: Option<&'a super::gate::GateReady>,
        policy_dir: Option<&'a Path>,
        resolve_hosts: bool,
    ) -> Result<(
        Option<super::gate::GateJob<'a>>,
        Option<super::forward::ForwardJobs<'a>>,
        Option<String>,
        Vec<(String, String)>,
    )> {
        let mut forward_jobs = self.spawn_forwarders(s.id, s.owner, forward_ready, &s.routes.forwards, s.uid)?;
        let mut gate_job = match (&spec.egress, gate, policy_dir) {
            (Some(e), Some(ready), Some(policy_dir)) => {
                let (id, owner, uid, remote) = (s.id, s.owner, s.uid, s.remote);
                Some(self.spawn_gate(super::gate::GateArgs { id, owner, e, ready, policy_dir, remote, uid })?)
            }
            _ => None,
        };
        let mut gate_cid = None;
        let hosts = if resolve_hosts {
            gate_cid = gate_job.take().map(|g| self.gate_started(g)).transpose()?;
            self.forwarders_started(forward_jobs.take())?;
            self.route_hosts(s.id, spec, s.routes)?
        } else {
            Vec::new()
        };
        Ok((gate_job, forward_jobs, gate_cid, hosts))
    }

    /// The sandbox's directory under the socket root: bind-mounted at
    /// /run/sandbox (direct channel), or a marker for gc and the watchdog
    /// (relayed). Nothing sbx makes for a remote sandbox belongs on this
    /// machine's file system (its socket is inside it; its state is in the
    /// data dir, where gc and the watchdog find it): never made, so
    /// removing it (rollback, destroy, gc) finds it gone.
    pub(super) fn socket_dir(
        &self,
        root: &Path,
        id: &str,
        remote: bool,
        channel: Kind,
        user: UserSpec,
    ) -> Result<PathBuf> {
        Ok(match (remote, channel) {
            (true, _) => root.join(id),
            (false, Kind::Direct) => socket::make_dir(root, id, user.uid, user.gid)?,
            (false, Kind::Exec) => socket::make_marker_dir(root, id)?,
        })
    }

    /// The host-side record of a running sandbox: what destroy removes
    /// without asking the engine. Without it destroy still works, through
    /// an inspect, so failing to write it is a warning.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn keep_record(
        &self,
        state: &State,
        id: &str,
        container: String,
        socket_dir: PathBuf,
        routes: &RouteNets,
        volume: Option<String>,
        spec: &SandboxSpec,
        gate: Option<String>,
    ) {
        let private = routes.private.clone();
        let record = SandboxRecord { container, socket_dir, private, volume, session: spec.session.clone(), gate };
        if let Err(e) = state.set_record(id, &record) {
            self.warn("sandbox_record", &format!("could not write the sandbox record: {e}"));
        }
    }

    /// The image's config as cached per digest (the content cannot change)
    /// when `cached` allows, else a `docker image inspect` started now, to
    /// be waited for while the routes are looked up.
    #[allow(clippy::type_complexity)]
    pub(super) fn image_asked(
        &self,
        state: &State,
        img: &str,
        cached: bool,
    ) -> Result<(Option<parse::ImageConfig>, Option<Box<dyn Background>>)> {
        let cached = if cached { state.image_user(img) } else { None };
        let job = match cached {
            Some(_) => None,
            None => Some(self.docker.spawn(&argv::image_user(img))?),
        };
        Ok((cached, job))
    }

    /// The gate's and forwarders' own uid, when the sandbox has either: no
    /// neighbour's service shares its per-uid limits.
    pub(super) fn service_uid(&self, spec: &SandboxSpec, routes: &RouteNets, id: &str) -> Result<Option<Lease<'_>>> {
        (spec.egress.is_some() || !routes.forwards.is_empty())
            .then(|| self.claim_uid(Holder::Service(id.to_string()), None))
            .transpose()
    }

    /// Recorded before anything exists, so `gc` can tell a create in flight
    /// from one whose process died (pid reuse included); then the engine,
    /// before the marker or socket directory and any other file (gc of
    /// another engine sees a live create until then): gc acts only on what
    /// its engine's sandboxes left.
    pub(super) fn mark_create(&self, state: &State, id: &str) -> Result<()> {
        if let Some(me) = ProcId::current() {
            state.begin_create(id, me)?;
        }
        state.set_engine(id, &self.engine()?.endpoint)?;
        Ok(())
    }

    /// The image's config: the verdict cached by digest, or the answer of
    /// `job` (pulling first when the image is missing and `--pull` allows
    /// it: nothing of the sandbox exists yet, so a pull leaves nothing to
    /// undo), cached for the next create.
    pub(super) fn image_verdict(
        &self,
        state: &State,
        spec: &SandboxSpec,
        cached: Option<parse::ImageConfig>,
        job: Option<Box<dyn Background>>,
    ) -> Result<parse::ImageConfig> {
        let img = spec.image.as_str();
        if let Some(c) = cached {
            return Ok(c);
        }
        let job = job.expect("a job is started whenever nothing is cached");
        let c = match self.image_user(img, job.wait()?) {
            Err(Error::Image(ImageError::Missing { .. })) if self.pulls(spec) => {
                self.pull(&spec.image)?;
                self.image_user(img, self.docker.run(&argv::image_user(img))?)?
            }
            r => r?,
        };
        state.set_image_user(img, &c);
        Ok(c)
    }

    /// The helper and the seccomp profile, installed in `data` (or, for a
    /// remote engine, the helper's volume there).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn host_files(
        &self,
        data: &Path,
        id: &str,
        spec: &SandboxSpec,
        remote: bool,
        readable: bool,
        channel: Kind,
        warnings: &mut Vec<String>,
    ) -> Result<HostFiles> {
        let (helper, helper_volume) = match remote {
            false => (crate::host::helper::install(data, readable)?, None),
            true if crate::host::helper::BYTES.is_empty() => (None, None),
            true => (None, Some(self.helper_volume(data, spec.image.as_str(), readable)?)),
        };
        if channel == Kind::Exec && helper.is_none() && helper_volume.is_none() {
            return Err(Error::Sandbox(SandboxError::HelperMissing { id: id.to_string() }));
        }
        let seccomp = match &spec.seccomp_profile {
            Some(custom) => {
                warnings.push(custom.warning());
                custom.path.clone()
            }
            None => crate::host::seccomp::install(data)?,
        };
        Ok(HostFiles { helper, helper_volume, seccomp })
    }

    /// The session's /state, held until the sandbox runs (one writer per
    /// persistent session), and `--clone` into it or into `--state-dir`.
    /// The volume's clone happens inside, before the volume exists, so a
    /// failed clone leaves no empty volume behind.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn session_state(
        &self,
        state: &State,
        key: &[u8],
        spec: &SandboxSpec,
        bound: Option<PersistSize>,
        remote: bool,
        user: UserSpec,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Persisted>> {
        let img = spec.image.as_str();
        let persist = match (&spec.session, bound) {
            (Some(session), Some(_)) if remote => {
                Some(self.prepare_remote_volume(state, key, session, user, img, spec.clone.as_ref(), warnings)?)
            }
            (Some(session), Some(b)) => Some(self.prepare_volume(state, key, session, user, b, spec, warnings)?),
            _ => None,
        };
        if let (Some(c), None) = (&spec.clone, &persist) {
            let m = spec.state_dir.as_ref().expect("spec validation requires a host-backed /state for --clone");
            self.clone_workspace(c, &m.host, user, warnings)?;
        }
        Ok(persist)
    }
}

/// What `inspect` will read back of the sandbox `plan` runs: on its route
/// networks, or on `none` without routes, with the labels it was given.
pub(super) fn expected_container(id: &str, routes: &RouteNets, plan: &argv::RunPlan) -> RawContainer {
    let mut attached = unique(routes.networks.iter().map(|r| r.network.clone()));
    if attached.is_empty() {
        attached.push("none".into());
    }
    RawContainer {
        name: id.to_string(),
        state: "running".into(),
        networks: attached,
        labels: plan.labels().into_iter().collect(),
        full: serde_json::Value::Null,
    }
}

/// What the routes reach beyond their targets (refused under
/// `--strict-egress`, else each a warning), the tier that leaves, and the
/// resolver: routed sandboxes that should not reach out get one that
/// reaches nothing, closing CVE-2024-29018 (see `boundary`); under gVisor
/// the embedded resolver does not answer at all, so sbx writes the route
/// hosts itself and the resolver stays contained.
pub(super) fn route_verdict(
    id: &str,
    spec: &SandboxSpec,
    routes: &RouteNets,
    resolve_hosts: bool,
    warnings: &mut Vec<String>,
) -> Result<(Vec<Gap>, u8, Option<&'static str>)> {
    let gaps = assess(id, &spec.routes, &routes.networks, &routes.info);
    if spec.strict_egress && !gaps.is_empty() {
        return Err(Error::Route(RouteError::NotContained { gaps }));
    }
    for g in &gaps {
        warnings.push(format!(
            "route {} ({}): {}; tier lowered to 1. Fix: {}",
            g.routes.join(","),
            g.network,
            g.detail,
            g.fix
        ));
    }
    let tier = boundary::tier(&gaps);
    let all_internal = routes.networks.iter().all(|r| routes.info.get(&r.network).is_some_and(|i| i.internal));
    let dns = (!routes.networks.is_empty() && (all_internal || resolve_hosts)).then_some(boundary::CONTAINED_DNS);
    Ok((gaps, tier, dns))
}

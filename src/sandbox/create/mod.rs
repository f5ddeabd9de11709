//! `create`: route networks, the image's user, the session volume, the
//! container, its egress gate, its socket, `--setup`; what a failure leaves is undone by
//! [`rollback::Rollback`].

mod forward;
mod gate;
mod image;
mod pull;
mod remote;
mod rollback;
mod routes;
mod runtime;
mod start;
mod user;
mod volume;

pub(super) use start::Boot;
pub(super) use user::choose_user;
#[cfg(test)]
pub(super) use user::image_user_warning;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::SystemTime;

use serde::Serialize;

use super::{unique, Driver, HostState};
use crate::docker::parse::RawContainer;
use crate::docker::{argv, parse, status_error, Output};
use crate::error::{DockerError, Error, Result};
use crate::error::{ImageError, RouteError, SandboxError};
use crate::host::channel::Kind;
use crate::host::socket;
use crate::host::state::{self, ProcId};
use crate::host::uids::Holder;
use crate::model::boundary::{self, Gap};
use crate::model::record::Record;
use crate::sandbox::boundary::assess;
use crate::spec::{PullPolicy, SandboxSpec};
use rollback::Rollback;

/// What `create` made: the sandbox's record, read from the labels it was
/// given (what `inspect` reports of it), and what only create knows.
#[derive(Debug, Clone)]
pub struct Created {
    pub record: Record,
    /// What the TTL watchdog watches, ending when it is gone
    /// (`Driver::watched`): the sandbox's socket directory on the host, or
    /// a remote sandbox's expiry in the data dir.
    pub watched: PathBuf,
    /// What the routes reach beyond their targets (empty at tier 2), each
    /// with the command that closes it.
    pub gaps: Vec<Gap>,
    /// Everything said on stderr as a warning.
    pub warnings: Vec<String>,
}

/// `create --json`: the record's identity, then what create adds (gaps and
/// warnings); the state and process fields of a `Record` are left out.
impl Serialize for Created {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            id: &'a str,
            session: &'a str,
            image: &'a str,
            tier: u8,
            /// The OCI runtime, e.g. `runc` or `runsc`.
            runtime: &'a str,
            socket: &'a str,
            /// `direct` or `exec` (relayed; see `channel`).
            channel: Kind,
            routes: &'a BTreeMap<String, String>,
            created_at: &'a str,
            user: &'a str,
            expires_at: &'a Option<String>,
            gaps: &'a [Gap],
            warnings: &'a [String],
            #[serde(skip_serializing_if = "Option::is_none")]
            egress: &'a Option<crate::model::record::Egress>,
        }
        let r = &self.record;
        Json {
            id: &r.id,
            session: &r.session,
            image: &r.image,
            tier: r.tier,
            runtime: &r.runtime,
            socket: &r.socket,
            channel: r.channel,
            routes: &r.routes,
            created_at: &r.created_at,
            user: &r.user,
            expires_at: &r.expires_at,
            gaps: &self.gaps,
            warnings: &self.warnings,
            egress: &r.egress,
        }
        .serialize(s)
    }
}

impl Driver {
    pub fn create(&self, spec: &SandboxSpec) -> Result<Created> {
        self.refuse_remote(spec)?;
        match self.create_once(spec, true) {
            // The cached image verdict outlived the image (removed since): what
            // the first try made is undone; the second asks the engine, which
            // finds the image missing and pulls it before anything exists.
            Err(Error::Image(ImageError::Missing { .. }))
                if self.pulls(spec) && self.state()?.state.image_user(spec.image.as_str()).is_some() =>
            {
                self.create_once(spec, false)
            }
            r => r,
        }
    }

    /// `--pull missing` and an image a registry can serve by digest.
    fn pulls(&self, spec: &SandboxSpec) -> bool {
        spec.pull == PullPolicy::Missing && spec.image.pullable()
    }

    /// One create; `cached`: trust the image verdict cached by digest.
    fn create_once(&self, spec: &SandboxSpec, cached: bool) -> Result<Created> {
        let root = self.roots.resolve()?;
        let id = (self.new_id)();
        // A remote engine's sandbox: the relayed channel, its socket inside
        // the sandbox (no path of this machine in its labels), the helper
        // from a volume there (issue 16; refused cases: `refuse_remote`).
        let remote = self.engine()?.is_remote();
        // Before any docker call: exit 2 where `--persist` cannot be bounded.
        let bound = self.persist_bound(spec)?;
        let sock = match remote {
            true => PathBuf::from(argv::SANDBOX_SOCKET),
            false => socket::socket_path(&root, &id),
        };
        socket::check_path_len(&sock)?;
        let HostState { state, key } = self.state()?;
        crate::spec::check_not_sbx_dirs(&spec.mounts, spec.state_dir.as_ref(), &state.dir, &root)?;
        // Before any docker call: an explicit --user naming the caller's ids is refused.
        let reserved = self.reserved_ids()?;
        let flag_user = spec.user.map(|u| u.not_reserved(&reserved)).transpose()?;
        self.check_interrupt()?;

        let mut warnings = Vec::new();
        // The image's user: cached per digest (the content cannot change), or
        // asked while the routes are looked up.
        let img = spec.image.as_str();
        let cached = if cached { state.image_user(img) } else { None };
        let image_job = match cached {
            Some(_) => None,
            None => Some(self.exec.spawn(&argv::image_user(img))?),
        };
        let runtime_job = self.spawn_runtime_check(spec)?;
        let mut routes = self.route_networks(&id, spec)?;
        if spec.egress.is_some() {
            routes.add_gate(&id);
        }
        let channel = if remote { Kind::Exec } else { spec.channel.resolve(nix::unistd::geteuid().as_raw()) };
        let runtime = self.check_runtime(spec, runtime_job, !routes.networks.is_empty(), channel == Kind::Direct)?;
        let resolve_hosts = runtime::needs_hosts(&runtime);
        let image_config = match (cached, image_job) {
            (Some(c), _) => c,
            (None, Some(job)) => {
                let c = match self.image_user(img, job.wait()?) {
                    // Nothing of the sandbox exists yet: the pull leaves nothing to undo.
                    Err(Error::Image(ImageError::Missing { .. })) if self.pulls(spec) => {
                        self.pull(&spec.image)?;
                        self.image_user(img, self.exec.run(&argv::image_user(img))?)?
                    }
                    r => r?,
                };
                state.set_image_user(img, &c);
                c
            }
            (None, None) => unreachable!("a job is started whenever nothing is cached"),
        };
        // Containers inherit image labels: an image must not write sbx's
        // record (issue 9 finding 5), so refuse it before anything exists.
        if let Some(label) = image_config.sbx_label {
            return Err(Error::Image(ImageError::HasSbxLabel { image: img.to_string(), label }));
        }
        let refused = |reason| Error::Image(ImageError::ConfigRefused { image: img.to_string(), reason });
        let image_volumes = image::volume_tmpfs(&image_config.volumes, spec, remote).map_err(refused)?;
        image::check_working_dir(&image_config.working_dir, spec).map_err(refused)?;
        let image_user = image_config.user;
        let chosen = choose_user(flag_user, img, &image_user, &mut warnings)?;
        let gaps = assess(&id, &spec.routes, &routes.networks, &routes.info);
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
        // Routed sandboxes that should not reach out get a resolver that
        // reaches nothing, closing CVE-2024-29018 (see `boundary`).
        let all_internal = routes.networks.iter().all(|r| routes.info.get(&r.network).is_some_and(|i| i.internal));
        // Under gVisor the embedded resolver does not answer at all: sbx
        // writes the route hosts itself and the resolver stays contained.
        let dns = (!routes.networks.is_empty() && (all_internal || resolve_hosts)).then_some(boundary::CONTAINED_DNS);
        self.check_interrupt()?;

        let (user, lease) = self.sandbox_user(chosen, spec, &id, &image_user, &mut warnings)?;
        // The gate's and forwarders' own: no neighbour's service shares its limits.
        let service = (spec.egress.is_some() || !routes.forwards.is_empty())
            .then(|| self.claim_uid(Holder::Service(id.clone()), None))
            .transpose()?;
        let service_uid = service.as_ref().map_or(crate::spec::NOBODY, |l| l.uid);

        let now = SystemTime::now();
        let created_at = humantime::format_rfc3339_seconds(now).to_string();
        let expires = spec.ttl.map(|t| now + t);
        let expires_at = expires.map(|e| humantime::format_rfc3339_millis(e).to_string());
        let owner = state::owner_token(key, &id);
        // gVisor cannot exec the execute-only helper (see `helper::MODE_READABLE`).
        let readable = runtime.family() == crate::model::runtime::Family::Gvisor;
        let (helper, helper_volume) = match remote {
            false => (crate::host::helper::install(&state.dir, readable)?, None),
            true if crate::host::helper::BYTES.is_empty() => (None, None),
            true => (None, Some(self.helper_volume(&state.dir, img, readable)?)),
        };
        if channel == Kind::Exec && helper.is_none() && helper_volume.is_none() {
            return Err(Error::Sandbox(SandboxError::HelperMissing { id: id.clone() }));
        }
        let seccomp = match &spec.seccomp_profile {
            Some(custom) => {
                warnings.push(custom.warning());
                custom.path.clone()
            }
            None => crate::host::seccomp::install(&state.dir)?,
        };
        // Held until the sandbox runs: one writer per persistent session.
        // The volume's clone happens inside, before the volume exists, so a
        // failed clone leaves no empty volume behind (issue 10).
        let persist = match (&spec.session, bound) {
            (Some(session), Some(_)) if remote => {
                Some(self.prepare_remote_volume(state, key, session, user, img, spec.clone.as_ref(), &mut warnings)?)
            }
            (Some(session), Some(b)) => Some(self.prepare_volume(state, key, session, user, b, spec, &mut warnings)?),
            _ => None,
        };
        if let (Some(c), None) = (&spec.clone, &persist) {
            let m = spec.state_dir.as_ref().expect("spec validation requires a host-backed /state for --clone");
            self.clone_workspace(c, &m.host, user, &mut warnings)?;
        }
        // Recorded before anything exists, so `gc` can tell a create in
        // flight from one whose process died (pid reuse included).
        if let Some(me) = ProcId::current() {
            state.begin_create(&id, me)?;
        }
        // After the record of the create (gc of another engine sees a live
        // create until then), before the marker or socket directory and any
        // other file: gc acts only on what its engine's sandboxes left.
        state.set_engine(&id, &self.engine()?.endpoint)?;
        // From here on a failure undoes what was made when `undo` drops.
        let mut undo = Rollback::new(self, state, &id, &root);
        // After begin_create (gc keeps the egress network while a create is
        // in flight), before anything of the sandbox's own exists.
        let gate = spec.egress.as_ref().map(|e| self.prepare_gate(e, &state.dir)).transpose()?;
        let forward_ready = self.prepare_forwards(&state.dir, &routes.forwards, gate.as_ref().map(|g| &*g.image))?;
        if let Some(e) = expires {
            state.set_expiry(&id, e)?;
        }
        let dir = match (remote, channel) {
            // Nothing sbx makes for a remote sandbox belongs on this
            // machine's file system (its socket is inside it; its state is
            // in the data dir, where gc and the watchdog find it). Never
            // made: removing it (rollback, destroy, gc) finds it gone.
            (true, _) => root.join(&id),
            (false, Kind::Direct) => socket::make_dir(&root, &id, user.uid, user.gid)?,
            // Not mounted: it marks the sandbox for gc and the watchdog.
            (false, Kind::Exec) => socket::make_marker_dir(&root, &id)?,
        };
        undo.made(dir.clone(), &routes.private);
        let policy_dir = match &gate {
            Some(ready) => {
                undo.gate();
                Some(crate::host::egress::write(&state.dir, &id, &ready.policy)?)
            }
            None => None,
        };
        undo.forwarders(forward_ready.is_some());
        self.make_private(&id, &owner, &routes.private)?;
        let mut forward_jobs =
            self.spawn_forwarders(&id, &owner, forward_ready.as_ref(), &routes.forwards, service_uid)?;
        let mut gate_job = match (&spec.egress, &gate, &policy_dir) {
            (Some(e), Some(ready), Some(policy_dir)) => Some(self.spawn_gate(gate::GateArgs {
                id: &id,
                owner: &owner,
                e,
                ready,
                policy_dir,
                remote,
                uid: service_uid,
            })?),
            _ => None,
        };
        // Where sbx resolves route hosts, the gate must be on its network
        // first; elsewhere it starts while the sandbox starts.
        let mut gate_cid = None;
        let hosts = if resolve_hosts {
            gate_cid = gate_job.take().map(|g| self.gate_started(g)).transpose()?;
            self.forwarders_started(forward_jobs.take())?;
            self.route_hosts(&id, spec, &routes)?
        } else {
            Vec::new()
        };
        let unsealed = argv::RunPlan {
            id: &id,
            spec,
            uid: user.uid,
            gid: user.gid,
            tier,
            socket_dir: &dir,
            socket_path: &sock,
            created_at: &created_at,
            owner: "",
            expires_at: expires_at.as_deref(),
            networks: &routes.networks,
            private: &routes.private,
            dns,
            helper: helper.as_deref(),
            helper_volume: helper_volume.as_deref(),
            volume: persist.as_ref().map(|p| p.volume.as_str()),
            persist_size: persist.as_ref().map(|p| p.size_label.as_str()),
            seccomp: &seccomp,
            channel,
            hosts: &hosts,
            family: runtime.family(),
            image_volumes: &image_volumes,
        };
        // The container's token covers every sbx label it gets (finding 5).
        let sealed = state::record_token(key, &id, &unsealed.labels().into_iter().collect());
        let plan = argv::RunPlan { owner: &sealed, ..unsealed };
        // What `inspect` will read back: the sandbox is on its route
        // networks, or on `none` without routes.
        let mut attached = unique(routes.networks.iter().map(|r| r.network.clone()));
        if attached.is_empty() {
            attached.push("none".into());
        }
        let raw = RawContainer {
            name: id.clone(),
            state: "running".into(),
            networks: attached,
            labels: plan.labels().into_iter().collect(),
            full: serde_json::Value::Null,
        };
        let started = self.start_and_wait(&plan, remote.then_some(readable));
        // Waited for whatever the sandbox did, so a rollback never races the gate's `docker run`.
        let gate_started = gate_job.map(|g| self.gate_started(g)).transpose();
        let forwarders_started = self.forwarders_started(forward_jobs);
        let cid = started?;
        let gate_cid = gate_cid.or(gate_started?);
        forwarders_started?;
        self.run_setup(&id, &spec.setup)?;
        let record = state::SandboxRecord {
            container: cid,
            socket_dir: dir,
            private: routes.private.clone(),
            volume: persist.as_ref().map(|p| p.volume.clone()),
            session: spec.session.clone(),
            gate: gate_cid,
        };
        // Without it destroy still works, through an inspect.
        if let Err(e) = state.set_record(&id, &record) {
            self.warn("sandbox_record", &format!("could not write the sandbox record: {e}"));
        }
        undo.commit();
        [lease, service].into_iter().flatten().for_each(super::uids::Lease::keep);
        let mut record = raw.record(expires, now);
        if let (Some(info), Some(e)) = (record.egress.as_mut(), &spec.egress) {
            info.allow = Some(e.policy.rules.iter().map(ToString::to_string).collect());
        }
        let watched = if remote { state.expiry_file(&id) } else { root.join(&id) };
        Ok(Created { record, watched, gaps, warnings })
    }

    fn image_user(&self, image: &str, out: Output) -> Result<parse::ImageConfig> {
        let args = argv::image_user(image);
        if out.status != 0 {
            if parse::no_such_image(&out.stderr_str()) {
                return Err(Error::Image(ImageError::Missing { image: image.to_string() }));
            }
            return Err(status_error(&args, &out).into());
        }
        parse::image_config(&out.stdout_str()).ok_or_else(|| {
            DockerError::Parse { command: crate::docker::render(&args), reason: "not [USER,LABELS]".into() }.into()
        })
    }
}

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
mod secrets;
mod steps;
mod user;
mod volume;

pub(in crate::sandbox) use user::choose_user;
#[cfg(test)]
pub(in crate::sandbox) use user::image_user_warning;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::SystemTime;

use serde::Serialize;

use crate::docker::{argv, parse, status_error, Output};
use crate::error::ImageError;
use crate::error::{DockerError, Error, Result};
use crate::host::channel::Kind;
use crate::host::state;
use crate::model::boundary::Gap;
use crate::model::record::Record;
use crate::sandbox::{Driver, HostState};
use crate::spec::{PullPolicy, SandboxSpec};
use rollback::Rollback;
use steps::{expected_container, route_verdict, Refusals};

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
        let Refusals { root, id, remote, bound, sock, flag_user } = self.refusals(spec)?;
        let HostState { state, key } = self.state()?;
        let mut warnings = Vec::new();
        let kept = secrets::read_secrets(&id, spec, &mut warnings)?;
        // The image's user: cached per digest (the content cannot change), or
        // asked while the routes are looked up.
        let img = spec.image.as_str();
        let (cached, image_job) = self.image_asked(state, img, cached)?;
        let runtime_job = self.spawn_runtime_check(spec)?;
        let mut routes = self.route_networks(&id, spec)?;
        if spec.egress.is_some() {
            routes.add_gate(&id);
        }
        let channel = if remote { Kind::Exec } else { spec.channel.resolve(nix::unistd::geteuid().as_raw()) };
        let runtime = self.check_runtime(spec, runtime_job, !routes.networks.is_empty(), channel == Kind::Direct)?;
        let resolve_hosts = runtime::needs_hosts(&runtime);
        let image_config = self.image_verdict(state, spec, cached, image_job)?;
        let image_volumes = image::checked(&image_config, spec, remote)?;
        let image_user = image_config.user;
        let chosen = choose_user(flag_user, img, &image_user, &mut warnings)?;
        let (gaps, tier, dns) = route_verdict(&id, spec, &routes, resolve_hosts, &mut warnings)?;
        self.check_interrupt()?;

        let (user, lease) = self.sandbox_user(chosen, spec, &id, &image_user, &mut warnings)?;
        let service = self.service_uid(spec, &routes, &id)?;
        let service_uid = service.as_ref().map_or(crate::spec::NOBODY, |l| l.uid);

        let now = SystemTime::now();
        let created_at = humantime::format_rfc3339_seconds(now).to_string();
        let expires = spec.ttl.map(|t| now + t);
        let expires_at = expires.map(|e| humantime::format_rfc3339_millis(e).to_string());
        let owner = state::owner_token(key, &id);
        // gVisor cannot exec the execute-only helper (see `helper::MODE_READABLE`).
        let readable = runtime.family() == crate::model::runtime::Family::Gvisor;
        let files = self.host_files(&state.dir, &id, spec, remote, readable, channel, &mut warnings)?;
        let persist = self.session_state(state, key, spec, bound, remote, user, &mut warnings)?;
        self.mark_create(state, &id)?;
        // From here on a failure undoes what was made when `undo` drops.
        let mut undo = Rollback::new(self, state, &id, &root);
        // After begin_create (gc keeps the egress network while a create is
        // in flight), before anything of the sandbox's own exists.
        let gate = spec.egress.as_ref().map(|e| self.prepare_gate(e, &state.dir)).transpose()?;
        let forward_ready = self.prepare_forwards(&state.dir, &routes.forwards, gate.as_ref().map(|g| &*g.image))?;
        if let Some(e) = expires {
            state.set_expiry(&id, e)?;
        }
        let dir = self.socket_dir(&root, &id, remote, channel, user)?;
        undo.made(dir.clone(), &routes.private);
        let policy_dir = match &gate {
            Some(ready) => {
                undo.gate();
                Some(crate::host::egress::write(&state.dir, &id, &ready.policy)?)
            }
            None => None,
        };
        let trust = secrets::keep_secrets(&state.dir, &id, kept.as_ref())?;
        undo.forwarders(forward_ready.is_some());
        self.make_private(&id, &owner, &routes.private)?;
        let services = steps::Services { id: &id, owner: &owner, uid: service_uid, routes: &routes, remote };
        let (gate_job, forward_jobs, gate_cid, hosts) = self.spawn_services(
            &services,
            spec,
            forward_ready.as_ref(),
            gate.as_ref(),
            policy_dir.as_deref(),
            resolve_hosts,
        )?;
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
            helper: files.helper.as_deref(),
            helper_volume: files.helper_volume.as_deref(),
            volume: persist.as_ref().map(|p| p.volume.as_str()),
            persist_size: persist.as_ref().map(|p| p.size_label.as_str()),
            seccomp: &files.seccomp,
            channel,
            hosts: &hosts,
            family: runtime.family(),
            image_volumes: &image_volumes,
            trust: trust.as_ref().map(|(bundle_dir, env)| argv::TrustPlan { bundle_dir, env }),
        };
        // The container's token covers every sbx label it gets (finding 5).
        let sealed = state::record_token(key, &id, &unsealed.labels().into_iter().collect());
        let plan = argv::RunPlan { owner: &sealed, ..unsealed };
        let raw = expected_container(&id, &routes, &plan);
        let started = self.start_and_wait(&plan, remote.then_some(readable));
        // Waited for whatever the sandbox did, so a rollback never races the gate's `docker run`.
        let gate_started = gate_job.map(|g| self.gate_started(g)).transpose();
        let forwarders_started = self.forwarders_started(forward_jobs);
        let cid = started?;
        let gate_cid = gate_cid.or(gate_started?);
        forwarders_started?;
        self.push_kept(&id, kept.as_ref(), gate_cid.as_deref())?;
        self.run_setup(&id, &spec.setup)?;
        let volume = persist.as_ref().map(|p| p.volume.clone());
        self.keep_record(state, &id, cid, dir, &routes, volume, spec, gate_cid);
        // A fork's child stays in flight until its siblings are made (see `commit`).
        undo.commit(spec.restore.is_some());
        [lease, service].into_iter().flatten().for_each(crate::sandbox::shared::uids::Lease::keep);
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

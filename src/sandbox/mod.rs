//! `ContainerDriver`: the sandbox lifecycle in terms of docker calls.
//!
//! Every docker call goes through the injected [`DockerExec`]; the driver
//! decides what to run, in which order, and what to undo when a step fails.

pub mod gc_plan;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::checks::boundary::{self, Gap};
use crate::docker::pace::Pace;
use crate::docker::parse::NetInfo;
use crate::docker::parse::RawContainer;
use crate::docker::{argv, parse, run_ok, status_error, DockerExec, Output};
use crate::error::{DockerError, Error, Result};
use crate::host::socket::{self, RootChoice};
use crate::host::state::{self, ProcId, State, StateChoice};
use crate::model::record::{self, Record};
use crate::spec::{self, SandboxSpec, UserSpec, NOBODY};

/// Returns the signal number once one is pending (see `interrupt`).
pub type InterruptCheck = Arc<dyn Fn() -> Option<i32> + Send + Sync>;
pub type IdSource = Arc<dyn Fn() -> String + Send + Sync>;

/// What `create` made.
#[derive(Debug, Clone, Serialize)]
pub struct Created {
    pub id: String,
    pub session: String,
    pub image: String,
    pub tier: u8,
    pub socket: String,
    /// `direct` or `exec` (relayed; see `channel`).
    pub channel: crate::host::channel::Kind,
    pub routes: BTreeMap<String, String>,
    pub created_at: String,
    pub user: String,
    pub expires_at: Option<String>,
    /// The sandbox's directory on the host (its socket's, when direct):
    /// the TTL watchdog ends when it is gone.
    #[serde(skip)]
    pub socket_dir: PathBuf,
    /// What the routes reach beyond their targets (empty at tier 2), each
    /// with the command that closes it.
    pub gaps: Vec<Gap>,
    /// Everything said on stderr as a warning.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Revoked {
    pub id: String,
    pub kind: String,
    pub network: String,
    /// Every route cut, `kind` included: routes to one host share a network.
    pub cut: Vec<String>,
    pub already: bool,
}

/// What `gc` removed, or would remove with `--dry-run`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    pub dry_run: bool,
    pub containers: Vec<crate::sandbox::gc_plan::Reap>,
    pub socket_dirs: Vec<String>,
    pub networks: Vec<String>,
    /// Session state under the data dir whose volume is gone: the session
    /// directory and its lock file (paths).
    pub volume_state: Vec<String>,
    /// What could not be removed, and why (issue 9 finding 8: one failure
    /// must not stop the rest; gc exits 1 at the end).
    pub failed: Vec<GcFailure>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GcFailure {
    pub item: String,
    pub error: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Destroyed {
    pub removed: Vec<String>,
    pub already_gone: Vec<String>,
}

pub struct ContainerDriver {
    exec: Arc<dyn DockerExec>,
    roots: RootChoice,
    states: StateChoice,
    state: OnceLock<(State, Vec<u8>)>,
    interrupted: InterruptCheck,
    new_id: IdSource,
    /// Where the host's /proc is (tests point it at a directory of their own).
    proc: PathBuf,
    /// How bulk removals are batched (issue 10: see `docker::pace`).
    pace: Pace,
}

impl ContainerDriver {
    pub fn new(exec: Arc<dyn DockerExec>, roots: RootChoice, states: StateChoice) -> Self {
        ContainerDriver {
            exec,
            roots,
            states,
            state: OnceLock::new(),
            interrupted: Arc::new(|| None),
            new_id: Arc::new(spec::new_id),
            proc: PathBuf::from("/proc"),
            pace: Pace::default(),
        }
    }

    pub fn with_pace(mut self, pace: Pace) -> Self {
        self.pace = pace;
        self
    }

    pub fn with_proc(mut self, proc: PathBuf) -> Self {
        self.proc = proc;
        self
    }

    /// The state directory and the ownership key, resolved on first use.
    pub fn state(&self) -> Result<&(State, Vec<u8>)> {
        if let Some(s) = self.state.get() {
            return Ok(s);
        }
        let st = self.states.resolve()?;
        let key = st.key()?;
        Ok(self.state.get_or_init(|| (st, key)))
    }

    pub fn docker(&self) -> &dyn DockerExec {
        &*self.exec
    }

    pub fn socket_root(&self) -> Result<PathBuf> {
        Ok(self.roots.resolve()?)
    }

    pub fn with_interrupts(mut self, check: InterruptCheck) -> Self {
        self.interrupted = check;
        self
    }

    pub fn with_ids(mut self, ids: IdSource) -> Self {
        self.new_id = ids;
        self
    }

    fn check_interrupt(&self) -> Result<()> {
        match (self.interrupted)() {
            Some(signal) => Err(Error::Interrupted { signal }),
            None => Ok(()),
        }
    }

    pub fn create(&self, spec: &SandboxSpec) -> Result<Created> {
        let root = self.roots.resolve()?;
        let id = (self.new_id)();
        let sock = socket::socket_path(&root, &id);
        socket::check_path_len(&sock)?;
        let (state, key) = self.state()?;
        self.check_interrupt()?;

        let mut warnings = Vec::new();
        // The image's user: cached per digest (the content cannot change), or
        // asked while the routes are looked up.
        let img = spec.image.as_str();
        let cached = state.image_user(img);
        let image_job = match cached {
            Some(_) => None,
            None => Some(self.exec.spawn(&argv::image_user(img))?),
        };
        let routes = self.route_networks(&id, spec)?;
        let image_config = match (cached, image_job) {
            (Some(c), _) => c,
            (None, Some(job)) => {
                let c = self.image_user(img, job.wait()?)?;
                state.set_image_user(img, &c);
                c
            }
            (None, None) => unreachable!("a job is started whenever nothing is cached"),
        };
        // Containers inherit image labels: an image must not write sbx's
        // record (issue 9 finding 5), so refuse it before anything exists.
        if let Some(label) = image_config.sbx_label {
            return Err(Error::ImageHasSbxLabel { image: img.to_string(), label });
        }
        let image_user = image_config.user;
        let user = choose_user(spec.user, &image_user, &mut warnings);
        let gaps = boundary::assess(&id, &spec.routes, &routes.networks, &routes.info);
        if spec.strict_egress && !gaps.is_empty() {
            return Err(Error::NotContained { gaps });
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
        let all_internal = routes.networks.iter().all(|(_, n)| routes.info.get(n).is_some_and(|i| i.internal));
        let dns = (!routes.networks.is_empty() && all_internal).then_some(boundary::CONTAINED_DNS);
        self.check_interrupt()?;

        let now = SystemTime::now();
        let created_at = humantime::format_rfc3339_seconds(now).to_string();
        let expires = spec.ttl.map(|t| now + t);
        let expires_at = expires.map(|e| humantime::format_rfc3339_millis(e).to_string());
        let owner = state::owner_token(key, &id);
        let helper = crate::host::helper::install(&state.dir)?;
        let channel = spec.channel.resolve(nix::unistd::geteuid().as_raw());
        if channel == crate::host::channel::Kind::Exec && helper.is_none() {
            return Err(Error::HelperMissing { id: id.clone() });
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
        let persist = match (&spec.persist, &spec.session) {
            (true, Some(session)) => {
                Some(self.prepare_volume(state, key, session, user, spec.clone.as_ref(), &mut warnings)?)
            }
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
        // Err carries whether the teardown completed; if not, the creating
        // record stays so `gc` reaps what is left once this process is gone.
        let made = (|| {
            let early = |e: Error| (e, socket::remove_dir(&root.join(&id), &id).is_ok());
            if let Some(e) = expires {
                state.set_expiry(&id, e).map_err(early)?;
            }
            let dir = match channel {
                crate::host::channel::Kind::Direct => socket::make_dir(&root, &id, user.uid, user.gid),
                // Not mounted: it marks the sandbox for gc and the watchdog.
                crate::host::channel::Kind::Exec => socket::make_marker_dir(&root, &id),
            }
            .map_err(|e| early(e.into()))?;
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
                volume: persist.as_ref().map(|p| p.volume.as_str()),
                seccomp: &seccomp,
                channel,
            };
            // The container's token covers every sbx label it gets (finding 5).
            let sealed = state::record_token(key, &id, &unsealed.labels().into_iter().collect());
            let plan = argv::RunPlan { owner: &sealed, ..unsealed };
            let cid = self
                .make_private(&id, &owner, &routes.private)
                .and_then(|()| self.start_and_wait(&plan))
                .and_then(|cid| self.run_setup(&id, &spec.setup).map(|()| cid))
                .map_err(|e| (e, self.teardown(&id, &dir, &routes.private)))?;
            let record = state::SandboxRecord {
                container: cid,
                socket_dir: dir.clone(),
                private: routes.private.clone(),
                volume: persist.as_ref().map(|p| p.volume.clone()),
                session: spec.session.clone(),
            };
            // Without it destroy still works, through an inspect.
            if let Err(e) = state.set_record(&id, &record) {
                tracing::warn!(%e, "could not write the sandbox record");
            }
            Ok(())
        })();
        match made {
            Ok(()) => state.end_create(&id),
            Err((e, torn_down)) => {
                if torn_down {
                    state.forget(&id);
                }
                return Err(e);
            }
        }
        Ok(Created {
            session: spec.session.clone().unwrap_or_else(|| id.clone()),
            socket_dir: root.join(&id),
            id,
            image: spec.image.as_str().to_string(),
            tier,
            socket: match channel {
                crate::host::channel::Kind::Direct => sock.display().to_string(),
                crate::host::channel::Kind::Exec => argv::SANDBOX_SOCKET.to_string(),
            },
            channel,
            routes: routes.networks.iter().cloned().collect(),
            created_at,
            user: format!("{}:{}", user.uid, user.gid),
            expires_at,
            gaps,
            warnings,
        })
    }

    fn image_user(&self, image: &str, out: Output) -> Result<parse::ImageConfig> {
        let args = argv::image_user(image);
        if out.status != 0 {
            if parse::no_such_image(&out.stderr_str()) {
                return Err(Error::ImageMissing { image: image.to_string() });
            }
            return Err(status_error(&args, &out).into());
        }
        parse::image_config(&out.stdout_str()).ok_or_else(|| {
            DockerError::Parse { command: crate::docker::render(&args), reason: "not [USER,LABELS]".into() }.into()
        })
    }

    /// Which network each route uses, and what docker says of each.
    /// Shared routes: one `docker network inspect` for all of them.
    /// Private routes: one `docker container inspect` of the services; the
    /// networks are made later, so their properties are known by design.
    fn route_networks(&self, id: &str, spec: &SandboxSpec) -> Result<RouteNets> {
        let mut r = RouteNets::default();
        if spec.routes.is_empty() {
            return Ok(r);
        }
        if spec.private_routes {
            let hosts: Vec<String> = unique(spec.routes.iter().map(|r| r.host.clone()));
            self.check_services(&hosts)?;
            for route in &spec.routes {
                let net = match r.private.iter().find(|(_, svc)| *svc == route.host) {
                    Some((net, _)) => net.clone(),
                    None => {
                        let net = format!("{id}-{}", route.kind);
                        r.private.push((net.clone(), route.host.clone()));
                        net
                    }
                };
                let info = NetInfo {
                    internal: true,
                    driver: "bridge".into(),
                    inhibit_ipv4: true,
                    private_for: Some(id.to_string()),
                };
                r.info.insert(net.clone(), info);
                r.networks.push((route.kind.clone(), net));
            }
            return Ok(r);
        }
        r.networks = spec.routes.iter().map(|route| (route.kind.clone(), route.network())).collect();
        let nets = unique(r.networks.iter().map(|(_, n)| n.clone()));
        let args = argv::network_inspect(&nets);
        let out = self.exec.run(&args)?;
        let report = parse::networks(&nets, &out.stdout_str(), &out.stderr_str());
        if !report.missing.is_empty() {
            return Err(Error::NetworkMissing { networks: report.missing });
        }
        if out.status != 0 || report.nets.len() != nets.len() {
            return Err(status_error(&args, &out).into());
        }
        r.info = report.nets;
        Ok(r)
    }

    /// Private routes attach existing service containers: they must run.
    fn check_services(&self, hosts: &[String]) -> Result<()> {
        let args = argv::inspect(hosts);
        let out = self.exec.run(&args)?;
        let found = parse::parse_inspect(&out.stdout_str(), &crate::docker::render(&args))?;
        // Issue 9 finding 3: a route naming another sandbox would attach it
        // to this one's network. Refused whoever's key made it, and also a
        // container that only looks like a sandbox (sbx labels, sbx's names).
        for c in &found {
            let why = if let Some(label) = c.labels.keys().find(|k| k.to_ascii_lowercase().starts_with("sbx.")) {
                format!("is a container carrying the sbx label {label:?}")
            } else if spec::parse_id(&c.name).is_ok() {
                format!("is named like a sandbox ({})", c.name)
            } else {
                continue;
            };
            let host = hosts.iter().find(|h| **h == c.name).unwrap_or(&c.name).clone();
            return Err(Error::ServiceIsSandbox { host, why });
        }
        for h in hosts {
            if spec::parse_id(h).is_ok() {
                return Err(Error::ServiceIsSandbox { host: h.clone(), why: "is named like a sandbox".into() });
            }
        }
        let missing: Vec<String> =
            hosts.iter().filter(|h| !found.iter().any(|c| &c.name == *h && c.state == "running")).cloned().collect();
        if !missing.is_empty() {
            if out.status != 0 && parse::missing_containers(hosts, &out.stderr_str()).len() + found.len() != hosts.len()
            {
                return Err(status_error(&args, &out).into());
            }
            return Err(Error::ServiceMissing { hosts: missing });
        }
        Ok(())
    }

    /// The session's volume, made on first use, and proof no running sandbox
    /// has it; `--clone` fills it before the volume is created.
    fn prepare_volume(
        &self,
        state: &State,
        key: &[u8],
        session: &str,
        user: UserSpec,
        clone: Option<&crate::spec::CloneSpec>,
        warnings: &mut Vec<String>,
    ) -> Result<Persisted> {
        let lock = crate::host::persist::lock(&state.dir, session)?;
        let volume = crate::host::persist::volume_name(session);
        let out = run_ok(&*self.exec, &crate::docker::argv::volume_users(Some(&volume)))?;
        if let Some(user_of) = out.stdout_str().lines().find_map(|l| serde_json::from_str::<(String, String)>(l).ok()) {
            return Err(Error::VolumeInUse { session: session.to_string(), id: user_of.0 });
        }
        let dir = crate::host::persist::host_dir(&state.dir, session);
        let fresh = crate::host::persist::prepare_dir(&dir, user.uid, user.gid)?;
        let owner = state::owner_token(key, &volume);
        let filled = match clone {
            Some(c) => {
                // An earlier create's bind: a rename cannot cross into it.
                crate::host::persist::unbind(&dir);
                self.clone_workspace(c, &dir, user, warnings)
            }
            None => Ok(()),
        }
        .and_then(|()| {
            run_ok(&*self.exec, &crate::docker::argv::volume_create(&volume, &dir, session, &owner))
                .map(drop)
                .map_err(Error::from)
        });
        if let Err(e) = filled {
            if fresh {
                let _ = std::fs::remove_dir(&dir);
            }
            return Err(e);
        }
        // After the clone: a rename cannot cross into this bind mount. It
        // stays after create (see `NosuidBind`).
        let nosuid = match crate::host::persist::NosuidBind::new(&dir) {
            Ok(b) => Some(b),
            Err(e) => {
                warnings.push(format!(
                    "could not mount {} nosuid,nodev ({e}); /state is still nocopy and no-new-privileges",
                    dir.display()
                ));
                None
            }
        };
        Ok(Persisted { volume, _nosuid: nosuid, _lock: lock })
    }

    /// `--clone` into `<base>/workspace` (see `persist::clone_workspace`); an
    /// existing, non-empty one is the session's previous work and is kept.
    fn clone_workspace(
        &self,
        c: &crate::spec::CloneSpec,
        base: &Path,
        user: UserSpec,
        warnings: &mut Vec<String>,
    ) -> Result<()> {
        let owner = (user.uid != 0).then_some((user.uid, user.gid));
        if crate::host::persist::clone_workspace(c, base, owner)? == crate::host::persist::Cloned::Kept {
            warnings.push(format!(
                "{} already has files (an earlier sandbox's work); not cloning {}",
                base.join("workspace").display(),
                c.url
            ));
        }
        Ok(())
    }

    /// `--setup` commands, in order, in the ready sandbox. Their output goes
    /// to stderr, so stdout stays the id alone.
    fn run_setup(&self, id: &str, setup: &[Vec<String>]) -> Result<()> {
        for argv in setup {
            self.check_interrupt()?;
            let args = crate::workbench::exec_argv(id, &crate::workbench::ExecOpts::default(), argv);
            let out = self.exec.run(&args)?;
            let text = inert(&format!("{}{}", out.stdout_str(), String::from_utf8_lossy(&out.stderr)));
            if !text.is_empty() {
                eprint!("{text}");
            }
            if out.status != 0 {
                let code = crate::workbench::exec_status(out.status, &text);
                return Err(Error::SetupFailed { command: argv.join(" "), code, output: text.trim_end().to_string() });
            }
        }
        Ok(())
    }

    /// Make each private route network (internal, no host address, labelled
    /// as this sandbox's) and attach its service under the route's host name.
    fn make_private(&self, id: &str, owner: &str, private: &[(String, String)]) -> Result<()> {
        for (net, svc) in private {
            self.check_interrupt()?;
            run_ok(&*self.exec, &argv::private_network(net, id, svc, owner))?;
            run_ok(&*self.exec, &argv::network_connect_alias(net, svc, svc))?;
        }
        Ok(())
    }

    /// Detach services from private route networks and remove them. Already
    /// gone is fine.
    fn remove_private(&self, private: &[(String, String)]) -> Result<()> {
        if private.is_empty() {
            return Ok(());
        }
        for (net, svc) in private {
            // Its failure shows in the removal; a hung engine stops here.
            if let Err(e @ DockerError::Timeout { .. }) = self.exec.run(&argv::network_disconnect(net, svc)) {
                return Err(e.into());
            }
        }
        let nets: Vec<String> = private.iter().map(|(n, _)| n.clone()).collect();
        // Paced like container removals (issue 10); the first failure is
        // returned once every batch has run.
        let remove = |batch: &[String]| -> Result<()> {
            let args = argv::network_remove(batch);
            let out = self.exec.run(&args)?;
            let real = out.stderr_str().lines().any(|l| !parse::is_trailer(l) && !parse::no_such_network(l));
            if out.status != 0 && real {
                return Err(status_error(&args, &out).into());
            }
            Ok(())
        };
        let done = self.pace.run_until(&nets, remove, |r| r.as_ref().is_err_and(is_timeout));
        match done.into_iter().find_map(|(_, r)| r.and_then(Result::err)) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Start the sandbox and wait for its socket; returns the container id.
    fn start_and_wait(&self, plan: &argv::RunPlan) -> Result<String> {
        self.check_interrupt()?;
        let nets = unique(plan.networks.iter().map(|(_, n)| n.clone()));
        // The image was seen before (its user is cached) but may be gone since.
        let missing = |e: DockerError| match &e {
            DockerError::Status { stderr, .. }
                if stderr.contains("Unable to find image") || parse::no_such_image(stderr) =>
            {
                Error::ImageMissing { image: plan.spec.image.as_str().to_string() }
            }
            _ => e.into(),
        };
        let cid = if nets.len() <= 1 {
            run_ok(&*self.exec, &argv::container(plan, true)).map_err(missing)?.stdout_str().trim().to_string()
        } else {
            let cid =
                run_ok(&*self.exec, &argv::container(plan, false)).map_err(missing)?.stdout_str().trim().to_string();
            for net in &nets[1..] {
                self.check_interrupt()?;
                run_ok(&*self.exec, &argv::network_connect(net, plan.id))?;
            }
            self.check_interrupt()?;
            run_ok(&*self.exec, &argv::start(plan.id))?;
            cid
        };
        // `docker run`/`start` is the only place sbx starts a sandbox
        // (`--restart no`), so this one check covers every start.
        self.check_mounts(plan)?;
        if plan.spec.socket_wait.is_zero() {
            self.check_interrupt()?;
        } else if plan.channel == crate::host::channel::Kind::Exec {
            self.wait_for_relayed_socket(plan, &cid)?;
        } else {
            self.wait_for_socket(plan)?;
        }
        Ok(cid)
    }

    /// Issue 9 finding 1: runc places mounts by following the image's
    /// symlinks, so read where the kernel really put sbx's mounts, from the
    /// host's /proc/PID/mountinfo of the sandbox's main process (kernel
    /// data the sandbox cannot forge), and refuse an image that moved them.
    fn check_mounts(&self, plan: &argv::RunPlan) -> Result<()> {
        self.check_interrupt()?;
        let pid = match self.main_process(plan)? {
            MainProcess::Running(pid) => pid,
            MainProcess::Exited(died) => return Err(died),
        };
        let path = self.proc.join(pid.to_string()).join("mountinfo");
        let checked = std::fs::read_to_string(&path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))
            .and_then(|info| {
                crate::host::helper::check_mounts(
                    &info,
                    plan.spec.image.as_str(),
                    plan.helper.is_some(),
                    argv::SANDBOX_SOCKET_DIR,
                )
            });
        if checked.is_err() {
            // The sandbox may have exited between the look-up and the read
            // (its /proc entry gone, or the pid already someone else's): that
            // is a boot crash, not a redirected image. Only a failure read
            // from the same, still running process stands.
            match self.main_process(plan)? {
                MainProcess::Exited(died) => return Err(died),
                MainProcess::Running(again) if again != pid => {
                    return Err(Error::DiedAtBoot { id: plan.id.to_string(), code: -1, logs: self.logs(plan.id) })
                }
                MainProcess::Running(_) => {}
            }
        }
        checked
    }

    /// The sandbox's main process, from one `docker container inspect`.
    fn main_process(&self, plan: &argv::RunPlan) -> Result<MainProcess> {
        let args = argv::running_pid(plan.id);
        let out = run_ok(&*self.exec, &args)?;
        let text = out.stdout_str();
        let mut words = text.split_whitespace();
        let (pid, status, code) = (words.next().and_then(|p| p.parse::<i32>().ok()), words.next(), words.next());
        match (pid, status) {
            (Some(pid), Some("running")) if pid > 0 => Ok(MainProcess::Running(pid)),
            (_, Some(s)) if s != "running" && s != "created" => Ok(MainProcess::Exited(Error::DiedAtBoot {
                id: plan.id.to_string(),
                code: code.and_then(|c| c.parse().ok()).unwrap_or(-1),
                logs: self.logs(plan.id),
            })),
            _ => Err(DockerError::Parse {
                command: crate::docker::render(&args),
                reason: format!("expected `PID STATUS EXITCODE`, got {:?}", text.trim()),
            }
            .into()),
        }
    }

    /// Poll for the socket (2 ms, backing off to 20 ms). Most sandboxes bind
    /// within a few hundred ms, so the container's state is asked only from
    /// 250 ms on, every 500 ms: a boot crash is still reported within half a
    /// second, without a `docker wait` process competing with the engine
    /// during every start.
    fn wait_for_socket(&self, plan: &argv::RunPlan) -> Result<()> {
        let owners = socket::allowed_owners(Some(plan.uid));
        let started = Instant::now();
        let mut next_check = Duration::from_millis(250);
        let mut delay = Duration::from_millis(2);
        // Bound, but not writable by sbx's user: not ready for its caller (issue 10 item 7).
        let mut not_yours = None;
        loop {
            self.check_interrupt()?;
            if let Some((fd, _)) = socket::open_checked(plan.socket_path, &owners)? {
                match socket::may_connect(&fd) {
                    Ok(()) => return Ok(()),
                    Err(e) => not_yours = Some(e),
                }
            }
            if started.elapsed() >= next_check {
                next_check += Duration::from_millis(500);
                let out = self.exec.run(&argv::state(plan.id))?;
                let text = out.stdout_str();
                let mut words = text.split_whitespace();
                if let (Some(status), Some(code)) = (words.next(), words.next()) {
                    if status != "running" && status != "created" {
                        let code = code.parse().unwrap_or(-1);
                        return Err(Error::DiedAtBoot { id: plan.id.to_string(), code, logs: self.logs(plan.id) });
                    }
                }
            }
            if started.elapsed() >= plan.spec.socket_wait {
                if let Some(reason) = not_yours {
                    let uid = nix::unistd::geteuid().as_raw();
                    return Err(socket_error(socket::not_yours(plan.socket_path, uid, reason)));
                }
                return Err(Error::SocketTimeout {
                    id: plan.id.to_string(),
                    socket: plan.socket_path.display().to_string(),
                    waited: humantime::format_duration(plan.spec.socket_wait).to_string(),
                    logs: self.logs(plan.id),
                });
            }
            std::thread::sleep(delay);
            delay = (delay * 2).min(Duration::from_millis(20));
        }
    }

    /// Readiness through the relayed channel (issue 10 item 7): the helper
    /// polls for the socket inside the sandbox for up to 500 ms per `docker
    /// exec`, refusing anything there that is not a socket; between execs
    /// the container's state is checked, so a boot crash is reported as
    /// promptly as on the direct path.
    fn wait_for_relayed_socket(&self, plan: &argv::RunPlan, cid: &str) -> Result<()> {
        use crate::host::channel::{probe_argv, relay_status, HELPER_NO_SOCKET};
        let started = Instant::now();
        loop {
            self.check_interrupt()?;
            let left = plan.spec.socket_wait.saturating_sub(started.elapsed());
            let out = self.exec.run(&probe_argv(cid, left.min(Duration::from_millis(500))))?;
            if out.status == 0 {
                return Ok(());
            }
            let died = || -> Result<Option<Error>> {
                let out = self.exec.run(&argv::state(plan.id))?;
                let text = out.stdout_str();
                let mut words = text.split_whitespace();
                Ok(match (words.next(), words.next()) {
                    (Some(status), Some(code)) if status != "running" && status != "created" => {
                        Some(Error::DiedAtBoot {
                            id: plan.id.to_string(),
                            code: code.parse().unwrap_or(-1),
                            logs: self.logs(plan.id),
                        })
                    }
                    _ => None,
                })
            };
            if let Some(e) = died()? {
                return Err(e);
            }
            if out.status != HELPER_NO_SOCKET {
                relay_status(plan.id, out.status, &out.stderr_str(), Duration::ZERO)?;
            }
            if started.elapsed() >= plan.spec.socket_wait {
                return Err(Error::SocketTimeout {
                    id: plan.id.to_string(),
                    socket: format!("{} (inside the sandbox)", argv::SANDBOX_SOCKET),
                    waited: humantime::format_duration(plan.spec.socket_wait).to_string(),
                    logs: self.logs(plan.id),
                });
            }
        }
    }

    fn logs(&self, id: &str) -> String {
        match self.exec.run(&argv::logs_tail(id)) {
            Ok(out) => inert(&format!("{}{}", out.stdout_str(), String::from_utf8_lossy(&out.stderr))),
            Err(e) => format!("(logs unavailable: {e})"),
        }
    }

    /// Undo a failed create. Runs to the end whatever fails or is signalled;
    /// true when nothing is left.
    fn teardown(&self, id: &str, dir: &Path, private: &[(String, String)]) -> bool {
        let mut clean = true;
        match self.exec.run(&argv::remove(&[id])) {
            Ok(out) if out.status == 0 || parse::no_such_container(&out.stderr_str()) => {}
            Ok(out) => {
                crate::output::warn(
                    "cleanup",
                    &format!(
                        "could not remove {id}: {}; `sbx gc` will",
                        crate::docker::explain::first_line(&out.stderr_str())
                    ),
                );
                clean = false;
            }
            Err(e) => {
                crate::output::warn("cleanup", &format!("could not remove {id}: {e}; `sbx gc` will"));
                clean = false;
            }
        }
        if let Err(e) = self.remove_private(private) {
            crate::output::warn(
                "cleanup",
                &format!("could not remove the private route networks of {id}: {e}; `sbx gc` will"),
            );
            clean = false;
        }
        if let Err(e) = socket::remove_dir(dir, id) {
            crate::output::warn("cleanup", &format!("could not remove {}: {e}", dir.display()));
            clean = false;
        }
        clean
    }

    /// Inspect sandboxes by id. Missing ones are left out; a container sbx
    /// did not create is an error.
    fn inspect_many(&self, ids: &[String]) -> Result<Vec<RawContainer>> {
        let args = argv::inspect(ids);
        let out = self.exec.run(&args)?;
        let raws = parse::parse_inspect(&out.stdout_str(), &crate::docker::render(&args))?;
        if out.status != 0 {
            let missing = parse::missing_containers(ids, &out.stderr_str());
            if missing.len() + raws.len() != ids.len() {
                return Err(status_error(&args, &out).into());
            }
        }
        let (_, key) = self.state()?;
        if let Some(foreign) = raws.iter().find(|r| !r.is_sbx(key)) {
            return Err(Error::Foreign { id: foreign.name.clone() });
        }
        Ok(raws)
    }

    /// What a command that touches sandbox `id` acts on, once `id` is proven
    /// to be this host's (issue 9 finding 9: `exec` ran in a hand-made
    /// container that copied sbx's labels): the full container id, from the
    /// record create wrote (no docker call; acting on the id means a
    /// container later given the same name is never touched), else from an
    /// inspect whose owner token matches.
    pub fn owned(&self, id: &str) -> Result<String> {
        let (state, _) = self.state()?;
        if let Some(r) = state.record(id) {
            return Ok(r.container);
        }
        let raw = self.inspect_one(id)?;
        match raw.full["Id"].as_str() {
            Some(cid) if cid.len() == 64 && cid.bytes().all(|b| b.is_ascii_hexdigit()) => Ok(cid.to_string()),
            _ => {
                Err(DockerError::Parse { command: "docker container inspect".into(), reason: "no container Id".into() }
                    .into())
            }
        }
    }

    pub fn inspect(&self, id: &str) -> Result<Record> {
        let raw = self.inspect_one(id)?;
        let mut r = [self.record(&raw)];
        if let Ok((state, _)) = self.state() {
            crate::sandbox::gc_plan::mark_creates(&mut r, &state.creating(), &|p: &ProcId| p.is_alive());
        }
        let [r] = r;
        Ok(r)
    }

    fn record(&self, raw: &RawContainer) -> Record {
        let moved = self.state().ok().and_then(|(s, _)| s.expiry(&raw.name));
        raw.record(raw.expiry(moved), SystemTime::now())
    }

    fn inspect_one(&self, id: &str) -> Result<RawContainer> {
        self.inspect_many(&[id.to_string()])?.into_iter().next().ok_or_else(|| Error::NotFound { id: id.to_string() })
    }

    pub fn list(&self) -> Result<Vec<Record>> {
        let args = argv::list();
        // docker answers while sbx reads its key.
        let job = self.exec.spawn(&args)?;
        let (state, key) = self.state()?;
        let out = job.wait()?;
        if out.status != 0 {
            return Err(status_error(&args, &out).into());
        }
        let raws = parse::parse_ps(&out.stdout_str(), "docker ps")?;
        let mut recs: Vec<Record> = raws.iter().filter(|r| r.is_sbx(key)).map(|r| self.record(r)).collect();
        crate::sandbox::gc_plan::mark_creates(&mut recs, &state.creating(), &|p: &ProcId| p.is_alive());
        Ok(recs)
    }

    /// Remove sandboxes and their socket directories. Already gone is fine:
    /// scripts call this from `trap ... EXIT`, and two destroys may race.
    pub fn destroy(&self, ids: &[String]) -> Result<Destroyed> {
        self.destroy_purging(ids, false)
    }

    /// `destroy --purge`: also the persistent volumes of their sessions.
    pub fn destroy_purging(&self, ids: &[String], purge: bool) -> Result<Destroyed> {
        let mut ids: Vec<String> = ids.to_vec();
        ids.dedup();
        // Sandboxes this host recorded go in one `docker rm` by container id;
        // the rest are inspected first to prove they are sbx's.
        let (state, _) = self.state()?;
        let (recorded, ids): (Vec<_>, Vec<_>) =
            ids.into_iter().map(|id| (state.record(&id), id)).partition(|(r, _)| r.is_some());
        let ids: Vec<String> = ids.into_iter().map(|(_, id)| id).collect();
        let mut removed = Vec::new();
        let mut failure = None;
        if !recorded.is_empty() {
            let cids: Vec<String> =
                recorded.iter().filter_map(|(r, _)| r.as_ref().map(|r| r.container.clone())).collect();
            // Paced (issue 10); what a failed batch held stays recorded.
            let failed = self.remove_paced(&cids);
            let kept: BTreeSet<String> = failed.iter().flat_map(|(b, _)| b.iter().cloned()).collect();
            // Named by sandbox id, not container id, in what the user reads.
            let name = |cid: &String| {
                recorded.iter().find(|(r, _)| r.as_ref().is_some_and(|r| r.container == *cid)).map(|(_, id)| id.clone())
            };
            failure =
                first_failure(failed.into_iter().map(|(b, e)| (b.iter().filter_map(name).collect(), e)).collect());
            for (r, id) in &recorded {
                let Some(r) = r else { continue };
                if kept.contains(&r.container) {
                    continue;
                }
                self.remove_private(&r.private)?;
                socket::remove_dir(&r.socket_dir, id)?;
                if purge {
                    if let (Some(vol), Some(session)) = (&r.volume, &r.session) {
                        self.purge_volume(vol, session)?;
                    }
                }
                state.forget(id);
                removed.push(id.clone());
            }
        }
        if let Some(e) = failure {
            // The rest still goes; the first failure is the answer.
            if !ids.is_empty() {
                if let Err(more) = self.destroy_inspected(&ids, purge) {
                    eprintln!("sbx: warning: {more}");
                }
            }
            return Err(e);
        }
        if ids.is_empty() {
            return Ok(Destroyed { removed, already_gone: Vec::new() });
        }
        let mut rest = self.destroy_inspected(&ids, purge)?;
        rest.removed.splice(0..0, removed);
        Ok(rest)
    }

    fn destroy_inspected(&self, ids: &[String], purge: bool) -> Result<Destroyed> {
        let ids = ids.to_vec();
        let raws = self.inspect_many(&ids)?;
        let present: Vec<String> = raws.iter().map(|r| r.name.clone()).collect();
        // Paced (issue 10); a sandbox of a failed batch keeps its directory,
        // networks and state, and the first failure is returned at the end.
        let failed = self.remove_paced(&present);
        let kept: BTreeSet<String> = failed.iter().flat_map(|(b, _)| b.iter().cloned()).collect();
        let failure = first_failure(failed);
        let raws: Vec<RawContainer> = raws.into_iter().filter(|r| !kept.contains(&r.name)).collect();
        let private: Vec<(String, String)> = raws.iter().flat_map(private_of).collect();
        self.remove_private(&private)?;
        for r in &raws {
            if let Some(dir) = r.labels.get(record::SOCKET).and_then(|s| Path::new(s).parent()) {
                socket::remove_dir(dir, &r.name)?;
            }
        }
        let (state, _) = self.state()?;
        for id in ids.iter().filter(|id| !kept.contains(*id)) {
            state.forget(id);
        }
        if purge {
            for r in &raws {
                if let (Some(vol), Some(session)) = (r.labels.get(record::VOLUME), r.labels.get(record::SESSION)) {
                    self.purge_volume(vol, session)?;
                }
            }
        }
        let already_gone: Vec<String> = ids.iter().filter(|i| !present.contains(i)).cloned().collect();
        if !already_gone.is_empty() {
            // A create killed before its container existed may have left the
            // directory under the root this environment resolves to.
            if let Ok(root) = self.roots.resolve() {
                for id in &already_gone {
                    socket::remove_dir(&root.join(id), id)?;
                }
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(Destroyed { removed: present, already_gone })
    }

    pub fn revoke(&self, id: &str, kind: &str) -> Result<Revoked> {
        let raw = self.inspect_one(id)?;
        let declared = raw.declared_routes();
        let Some(network) = declared.get(kind).cloned() else {
            return Err(Error::UnknownRoute {
                id: id.to_string(),
                kind: kind.to_string(),
                routes: self.record(&raw).routes.into_keys().collect(),
            });
        };
        let cut: Vec<String> = declared.iter().filter(|(_, n)| **n == network).map(|(k, _)| k.clone()).collect();
        let mut already = !raw.networks.contains(&network);
        if !already {
            let args = argv::network_disconnect(&network, id);
            let out = self.exec.run(&args)?;
            if out.status != 0 {
                if out.stderr_str().contains("is not connected") {
                    already = true;
                } else {
                    return Err(status_error(&args, &out).into());
                }
            }
        }
        let private: Vec<(String, String)> = private_of(&raw).into_iter().filter(|(n, _)| *n == network).collect();
        self.remove_private(&private)?;
        Ok(Revoked { id: id.to_string(), kind: kind.to_string(), network, cut, already })
    }

    /// Reap expired sandboxes, sandboxes of creates that died, orphaned
    /// socket directories and stale state, in a few batched docker calls.
    /// Safe to run concurrently with other sbx commands and with itself:
    /// every removal tolerates "already gone".
    pub fn gc(&self, dry_run: bool) -> Result<GcReport> {
        let (state, key) = self.state()?;
        let root = self.roots.resolve()?;
        // Order matters: socket entries, then containers, then creates in
        // flight, so a create racing this gc is seen in at least one of them.
        let entries: Vec<String> = std::fs::read_dir(&root)
            .map_err(|e| Error::io(format!("reading {}", root.display()), e))?
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        let out = run_ok(&*self.exec, &argv::private_networks())?;
        let private_networks: Vec<(String, String, String)> = out
            .stdout_str()
            .lines()
            .filter_map(|l| serde_json::from_str::<(String, String, String, String)>(l.trim()).ok())
            .filter(|(_, id, _, owner)| *owner == state::owner_token(key, id))
            .map(|(n, id, svc, _)| (n, id, svc))
            .collect();
        let out = run_ok(&*self.exec, &argv::list())?;
        let owned: Vec<RawContainer> =
            parse::parse_ps(&out.stdout_str(), "docker ps")?.into_iter().filter(|r| r.is_sbx(key)).collect();
        let creating = state.creating();
        let expiring = state.expiring();
        let expiry = |r: &RawContainer| r.expiry(state.expiry(&r.name));
        let mut plan = crate::sandbox::gc_plan::plan(&crate::sandbox::gc_plan::Inputs {
            containers: &owned,
            creating: &creating,
            expiring: &expiring,
            socket_entries: &entries,
            private_networks: &private_networks,
            expiry: &expiry,
            alive: &|p: &ProcId| p.is_alive(),
            now: SystemTime::now(),
        });
        // A create may have finished between `docker ps` and reading the
        // creates in flight: keep any candidate orphan that is a container now.
        if !plan.orphan_dirs.is_empty() {
            let args = argv::inspect(&plan.orphan_dirs);
            let out = self.exec.run(&args)?;
            let exists: Vec<String> = parse::parse_inspect(&out.stdout_str(), "docker container inspect")?
                .into_iter()
                .map(|r| r.name)
                .collect();
            if out.status != 0
                && parse::missing_containers(&plan.orphan_dirs, &out.stderr_str()).len() + exists.len()
                    != plan.orphan_dirs.len()
            {
                return Err(status_error(&args, &out).into());
            }
            plan.orphan_dirs.retain(|d| !exists.contains(d));
        }
        let mut report = GcReport {
            dry_run,
            containers: plan.containers.clone(),
            socket_dirs: Vec::new(),
            networks: plan.networks.iter().map(|(n, _)| n.clone()).collect(),
            volume_state: Vec::new(),
            failed: Vec::new(),
        };
        let reaped: Vec<&RawContainer> =
            owned.iter().filter(|c| plan.containers.iter().any(|r| r.id == c.name)).collect();
        let mut dirs: Vec<(PathBuf, String)> = reaped
            .iter()
            .filter_map(|c| Some((Path::new(c.labels.get(record::SOCKET)?).parent()?.to_path_buf(), c.name.clone())))
            .collect();
        dirs.extend(plan.orphan_dirs.iter().map(|id| (root.join(id), id.clone())));
        report.socket_dirs = dirs.iter().filter(|(d, _)| d.exists()).map(|(d, _)| d.display().to_string()).collect();
        let orphaned = self.orphan_volume_state(state, key)?;
        report.volume_state = orphaned.iter().flat_map(|(_, paths)| paths.iter().cloned()).collect();
        if dry_run {
            return Ok(report);
        }
        for (session, _) in &orphaned {
            match self.remove_orphan_volume_state(state, session) {
                Ok(true) => {}
                // A create of that session holds its lock now: not orphaned.
                Ok(false) => {
                    let dir = crate::host::persist::host_dir(&state.dir, session).display().to_string();
                    let lock = crate::host::persist::lock_path(&state.dir, session).display().to_string();
                    report.volume_state.retain(|p| *p != dir && *p != lock);
                }
                Err(e) => {
                    report.failed.push(GcFailure { item: format!("session state {session}"), error: e.to_string() })
                }
            }
        }
        let mut fail = |item: String, e: &dyn std::fmt::Display| {
            report.failed.push(GcFailure { item, error: e.to_string() });
        };
        let mut hung = false;
        let mut left: BTreeSet<String> = BTreeSet::new();
        if !reaped.is_empty() {
            let ids: Vec<String> = reaped.iter().map(|c| c.name.clone()).collect();
            // Paced (issue 10): one failed batch is reported, the rest go on.
            let mut untried = Vec::new();
            for (batch, e) in self.remove_paced(&ids) {
                match e {
                    Some(e) => {
                        hung |= is_timeout(&e);
                        fail(format!("containers {}", batch.join(" ")), &e)
                    }
                    None => untried.extend(batch.iter().cloned()),
                }
                left.extend(batch);
            }
            if !untried.is_empty() {
                fail(format!("containers {}", untried.join(" ")), &NOT_TRIED);
            }
        }
        if hung && !plan.networks.is_empty() {
            // Each network call would only wait out its own deadline too.
            fail(format!("private route networks {}", report.networks.join(" ")), &NOT_TRIED);
            report.networks.clear();
        } else if let Err(e) = self.remove_private(&plan.networks) {
            fail(format!("private route networks {}", report.networks.join(" ")), &e);
        }
        // A sandbox still there keeps its directory and state for the next gc.
        report.containers.retain(|c| !left.contains(&c.id));
        dirs.retain(|(_, id)| !left.contains(id));
        report.socket_dirs.retain(|d| dirs.iter().any(|(dir, _)| dir.display().to_string() == *d));
        plan.forget.retain(|id| !left.contains(id));
        let mut kept = Vec::new();
        for (dir, id) in &dirs {
            if let Err(e) = socket::remove_dir(dir, id) {
                fail(format!("socket directory {}", dir.display()), &e);
                kept.push(dir.display().to_string());
            }
        }
        report.socket_dirs.retain(|d| !kept.contains(d));
        for id in &plan.forget {
            state.forget(id);
        }
        Ok(report)
    }

    /// Sessions whose directory or lock file under the data dir has no
    /// volume any more (a create killed between the two, a volume removed
    /// behind sbx's back), with the paths that would go. One `docker volume
    /// ls`, and only when the data dir holds session state at all.
    fn orphan_volume_state(&self, state: &State, key: &[u8]) -> Result<Vec<(String, Vec<String>)>> {
        let dir = state.dir.join("volumes");
        let mut sessions: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(name) = e.file_name().into_string() else { continue };
            let session = name.strip_suffix(".lock").unwrap_or(&name).to_string();
            // Only names sbx makes: a session key (see `spec::parse_session`).
            if crate::spec::parse_session(&session).is_err() {
                continue;
            }
            sessions.entry(session).or_default().push(dir.join(&name).display().to_string());
        }
        if sessions.is_empty() {
            return Ok(Vec::new());
        }
        sessions.values_mut().for_each(|paths| paths.sort());
        let out = run_ok(&*self.exec, &crate::docker::argv::session_volumes())?;
        let volumes: Vec<String> = out
            .stdout_str()
            .lines()
            .filter_map(|l| serde_json::from_str::<(String, String, String)>(l).ok())
            .filter(|(n, _, owner)| *owner == state::owner_token(key, n))
            .map(|(n, _, _)| n)
            .collect();
        Ok(sessions.into_iter().filter(|(s, _)| !volumes.contains(&crate::host::persist::volume_name(s))).collect())
    }

    /// Remove a session's orphaned state under its lock, taken without
    /// waiting: Ok(false) when a create holds it. The volume is looked up
    /// again under the lock, since a create may have finished since the list.
    fn remove_orphan_volume_state(&self, state: &State, session: &str) -> Result<bool> {
        let Some(_lock) = crate::host::persist::try_lock(&state.dir, session)? else { return Ok(false) };
        let name = crate::host::persist::volume_name(session);
        let out = self.exec.run(&crate::docker::argv::volume_inspect(&name))?;
        if out.status == 0 {
            return Ok(false);
        }
        remove_session_state(state, session)?;
        Ok(true)
    }

    /// [`remove_tolerant`](Self::remove_tolerant) in paced batches (issue 10:
    /// never one `docker rm` of many, see `docker::pace`). Every batch runs
    /// even when one fails, except after the engine stopped answering (each
    /// would only wait out its deadline). Returns the batches not removed,
    /// each with its error, or None for a batch never tried.
    fn remove_paced(&self, ids: &[String]) -> Vec<(Vec<String>, Option<Error>)> {
        self.pace
            .run_until(ids, |batch| self.remove_tolerant(batch), |r| r.as_ref().is_err_and(is_timeout))
            .into_iter()
            .filter_map(|(batch, r)| match r {
                Some(Ok(())) => None,
                Some(Err(e)) => Some((batch.to_vec(), Some(e))),
                None => Some((batch.to_vec(), None)),
            })
            .collect()
    }

    /// `docker rm -f` that counts "no such container" as done, and waits
    /// out "removal already in progress" (a racing destroy, watchdog or gc
    /// got there first) so the container is gone when this returns.
    fn remove_tolerant(&self, ids: &[String]) -> Result<()> {
        let args = argv::remove(ids);
        let out = self.exec.run(&args)?;
        if out.status == 0 {
            return Ok(());
        }
        let stderr = out.stderr_str();
        let mut racing = Vec::new();
        for line in stderr.lines().filter(|l| !parse::is_trailer(l)) {
            if parse::no_such_container(line) {
                continue;
            }
            match ids.iter().find(|id| parse::removal_in_progress(line, id)) {
                Some(id) => racing.push(id.clone()),
                None => return Err(status_error(&args, &out).into()),
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while !racing.is_empty() {
            if Instant::now() > deadline {
                return Err(status_error(&args, &out).into());
            }
            std::thread::sleep(Duration::from_millis(50));
            let out = self.exec.run(&argv::inspect(&racing))?;
            let still: Vec<String> = parse::parse_inspect(&out.stdout_str(), "docker container inspect")?
                .into_iter()
                .map(|r| r.name)
                .collect();
            racing.retain(|id| still.contains(id));
        }
        Ok(())
    }

    /// The TTL watchdog's loop: sleeps until the expiry (re-read every
    /// second, so `sbx ttl` moves it), then destroys the sandbox. Ends early
    /// when the sandbox is destroyed by anyone else.
    pub fn watch(&self, id: &str, socket_dir: &Path) -> Result<()> {
        let (state, _) = self.state()?;
        if let Some(me) = ProcId::current() {
            state.set_watchdog(id, me)?;
        }
        loop {
            let Some(expiry) = state.expiry(id) else { return Ok(()) };
            if !socket_dir.exists() {
                return Ok(());
            }
            let now = SystemTime::now();
            match expiry.duration_since(now) {
                Ok(left) if !left.is_zero() => std::thread::sleep(left.min(Duration::from_secs(1))),
                _ => {
                    // The sandbox record makes this one `docker rm`, close to the expiry.
                    tracing::info!(id, "TTL expired; destroying");
                    self.destroy(&[id.to_string()])?;
                    return Ok(());
                }
            }
        }
    }

    /// Move a sandbox's expiry to `ttl` from now. Returns the new expiry,
    /// and the socket path when a watchdog must be started (none is alive).
    pub fn set_ttl(&self, id: &str, ttl: Duration) -> Result<(SystemTime, Option<PathBuf>)> {
        let raw = self.inspect_one(id)?;
        let (state, _) = self.state()?;
        let at = SystemTime::now() + ttl;
        state.set_expiry(id, at)?;
        let watched = state.watchdog(id).is_some_and(|w| w.is_alive());
        let socket = raw.labels.get(record::SOCKET).map(PathBuf::from);
        Ok((at, if watched { None } else { socket }))
    }

    fn purge_volume(&self, volume: &str, session: &str) -> Result<()> {
        let (state, _) = self.state()?;
        let _lock = crate::host::persist::lock(&state.dir, session)?;
        self.purge_volume_locked(volume, session)
    }

    /// [`Self::purge_volume`] with the session's lock already held.
    fn purge_volume_locked(&self, volume: &str, session: &str) -> Result<()> {
        let (state, _) = self.state()?;
        let args = crate::docker::argv::volume_remove(volume);
        let out = self.exec.run(&args)?;
        if out.status != 0
            && !out.stderr_str().contains("No such volume")
            && !out.stderr_str().contains("no such volume")
        {
            return Err(status_error(&args, &out).into());
        }
        remove_session_state(state, session)
    }

    /// `sbx volumes rm KEY`: the session's volume (only one this host made),
    /// its directory (never following links) and its lock file, under the
    /// session's lock; refused while a running sandbox uses the volume.
    /// Returns the volume's name.
    pub fn remove_volume(&self, session: &str) -> Result<String> {
        let (state, key) = self.state()?;
        let name = crate::host::persist::volume_name(session);
        let _lock = crate::host::persist::lock(&state.dir, session)?;
        let users = run_ok(&*self.exec, &crate::docker::argv::volume_users(Some(&name)))?;
        if let Some((user, _)) =
            users.stdout_str().lines().filter_map(|l| serde_json::from_str::<(String, String)>(l).ok()).next()
        {
            return Err(Error::VolumeInUse { session: session.to_string(), id: user });
        }
        let out = run_ok(&*self.exec, &crate::docker::argv::session_volumes())?;
        let listed: Vec<(String, String, String)> =
            out.stdout_str().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let dir = crate::host::persist::host_dir(&state.dir, session);
        match listed.iter().find(|(n, _, _)| *n == name) {
            Some((_, _, owner)) if *owner != state::owner_token(key, &name) => {
                return Err(Error::Foreign { id: name });
            }
            Some(_) => self.purge_volume_locked(&name, session)?,
            None if std::fs::symlink_metadata(&dir).is_ok() => self.purge_volume_locked(&name, session)?,
            None => return Err(Error::NotFound { id: name }),
        }
        Ok(name)
    }

    /// The persistent session volumes sbx made, and who uses each.
    pub fn volumes(&self) -> Result<Vec<crate::host::persist::VolumeInfo>> {
        let (state, key) = self.state()?;
        let out = run_ok(&*self.exec, &crate::docker::argv::session_volumes())?;
        let users = run_ok(&*self.exec, &crate::docker::argv::volume_users(None))?;
        let users: Vec<(String, String)> =
            users.stdout_str().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        Ok(out
            .stdout_str()
            .lines()
            .filter_map(|l| serde_json::from_str::<(String, String, String)>(l).ok())
            .filter(|(name, _, owner)| *owner == state::owner_token(key, name))
            .map(|(name, session, _)| {
                let dir = crate::host::persist::host_dir(&state.dir, &session);
                crate::host::persist::VolumeInfo {
                    in_use_by: users.iter().filter(|(_, v)| *v == name).map(|(c, _)| c.clone()).collect(),
                    bytes: crate::host::persist::du(&dir),
                    path: dir.display().to_string(),
                    name,
                    session,
                }
            })
            .collect())
    }

    /// Check a sandbox against the CIS runtime rules (see `audit`).
    pub fn audit(&self, id: &str) -> Result<crate::checks::audit::AuditReport> {
        let raw = self.inspect_one(id)?;
        let full = &raw.full;
        let status = crate::checks::audit::ProcStatus::of_pid(full["State"]["Pid"].as_i64().unwrap_or(0));
        // The image's own labels: a container inherits them, sbx's record must not.
        let image = full["Image"].as_str().unwrap_or_default();
        let args = argv::image_labels(image);
        let out = self.exec.run(&args)?;
        let image_labels = match out.status {
            0 => serde_json::from_str(out.stdout_str().trim()).map_err(|e| format!("unreadable answer: {e}")),
            // Removed under the container: its labels cannot be checked.
            _ if parse::no_such_image(&out.stderr_str()) => Err(out.stderr_str()),
            _ => return Err(status_error(&args, &out).into()),
        };
        let facts = crate::checks::audit::Facts { apparmor: crate::checks::audit::apparmor_enabled(), image_labels };
        let rules = crate::checks::audit::audit(full, status.as_ref(), &facts);
        Ok(crate::checks::audit::AuditReport { id: id.to_string(), passed: rules.iter().all(|r| r.pass), rules })
    }

    /// How to reach a running sandbox's program (`connect`, `doctor`): the
    /// channel its create chose, as its (token-covered) label records it.
    pub fn channel(&self, id: &str) -> Result<crate::host::channel::Channel> {
        let raw = self.inspect_one(id)?;
        if raw.state != "running" {
            return Err(Error::NotRunning { id: id.to_string(), state: raw.state });
        }
        let rec = self.record(&raw);
        Ok(match crate::host::channel::Kind::from_label(raw.labels.get(record::CHANNEL).map(String::as_str)) {
            crate::host::channel::Kind::Direct => {
                let uid = rec.user.split(':').next().and_then(|u| u.parse().ok());
                let path = PathBuf::from(raw.labels.get(record::SOCKET).cloned().unwrap_or_default());
                crate::host::channel::Channel::Direct { path, owners: socket::allowed_owners(uid) }
            }
            // `docker exec` on the container id, never a name another container could take.
            crate::host::channel::Kind::Exec => match raw.full["Id"].as_str() {
                Some(cid) if cid.len() == 64 && cid.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    crate::host::channel::Channel::Exec { id: id.to_string(), container: cid.to_string() }
                }
                _ => {
                    return Err(DockerError::Parse {
                        command: "docker container inspect".into(),
                        reason: "no container Id".into(),
                    }
                    .into())
                }
            },
        })
    }
}

fn socket_error(e: crate::error::SocketError) -> Error {
    e.into()
}

/// A session's directory under the data dir (its nosuid,nodev bind
/// detached first) and its lock file, with the session's lock held.
fn remove_session_state(state: &State, session: &str) -> Result<()> {
    let dir = crate::host::persist::host_dir(&state.dir, session);
    crate::host::persist::unbind(&dir);
    // The sandbox filled this tree: std's remove_dir_all holds one
    // descriptor per level and a deep /state ran it out of them (EMFILE,
    // issue 9 finding 8 in the volume); remove_tree holds a bounded number.
    let parent = dir.parent().unwrap_or(Path::new("/"));
    socket::remove_tree(parent, session).map_err(|e| Error::io(format!("removing {}", dir.display()), e.into()))?;
    // The lock file goes with its volume (issue 10).
    let _ = std::fs::remove_file(crate::host::persist::lock_path(&state.dir, session));
    Ok(())
}

/// Most of the sandbox's output sbx quotes in its own messages.
const QUOTED_MAX: usize = 16 * 1024;

/// The sandbox's own output, made safe to quote on the operator's terminal:
/// control characters other than newline and tab (ESC sequences that
/// rewrite the screen, set the clipboard with OSC 52, or a `\r` that hides
/// a line) are written as escapes, and only the last `QUOTED_MAX` bytes are
/// kept (`--tail` counts lines, and a line can be megabytes).
fn inert(text: &str) -> String {
    let mut start = text.len().saturating_sub(QUOTED_MAX);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let kept = crate::error::inert_chars(&text[start..]);
    if start > 0 {
        format!("[...] {kept}")
    } else {
        kept
    }
}

/// Why a paced batch was not tried: an earlier one found the engine not answering.
const NOT_TRIED: &str = "not tried: the engine did not answer an earlier batch";

fn is_timeout(e: &Error) -> bool {
    matches!(e, Error::Docker(DockerError::Timeout { .. }))
}

/// The error to answer with after paced removals: the first failed batch's
/// (its kind and hint stay, e.g. `engine_timeout`), after a warning naming
/// the sandboxes of every other batch left in place.
fn first_failure(failed: Vec<(Vec<String>, Option<Error>)>) -> Option<Error> {
    let mut first: Option<Error> = None;
    let mut left = Vec::new();
    for (ids, e) in failed {
        left.extend(ids);
        first = first.or(e);
    }
    if !left.is_empty() {
        eprintln!("sbx: warning: not removed: {}; `sbx destroy` them again once the engine answers", left.join(" "));
    }
    first.or_else(|| (!left.is_empty()).then(|| Error::io("removing sandboxes", std::io::Error::other(NOT_TRIED))))
}

/// Items in order, each once.
fn unique(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    items.filter(|n| seen.insert(n.clone())).collect()
}

/// A persistent session volume, locked for this create.
enum MainProcess {
    Running(i32),
    /// It exited: the error that says so, with its logs.
    Exited(Error),
}

struct Persisted {
    volume: String,
    /// The bind stays after create (see `NosuidBind`); this only says it was made.
    _nosuid: Option<crate::host::persist::NosuidBind>,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

/// How a sandbox's routes map onto networks.
#[derive(Debug, Default)]
struct RouteNets {
    /// (kind, network), in route order.
    networks: Vec<(String, String)>,
    info: std::collections::BTreeMap<String, NetInfo>,
    /// (private network, service container) sbx makes and removes.
    private: Vec<(String, String)>,
}

/// The private route networks recorded on a sandbox.
fn private_of(raw: &RawContainer) -> Vec<(String, String)> {
    raw.labels
        .get(record::PRIVATE)
        .and_then(|p| serde_json::from_str::<BTreeMap<String, String>>(p).ok())
        .map(|m| m.into_iter().collect())
        .unwrap_or_default()
}

/// Never root unless asked for by `--user 0`; otherwise the image's numeric
/// non-root user, otherwise nobody.
/// gid 0 only when asked for by `--user X:0`, with a warning; the image's
/// USER never yields it (issue 9 finding 10).
fn choose_user(flag: Option<UserSpec>, image_user: &str, warnings: &mut Vec<String>) -> UserSpec {
    if let Some(u) = flag {
        if u.uid == 0 {
            warnings.push(
                "running as root inside the sandbox (--user 0): a kernel or runtime escape would start as root".into(),
            );
        } else if u.gid == 0 {
            warnings.push(format!(
                "running with group 0 (root) inside the sandbox (--user {}:0): files of group root become writable to it",
                u.uid
            ));
        }
        return u;
    }
    if let Some(u) = UserSpec::from_image(image_user) {
        if u.gid == 0 {
            warnings.push(format!(
                "the image's user {image_user:?} has group 0 (root); running as {0}:{0} instead (pass --user {0}:0 to keep group 0)",
                u.uid
            ));
            return UserSpec { uid: u.uid, gid: u.uid };
        }
        return u;
    }
    if !image_user.is_empty() {
        warnings.push(format!(
            "the image's user {image_user:?} is not a numeric non-root user; running as {NOBODY}:{NOBODY} (pass --user UID[:GID] to choose)"
        ));
    }
    UserSpec { uid: NOBODY, gid: NOBODY }
}

#[cfg(test)]
mod tests;

//! `ContainerDriver`: the sandbox lifecycle in terms of docker calls.
//!
//! Every docker call goes through the injected [`DockerExec`]; the driver
//! decides what to run, in which order, and what to undo when a step fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::docker::{argv, parse, run_ok, DockerExec, Output};
use crate::error::{DockerError, Error, Result};
use crate::record::{self, RawContainer, Record};
use crate::socket::{self, RootChoice};
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
    pub routes: BTreeMap<String, String>,
    pub created_at: String,
    pub user: String,
    /// Where the boundary is weaker than it could be (also said on stderr).
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Destroyed {
    pub removed: Vec<String>,
    pub already_gone: Vec<String>,
}

pub struct ContainerDriver {
    exec: Arc<dyn DockerExec>,
    roots: RootChoice,
    interrupted: InterruptCheck,
    new_id: IdSource,
}

impl ContainerDriver {
    pub fn new(exec: Arc<dyn DockerExec>, roots: RootChoice) -> Self {
        ContainerDriver { exec, roots, interrupted: Arc::new(|| None), new_id: Arc::new(spec::new_id) }
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
        self.check_interrupt()?;

        let mut warnings = Vec::new();
        let image_user = self.image_user(spec.image.as_str())?;
        let user = choose_user(spec.user, &image_user, &mut warnings);
        let tier = self.route_tier(spec, &mut warnings)?;
        self.check_interrupt()?;

        let created_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
        let dir = socket::make_dir(&root, &id, user.uid, user.gid)?;
        let plan = argv::RunPlan {
            id: &id,
            spec,
            uid: user.uid,
            gid: user.gid,
            tier,
            socket_dir: &dir,
            socket_path: &sock,
            created_at: &created_at,
        };
        if let Err(e) = self.start_and_wait(&plan) {
            self.teardown(&id, &dir);
            return Err(e);
        }
        let routes = spec.routes.iter().map(|r| (r.kind.clone(), r.network())).collect();
        Ok(Created {
            session: spec.session.clone().unwrap_or_else(|| id.clone()),
            id,
            image: spec.image.as_str().to_string(),
            tier,
            socket: sock.display().to_string(),
            routes,
            created_at,
            user: format!("{}:{}", user.uid, user.gid),
            warnings,
        })
    }

    fn image_user(&self, image: &str) -> Result<String> {
        let out = self.exec.run(&argv::image_user(image))?;
        if out.status != 0 {
            if parse::no_such_image(&out.stderr_str()) {
                return Err(Error::ImageMissing { image: image.to_string() });
            }
            return Err(status_error(&argv::image_user(image), &out).into());
        }
        Ok(parse::image_user(&out.stdout_str()))
    }

    /// One `docker network inspect` for all route networks. Tier 2 needs
    /// every one of them internal; otherwise tier 1, or refusal under
    /// strict egress.
    fn route_tier(&self, spec: &SandboxSpec, warnings: &mut Vec<String>) -> Result<u8> {
        let nets = unique_networks(spec);
        if nets.is_empty() {
            return Ok(2);
        }
        let args = argv::network_inspect(&nets);
        let out = self.exec.run(&args)?;
        let report = parse::networks(&nets, &out.stdout_str(), &out.stderr_str());
        if !report.missing.is_empty() {
            return Err(Error::NetworkMissing { networks: report.missing });
        }
        if out.status != 0 || report.internal.len() != nets.len() {
            return Err(status_error(&args, &out).into());
        }
        let open: Vec<String> = nets.iter().filter(|n| report.internal.get(*n) == Some(&false)).cloned().collect();
        if open.is_empty() {
            return Ok(2);
        }
        if spec.strict_egress {
            return Err(Error::EgressNotStrict { networks: open });
        }
        for n in &open {
            warnings.push(format!(
                "network {n} is not internal: the sandbox can reach beyond its route, so the tier is lowered to 1 (fix: `docker network rm {n} && docker network create --internal {n}`, then reattach the service)"
            ));
        }
        Ok(1)
    }

    fn start_and_wait(&self, plan: &argv::RunPlan) -> Result<()> {
        self.check_interrupt()?;
        let nets = unique_networks(plan.spec);
        if nets.len() <= 1 {
            run_ok(&*self.exec, &argv::container(plan, true))?;
        } else {
            run_ok(&*self.exec, &argv::container(plan, false))?;
            for net in &nets[1..] {
                self.check_interrupt()?;
                run_ok(&*self.exec, &argv::network_connect(net, plan.id))?;
            }
            self.check_interrupt()?;
            run_ok(&*self.exec, &argv::start(plan.id))?;
        }
        if plan.spec.socket_wait.is_zero() {
            return self.check_interrupt();
        }
        self.wait_for_socket(plan)
    }

    /// Poll for the socket (2 ms, backing off to 20 ms) while `docker wait`
    /// watches for the container dying, so a boot crash is reported at once
    /// instead of after the whole timeout.
    fn wait_for_socket(&self, plan: &argv::RunPlan) -> Result<()> {
        let owners = socket::allowed_owners(Some(plan.uid));
        let mut watcher = Some(self.exec.spawn(&argv::wait(plan.id))?);
        let started = Instant::now();
        let mut delay = Duration::from_millis(2);
        loop {
            self.check_interrupt()?;
            if socket::open_checked(plan.socket_path, &owners)?.is_some() {
                return Ok(());
            }
            if let Some(out) = watcher.as_mut().and_then(|w| w.try_wait()) {
                if out.status == 0 {
                    let code = out.stdout_str().trim().parse().unwrap_or(-1);
                    return Err(Error::DiedAtBoot { id: plan.id.to_string(), code, logs: self.logs(plan.id) });
                }
                // The watch itself failed: keep polling until the deadline.
                tracing::debug!(stderr = %out.stderr_str(), "docker wait failed");
                watcher = None;
            }
            if started.elapsed() >= plan.spec.socket_wait {
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

    fn logs(&self, id: &str) -> String {
        match self.exec.run(&argv::logs_tail(id)) {
            Ok(out) => format!("{}{}", out.stdout_str(), String::from_utf8_lossy(&out.stderr)),
            Err(e) => format!("(logs unavailable: {e})"),
        }
    }

    /// Undo a failed create. Runs to the end whatever fails or is signalled.
    fn teardown(&self, id: &str, dir: &Path) {
        match self.exec.run(&argv::remove(&[id])) {
            Ok(out) if out.status == 0 || parse::no_such_container(&out.stderr_str()) => {}
            Ok(out) => eprintln!("sbx: warning: could not remove {id}: {}", out.stderr_str()),
            Err(e) => eprintln!("sbx: warning: could not remove {id}: {e}"),
        }
        if let Err(e) = socket::remove_dir(dir, id) {
            eprintln!("sbx: warning: could not remove {}: {e}", dir.display());
        }
    }

    /// Inspect sandboxes by id. Missing ones are left out; a container sbx
    /// did not create is an error.
    fn inspect_many(&self, ids: &[String]) -> Result<Vec<RawContainer>> {
        let args = argv::inspect(ids);
        let out = self.exec.run(&args)?;
        let raws = record::parse_inspect(&out.stdout_str(), &argv_display(&args))?;
        if out.status != 0 {
            let missing = parse::missing_containers(ids, &out.stderr_str());
            if missing.len() + raws.len() != ids.len() {
                return Err(status_error(&args, &out).into());
            }
        }
        if let Some(foreign) = raws.iter().find(|r| !r.is_sbx()) {
            return Err(Error::Foreign { id: foreign.name.clone() });
        }
        Ok(raws)
    }

    pub fn inspect(&self, id: &str) -> Result<Record> {
        Ok(self.inspect_one(id)?.record())
    }

    fn inspect_one(&self, id: &str) -> Result<RawContainer> {
        self.inspect_many(&[id.to_string()])?.into_iter().next().ok_or_else(|| Error::NotFound { id: id.to_string() })
    }

    pub fn list(&self) -> Result<Vec<Record>> {
        let args = argv::list();
        let out = run_ok(&*self.exec, &args)?;
        let raws = record::parse_ps(&out.stdout_str(), "docker ps")?;
        Ok(raws.iter().filter(|r| r.is_sbx()).map(RawContainer::record).collect())
    }

    /// Remove sandboxes and their socket directories. Already gone is fine:
    /// scripts call this from `trap ... EXIT`, and two destroys may race.
    pub fn destroy(&self, ids: &[String]) -> Result<Destroyed> {
        let mut ids: Vec<String> = ids.to_vec();
        ids.dedup();
        let raws = self.inspect_many(&ids)?;
        let present: Vec<String> = raws.iter().map(|r| r.name.clone()).collect();
        if !present.is_empty() {
            let args = argv::remove(&present);
            let out = self.exec.run(&args)?;
            if out.status != 0 && parse::missing_containers(&present, &out.stderr_str()).len() != present.len() {
                let stderr = out.stderr_str();
                // Lines other than "no such container" are real failures.
                if stderr.lines().any(|l| !parse::no_such_container(l)) {
                    return Err(status_error(&args, &out).into());
                }
            }
        }
        for r in &raws {
            if let Some(dir) = r.labels.get(record::SOCKET).and_then(|s| Path::new(s).parent()) {
                socket::remove_dir(dir, &r.name)?;
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
        Ok(Destroyed { removed: present, already_gone })
    }

    pub fn revoke(&self, id: &str, kind: &str) -> Result<Revoked> {
        let raw = self.inspect_one(id)?;
        let declared = raw.declared_routes();
        let Some(network) = declared.get(kind).cloned() else {
            return Err(Error::UnknownRoute {
                id: id.to_string(),
                kind: kind.to_string(),
                routes: raw.record().routes.into_keys().collect(),
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
        Ok(Revoked { id: id.to_string(), kind: kind.to_string(), network, cut, already })
    }

    /// The socket path and the owners it may have, for `connect`.
    pub fn channel(&self, id: &str) -> Result<(PathBuf, Vec<u32>)> {
        let raw = self.inspect_one(id)?;
        if raw.state != "running" {
            return Err(Error::NotRunning { id: id.to_string(), state: raw.state });
        }
        let rec = raw.record();
        let uid = rec.user.split(':').next().and_then(|u| u.parse().ok());
        Ok((PathBuf::from(rec.socket), socket::allowed_owners(uid)))
    }
}

fn argv_display(args: &[std::ffi::OsString]) -> String {
    crate::docker::render(args)
}

fn status_error(args: &[std::ffi::OsString], out: &Output) -> DockerError {
    DockerError::Status { command: argv_display(args), status: out.status, stderr: out.stderr_str() }
}

/// Route networks in order, each once (two routes to one host share it).
fn unique_networks(spec: &SandboxSpec) -> Vec<String> {
    let mut seen = BTreeSet::new();
    spec.routes.iter().map(|r| r.network()).filter(|n| seen.insert(n.clone())).collect()
}

/// Never root unless asked for by `--user 0`; otherwise the image's numeric
/// non-root user, otherwise nobody.
fn choose_user(flag: Option<UserSpec>, image_user: &str, warnings: &mut Vec<String>) -> UserSpec {
    if let Some(u) = flag {
        if u.uid == 0 {
            warnings.push(
                "running as root inside the sandbox (--user 0): a kernel or runtime escape would start as root".into(),
            );
        }
        return u;
    }
    if let Some(u) = UserSpec::from_image(image_user) {
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

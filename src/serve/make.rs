//! Making one sandbox for a front end that is not the command line (`sbx
//! serve`'s create; `sbx mcp` calls the same): serve's create defaults
//! checked once at start ([`Defaults::new`], by `SandboxSpec::from_request`
//! as `sbx create` checks its flags), a template id resolved ([`template_for`]),
//! and [`make`]: a cold create from an image, idling, or a claim from a warm pool.
//!
//! A template's image is a plain image: sbx's helper idles as its main
//! process, never its ENTRYPOINT/CMD, and the sandbox is ready once it runs.
//! A warm pool's sandboxes are the pool's, made by `sbx pool create` with
//! its flags: they run the image's program, which binds sbx's socket as for
//! `sbx create`, and commands run beside it through `docker exec` the same
//! way. serve's own defaults never apply to them (the pool fixed them), as
//! with `create --pool`.

use std::collections::BTreeMap;
use std::time::Duration;

use hyper::StatusCode;

use super::http::Refusal;
use super::network::{resolve, Egress, NetworkAsk};
use super::Ops;
use crate::error::{Error, Result};
use crate::host::pool::Pool;
use crate::spec::egress::{AllowRule, Mode};
use crate::spec::{CreateRequest, ImageRef, SandboxSpec};

/// A create body, checked; Err is the 4xx to answer, before anything is made.
#[derive(Debug, PartialEq)]
pub struct NewSandbox {
    pub template: String,
    pub timeout_secs: u64,
    pub env: Vec<(String, String)>,
    pub metadata: BTreeMap<String, String>,
    /// `network` and `allow_internet_access`, checked for shape only here.
    pub network: NetworkAsk,
}

/// An image id that only stands in for the templates' when the defaults are checked.
const PROBE_IMAGE: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// serve's create flags, the environment's defaults folded in, checked.
#[derive(Debug, Clone)]
pub struct Defaults {
    pub request: CreateRequest,
    /// Its `--allow` rules, parsed: what every sandbox may reach.
    pub rules: Vec<AllowRule>,
    /// `--allow-internet`: a create may ask for observe mode.
    pub allow_internet: bool,
    pub docker_host: Option<String>,
}

impl Defaults {
    /// Checked as `sbx create` would check them with a template's image. The
    /// gate's own flags (`--egress-network`, `--egress-dns`) may come
    /// without `--allow`: they then configure the gate of a sandbox whose
    /// create asks for one, and are checked as such.
    pub fn new(request: CreateRequest, allow_internet: bool, docker_host: Option<&str>) -> Result<Defaults> {
        let gate_flags = request.egress_dns.is_some() || request.egress_network.is_some() || request.allow_unsafe_cidr;
        let probe = CreateRequest {
            image: PROBE_IMAGE.into(),
            socket_wait: Some("0".into()),
            egress: (request.allow.is_empty() && gate_flags).then_some(Mode::Observe),
            ..request.clone()
        };
        SandboxSpec::from_request(&probe, docker_host)?;
        let rules = request
            .allow
            .iter()
            .map(|a| AllowRule::parse(a, request.allow_unsafe_cidr))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Defaults { request, rules, allow_internet, docker_host: docker_host.map(str::to_string) })
    }

    /// The egress a create or an update asking `ask` gives a sandbox.
    pub fn egress_for(&self, ask: &NetworkAsk) -> std::result::Result<Egress, Refusal> {
        resolve(&self.rules, self.request.allow_unsafe_cidr, self.allow_internet, ask)
    }

    /// One sandbox's create request: these defaults, the template's image,
    /// the create's timeout, env (a name it sets replaces the default's) and egress.
    pub fn request_for(&self, image: &ImageRef, new: &NewSandbox, egress: &Egress) -> CreateRequest {
        let mut req = self.request.clone();
        req.image = image.as_str().to_string();
        req.env.retain(|kv| {
            let name = kv.split_once('=').map_or(kv.as_str(), |(k, _)| k);
            !new.env.iter().any(|(k, _)| k == name)
        });
        req.env.extend(new.env.iter().map(|(k, v)| format!("{k}={v}")));
        req.ttl = Some(format!("{}s", new.timeout_secs));
        req.socket_wait = Some("0".into());
        req.allow = egress.rules.iter().map(ToString::to_string).collect();
        req.egress = (egress.mode == Mode::Observe).then_some(Mode::Observe);
        if !egress.gated() {
            // They configure a gate this sandbox does not get.
            req.egress_dns = None;
            req.egress_network = None;
            req.allow_unsafe_cidr = false;
        }
        req
    }
}

/// What an E2B template id names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Template {
    /// A `--template NAME=IMAGE`, or an image pinned by digest itself.
    Image(ImageRef),
    /// A warm pool of this data dir (`sbx pool create`).
    Pool(String),
    /// A snapshot this server took (`POST /sandboxes/{id}/snapshots`):
    /// checkpoint `name` of sandbox `sandbox`, which may be gone.
    Snapshot { sandbox: String, name: String },
}

/// The prefix of the checkpoints E2B's `create_snapshot` makes: only those
/// are template ids, never a checkpoint an operator made with the CLI.
pub const SNAPSHOT_PREFIX: &str = "e2b-";

/// A snapshot's E2B id: `SANDBOX.CHECKPOINT`, decoded without an index
/// (a sandbox id holds no `.`).
pub fn snapshot_id(sandbox: &str, name: &str) -> String {
    format!("{sandbox}.{name}")
}

/// The sandbox and checkpoint a snapshot id names, when it has that shape.
pub fn parse_snapshot_id(id: &str) -> Option<(&str, &str)> {
    let (sandbox, name) = id.split_once('.')?;
    let ok = crate::spec::parse_id(sandbox).is_ok()
        && name.starts_with(SNAPSHOT_PREFIX)
        && crate::host::checkpoints::valid_name(name);
    ok.then_some((sandbox, name))
}

/// A `--template` first, then a warm pool of that name, then a snapshot
/// this server took, then an image pinned by digest; anything else is a 404.
pub fn template_for(
    ops: &Ops,
    templates: &BTreeMap<String, ImageRef>,
    id: &str,
) -> std::result::Result<Template, Refusal> {
    let state = ops.driver.state().map_err(failed)?;
    if let Some((sandbox, name)) = parse_snapshot_id(id).filter(|_| !templates.contains_key(id)) {
        let store = crate::host::checkpoints::Store::at(&state.state.dir);
        return match store.get(sandbox, name) {
            Some(_) => Ok(Template::Snapshot { sandbox: sandbox.into(), name: name.into() }),
            None => Err(Refusal(StatusCode::NOT_FOUND, format!("snapshot '{id}' not found"))),
        };
    }
    template_of(templates, id, |name| Pool::at(&state.state.dir, name).exists())
        .ok_or_else(|| Refusal(StatusCode::NOT_FOUND, format!("template '{id}' not found")))
}

/// [`template_for`], with `is_pool` saying which pools exist.
pub fn template_of(
    templates: &BTreeMap<String, ImageRef>,
    id: &str,
    is_pool: impl Fn(&str) -> bool,
) -> Option<Template> {
    if let Some(image) = templates.get(id) {
        return Some(Template::Image(image.clone()));
    }
    if id.parse::<crate::model::names::PoolName>().is_ok() && is_pool(id) {
        return Some(Template::Pool(id.to_string()));
    }
    ImageRef::parse(id).ok().map(Template::Image)
}

/// A sandbox made: its id and what E2B reports of its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    pub id: String,
    pub cpu_count: u32,
    pub memory_mb: u64,
}

fn failed(e: Error) -> Refusal {
    Refusal(super::answer::status_of(&e), e.to_string())
}

/// Make the sandbox `new` asks for from `template`, on this worker thread;
/// its TTL watchdog started. Err is the answer, with nothing left behind.
pub fn make(
    ops: &Ops,
    defaults: &Defaults,
    template: &Template,
    new: &NewSandbox,
) -> std::result::Result<Made, Refusal> {
    match template {
        Template::Image(image) => {
            let egress = defaults.egress_for(&new.network)?;
            let req = defaults.request_for(image, new, &egress);
            let mut spec = SandboxSpec::from_request(&req, defaults.docker_host.as_deref())
                .map_err(|e| Refusal::bad(e.to_string()))?;
            spec.idle = true;
            create(ops, &spec)
        }
        Template::Pool(name) => claim(ops, defaults, name, new),
        Template::Snapshot { sandbox, name } => from_snapshot(ops, defaults, sandbox, name, new),
    }
}

/// `sbx fork SANDBOX --from NAME` of one child, its TTL the create's
/// timeout. The child carries on from the snapshot's memory, environment
/// included: envVars and network options are refused, as for a pool.
fn from_snapshot(
    ops: &Ops,
    defaults: &Defaults,
    sandbox: &str,
    name: &str,
    new: &NewSandbox,
) -> std::result::Result<Made, Refusal> {
    if !new.env.is_empty() || !new.network.is_empty() {
        return Err(Refusal::bad(format!(
            "template '{}' is a snapshot: a sandbox made from it carries on from its memory, environment \
             included, so envVars and network options cannot be given at create; pass envs to each command",
            snapshot_id(sandbox, name)
        )));
    }
    let made =
        ops.driver.fork(sandbox, 1, Some(name), Default::default(), defaults.docker_host.as_deref()).map_err(failed)?;
    let Some(c) = made.into_iter().next() else {
        return Err(Refusal(StatusCode::INTERNAL_SERVER_ERROR, "fork made no sandbox".into()));
    };
    let id = c.record.id.clone();
    let ttl = Duration::from_secs(new.timeout_secs);
    match ops.driver.set_ttl(&id, ttl) {
        Ok((_, Some(watched))) => {
            if let Err(e) = (ops.watchdog)(&id, &watched) {
                tracing::warn!(error = %e, %id, "no TTL watchdog; `sbx gc` still reaps it once expired");
            }
        }
        Ok((_, None)) => {}
        Err(e) => {
            let _ = ops.driver.destroy(std::slice::from_ref(&id));
            return Err(failed(e));
        }
    }
    Ok(Made { id, cpu_count: 1, memory_mb: c.record.memory_mib.unwrap_or_default() })
}

/// `sbx create` of `spec`, its watchdog started.
fn create(ops: &Ops, spec: &SandboxSpec) -> std::result::Result<Made, Refusal> {
    let created = ops.driver.create(spec).map_err(failed)?;
    let id = created.record.id.clone();
    if created.record.expires_at.is_some() {
        if let Err(e) = (ops.watchdog)(&id, &created.watched) {
            tracing::warn!(error = %e, %id, "no TTL watchdog; `sbx gc` still reaps it once expired");
        }
    }
    Ok(Made { id, cpu_count: cpu_count(spec.cpus.as_deref()), memory_mb: spec.memory_mib.unwrap_or_default() })
}

/// E2B counts whole CPUs: a limit of 1.5 is 2.
fn cpu_count(cpus: Option<&str>) -> u32 {
    cpus.and_then(|c| c.parse::<f64>().ok()).map_or(1, |c| c.ceil().max(1.0) as u32)
}

/// `sbx create --pool NAME --ttl TIMEOUT`: a ready member, else a cold
/// create from the pool's spec; the refiller started either way. A member
/// runs already, so nothing of it can change at create: envVars and
/// network options are refused (the pool's flags fixed them).
fn claim(ops: &Ops, defaults: &Defaults, name: &str, new: &NewSandbox) -> std::result::Result<Made, Refusal> {
    if !new.env.is_empty() || !new.network.is_empty() {
        return Err(Refusal::bad(format!(
            "template '{name}' is a warm pool: its sandboxes are made ahead with the pool's flags, \
             so envVars and network options cannot be given at create; pass envs to each command, \
             or make a pool with the flags you need (`sbx pool create`)"
        )));
    }
    let state = ops.driver.state().map_err(failed)?;
    let pool = Pool::at(&state.state.dir, name);
    let spec = ops.driver.pool_spec(&pool).map_err(failed)?;
    // A runtime serve was told to use must not be bypassed by a pool made under another.
    if let Some(want) = defaults.request.runtime.as_deref() {
        let have = spec.request.runtime.as_deref().unwrap_or(crate::model::runtime::DEFAULT);
        if want != have {
            return Err(Refusal::bad(format!(
                "warm pool '{name}' runs its sandboxes under {have}, and this sbx serve under {want}"
            )));
        }
    }
    let ttl = Duration::from_secs(new.timeout_secs);
    let (cpus, memory) = (cpu_count(spec.request.cpus.as_deref()), spec.request.memory_mib.unwrap_or_default());
    let claimed = ops.driver.claim(&pool, None, Some(ttl)).map_err(failed)?;
    let Some(c) = claimed else {
        (ops.refill)(&pool);
        tracing::info!(pool = name, "no ready sandbox in the pool; creating one from its spec");
        let cold = CreateRequest { ttl: Some(format!("{}s", new.timeout_secs)), ..spec.request };
        let spec = SandboxSpec::from_request(&cold, defaults.docker_host.as_deref())
            .map_err(|e| Refusal::bad(e.to_string()))?;
        return create(ops, &spec);
    };
    if c.expires {
        if let Err(e) = (ops.watchdog)(&c.id, &c.watched) {
            tracing::warn!(error = %e, id = %c.id, "no TTL watchdog; `sbx gc` still reaps it once expired");
        }
    }
    let done = ops.driver.claim_done(&pool, &c);
    (ops.refill)(&pool);
    if let Err(e) = done {
        let _ = ops.driver.destroy(std::slice::from_ref(&c.id));
        return Err(failed(e));
    }
    Ok(Made { id: c.id, cpu_count: cpus, memory_mb: memory })
}

//! `sbx pool create|ls|fill|rm`, `sbx create --pool NAME` (the claim) and
//! the detached refiller `sbx __pool-fill NAME`.

use std::time::Duration;

use serde::Serialize;

use super::Context;
use crate::cli::{PoolAction, PoolCreateArgs};
use crate::error::{Error, Invalid, Result, SandboxError};
use crate::host::env::Dirs;
use crate::host::pool::{Pool, PoolSpec};
use crate::model::names::PoolName;
use crate::spec::CreateRequest;

pub fn exec(action: PoolAction, ctx: &Context) -> Result<()> {
    match action {
        PoolAction::Create(a) => create(*a, ctx),
        PoolAction::Ls => ls(ctx),
        PoolAction::Fill(a) => fill(&a.name, ctx),
        PoolAction::Rm(a) => rm(&a.name, ctx),
    }
}

/// The refiller: top up under the pool's lock; failures land in its status for `pool ls`.
pub fn refill(name: &PoolName, ctx: &Context) -> Result<()> {
    let pool = open(name, ctx)?;
    ctx.driver.fill_pool(&pool, ctx.env.docker_host.as_deref())
}

/// The pool, once sbx drives its engine (else exit 2, nothing done).
fn open(name: &PoolName, ctx: &Context) -> Result<Pool> {
    let name = name.to_string();
    let state = ctx.driver.state()?;
    let pool = Pool::at(&state.state.dir, &name);
    if !pool.exists() {
        return Err(Error::Sandbox(SandboxError::NoPool { name }));
    }
    ctx.driver.pool_spec(&pool)?;
    Ok(pool)
}

/// The flags of `req` that differ from their defaults, except `allowed`
/// (field names), as the command line spells them.
pub(super) fn given_flags(req: &CreateRequest, allowed: &[&str]) -> Vec<String> {
    let (Ok(serde_json::Value::Object(given)), Ok(serde_json::Value::Object(default))) =
        (serde_json::to_value(req), serde_json::to_value(CreateRequest::default()))
    else {
        return Vec::new();
    };
    given
        .iter()
        .filter(|(k, v)| !allowed.contains(&k.as_str()) && default.get(*k) != Some(v))
        .map(|(k, _)| match k.as_str() {
            "routes" => "--route".to_string(),
            "labels" => "--label".to_string(),
            "memory_mib" => "--memory".to_string(),
            "command" => "-- CMD".to_string(),
            k => format!("--{}", k.replace('_', "-")),
        })
        .collect()
}

/// The environment's defaults, as `create` folds them in.
pub(super) fn with_env(mut req: CreateRequest, ctx: &Context) -> Result<CreateRequest> {
    req.strict_egress |= ctx.env.strict_egress;
    if req.seccomp_profile.is_none() {
        req.seccomp_profile = ctx.env.seccomp_profile.clone();
    }
    if req.runtime.is_none() {
        req.runtime = ctx.env.runtime.clone();
    }
    if let (None, Some(v)) = (req.pull, ctx.env.pull.as_deref()) {
        req.pull = Some(crate::spec::PullPolicy::from_env(v)?);
    }
    super::create::fold_memory(&mut req, ctx)?;
    Ok(req)
}

fn create(a: PoolCreateArgs, ctx: &Context) -> Result<()> {
    let name = a.name.to_string();
    const ONE_SESSION: &[&str] = &["--session", "--ttl", "--persist", "--clone", "--setup", "--pool", "--no-fallback"];
    let session_only: Vec<String> =
        given_flags(&a.request, &[]).into_iter().filter(|f| ONE_SESSION.contains(&f.as_str())).collect();
    if !session_only.is_empty() {
        return Err(Invalid::new(
            "pool create",
            session_only.join(" "),
            "these belong to one session, not to every sandbox of the pool",
        )
        .hint(format!("give them when claiming: `sbx create --pool {name} --session KEY --ttl 30m`"))
        .into());
    }
    if let Some(flag) = given_flags(&a.request, &[])
        .into_iter()
        .find(|f| ["--secret", "--secret-prefix", "--egress-ca"].contains(&f.as_str()))
    {
        return Err(Invalid::new(
            "pool create",
            flag,
            "a pool's members are made later, by a refill whose environment and files are not this command's, \
             and one value would be shared by every member",
        )
        .hint("create a sandbox with secrets on its own: `sbx create --secret NAME@HOST=env:VAR ...`")
        .into());
    }
    let max_idle_secs = a.max_idle.as_deref().map(|d| crate::spec::parse_duration("--max-idle", d)).transpose()?;
    if max_idle_secs.is_some_and(|d| d.is_zero()) {
        return Err(Invalid::new("--max-idle", "0", "a member would be recycled as soon as it is ready").into());
    }
    let req = with_env(a.request, ctx)?;
    let engine = ctx.driver.engine()?.clone();
    // Paths of this machine mean nothing to a remote engine (as `create`).
    crate::spec::refuse_host_paths(&req, &engine)?;
    let state = ctx.driver.state()?;
    let pool = Pool::at(&state.state.dir, &name);
    // Validated now, as `create` would (exit 2 before anything is recorded).
    crate::sandbox::pool::sandbox_spec(&pool, &req, ctx.env.docker_host.as_deref())?;
    let spec = PoolSpec {
        size: a.size,
        max_idle_secs: max_idle_secs.map(|d| d.as_secs().max(1)),
        request: req,
        // The default engine is recorded as nothing, as pools before it were.
        engine: (!engine.default).then(|| engine.endpoint.clone()),
        context: engine.context.clone(),
    };
    if !pool.create(&spec)? {
        let on = pool.spec().map(|s| format!(" (on the engine at {})", s.endpoint())).unwrap_or_default();
        return Err(Invalid::new("pool name", name.clone(), format!("a pool of that name exists{on}"))
            .hint(format!("pick another name, or `sbx pool rm {name}` first (driving that engine)"))
            .into());
    }
    (ctx.catch_signals)();
    let filled = ctx.driver.fill_pool(&pool, ctx.env.docker_host.as_deref());
    if let Err(e) = filled {
        if pool.ready().is_empty() {
            // Not one member could be made: the spec is wrong for this engine.
            let _ = ctx.driver.pool_rm(&pool);
            return Err(e);
        }
        ctx.out.warn("pool_fill", &format!("pool {name} filled only partly: {e}; `sbx pool fill {name}` retries"));
    }
    if ctx.json() {
        ctx.out.json_line(&row(&pool, &[]))
    } else {
        ctx.out.data(&format!("{name}\n"))
    }
}

/// One pool, as `pool ls` reports it.
#[derive(Debug, Serialize)]
struct Row {
    name: String,
    size: u32,
    ready: usize,
    filling: u32,
    failed: u32,
    last_error: Option<String>,
    max_idle: Option<String>,
    /// Memory of the ready members, as docker reports it (without page cache).
    idle_memory_bytes: u64,
}

fn row(pool: &Pool, stats: &[crate::docker::parse::Stats]) -> Row {
    let spec = pool.spec().ok();
    let status = pool.status();
    let ready = pool.ready();
    Row {
        name: pool.name.clone(),
        size: spec.as_ref().map(|s| s.size).unwrap_or_default(),
        ready: ready.len(),
        filling: if pool.filling() { status.filling } else { 0 },
        failed: status.failed,
        last_error: status.last_error,
        max_idle: spec
            .and_then(|s| s.max_idle_secs)
            .map(|d| humantime::format_duration(Duration::from_secs(d)).to_string()),
        idle_memory_bytes: stats.iter().filter(|s| ready.contains(&s.id)).map(|s| s.memory_bytes).sum(),
    }
}

fn ls(ctx: &Context) -> Result<()> {
    let state = ctx.driver.state()?;
    let endpoint = ctx.driver.engine()?.endpoint.clone();
    // Only this engine's pools: another's members are not where `docker stats` looks.
    let (pools, elsewhere): (Vec<Pool>, Vec<Pool>) = crate::host::pool::all(&state.state.dir)
        .into_iter()
        .partition(|p| p.spec().is_ok_and(|s| s.endpoint() == endpoint));
    for p in &elsewhere {
        let on = p.spec().map(|s| s.endpoint().to_string()).unwrap_or_default();
        ctx.out.note(
            "pool_elsewhere",
            &format!(
                "pool {} is on the engine at {on}, not {endpoint}: `sbx pool ls` driving that engine lists it",
                p.name
            ),
        );
    }
    let ready: Vec<String> = pools.iter().flat_map(Pool::ready).collect();
    let stats = if ready.is_empty() {
        Vec::new()
    } else {
        crate::workbench::stats::stats_present(ctx.driver.docker(), &ready)?.0
    };
    let rows: Vec<Row> = pools.iter().map(|p| row(p, &stats)).collect();
    if ctx.json() {
        return ctx.out.json_line(&rows);
    }
    let mut text = String::from("POOL\tSIZE\tREADY\tFILLING\tFAILED\tIDLE MEMORY\tLAST ERROR\n");
    for r in &rows {
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            r.name,
            r.size,
            r.ready,
            r.filling,
            r.failed,
            mib(r.idle_memory_bytes),
            r.last_error.as_deref().map(crate::model::text::inert_chars).unwrap_or_else(|| "-".into())
        ));
    }
    ctx.out.data(&text)
}

fn mib(b: u64) -> String {
    format!("{:.1}MiB", b as f64 / (1024.0 * 1024.0))
}

fn fill(name: &PoolName, ctx: &Context) -> Result<()> {
    let pool = open(name, ctx)?;
    (ctx.catch_signals)();
    ctx.driver.fill_pool(&pool, ctx.env.docker_host.as_deref())?;
    if ctx.json() {
        ctx.out.json_line(&row(&pool, &[]))
    } else {
        ctx.out.data(&format!("{}\t{} ready\n", pool.name, pool.ready().len()))
    }
}

fn rm(name: &PoolName, ctx: &Context) -> Result<()> {
    let pool = open(name, ctx)?;
    (ctx.catch_signals)();
    let removed = ctx.driver.pool_rm(&pool)?;
    if ctx.json() {
        ctx.out.json_line(&serde_json::json!({"pool": pool.name, "removed": removed}))
    } else {
        Ok(())
    }
}

/// `sbx create --pool NAME`: claim a ready member (no docker call), or
/// create one cold from the pool's spec.
pub fn claim(req: CreateRequest, ctx: &Context) -> Result<()> {
    let name: PoolName = req.pool.as_deref().unwrap_or_default().parse()?;
    let fixed = given_flags(&req, &["session", "ttl", "pool", "no_fallback"]);
    if !fixed.is_empty() {
        return Err(Invalid::new("create --pool", fixed.join(" "), "the pool fixes these for its sandboxes")
            .hint("give only --session and --ttl with --pool, or create without --pool")
            .into());
    }
    let session = req.session.as_deref().map(crate::spec::parse_session).transpose()?;
    let ttl = req.ttl.as_deref().map(crate::spec::parse_ttl).transpose()?;
    let pool = open(&name, ctx)?;
    // SBX_RUNTIME set host-wide (say, for a kernel of the sandbox's own) must
    // not quietly hand out a sandbox of a pool made under another runtime.
    if let Some(want) = ctx.env.runtime.as_deref() {
        let have = pool.spec()?.request.runtime.unwrap_or_else(|| crate::model::runtime::DEFAULT.into());
        if want != have {
            return Err(Invalid::new("SBX_RUNTIME", want, format!("pool {name} runs its sandboxes under {have}"))
                .hint(format!("unset SBX_RUNTIME for this claim, or claim from a pool made with --runtime {want}"))
                .into());
        }
    }
    (ctx.catch_signals)();
    let claimed = ctx.driver.claim(&pool, session.as_deref(), ttl)?;
    let Some(c) = claimed else {
        ensure_refiller(&pool, &ctx.dirs);
        if req.no_fallback {
            return Err(Error::Sandbox(SandboxError::PoolEmpty { name: name.to_string() }));
        }
        ctx.out.note("pool_fallback", &format!("pool {name} has no ready sandbox; creating one from its spec"));
        let spec = pool.spec()?;
        let cold = CreateRequest { session: req.session, ttl: req.ttl, ..spec.request };
        return super::create::exec(cold, ctx);
    };
    if c.expires {
        if let Err(e) = super::watchdog::spawn(&c.id, &c.watched, &ctx.dirs) {
            ctx.out.warn(
                "ttl_watchdog",
                &format!("could not start the TTL watchdog ({e}); run `sbx gc` from cron to enforce TTLs"),
            );
        }
    }
    let printed = if ctx.json() {
        ctx.out.json_line(&c.created)
    } else {
        // As `create` prints them: what the member's create warned about still holds.
        for w in &c.created.warnings {
            ctx.out.warn("warning", w);
        }
        ctx.out.data(&format!("{}\n", c.id))
    };
    printed?;
    ctx.driver.claim_done(&pool, &c)?;
    ensure_refiller(&pool, &ctx.dirs);
    Ok(())
}

/// One refiller per pool: start one unless one holds the pool's lock (a
/// second that races in finds the lock taken and exits at once).
pub(super) fn ensure_refiller(pool: &Pool, dirs: &Dirs) {
    if pool.filling() {
        return;
    }
    let _ = spawn_refiller(&pool.name, dirs);
}

/// Detached like the TTL watchdog: its own session, no terminal or pipes,
/// so `$(sbx create --pool ...)` returns at once.
fn spawn_refiller(name: &str, dirs: &Dirs) -> Result<()> {
    let args = [std::ffi::OsStr::new("__pool-fill"), std::ffi::OsStr::new(name)];
    super::watchdog::spawn_detached(&args, dirs, "starting the pool's refiller")
}

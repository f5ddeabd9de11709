//! Warm pools (`sbx pool`): members are made by [`Driver::create`] from the
//! pool's spec, recorded ready on the host (`host::pool`), and claimed
//! without a docker call: a rename wins the member, /proc and the socket's
//! owner say it is still alive, the claim record holds the session. On a
//! remote engine the claim spends one docker call instead (`remote`).

pub mod remote;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::docker::parse::{self, MainState, RawContainer};
use crate::docker::{argv, run_ok};
use crate::error::{DockerError, Error, Result};
use crate::host::pool::{unix_now, Member, Pool, Status};
use crate::host::state::{self, Claim, ProcId, State};
use crate::model::record;
use crate::sandbox::shared::members::{alive, claimer_alive, is_remote};
use crate::sandbox::{Driver, HostState};
use crate::spec::{CreateRequest, SandboxSpec};

/// A claim still in progress: the caller prints it, then calls [`Driver::claim_done`].
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: String,
    /// `create --json`'s object, with this claim's session and expiry.
    pub created: crate::host::pool::CreatedJson,
    /// What its TTL watchdog watches (`Driver::watched`).
    pub watched: PathBuf,
    pub expires: bool,
    pub by: ProcId,
}

/// How old a pool file of a sandbox gone from `docker ps` must be before gc
/// forgets it: the filler writes it after the container exists, so a fresh
/// one may be newer than gc's `docker ps`.
const SETTLE: Duration = Duration::from_secs(30);

/// Failed creates in a row before a refiller gives up until the next claim or fill.
const MAX_FAILURES: u32 = 3;

/// The pool's spec, validated as `create` validates its flags.
pub fn sandbox_spec(pool: &Pool, req: &CreateRequest, docker_host: Option<&str>) -> Result<SandboxSpec> {
    let mut spec = SandboxSpec::from_request(req, docker_host)?;
    spec.pool = Some(pool.name.clone());
    Ok(spec)
}

impl Driver {
    /// Claim a ready member of `pool`: None when there is none. No docker
    /// call on a local engine; one per member tried on a remote one.
    pub fn claim(&self, pool: &Pool, session: Option<&str>, ttl: Option<Duration>) -> Result<Option<Claimed>> {
        let remote = is_remote(&self.pool_spec(pool)?);
        let HostState { state, .. } = self.state()?;
        // Start 0 (no /proc) never matches a live process: gc would take the claim for dead.
        let me = ProcId::current().unwrap_or(ProcId { pid: std::process::id() as i32, start: 0 });
        let mut ready = pool.ready();
        // Concurrent claimers start at different members, so most win their first rename.
        if !ready.is_empty() {
            let at = rand::random::<usize>() % ready.len();
            ready.rotate_left(at);
        }
        for id in ready {
            if !pool.take(&id, me)? {
                continue;
            }
            let member = match pool.taken(&id, me) {
                Some(m) if m.id == id => m,
                _ => {
                    pool.give_up(&id, me);
                    continue;
                }
            };
            let alive = match remote {
                false => alive(&member),
                true => match self.remote_alive(&pool.name, std::slice::from_ref(&member)) {
                    Ok(live) => !live.is_empty(),
                    // Unknown is not dead: the member stays for the next claim.
                    Err(e) => {
                        pool.put_back(&id, me);
                        return Err(e);
                    }
                },
            };
            // Dead: the refiller or gc removes it.
            if !alive {
                pool.give_up(&id, me);
                continue;
            }
            let claim = Claim {
                pool: pool.name.clone(),
                session: session.map(str::to_string),
                pid: me.pid,
                start: me.start,
                complete: false,
            };
            state.set_claim(&id, &claim)?;
            let mut created = member.created.clone();
            created.session = session.unwrap_or(&id).to_string();
            if let Some(t) = ttl {
                let at = SystemTime::now() + t;
                state.set_expiry(&id, at)?;
                created.expires_at = Some(humantime::format_rfc3339_millis(at).to_string());
            }
            let watched = self.watched(state, &id)?;
            return Ok(Some(Claimed { id, created, watched, expires: ttl.is_some(), by: me }));
        }
        Ok(None)
    }

    /// The id was handed out: the claim is complete.
    pub fn claim_done(&self, pool: &Pool, c: &Claimed) -> Result<()> {
        let HostState { state, .. } = self.state()?;
        if let Some(mut claim) = state.claim(&c.id) {
            claim.complete = true;
            state.set_claim(&c.id, &claim)?;
        }
        pool.drop_taken(&c.id, c.by);
        Ok(())
    }

    /// Make one member and record it ready; returns its id.
    pub fn fill_one(&self, pool: &Pool, spec: &SandboxSpec) -> Result<String> {
        let created = self.create(spec)?;
        let id = created.record.id.clone();
        let recorded = self.member_of(pool, &created).and_then(|m| {
            // `pool rm` while it was made: it is nobody's.
            if !pool.exists() {
                return Err(Error::Sandbox(crate::error::SandboxError::NoPool { name: pool.name.clone() }));
            }
            pool.add_ready(&m)
        });
        if let Err(e) = recorded {
            let _ = self.destroy(std::slice::from_ref(&id));
            return Err(e);
        }
        Ok(id)
    }

    fn member_of(&self, _pool: &Pool, created: &crate::sandbox::Created) -> Result<Member> {
        if self.engine()?.is_remote() {
            return self.remote_member_of(created);
        }
        let id = &created.record.id;
        let args = argv::running_pid(id);
        let out = run_ok(&*self.docker, &args)?;
        let pid = match parse::main_state(&out.stdout_str()) {
            MainState::Running(pid) => pid,
            _ => {
                return Err(DockerError::Parse {
                    command: crate::docker::render(&args),
                    reason: format!("the new pool member is not running: {:?}", out.stdout_str().trim()),
                }
                .into())
            }
        };
        let start = state::start_time(pid)
            .ok_or_else(|| Error::io(format!("reading /proc/{pid}/stat"), std::io::ErrorKind::NotFound.into()))?;
        let uid = created.record.user.split(':').next().and_then(|u| u.parse().ok()).unwrap_or(crate::spec::NOBODY);
        let socket = (created.record.channel == crate::host::channel::Kind::Direct)
            .then(|| PathBuf::from(&created.record.socket));
        let json = serde_json::to_value(created)
            .and_then(serde_json::from_value)
            .map_err(|e| Error::io("encoding the member's create result", std::io::Error::other(e)))?;
        Ok(Member { id: id.clone(), socket, uid, pid, start, ready_at: unix_now(), created: json, remote: None })
    }

    /// Members to recycle now: found dead by a claim, no longer alive, or
    /// idle longer than max-idle. Each is first moved to `dead/`, so no claim can win it.
    /// A remote pool's members are judged by one inspect of them all;
    /// when the engine does not answer, none is taken for dead.
    pub fn pool_stale(&self, pool: &Pool, max_idle: Option<Duration>) -> Vec<String> {
        let now = unix_now();
        let members: Vec<(String, Option<Member>)> =
            pool.ready().into_iter().map(|id| (id.clone(), pool.member("ready", &id))).collect();
        let live = match pool.spec() {
            Ok(spec) if is_remote(&spec) => {
                let known: Vec<Member> = members.iter().filter_map(|(_, m)| m.clone()).collect();
                Some(
                    self.remote_alive(&pool.name, &known)
                        .unwrap_or_else(|_| known.iter().map(|m| m.id.clone()).collect()),
                )
            }
            _ => None,
        };
        for (id, m) in members {
            let stale = match m {
                Some(m) => {
                    let dead = live.as_ref().map_or_else(|| !alive(&m), |l| !l.contains(&m.id));
                    dead || max_idle.is_some_and(|d| now.saturating_sub(m.ready_at) > d.as_secs())
                }
                None => true,
            };
            if stale {
                pool.shift(&id, "ready", "dead");
            }
        }
        pool.dead()
    }

    /// Destroy members in `dead/` and forget them.
    pub fn pool_recycle(&self, pool: &Pool, max_idle: Option<Duration>) -> Result<Vec<String>> {
        let dead = self.pool_stale(pool, max_idle);
        if dead.is_empty() {
            return Ok(dead);
        }
        self.destroy(&dead)?;
        for id in &dead {
            pool.drop_member("dead", id);
        }
        Ok(dead)
    }

    /// Top the pool up to its size, one member at a time (engine work paced),
    /// holding its lock; returns at once when another refiller holds it.
    pub fn fill_pool(&self, pool: &Pool, docker_host: Option<&str>) -> Result<()> {
        self.pool_spec(pool)?;
        let Some(_lock) = pool.try_lock()? else { return Ok(()) };
        let mut status = pool.status();
        status.failed = 0;
        let result = self.fill_locked(pool, docker_host, &mut status);
        status.filling = 0;
        if let Err(e) = &result {
            status.last_error = Some(e.to_string());
        }
        if pool.exists() {
            pool.set_status(&status);
        }
        result
    }

    fn fill_locked(&self, pool: &Pool, docker_host: Option<&str>, status: &mut Status) -> Result<()> {
        let mut bar = crate::output::progress();
        loop {
            if !pool.exists() {
                return Ok(());
            }
            let ps = pool.spec()?;
            let max_idle = ps.max_idle_secs.map(Duration::from_secs);
            self.pool_recycle(pool, max_idle)?;
            let ready = pool.ready().len() as u32;
            if ready >= ps.size {
                return Ok(());
            }
            status.filling = ps.size - ready;
            pool.set_status(status);
            bar.update(&format!("pool {}: {ready}/{} ready, making one", pool.name, ps.size));
            let spec = sandbox_spec(pool, &ps.request, docker_host)?;
            match self.fill_one(pool, &spec) {
                Ok(_) => {
                    status.failed = 0;
                }
                Err(e) => {
                    status.failed += 1;
                    status.last_error = Some(e.to_string());
                    pool.set_status(status);
                    if status.failed >= MAX_FAILURES {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// The pool's members on the engine, claimed or not, from one `docker ps`.
    pub fn pool_members(&self, name: &str) -> Result<Vec<RawContainer>> {
        let out = run_ok(&*self.docker, &argv::list())?;
        let HostState { key, .. } = self.state()?;
        let all = parse::parse_ps(&out.stdout_str(), "docker ps")?;
        self.prune_uids(&all);
        Ok(all
            .into_iter()
            .filter(|r| r.is_sbx(key) && r.labels.get(record::POOL).map(String::as_str) == Some(name))
            .collect())
    }

    /// Forget the pool and destroy its unclaimed members; claimed ones stay.
    /// Returns the destroyed ids.
    pub fn pool_rm(&self, pool: &Pool) -> Result<Vec<String>> {
        let HostState { state, .. } = self.state()?;
        self.pool_spec(pool)?;
        // The spec goes first: no claim, refiller or fill starts on it after this.
        let _ = std::fs::remove_file(pool.dir.join("spec.json"));
        // A claimer that opened the pool before that may still rename a ready
        // member: win each one first (the same rename), so what is destroyed
        // below can no longer be handed out.
        for id in pool.ready() {
            pool.shift(&id, "ready", "dead");
        }
        let members = self.pool_members(&pool.name)?;
        // Taken by a live claimer that has not yet written its claim record.
        let taking: Vec<String> =
            pool.claimed().into_iter().filter(|(_, by)| by.is_alive()).map(|(id, _)| id).collect();
        let unclaimed: Vec<String> = members
            .iter()
            .map(|r| r.name.clone())
            .filter(|id| !taking.contains(id))
            .filter(|id| state.claim(id).is_none_or(|c| !c.complete && !claimer_alive(&c)))
            .collect();
        if !unclaimed.is_empty() {
            self.destroy(&unclaimed)?;
        }
        pool.forget();
        Ok(unclaimed)
    }

    /// Pool files whose sandbox is gone (after gc's removals).
    /// Also the claimed-file of a claim that completed (its id was handed
    /// out) but whose claimer died before removing it: the sandbox is the
    /// caller's now, an ordinary one.
    /// `removed`: sandboxes this gc removed, whose files go at once (the
    /// settle time is for files newer than gc's `docker ps`).
    /// Only members `mine` (attributed to the engine gc asked, see
    /// `State::belongs`): another engine's are alive where gc did not look.
    pub fn pool_forget_gone(
        &self,
        state: &State,
        alive_ids: &[String],
        removed: &[String],
        mine: &dyn Fn(&str) -> bool,
    ) {
        for pool in crate::host::pool::all(&state.dir) {
            for (id, by) in pool.claimed() {
                if !by.is_alive() && state.claim(&id).is_some_and(|c| c.complete) {
                    pool.drop_taken(&id, by);
                }
            }
            let taken =
                pool.claimed().into_iter().map(|(id, by)| (id.clone(), format!("{id}.{}.{}", by.pid, by.start)));
            let files = pool.ready().into_iter().map(|id| ("ready", id.clone(), id));
            let files = files
                .chain(pool.dead().into_iter().map(|id| ("dead", id.clone(), id)))
                .chain(taken.map(|(id, file)| ("claimed", id, file)));
            for (place, id, file) in files.filter(|(_, id, _)| mine(id)) {
                let settled = pool.moved_ago(place, &file).is_some_and(|d| d > SETTLE);
                if removed.contains(&id) || (!alive_ids.contains(&id) && settled) {
                    pool.drop_member(place, &file);
                }
            }
        }
    }
}

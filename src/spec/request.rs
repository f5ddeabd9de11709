//! The create request: `sbx create`'s options exactly as clap parses them
//! (this struct is flattened into the subcommand, so its doc comments are
//! the help text), and the one step that validates them into a
//! [`SandboxSpec`].

// Field doc comments here are clap's help text, in its notation ([:GID],
// <64 hex>), not rustdoc links.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::collections::BTreeSet;

use super::*;

/// Raw, unvalidated create options as they come from the command line;
/// `SBX_STRICT_EGRESS` and `SBX_SECCOMP_PROFILE` are folded in by the command.
/// Serialized as a pool's spec (`sbx pool create`), re-validated by
/// [`SandboxSpec::from_request`] whenever the pool is filled.
#[derive(Debug, Clone, Default, clap::Args, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct CreateRequest {
    /// Image pinned by digest: repo[:tag]@sha256:<64 hex> or sha256:<64 hex>.
    /// Refused if it carries a label starting with `sbx.`.
    /// Its HEALTHCHECK never runs; each VOLUME is a tmpfs (together 1/8 of --memory; a VOLUME
    /// or WORKDIR in /proc, /sys, /dev or below sbx's mounts is refused, exit 2).
    // Not required with --pool; a default never satisfies clap's `required`.
    #[arg(long, value_name = "IMAGE", required_unless_present = "pool", default_value = "", hide_default_value = true)]
    pub image: String,
    /// Claim a ready sandbox from the warm pool NAME (`sbx pool create`) instead of
    /// making one (a few ms, no docker call; only --session and --ttl may be given too);
    /// with no ready member, a cold create from the pool's spec (said on stderr).
    #[arg(long, value_name = "NAME")]
    pub pool: Option<String>,
    /// With --pool: exit 1 when no member is ready instead of a cold create.
    #[arg(long, requires = "pool")]
    pub no_fallback: bool,
    /// Session key recorded on the sandbox [default: the sandbox id].
    #[arg(long, value_name = "KEY")]
    pub session: Option<String>,
    /// Route KIND:TARGET (e.g. inference:proxy:8080): joins network sbx-<host>. Repeatable.
    #[arg(long = "route", value_name = "KIND:TARGET")]
    pub routes: Vec<String>,
    /// Bind-mount HOST read-only at SANDBOX (default: the same path); not /proc, /sys, /dev,
    /// engine socket directories, a socket or a device. Repeatable.
    #[arg(long, value_name = "HOST[:SANDBOX]")]
    pub ro: Vec<String>,
    /// Bind-mount HOST read-write at SANDBOX (default: the same path). Repeatable.
    #[arg(long, value_name = "HOST[:SANDBOX]")]
    pub rw: Vec<String>,
    /// Host directory mounted at /state instead of a tmpfs.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<String>,
    /// Memory limit in MiB (swap is not added on top); every tmpfs and /dev/shm is a share
    /// of it (59% together), so a full /tmp fails with ENOSPC, e.g. --memory 512
    /// [default: an eighth of a local engine's RAM, 256 to 4096; 4096 on a remote engine].
    #[arg(long = "memory", value_name = "MIB")]
    pub memory_mib: Option<u64>,
    /// CPU limit, e.g. 1.5 [default: 1].
    #[arg(long, value_name = "N")]
    pub cpus: Option<String>,
    /// Process limit [default: 512]; under runsc at least 128 (it counts gVisor's own threads too).
    #[arg(long, value_name = "N")]
    pub pids: Option<u32>,
    /// Environment variable K=V for the sandbox (SBX_* is reserved). Repeatable.
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// Label K=V added to the container (sbx.* is reserved). Repeatable.
    #[arg(long = "label", value_name = "K=V")]
    pub labels: Vec<String>,
    /// Numeric UID[:GID] [default: a uid (= gid) of the sandbox's own from sbx's range
    /// 1879048192-1895825407, shown by `inspect` and `create --json`; the image's USER is not used]. Group 0 only
    /// when given here (UID:0), with a warning. Never your uid, your groups, the docker
    /// socket's group or an id in sbx's range. E.g. --user 1000 to write a --rw dir of uid 1000.
    #[arg(long, value_name = "UID[:GID]")]
    pub user: Option<String>,
    /// How long to wait for the sandbox to bind its socket; 0 returns once it runs [default: 90s].
    #[arg(long, value_name = "DURATION")]
    pub socket_wait: Option<String>,
    /// Destroy the sandbox after DURATION (e.g. 90s, 30m, 2h), even after sbx and the shell exit.
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
    /// Keep /state in the session's named volume (needs --session): a new sandbox for
    /// the same session continues where the last left off. `destroy --purge` removes it.
    #[arg(long)]
    pub persist: bool,
    /// With --persist: the most the session's /state holds on the host, e.g. 512MiB,
    /// 4GiB (16MiB to 16TiB) [default: 2GiB]; a write past it fails with ENOSPC inside.
    /// As root with a local engine it is a file system of the session's own. Where sbx
    /// cannot enforce one (not root, or a remote engine) --persist is refused unless
    /// this is `unbounded`, which `sbx audit` then fails. A larger size than the
    /// session's grows it; a smaller one is refused.
    #[arg(long, value_name = "SIZE|unbounded", requires = "persist")]
    pub persist_size: Option<String>,
    /// Clone URL[#REF] on the host into /state/workspace before the sandbox starts
    /// (needs --persist or --state-dir; on a remote engine --persist, the clone copied
    /// into the session's volume there; skipped when the workspace already has files,
    /// refused when it is a symlink or not a directory).
    #[arg(long, value_name = "URL[#REF]")]
    pub clone: Option<String>,
    /// Run CMD (split into words, never through a shell) in the ready sandbox; in order,
    /// repeatable. A failing one fails the create and removes the sandbox.
    #[arg(long, value_name = "CMD")]
    pub setup: Vec<String>,
    /// Give each route its own internal network, with no host address, where HOST is
    /// sbx's forwarder relaying only the route's PORT to the service (the container
    /// named HOST, never a sandbox): tier 2. Each route must name its port.
    /// Removed with the sandbox.
    #[arg(long)]
    pub private_routes: bool,
    /// Refuse, instead of lowering the tier, when a route reaches more than its target.
    #[arg(long)]
    pub strict_egress: bool,
    /// Seccomp profile FILE (Docker's JSON format) instead of sbx's own; `unconfined` is
    /// refused, and `sbx audit` then fails the sandbox's sbx.seccomp rule. [env: SBX_SECCOMP_PROFILE]
    #[arg(long, value_name = "FILE")]
    pub seccomp_profile: Option<String>,
    /// How sbx reaches the sandbox's socket: `direct` (connect to it on the host),
    /// `exec` (relay through `docker exec` and sbx's helper; /run/sandbox is then a
    /// 1 MiB tmpfs inside the sandbox), or `auto`: direct as root, exec otherwise.
    #[arg(long, value_name = "auto|direct|exec", value_enum, default_value_t)]
    pub channel: crate::model::channel::Choice,
    /// Let the sandbox reach HOST (port 443 unless given) through its egress gate, a proxy
    /// sbx runs beside it; `*.example.com` matches subdomains only, CIDR:PORT literal
    /// addresses (the Docker host's own only by a /32 or /128 naming it). Repeatable.
    /// The sandbox gets HTTP(S)_PROXY/ALL_PROXY; nothing else leaves.
    #[arg(long = "allow", value_name = "HOST[:PORT]")]
    pub allow: Vec<String>,
    /// A credential the sandbox never holds: it gets NAME=<placeholder>, and its gate
    /// terminates TLS for HOST (port 443 unless given) and puts the value read from
    /// SOURCE (`env:VAR` of sbx's environment, or `file:PATH` only its owner can read)
    /// into HEADER [default: Authorization] where the placeholder stands: `Bearer <ph>`,
    /// `<ph>`, or `Basic base64(user:<ph>)`. Implies --allow HOST:PORT. Repeatable.
    #[arg(long = "secret", value_name = "NAME@HOST[:PORT][/HEADER]=SOURCE")]
    pub secret: Vec<String>,
    /// Start every placeholder with PREFIX (e.g. `sk-`), for clients that check it.
    #[arg(long, value_name = "PREFIX")]
    pub secret_prefix: Option<String>,
    /// A CA (PEM FILE) the gate also trusts when it re-originates TLS to a terminated
    /// host, beside this machine's trust store: for private endpoints.
    #[arg(long, value_name = "FILE")]
    pub egress_ca: Option<String>,
    /// `enforce` the --allow list, or `observe`: allow every name, log it, and let
    /// `sbx egress policy` print the --allow flags it saw [default: enforce].
    #[arg(long, value_name = "enforce|observe", value_enum)]
    pub egress: Option<super::egress::Mode>,
    /// The resolver the egress gate asks for allowed names [default: the engine's].
    #[arg(long, value_name = "IP")]
    pub egress_dns: Option<String>,
    /// The network the egress gate reaches out through [default: sbx-egress-net, made
    /// once per host with inter-container traffic off].
    #[arg(long, value_name = "NAME")]
    pub egress_network: Option<String>,
    /// Let a CIDR --allow rule name loopback, link-local or multicast addresses (the
    /// gate itself, the cloud metadata service, Azure's host endpoint).
    #[arg(long)]
    pub allow_unsafe_cidr: bool,
    /// The engine's OCI runtime to run the sandbox under: `runsc` (gVisor) gives it a
    /// kernel of its own, for ~1.5x runc's start time and ~1.1-1.2x per exec; it must be
    /// registered with the engine (`sbx doctor --runtime NAME` says how)
    /// [env: SBX_RUNTIME] [default: runc].
    #[arg(long, value_name = "NAME")]
    pub runtime: Option<String>,
    /// Make a sandbox that `sbx checkpoint`, `fork` and `hibernate` can save with its
    /// memory: it runs under gVisor registered as `runsc-snap` (`--network=none`: no
    /// routes, no egress gate, no secrets, no --persist) and takes the relayed channel.
    /// `--runtime NAME` names another registration of that shape.
    #[arg(long)]
    pub snapshots: bool,
    /// `missing`: an image pinned as repo@sha256:<digest> that the engine lacks is pulled
    /// by that digest first (progress on stderr when it is a terminal); `never`: fail and
    /// say which `docker pull` to run. An image id (sha256:<64 hex> alone) is never pulled
    /// [env: SBX_PULL] [default: missing].
    #[arg(long, value_name = "missing|never", value_enum)]
    pub pull: Option<PullPolicy>,
    /// The command to run in the sandbox (default: the image's).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

impl SandboxSpec {
    /// `docker_host` is `$DOCKER_HOST`, so a socket there is refused as a mount too.
    pub fn from_request(req: &CreateRequest, docker_host: Option<&str>) -> Result<Self, Invalid> {
        let image = ImageRef::parse(&req.image)?;
        let session = req.session.as_deref().map(parse_session).transpose()?;
        let routes = routes_of(req)?;
        let sockets = docker_socket_paths(docker_host);
        let mounts = mounts_of(req, &sockets)?;
        let state_dir = req.state_dir.as_deref().map(|d| MountSpec::state_dir(d, &sockets)).transpose()?;
        let (cpus, pids) = limits_of(req)?;
        let env = req.env.iter().map(|e| parse_env(e)).collect::<Result<_, _>>()?;
        let user = user_of(req, &mounts, state_dir.is_some())?;
        let socket_wait = match &req.socket_wait {
            Some(w) => parse_duration("--socket-wait", w)?,
            None => DEFAULT_SOCKET_WAIT,
        };
        let labels = req.labels.iter().map(|l| parse_label(l)).collect::<Result<_, _>>()?;
        let ttl = req.ttl.as_deref().map(parse_ttl).transpose()?;
        let (persist_size, clone) = persistence_of(req, session.is_some(), state_dir.is_some())?;
        let setup = req.setup.iter().map(|c| parse_setup(c)).collect::<Result<_, _>>()?;
        let seccomp_profile = req.seccomp_profile.as_deref().map(super::seccomp::check_custom).transpose()?;
        let egress = egress_of(req)?;
        let runtime = match req.snapshots {
            true => parse_runtime(Some(req.runtime.as_deref().unwrap_or(crate::model::runtime::SNAPSHOTS)))?,
            false => parse_runtime(req.runtime.as_deref())?,
        };
        let channel = snapshot_limits(req, &runtime)?;
        let snapshots = req.snapshots || runtime == crate::model::runtime::SNAPSHOTS;
        let remake = snapshots.then(|| serde_json::to_string(req).unwrap_or_default());
        Ok(SandboxSpec {
            image,
            session,
            routes,
            mounts,
            state_dir,
            memory_mib: Some(req.memory_mib.unwrap_or(DEFAULT_MEMORY_MIB)),
            cpus: Some(cpus),
            pids,
            env,
            user,
            socket_wait,
            strict_egress: req.strict_egress,
            labels,
            ttl,
            private_routes: req.private_routes,
            persist: req.persist,
            persist_size,
            clone,
            setup,
            command: req.command.clone(),
            seccomp_profile,
            channel,
            egress,
            runtime,
            pull: req.pull.unwrap_or_default(),
            pool: None,
            idle: false,
            remake,
            restore: None,
        })
    }
}

/// A sandbox that can be checkpointed (`--snapshots`, or the runtime sbx
/// registers for it) has no network and no host-backed socket: runsc
/// 20221219 cannot save a sandbox on hostinet or one holding a host unix
/// socket (gvisor#10897). What needs either is refused here; the channel
/// is the relayed one.
fn snapshot_limits(req: &CreateRequest, runtime: &str) -> Result<crate::model::channel::Choice, Invalid> {
    use crate::model::channel::Choice;
    if !req.snapshots && runtime != crate::model::runtime::SNAPSHOTS {
        return Ok(req.channel);
    }
    let why = "a sandbox that can be checkpointed runs under gVisor with no network \
               (runsc 20221219 cannot save one on the host's network stack; a newer gVisor lifts it)";
    let refused = |flag: &'static str, given: bool| given.then_some(flag);
    let flag = refused("--route", !req.routes.is_empty())
        .or_else(|| refused("--allow", !req.allow.is_empty()))
        .or_else(|| refused("--secret", !req.secret.is_empty()))
        .or_else(|| refused("--egress", req.egress.is_some()))
        .or_else(|| refused("--private-routes", req.private_routes));
    if let Some(flag) = flag {
        return Err(Invalid::new(flag, "", why).hint("drop it, or create the sandbox without --snapshots"));
    }
    if req.persist {
        return Err(Invalid::new(
            "--persist",
            "",
            "a checkpoint saves the sandbox's memory and its own file systems; a persistent /state is a host \
             volume that would change under a restored sandbox",
        )
        .hint("keep the work in /state (a tmpfs, saved with the checkpoint), or drop --snapshots"));
    }
    match req.channel {
        Choice::Direct => Err(Invalid::new(
            "--channel",
            "direct",
            "the direct channel's socket is backed by the host, and gVisor cannot save one (gvisor#10897)",
        )
        .hint("leave --channel out: a sandbox with --snapshots takes the relayed channel")),
        _ => Ok(Choice::Exec),
    }
}

/// `--route`s, each parsed, of distinct kinds; with `--private-routes`
/// each names the one port the forwarder relays.
fn routes_of(req: &CreateRequest) -> Result<Vec<Route>, Invalid> {
    let mut routes = Vec::with_capacity(req.routes.len());
    let mut kinds = BTreeSet::new();
    for r in &req.routes {
        let route = Route::parse(r)?;
        if !kinds.insert(route.kind.clone()) {
            return Err(Invalid::new("route", r, format!("the kind {:?} is given twice", route.kind))
                .hint("give each route a distinct KIND"));
        }
        // The forwarder relays exactly the route's port: it must have one.
        if req.private_routes && route.port_or_default().is_none() {
            return Err(Invalid::new("route", r, "with --private-routes a route names the one port sbx relays")
                .hint("give the port: KIND:HOST:PORT, or an http(s):// URL"));
        }
        routes.push(route);
    }
    Ok(routes)
}

/// `--ro` then `--rw`, none of them a docker socket, no two at one path.
fn mounts_of(req: &CreateRequest, sockets: &[std::path::PathBuf]) -> Result<Vec<MountSpec>, Invalid> {
    let mut mounts = Vec::new();
    for m in &req.ro {
        mounts.push(MountSpec::parse(m, true, sockets)?);
    }
    for m in &req.rw {
        mounts.push(MountSpec::parse(m, false, sockets)?);
    }
    let mut targets = BTreeSet::new();
    for m in &mounts {
        if !targets.insert(m.sandbox.clone()) {
            return Err(Invalid::new("mount", m.sandbox.clone(), "two mounts target the same sandbox path"));
        }
    }
    Ok(mounts)
}

/// `--memory` within docker's range, `--cpus` and `--pids` (defaults filled in).
fn limits_of(req: &CreateRequest) -> Result<(String, u32), Invalid> {
    if let Some(m) = req.memory_mib {
        if !(6..=16 * 1024 * 1024).contains(&m) {
            return Err(Invalid::new(
                "--memory",
                m.to_string(),
                "it must be between 6 and 16777216 MiB (docker's minimum is 6)",
            ));
        }
    }
    let cpus = parse_cpus(req.cpus.as_deref().unwrap_or(DEFAULT_CPUS))?;
    let pids = req.pids.unwrap_or(DEFAULT_PIDS);
    if pids == 0 {
        return Err(Invalid::new("--pids", "0", "a sandbox needs at least one process"));
    }
    if pids > MAX_PIDS {
        return Err(Invalid::new("--pids", pids.to_string(), format!("the kernel allows at most {MAX_PIDS}")));
    }
    Ok((cpus, pids))
}

/// `--user`, outside sbx's range, and never root with a writable host mount.
fn user_of(req: &CreateRequest, mounts: &[MountSpec], state_dir: bool) -> Result<Option<UserSpec>, Invalid> {
    let user =
        req.user.as_deref().map(UserSpec::parse).transpose()?.map(|u| u.outside_sbx_range("--user")).transpose()?;
    // Root's links in a writable host mount would be root's own, the one
    // owner `sbx cp` follows a link of (see `workbench::transfer::host`).
    if user.is_some_and(|u| u.uid == 0) && (!mounts.iter().all(|m| m.readonly) || state_dir) {
        return Err(Invalid::new(
            "--user",
            req.user.clone().unwrap_or_default(),
            "a sandbox running as root makes what it writes in a --rw or --state-dir mount root's, \
             links included, and root's links are the ones sbx cp follows on the host",
        )
        .hint("mount the directory --ro, or run the sandbox as another uid (--user UID)"));
    }
    Ok(user)
}

/// `--persist` (with a session, not with `--state-dir`), `--persist-size`,
/// and `--clone` (only into a /state on the host).
fn persistence_of(
    req: &CreateRequest,
    session: bool,
    state_dir: bool,
) -> Result<(Option<PersistSize>, Option<CloneSpec>), Invalid> {
    if req.persist && !session {
        return Err(Invalid::new("--persist", "", "a persistent /state belongs to a session").hint("add --session KEY"));
    }
    if req.persist && state_dir {
        return Err(Invalid::new("--persist", "", "--persist and --state-dir both choose what /state is; pick one"));
    }
    let persist_size = req.persist_size.as_deref().map(PersistSize::parse).transpose()?;
    let clone = req.clone.as_deref().map(CloneSpec::parse).transpose()?;
    if clone.is_some() && !req.persist && !state_dir {
        return Err(Invalid::new(
            "--clone",
            req.clone.clone().unwrap_or_default(),
            "the workspace must be on the host to be filled before the sandbox starts",
        )
        .hint("add --persist (with --session) or --state-dir DIR"));
    }
    Ok((persist_size, clone))
}

/// The egress gate's flags: `--allow` and `--egress` make it; the others
/// only configure it, so alone they are refused.
fn egress_of(req: &CreateRequest) -> Result<Option<super::egress::EgressSpec>, Invalid> {
    let secrets = super::egress::parse_secrets(&req.secret)?;
    // Each secret's host is allowed: the value is no use where it cannot go.
    let mut allow = req.allow.clone();
    allow.extend(secrets.iter().map(|s| format!("{}:{}", s.host, s.port)));
    let mut egress = super::egress::EgressSpec::from_flags(
        &allow,
        req.egress,
        req.egress_dns.as_deref(),
        req.egress_network.as_deref(),
        req.allow_unsafe_cidr,
    )?;
    if egress.is_none() && (req.egress_dns.is_some() || req.egress_network.is_some() || req.allow_unsafe_cidr) {
        let flag = if req.egress_dns.is_some() {
            "--egress-dns"
        } else if req.egress_network.is_some() {
            "--egress-network"
        } else {
            "--allow-unsafe-cidr"
        };
        return Err(Invalid::new(
            flag,
            "",
            "it configures the egress gate, which only --allow or --egress observe makes",
        )
        .hint("add --allow HOST[:PORT] (or --egress observe)"));
    }
    if let Some(n) = req.egress_network.as_deref() {
        check_network_name(n)?;
    }
    match egress.as_mut() {
        Some(e) => e.add_secrets(secrets, req.secret_prefix.as_deref(), req.egress_ca.as_deref())?,
        None => {
            let lone = [("--secret-prefix", &req.secret_prefix), ("--egress-ca", &req.egress_ca)];
            if let Some((flag, Some(v))) = lone.into_iter().find(|(_, v)| v.is_some()) {
                return Err(Invalid::new(
                    flag,
                    v.as_str(),
                    "it configures the egress gate's secrets, and there is no --secret",
                )
                .hint("add --secret NAME@HOST=env:VAR (or leave the flag out)"));
            }
        }
    }
    Ok(egress)
}

/// `--runtime NAME` (create and doctor), runc when not given: a name as
/// daemon.json's runtime keys look, never an option.
pub fn parse_runtime(name: Option<&str>) -> Result<String, Invalid> {
    let name = name.unwrap_or(crate::model::runtime::DEFAULT);
    if !crate::model::runtime::valid_name(name) {
        return Err(Invalid::new("--runtime", name, "a runtime name is letters, digits, '.', '_', '-'")
            .hint("name one that `docker info` lists under Runtimes, e.g. runsc"));
    }
    Ok(name.to_string())
}

/// `--egress-network NAME`: a docker network name, never an option, and not a
/// network sbx makes per sandbox or `none`/`host` (the gate must reach out
/// through a bridge).
fn check_network_name(n: &str) -> Result<(), Invalid> {
    let ok = !n.is_empty()
        && n.len() <= 128
        && n.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !ok {
        return Err(Invalid::new("--egress-network", n, "a network name is letters, digits, '.', '_', '-'"));
    }
    if ["none", "host", "bridge"].contains(&n) || parse_id(n.get(..16).unwrap_or("")).is_ok() {
        return Err(Invalid::new(
            "--egress-network",
            n,
            "the gate needs a user-defined bridge network of its own, not `none`, `host`, `bridge` or a sandbox's network",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

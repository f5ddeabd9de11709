//! `sbx create`: validate, build the sandbox, wait for its socket, print its id.

use crate::cli::CreateArgs;
use crate::error::Result;
use crate::spec::{CreateRequest, SandboxSpec};
use crate::{host::interrupt, Dirs, Env};

pub fn exec(a: CreateArgs, json: bool, env: &Env, dirs: &Dirs) -> Result<()> {
    let req = CreateRequest {
        image: a.image,
        session: a.session,
        routes: a.routes,
        ro: a.ro,
        rw: a.rw,
        state_dir: a.state_dir,
        memory_mib: a.memory,
        cpus: a.cpus,
        pids: a.pids,
        env: a.env,
        user: a.user,
        socket_wait: a.socket_wait,
        strict_egress: a.strict_egress || env.strict_egress,
        labels: a.labels,
        ttl: a.ttl,
        private_routes: a.private_routes,
        persist: a.persist,
        clone: a.clone,
        setup: a.setup,
        command: a.command,
        seccomp_profile: a.seccomp_profile.or_else(|| env.seccomp_profile.clone()),
        channel: a.channel,
    };
    let spec = SandboxSpec::from_request(&req, env.docker_host.as_deref())?;
    // From here on a signal must not kill sbx before it has cleaned up.
    interrupt::install();
    let created = crate::real_driver(env, dirs).create(&spec)?;
    if created.record.expires_at.is_some() {
        if let Err(e) =
            super::watchdog::spawn(&created.record.id, &created.socket_dir.join(crate::host::socket::SOCKET_NAME), dirs)
        {
            // The sandbox stands; `sbx gc` still reaps it once expired.
            crate::messages::warn(
                "ttl_watchdog",
                &format!("could not start the TTL watchdog ({e}); run `sbx gc` from cron to enforce TTLs"),
            );
        }
    }
    // Under --json they are in the result object already (issue 10 item 6).
    if !json {
        for w in &created.warnings {
            super::warn(w);
        }
    }
    if json {
        super::json_line(&created)
    } else {
        super::out(&format!("{}\n", created.record.id))
    }
}

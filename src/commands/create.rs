//! `sbx create`: validate, build the sandbox, wait for its socket, print its id.

use std::path::PathBuf;

use crate::cli::CreateArgs;
use crate::error::Result;
use crate::spec::{CreateRequest, SandboxSpec};
use crate::{interrupt, Env};

pub fn exec(a: CreateArgs, json: bool, env: &Env, socket_dir: Option<PathBuf>) -> Result<()> {
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
        command: a.command,
    };
    let spec = SandboxSpec::from_request(&req, env.docker_host.as_deref())?;
    // From here on a signal must not kill sbx before it has cleaned up.
    interrupt::install();
    let created = crate::real_driver(env, socket_dir).create(&spec)?;
    for w in &created.warnings {
        super::warn(w);
    }
    if json {
        super::json_line(&created)
    } else {
        super::out(&format!("{}\n", created.id))
    }
}

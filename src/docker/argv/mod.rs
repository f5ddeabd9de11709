//! Pure builders for every docker argv sbx runs. No I/O here: each function
//! maps typed, validated input to the exact argument vector, so the vectors
//! are tested on their own. Values a user controls come after `--` wherever
//! the subcommand allows it, so none can be read as an option.
//!
//! One file per area: `run` (the sandbox's `docker run`/`create`),
//! `lifecycle` (containers by id), `events` (the event stream), `network`, `volume`, `exec` (exec, logs,
//! stats), `image` (images and the engine), `gate` (the egress gate), `forward` (a private route's forwarder), `probe` (audit's
//! status probe), `remote` (a remote engine's helper volume), `remote_state` (a remote
//! session's /state). Callers use the flat
//! `argv::NAME` paths re-exported here.

use std::ffi::OsString;

mod events;
mod exec;
mod forward;
mod gate;
mod image;
mod lifecycle;
mod network;
mod probe;
pub mod remote;
pub mod remote_state;
mod run;
mod volume;

pub use crate::model::paths::{SANDBOX_SOCKET, SANDBOX_SOCKET_DIR};
pub use events::{events, exit_state};
pub use exec::{exec, helper_connect, helper_probe_socket, logs, stats, ExecOpts};
pub use forward::{forward_run, forwarders, ForwardPlan};
pub use gate::{
    egress_network_create, egress_networks, gate_create, gate_run, gate_vault, gates, host_addrs_run, GatePlan,
    PolicySource,
};
pub use image::{
    context_host, context_show, engine_id, engine_time, experimental, image_labels, image_user, import, info_os,
    ps_quiet, pull, remove_images, repo_digests, runtimes, security_options, version,
};
pub use lifecycle::{
    checkpoint_create, checkpoint_rm, inspect, list, pause, remove, root_dir, running_pid, start, start_checkpoint,
    state, stop, unpause, wait_exit, LOG_TAIL,
};
pub use network::{
    network_connect, network_connect_alias, network_disconnect, network_inspect, network_members, network_remove,
    private_network, private_networks,
};
pub use probe::{audit_probe, audit_probes, ProbePlan};
pub use run::{container, egress_network, mode_name, secrets_label, RunPlan, TrustPlan};
pub use volume::{session_volumes, volume_create, volume_inspect, volume_remove, volume_users};

/// `["a", "b"]` as an argv.
pub fn os<S: AsRef<str>>(v: &[S]) -> Vec<OsString> {
    v.iter().map(|s| OsString::from(s.as_ref())).collect()
}

/// `head` then `tail`, e.g. a fixed subcommand and the ids it acts on.
pub fn with_tail<S: AsRef<str>>(head: &[&str], tail: &[S]) -> Vec<OsString> {
    let mut v = os(head);
    v.extend(tail.iter().map(|s| OsString::from(s.as_ref())));
    v
}

/// An argv as strings, for comparing with a literal in the tests.
#[cfg(test)]
fn strs(v: Vec<OsString>) -> Vec<String> {
    v.into_iter().map(|s| s.into_string().unwrap()).collect()
}

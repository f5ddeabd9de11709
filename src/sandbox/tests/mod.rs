//! The driver through the recording fake: exact calls, every failure path,
//! and what each failure cleans up; one file per operation, sharing [`Rig`].

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::docker::Output;
use crate::error::{DockerError, Error, SocketError};
use crate::host::socket;
use crate::host::state;
use crate::model::record;
use crate::sandbox::testing::{Rig, ID, IMG, MOUNTINFO, UID, USER};
use crate::spec::{CreateRequest, SandboxSpec};

/// `docker network inspect` lines as NETWORK_FORMAT prints them.
fn net_line(name: &str, internal: bool, inhibit: bool) -> String {
    let opts = if inhibit { r#"{"com.docker.network.bridge.inhibit_ipv4":"true"}"# } else { "{}" };
    format!("[{name:?},{internal},\"bridge\",{opts},{{}}]\n")
}

/// What only the driver's tests script.
impl Rig {
    /// `docker container inspect` of sandbox `name` (labelled `labels_id`)
    /// with a socket label, on `networks`.
    fn inspect_line(&self, name: &str, labels_id: &str, networks: &[&str]) -> String {
        let labels = serde_json::json!({
            "sbx.managed": "1",
            "sbx.id": labels_id,
            "sbx.routes": "{\"inference\":\"sbx-proxy\",\"tools\":\"sbx-proxy\",\"docs\":\"sbx-docs\"}",
            "sbx.socket": self.root.join(name).join("sandbox.sock").display().to_string(),
            "sbx.user": "65534:65534",
        });
        self.container_line(name, labels, networks)
    }

    fn image(&self, user: &str) {
        self.fake.push(Output::ok(&format!("[{user:?},{{\"org.opencontainers.image.title\":\"x\"}},null,\"\"]\n")));
    }

    fn removed(&self) {
        self.fake.push(Output::ok(&format!("{ID}\n")));
    }
}

/// A running route service as `docker container inspect` shows it: no sbx labels.
fn service_line(name: &str) -> String {
    serde_json::json!({"Name": format!("/{name}"), "State": {"Status": "running"},
        "Config": {"Labels": {"com.example.role": "proxy"}}, "NetworkSettings": {"Networks": {"bridge": {}}}})
    .to_string()
}

fn spec(req: CreateRequest) -> SandboxSpec {
    SandboxSpec::from_request(&CreateRequest { image: IMG.into(), ..req }, None).unwrap()
}

fn routes(r: &[&str]) -> CreateRequest {
    CreateRequest { routes: r.iter().map(|s| s.to_string()).collect(), ..Default::default() }
}

/// `n` sandbox ids, each with a socket directory under the rig's root.
fn many(rig: &Rig, n: usize) -> Vec<String> {
    (1..=n)
        .map(|i| {
            let id = format!("sbx-{i:012x}");
            std::fs::create_dir_all(rig.root.join(&id)).unwrap();
            id
        })
        .collect()
}

mod create;
mod create_image;
mod destroy;
mod egress;
mod gc;
mod host_addrs;
mod lifecycle;
mod lookup;
mod pool;
mod pool_remote;
mod private;
mod pull;
mod remote;
mod remote_clone;
mod remote_persist;
mod remote_start;
mod rollback;
mod runtime;
mod secrets;
mod snapshot;

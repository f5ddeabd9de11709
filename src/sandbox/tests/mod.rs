//! The driver through the recording fake: exact calls, every failure path,
//! and what each failure cleans up; one file per operation, sharing [`Rig`].

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::docker::fake::FakeDocker;
use crate::docker::Output;
use crate::error::{DockerError, Error, SocketError};
use crate::host::socket::{self, RootChoice};
use crate::host::state::{self, State, StateChoice};
use crate::model::record;
use crate::spec::{CreateRequest, SandboxSpec};

const IMG: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const ID: &str = "sbx-00000000000f";

/// `docker network inspect` lines as NETWORK_FORMAT prints them.
fn net_line(name: &str, internal: bool, inhibit: bool) -> String {
    let opts = if inhibit { r#"{"com.docker.network.bridge.inhibit_ipv4":"true"}"# } else { "{}" };
    format!("[{name:?},{internal},\"bridge\",{opts},{{}}]\n")
}

struct Rig {
    fake: FakeDocker,
    root: PathBuf,
    state: PathBuf,
}

impl Rig {
    fn new() -> Self {
        let root = std::env::temp_dir().join(format!("sbx-drv-{}-{}", std::process::id(), rand::random::<u64>()));
        let state = root.with_extension("state");
        Rig { fake: FakeDocker::new(), root, state }
    }

    fn driver(&self) -> Driver {
        let roots = RootChoice {
            explicit: Some(self.root.clone()),
            xdg_runtime_dir: None,
            temp_dir: self.root.clone(),
            euid: 0,
        };
        let states = StateChoice { explicit: Some(self.state.clone()), xdg_state_home: None, home: None, euid: 0 };
        // The sandbox's mount table, as the kernel shows it on the host.
        let proc = self.root.with_extension("proc");
        std::fs::create_dir_all(proc.join("4242")).unwrap();
        std::fs::write(proc.join("4242/mountinfo"), MOUNTINFO).unwrap();
        Driver::new(Arc::new(self.fake.clone()), roots, states).with_ids(Arc::new(|| ID.to_string())).with_proc(proc)
    }

    /// The main process's pid, asked right after the start.
    fn running(&self) {
        self.fake.push(Output::ok("4242 running 0\n"));
    }

    fn token(&self, id: &str) -> String {
        std::fs::create_dir_all(&self.state).unwrap();
        state::owner_token(&self.state().key().unwrap(), id)
    }

    /// Labels as sbx writes them on a container: `sbx.owner` covers the rest.
    fn seal(&self, mut labels: serde_json::Value) -> serde_json::Value {
        std::fs::create_dir_all(&self.state).unwrap();
        let map: std::collections::BTreeMap<String, String> = serde_json::from_value(labels.clone()).unwrap();
        let id = map["sbx.id"].clone();
        labels["sbx.owner"] = state::record_token(&self.state().key().unwrap(), &id, &map).into();
        labels
    }

    fn state(&self) -> State {
        State::at(self.state.clone())
    }

    fn inspect_line(&self, name: &str, labels_id: &str, networks: &[&str]) -> String {
        let nets: serde_json::Map<String, serde_json::Value> =
            networks.iter().map(|n| (n.to_string(), serde_json::json!({}))).collect();
        serde_json::json!({
            "Name": format!("/{name}"),
            "State": {"Status": "running"},
            "Config": {"Labels": self.seal(serde_json::json!({
                "sbx.managed": "1",
                "sbx.id": labels_id,
                "sbx.routes": "{\"inference\":\"sbx-proxy\",\"tools\":\"sbx-proxy\",\"docs\":\"sbx-docs\"}",
                "sbx.socket": self.root.join(name).join("sandbox.sock").display().to_string(),
                "sbx.user": "65534:65534",
            }))},
            "NetworkSettings": {"Networks": nets},
        })
        .to_string()
    }

    fn sock_dir(&self) -> PathBuf {
        self.root.join(ID)
    }

    fn image(&self, user: &str) {
        self.fake.push(Output::ok(&format!("[{user:?},{{\"org.opencontainers.image.title\":\"x\"}}]\n")));
    }

    /// `docker run`/`start` succeeds and the "sandbox" binds its socket.
    fn starts_and_binds(&self) {
        let dir = self.sock_dir();
        self.fake.push_with(Output::ok("deadbeef\n"), move |_| {
            let l = UnixListener::bind(dir.join("sandbox.sock")).unwrap();
            std::mem::forget(l);
        });
        self.running();
    }

    fn removed(&self) {
        self.fake.push(Output::ok(&format!("{ID}\n")));
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // As root the socket directory is a tmpfs: unmounted by sbx's own removal.
        let _ = socket::remove_dir(&self.sock_dir(), ID);
        let _ = std::fs::remove_dir_all(&self.root);
        let _ = std::fs::remove_dir_all(&self.state);
        let _ = std::fs::remove_dir_all(self.root.with_extension("proc"));
    }
}

/// A running route service as `docker container inspect` shows it: no sbx labels.
fn service_line(name: &str) -> String {
    serde_json::json!({"Name": format!("/{name}"), "State": {"Status": "running"},
        "Config": {"Labels": {"com.example.role": "proxy"}}, "NetworkSettings": {"Networks": {"bridge": {}}}})
    .to_string()
}
/// Where a sandbox's mounts are when the image redirects nothing.
const MOUNTINFO: &str = "\
600 500 0:51 / / ro,relatime - overlay overlay rw
611 600 8:1 /tmp/root/sbx-00000000000f /run/sandbox rw,relatime - ext4 /dev/sda1 rw
612 600 8:1 /var/lib/sbx/helper/v-k /run/sbx ro,relatime - ext4 /dev/sda1 rw
";

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
mod destroy;
mod gc;
mod lookup;
mod private;
mod rollback;

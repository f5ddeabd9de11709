//! Test support (cfg(test) only): a [`Driver`] on the recording fake with a
//! socket root, state directory and /proc of its own, removed on drop.
//! Shared by the driver's tests (`sandbox/tests`) and the commands' tests
//! (`commands/tests`), which add their own helpers in `impl Rig` blocks.

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::Arc;

use super::Driver;
use crate::docker::fake::FakeDocker;
use crate::docker::Output;
use crate::host::socket::{self, RootChoice};
use crate::host::state::{self, State, StateChoice};

/// A pinned image reference.
pub const IMG: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// The id every sandbox the rig's driver creates gets.
pub const ID: &str = "sbx-00000000000f";
/// Where a sandbox's mounts are when the image redirects nothing.
pub const MOUNTINFO: &str = "\
600 500 0:51 / / ro,relatime - overlay overlay rw
611 600 8:1 /tmp/root/sbx-00000000000f /run/sandbox rw,relatime - ext4 /dev/sda1 rw
612 600 8:1 /var/lib/sbx/helper/v-k /run/sbx ro,relatime - ext4 /dev/sda1 rw
";

/// The user the rig's sbx runs as: uid [`CALLER`] in groups [`CALLER`] and
/// [`DOCKER_GID`], the docker socket's (fixed, so no test depends on who runs it).
pub const CALLER: u32 = 4321;
/// Where the rig's driver starts looking for a free uid in sbx's range.
pub const UID_START: u32 = 0x4242;
/// The first uid (and gid) the rig's driver hands out, the second is one more.
pub const UID: u32 = crate::model::ids::SBX_UID_BASE + UID_START;
/// [`UID`] as the `sbx.user` label and `--user` say it.
pub const USER: &str = "1879065154:1879065154";
pub const DOCKER_GID: u32 = 4999;

pub fn reserved() -> crate::model::ids::Reserved {
    let mut r = crate::model::ids::Reserved::default();
    r.uid(CALLER, "yours (the user running sbx)");
    r.gid(CALLER, "one of your groups (the user running sbx)");
    r.gid(DOCKER_GID, "the group of the docker socket /var/run/docker.sock (who may drive the engine)");
    r
}

pub struct Rig {
    pub fake: FakeDocker,
    /// The socket root: one directory per sandbox.
    pub root: PathBuf,
    pub state: PathBuf,
}

impl Rig {
    pub fn new() -> Self {
        let root = std::env::temp_dir().join(format!("sbx-rig-{}-{}", std::process::id(), rand::random::<u64>()));
        let state = root.with_extension("state");
        Rig { fake: FakeDocker::new(), root, state }
    }

    /// A driver on the fake whose new sandboxes are all [`ID`]; the sandbox's
    /// main process is pid 4242 with [`MOUNTINFO`] as its mount table.
    pub fn driver(&self) -> Driver {
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
        // A small stand-in for sbx's executable, packed into the egress gate's image.
        let exe = self.exe();
        Driver::new(Arc::new(self.fake.clone()), roots, states)
            .with_ids(Arc::new(|| ID.to_string()))
            .with_proc(proc)
            .with_exe(exe)
            .with_reserved(Arc::new(|_| reserved()))
            .with_uids(self.root.with_extension("uids"), Arc::new(|| UID_START))
    }

    /// The uids the driver's table holds, with what holds them.
    pub fn uids_held(&self) -> Vec<(u32, crate::host::uids::Holder)> {
        let file = self.root.with_extension("uids").join("uids.json");
        let entries: Vec<crate::host::uids::Entry> = match std::fs::read(file) {
            Ok(b) => serde_json::from_slice(&b).unwrap(),
            Err(_) => Vec::new(),
        };
        entries.into_iter().map(|e| (e.uid, e.holder)).collect()
    }

    /// The small stand-in for sbx's executable (written once: its identity
    /// is what sbx's own image is recorded under).
    pub fn exe(&self) -> PathBuf {
        let exe = self.root.with_extension("exe");
        if !exe.exists() {
            std::fs::write(&exe, b"sbx").unwrap();
        }
        exe
    }

    /// sbx's own image recorded as imported on the default engine as `id`,
    /// so the driver runs it with no docker call.
    pub fn self_image_recorded(&self, id: &str) {
        self.self_image_recorded_at(crate::model::engine::DEFAULT_ENDPOINT, id);
    }

    /// [`Rig::self_image_recorded`] for the engine at `endpoint`.
    pub fn self_image_recorded_at(&self, endpoint: &str, id: &str) {
        let place = crate::host::self_image::Place { dir: &self.state, endpoint };
        crate::host::self_image::record_for_test(place, &self.exe(), "ENGINE:ONE", id);
    }

    pub fn state(&self) -> State {
        State::at(self.state.clone())
    }

    /// Record sandbox `id` as made here on container `container`, its
    /// socket directory under the rig's root (what create records).
    pub fn record_container(&self, id: &str, container: &str) {
        let rec = state::SandboxRecord {
            container: container.to_string(),
            socket_dir: self.root.join(id),
            private: vec![],
            volume: None,
            session: None,
            gate: None,
        };
        self.state().set_record(id, &rec).unwrap();
    }

    /// This host's owner token for sandbox `id`.
    pub fn token(&self, id: &str) -> String {
        std::fs::create_dir_all(&self.state).unwrap();
        state::owner_token(&self.state().key().unwrap(), id)
    }

    /// Labels as sbx writes them on a container: `sbx.owner` covers the rest.
    pub fn seal(&self, mut labels: serde_json::Value) -> serde_json::Value {
        std::fs::create_dir_all(&self.state).unwrap();
        let map: std::collections::BTreeMap<String, String> = serde_json::from_value(labels.clone()).unwrap();
        let id = map["sbx.id"].clone();
        labels["sbx.owner"] = state::record_token(&self.state().key().unwrap(), &id, &map).into();
        labels
    }

    /// `docker container inspect` of a running container `name` carrying
    /// `labels` (sealed here) on `networks`.
    pub fn container_line(&self, name: &str, labels: serde_json::Value, networks: &[&str]) -> String {
        let nets: serde_json::Map<String, serde_json::Value> =
            networks.iter().map(|n| (n.to_string(), serde_json::json!({}))).collect();
        serde_json::json!({
            "Name": format!("/{name}"),
            "State": {"Status": "running"},
            "Config": {"Labels": self.seal(labels)},
            "NetworkSettings": {"Networks": nets},
        })
        .to_string()
    }

    /// The socket directory of sandbox [`ID`].
    pub fn sock_dir(&self) -> PathBuf {
        self.root.join(ID)
    }

    /// The main process's pid, asked right after the start.
    pub fn running(&self) {
        self.fake.push(Output::ok("4242 running 0\n"));
    }

    /// `docker run`/`start` succeeds and the "sandbox" binds its socket.
    pub fn starts_and_binds(&self) {
        self.starts_and_binds_as("deadbeef")
    }

    /// [`Rig::starts_and_binds`], `docker run` printing container id `cid`.
    pub fn starts_and_binds_as(&self, cid: &str) {
        let dir = self.sock_dir();
        self.fake.push_with(Output::ok(&format!("{cid}\n")), move |_| {
            let l = UnixListener::bind(dir.join("sandbox.sock")).unwrap();
            std::mem::forget(l);
        });
        self.running();
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // As root the socket directory is a tmpfs: unmounted by sbx's own removal.
        let _ = socket::remove_dir(&self.sock_dir(), ID);
        let _ = std::fs::remove_dir_all(&self.root);
        let _ = std::fs::remove_dir_all(&self.state);
        // Every sibling a test made beside the root (the uid table, a
        // read-only mount's source, an engine's checkpoint image).
        for ext in ["proc", "uids", "ro", "engine-image"] {
            let _ = std::fs::remove_dir_all(self.root.with_extension(ext));
        }
        let _ = std::fs::remove_file(self.root.with_extension("exe"));
    }
}

/// One tar entry as `docker cp` prints it: (path, type, content, mode, link target).
pub type TarEntry<'a> = (&'a str, tar::EntryType, &'a [u8], u32, Option<&'a str>);

/// A tar of root-owned `entries`, in order (what `docker cp ID:PATH -`
/// answers, for the remote engine's checks).
pub fn tar_of(entries: &[TarEntry]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, kind, data, mode, link) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(*kind);
        h.set_mode(*mode);
        h.set_uid(0);
        h.set_size(data.len() as u64);
        if let Some(l) = link {
            h.set_link_name(l).unwrap();
        }
        h.set_path(path).unwrap();
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap()
}

/// Where the (one) filler `calls` created mounts its volume: `/NAME`, its
/// random name (`argv::remote::FillerId::dir`).
pub fn fill_dir(calls: &[Vec<String>]) -> String {
    let name = calls
        .iter()
        .find_map(|c| match &c[..] {
            [create, flag, name, ..] if create == "create" && flag == "--name" && name.starts_with("sbx-fill-") => {
                Some(name.clone())
            }
            _ => None,
        })
        .expect("no filler created");
    format!("/{name}")
}

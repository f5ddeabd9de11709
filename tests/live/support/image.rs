//! Images a test makes itself: [`ImageTree`] packs the fixture binary plus
//! whatever the test adds with `docker import`, and [`Image`] removes an
//! image on drop. Not built FROM the fixture image: a derived image would
//! inherit its `sbx-test.fixture` label, and other test runs remove images
//! carrying it.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{assert_success, docker, docker_ok, tar_root, unique, Sandbox, World, TEST_LABEL};

/// An image a test built (by id), removed on drop even when the test fails
/// (declare it before the sandboxes made from it, so it outlives them).
/// `--no-prune`: its parents may be anyone's.
pub struct Image(pub String);

impl Image {
    /// Keep the image on the engine (one cached by content, as the fixture is).
    pub fn keep(self) -> String {
        let id = self.0.clone();
        std::mem::forget(self);
        id
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = docker(&["rmi", "-f", "--no-prune", &self.0]);
    }
}

/// An image's root directory being filled on the host: `/bin/fixture`,
/// `/tmp` and the directories the test asks for, started with
/// `ENTRYPOINT ["/bin/fixture"]` and labelled `sbx-test=1` so a crashed
/// run's leftovers can be swept. The directory is removed on drop.
pub struct ImageTree {
    dir: PathBuf,
    root: PathBuf,
    start: String,
    label: String,
    changes: Vec<String>,
}

impl ImageTree {
    /// The fixture at /bin/fixture, plus the empty directories `dirs`.
    pub fn new(dirs: &[&str]) -> Self {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("image-"));
        let root = dir.join("root");
        for d in ["bin", "tmp"].iter().chain(dirs) {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::copy(super::fixture_binary(), root.join("bin/fixture")).unwrap();
        let label = format!("LABEL {TEST_LABEL}=1");
        ImageTree { dir, root, start: "ENTRYPOINT [\"/bin/fixture\"]".into(), label, changes: Vec::new() }
    }

    /// Where the image's `/` is on the host, for the test to shape.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Also label it with `w`'s case, so the world finds it as its own.
    pub fn for_case(mut self, w: &World) -> Self {
        self.label = format!("{} {}", self.label, w.case_label());
        self
    }

    /// Start with `instruction` (e.g. a `CMD`, so `docker run IMAGE PROGRAM`
    /// runs PROGRAM) instead of `ENTRYPOINT ["/bin/fixture"]`.
    pub fn start(mut self, instruction: &str) -> Self {
        self.start = instruction.into();
        self
    }

    /// More Dockerfile instructions for `docker import --change` (VOLUME, USER, LABEL, ...).
    pub fn changes(mut self, changes: &[&str]) -> Self {
        self.changes.extend(changes.iter().map(|c| c.to_string()));
        self
    }

    /// Pack the root (every entry owned by root) and import it.
    pub fn import(self) -> Image {
        let tar = self.dir.join("image.tar");
        tar_root(&self.root, &tar);
        let mut args = vec!["import", "--change", &self.start, "--change", &self.label];
        for c in &self.changes {
            args.extend(["--change", c]);
        }
        args.push(tar.to_str().unwrap());
        let id = docker_ok(&args);
        assert!(id.starts_with("sha256:"), "docker import printed {id:?}");
        Image(id)
    }
}

impl Drop for ImageTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Compile the C program `src` statically to `out` (an attacker program
/// that needs no libc in the image).
pub fn gcc_static(src: &Path, out: &Path) {
    let done = Command::new("gcc").args(["-static", "-O2", "-o"]).arg(out).arg(src).output().expect("spawn gcc");
    assert!(done.status.success(), "gcc failed on {}: {}", src.display(), String::from_utf8_lossy(&done.stderr));
}

/// The C program at tests/live/`src`, built statically once per run.
pub fn attacker(src: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<std::collections::BTreeMap<String, PathBuf>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    built
        .entry(src.to_string())
        .or_insert_with(|| {
            let name = Path::new(src).file_stem().and_then(|n| n.to_str()).unwrap_or("attacker");
            let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique(&format!("{name}-")));
            gcc_static(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/live").join(src), &out);
            out
        })
        .clone()
}

/// A sandbox created with `args`, with the attacker program tests/live/`src`
/// copied in (`sbx cp`, so it works on the fixture, which has no shell) at `at`.
pub fn armed_with(w: &World, args: &[&str], src: &str, at: &str) -> Sandbox {
    let sb = w.create(args);
    let to = format!("{}:{at}", sb.id);
    assert_success(&w.sbx(&["cp", attacker(src).to_str().unwrap(), &to]), &format!("sbx cp {src}"));
    sb
}

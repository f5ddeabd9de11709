//! The fixture image: `tests/fixture/sandbox_fixture.rs` built statically
//! and imported alone, once per test process, and cached on the engine by
//! the binary's content hash.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::{docker, docker_ok, tar_root, TEST_LABEL};

fn require_docker() {
    static CHECK: OnceLock<Result<String, String>> = OnceLock::new();
    let r = CHECK.get_or_init(|| {
        match Command::new("docker").args(["version", "--format", "{{.Server.Version}}"]).output() {
            Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
            Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
            Err(e) => Err(e.to_string()),
        }
    });
    if let Err(e) = r {
        panic!(
            "live tests need a reachable Docker engine (`docker version` failed: {e}); \
             start dockerd, or run only the unit tests with `cargo test --lib`"
        );
    }
}

/// The fixture image: `tests/fixture/sandbox_fixture.rs` built statically and
/// packed alone with `docker import` (no shell, no libc, /tmp 0755 root, as
/// in many distroless images). Cached by the binary's content hash.
pub fn fixture_image() -> String {
    fixture().image.clone()
}

/// The fixture binary itself, for tests that run it on the host or pack it
/// into an image of their own.
pub fn fixture_binary() -> PathBuf {
    fixture().binary.clone()
}

struct Fixture {
    image: String,
    /// `fixture-<hash>` in the target's tmp dir: named by its content, so
    /// concurrent runs of this checkout share it and nothing piles up per run.
    binary: PathBuf,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    require_docker();
    FIXTURE.get_or_init(build_fixture)
}

/// The directory the fixture is built and packed in, removed when the build
/// ends (or fails). Keyed by pid: another run of this checkout may be
/// building at the same time.
struct BuildDir(PathBuf);

impl Drop for BuildDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn build_fixture() -> Fixture {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dir = BuildDir(tmp.join(format!("fixture-build-{}", std::process::id())));
    let root = dir.0.join("root");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::create_dir_all(root.join("tmp")).unwrap();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    set_mode(&root.join("tmp"), 0o755);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixture/sandbox_fixture.rs");
    let bin = root.join("bin/fixture");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc)
        .args(["--edition", "2021", "-O", "-C", "target-feature=+crt-static", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("spawn rustc");
    assert!(out.status.success(), "building the fixture failed: {}", String::from_utf8_lossy(&out.stderr));
    let hash = content_hash(&std::fs::read(&bin).unwrap());
    let label = format!("{TEST_LABEL}.fixture={hash}");
    let cached = docker_ok(&["images", "-q", "--no-trunc", "--filter", &format!("label={label}")]);
    // Images built FROM the fixture inherit its label; only the imported one
    // has no other label (a test's derived image must never be taken for it).
    // (An image built FROM the fixture keeps its labels but has more layers.)
    let pristine = |id: &&str| {
        docker_ok(&["image", "inspect", "--format", "{{len .Config.Labels}} {{len .RootFS.Layers}}", id]) == "2 1"
    };
    let image = match cached.lines().find(pristine) {
        Some(id) => id.to_string(),
        None => import(&dir.0, &root, &label),
    };
    let binary = tmp.join(format!("fixture-{hash}"));
    if !binary.exists() {
        // Copied, then renamed into place: a concurrent run never sees half a file.
        let part = dir.0.join("fixture.bin");
        std::fs::copy(&bin, &part).unwrap();
        std::fs::rename(&part, &binary).unwrap();
    }
    Fixture { image, binary }
}

/// Import the fixture tree `root` as an image labelled `label`.
fn import(dir: &Path, root: &Path, label: &str) -> String {
    // Fixture images of older fixture sources in this checkout: remove
    // (in-use ones stay). Only this checkout's: another checkout's test run
    // on the same engine may be using its own fixture right now.
    let tree = format!("{TEST_LABEL}.tree={}", content_hash(env!("CARGO_MANIFEST_DIR").as_bytes()));
    let stale = docker_ok(&[
        "images",
        "-q",
        "--no-trunc",
        "--filter",
        &format!("label={TEST_LABEL}.fixture"),
        "--filter",
        &format!("label={tree}"),
    ]);
    for old in stale.lines() {
        let _ = docker(&["rmi", old]);
    }
    let tar = dir.join("fixture.tar");
    tar_root(root, &tar);
    docker_ok(&[
        "import",
        "--change",
        "ENTRYPOINT [\"/bin/fixture\"]",
        "--change",
        &format!("LABEL {label} {tree}"),
        tar.to_str().unwrap(),
    ])
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// FNV-1a: a stable content key, not a security boundary.
fn content_hash(data: &[u8]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

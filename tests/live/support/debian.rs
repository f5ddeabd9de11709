//! A stock Debian image: bookworm's minbase plus the ordinary clients the
//! secrets tests drive (curl, Python's requests and urllib, git, pip), made
//! with debootstrap from Debian's mirror (scripts/test installs debootstrap)
//! and packed with `docker import`. Nothing of sbx or of the tests is in it:
//! what works in it works in an agent's image unchanged.
//!
//! It takes about a minute to make, so it is made once per machine: cached
//! on the engine under a label holding a hash of the recipe, with a file
//! lock so parallel tests (or two checkouts' runs) never make it twice.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::{assert_success, docker_ok, tar_root, TEST_LABEL};

pub const SUITE: &str = "bookworm";
pub const MIRROR: &str = "http://deb.debian.org/debian";
pub const PACKAGES: &str = "curl,ca-certificates,python3,python3-requests,git,python3-pip";

/// What is removed from the tree before packing: caches and docs no client
/// reads, and what the engine lays anew in every container (/dev, the
/// resolver and host name debootstrap copied from this machine).
const TRIM: &[&str] = &[
    "var/cache/apt/archives",
    "var/cache/apt/pkgcache.bin",
    "var/cache/apt/srcpkgcache.bin",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "dev",
    "etc/resolv.conf",
    "etc/hostname",
];

/// The machine-wide lock the build holds (every checkout's runs share the engine).
const LOCK: &str = "/tmp/sbx-test-debian-image.lock";

/// The image's id (`sha256:...`), made on first use on this machine.
pub fn debian_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let label = format!("{TEST_LABEL}.debian={}", recipe_hash());
        let cached = || {
            let out = docker_ok(&["images", "-q", "--no-trunc", "--filter", &format!("label={label}")]);
            out.lines().next().map(str::to_string)
        };
        if let Some(id) = cached() {
            return id;
        }
        let lock = std::fs::OpenOptions::new().create(true).append(true).open(LOCK).expect("open the build lock");
        let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
            .unwrap_or_else(|(_, e)| panic!("lock {LOCK}: {e}"));
        // Someone else may have made it while this test waited.
        if let Some(id) = cached() {
            return id;
        }
        build(&label)
    })
}

/// The recipe's content key: anything that changes the image changes it.
fn recipe_hash() -> String {
    let recipe = format!("{SUITE} {MIRROR} minbase {PACKAGES} trim {TRIM:?} import CMD bash v1");
    super::internet::fnv(recipe.as_bytes())
}

/// The build directory, removed when the build ends or fails.
struct BuildDir(PathBuf);

impl Drop for BuildDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn build(label: &str) -> String {
    let started = std::time::Instant::now();
    let dir = BuildDir(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("debian-build-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).unwrap();
    let root = dir.0.join("root");
    let out = Command::new("/usr/sbin/debootstrap")
        .args(["--variant=minbase", &format!("--include={PACKAGES}"), SUITE])
        .arg(&root)
        .arg(MIRROR)
        .output()
        .expect("spawn debootstrap (apt-get install debootstrap; scripts/test --prepare-only does)");
    assert_success(&out, "debootstrap (making the Debian test image)");
    for t in TRIM {
        remove(&root.join(t));
    }
    std::fs::create_dir_all(root.join("dev")).unwrap();
    std::fs::create_dir_all(root.join("var/lib/apt/lists/partial")).unwrap();
    let tar = dir.0.join("debian.tar");
    tar_root(&root, &tar);
    let id = docker_ok(&[
        "import",
        "--change",
        "CMD [\"/bin/bash\"]",
        "--change",
        &format!("LABEL {TEST_LABEL}=1 {label}"),
        tar.to_str().unwrap(),
    ]);
    assert!(id.starts_with("sha256:"), "docker import printed {id:?}");
    eprintln!("made the Debian test image {id} in {:.0?}", started.elapsed());
    id
}

fn remove(p: &Path) {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p).unwrap(),
        Ok(_) => std::fs::remove_file(p).unwrap(),
        Err(_) => {}
    }
}

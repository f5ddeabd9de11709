//! A `docker` stand-in (passed to sbx as `SBX_DOCKER`) that blocks at chosen
//! subcommands until released: a create killed at one step, a hung engine.

use std::path::Path;
use std::time::Duration;

use super::World;

/// A `docker` stand-in that blocks at one subcommand (before or after doing
/// it for real) until released, so a test can SIGKILL `sbx create` there.
pub struct Shim {
    dir: std::path::PathBuf,
}

impl Shim {
    pub fn new(w: &World, verb: &str, after: bool) -> Self {
        let dir = Path::new("/tmp").join(format!("sbxt-{}-shim", w.case));
        std::fs::create_dir_all(&dir).unwrap();
        let (pre, post) = if after { ("", "block") } else { ("block", "") };
        let script = format!(
            "#!/bin/sh\n\
             echo \"$*\" >> '{d}/argv'\n\
             block() {{ : > '{d}/reached'; while [ ! -e '{d}/release' ]; do sleep 0.05; done; }}\n\
             if [ \"$1\" = '{verb}' ]; then {pre}\n docker \"$@\"; rc=$?\n {post}\n exit $rc\nfi\n\
             exec docker \"$@\"\n",
            d = dir.display(),
            pre = if pre.is_empty() { ":" } else { pre },
            post = if post.is_empty() { ":" } else { post },
        );
        Self::install(dir, &script)
    }

    /// Blocks at every one of `verbs` (a hung engine that still answers the rest).
    pub fn blocking(w: &World, verbs: &[&str]) -> Self {
        let dir = Path::new("/tmp").join(format!("sbxt-{}-shim", w.case));
        std::fs::create_dir_all(&dir).unwrap();
        let script = format!(
            "#!/bin/sh\n\
             case \"$1\" in {verbs}) : > '{d}/reached'; while [ ! -e '{d}/release' ]; do sleep 0.05; done ;; esac\n\
             exec docker \"$@\"\n",
            verbs = verbs.join("|"),
            d = dir.display(),
        );
        Self::install(dir, &script)
    }

    /// Removes the image of the first egress gate's `docker run` just
    /// before passing that run on, as another sbx build on the engine
    /// dropping sbx's image would; `docker rmi`'s answer is in [`Shim::dropped`].
    pub fn dropping_the_gate_s_image(w: &World) -> Self {
        let dir = Path::new("/tmp").join(format!("sbxt-{}-shim", w.case));
        std::fs::create_dir_all(&dir).unwrap();
        let script = format!(
            "#!/bin/sh
             if [ \"$1\" = run ] && [ ! -e '{d}/dropped' ]; then case \" $* \" in *' __gate '*)
             for a in \"$@\"; do case \"$a\" in sha256:*) docker rmi \"$a\" > '{d}/dropped' 2>&1 ;; esac; done ;; esac; fi
             exec docker \"$@\"
",
            d = dir.display(),
        );
        Self::install(dir, &script)
    }

    /// What `docker rmi` said in [`Shim::dropping_the_gate_s_image`]; None if it never ran.
    pub fn dropped(&self) -> Option<String> {
        std::fs::read_to_string(self.dir.join("dropped")).ok()
    }

    /// Passes every call on, logging its whole argv (see [`Shim::argvs`]).
    pub fn logging(w: &World) -> Self {
        let dir = Path::new("/tmp").join(format!("sbxt-{}-shim", w.case));
        std::fs::create_dir_all(&dir).unwrap();
        // One write per call (O_APPEND), arguments separated by \037.
        let script = format!(
            "#!/bin/sh\nline=$(printf '%s\\037' \"$@\")\nprintf '%s\\n' \"$line\" >> '{d}/argvs'\nexec docker \"$@\"\n",
            d = dir.display(),
        );
        Self::install(dir, &script)
    }

    /// Every argv a [`Shim::logging`] passed on, in order.
    pub fn argvs(&self) -> Vec<Vec<String>> {
        let log = std::fs::read_to_string(self.dir.join("argvs")).unwrap_or_default();
        log.lines().map(|l| l.split('\u{1f}').filter(|a| !a.is_empty()).map(str::to_string).collect()).collect()
    }

    fn install(dir: std::path::PathBuf, script: &str) -> Self {
        let path = dir.join("docker");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        Shim { dir }
    }

    pub fn path(&self) -> std::path::PathBuf {
        self.dir.join("docker")
    }

    pub fn reached(&self) -> bool {
        self.dir.join("reached").exists()
    }

    /// The sandbox ids (`sbx-` and 12 hex digits) in the docker calls so far.
    pub fn ids(&self) -> Vec<String> {
        let argv = std::fs::read_to_string(self.dir.join("argv")).unwrap_or_default();
        let mut ids: Vec<String> = argv
            .match_indices("sbx-")
            .filter_map(|(i, _)| argv.get(i..i + 16))
            .filter(|id| id[4..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            .map(str::to_string)
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Whether a docker call through this shim is still running.
    pub fn busy(&self) -> bool {
        let me = self.path().into_os_string().into_encoded_bytes();
        std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
            std::fs::read(p.path().join("cmdline")).is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == me.as_slice()))
        })
    }

    pub fn release(&self) {
        std::fs::write(self.dir.join("release"), b"").unwrap();
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        self.release();
        std::thread::sleep(Duration::from_millis(100));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

//! The ids of this process and of the engine's socket, which no sandbox
//! may run as (see `model::ids`). No docker call: a few syscalls and a stat.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::model::engine::Engine;
use crate::model::ids::Reserved;

/// What `create` (and `exec -u`) must not give a sandbox on `engine`.
/// The caller's real and effective ids and supplementary groups, the user
/// behind `sudo` (SUDO_UID/SUDO_GID: a variable can only add to the list),
/// and, on a local engine, the owner and group of the socket it is reached
/// through (with rootless docker the owner is the user). A remote engine's
/// ids are its machine's, which sbx cannot know without asking: nothing of
/// this machine applies there (its sandboxes share no kernel or file with
/// it), so the list is empty.
pub fn reserved(engine: &Engine) -> Reserved {
    let mut r = Reserved::default();
    if engine.is_remote() {
        return r;
    }
    let you = "yours (the user running sbx)";
    r.uid(nix::unistd::getuid().as_raw(), you);
    r.uid(nix::unistd::geteuid().as_raw(), you);
    let yours = "one of your groups (the user running sbx)";
    r.gid(nix::unistd::getgid().as_raw(), yours);
    r.gid(nix::unistd::getegid().as_raw(), yours);
    for g in nix::unistd::getgroups().unwrap_or_default() {
        r.gid(g.as_raw(), yours);
    }
    let sudo = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u32>().ok());
    if let Some(u) = sudo("SUDO_UID") {
        r.uid(u, "the user who ran sudo");
    }
    if let Some(g) = sudo("SUDO_GID") {
        r.gid(g, "the group of the user who ran sudo");
    }
    if let Some(sock) = socket_path(&engine.endpoint) {
        if let Ok(md) = std::fs::metadata(sock) {
            r.uid(md.uid(), format!("the owner of the docker socket {sock}"));
            r.gid(md.gid(), format!("the group of the docker socket {sock} (who may drive the engine)"));
        }
    }
    r
}

/// The socket file of a local endpoint (`unix://PATH` or a bare path);
/// none for `fd://`, whose socket has no path.
fn socket_path(endpoint: &str) -> Option<&str> {
    let p = endpoint.strip_prefix("unix://").unwrap_or(endpoint);
    Path::new(p).is_absolute().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_engine_reserves_the_caller_and_the_socket_a_remote_one_nothing() {
        let remote = Engine::at("ssh://me@far", None);
        assert_eq!(reserved(&remote), Reserved::default());
        let dir = std::env::temp_dir().join(format!("sbx-invoker-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("d.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::lchown(&sock, Some(4711), Some(4712)).unwrap();
        }
        let r = reserved(&Engine::at(&format!("unix://{}", sock.display()), None));
        let me = nix::unistd::geteuid().as_raw();
        if me != 0 {
            assert!(r.why_uid(me).unwrap().contains("yours"));
        } else {
            assert!(r.why_uid(4711).unwrap().contains("owner of the docker socket"));
            assert!(r.why_gid(4712).unwrap().contains("group of the docker socket"));
        }
        let g = nix::unistd::getgroups().unwrap();
        for g in g.iter().filter(|g| g.as_raw() != 0) {
            assert!(r.why_gid(g.as_raw()).is_some(), "{g}");
        }
        assert_eq!(socket_path("fd://"), None);
        assert_eq!(socket_path("/run/d.sock"), Some("/run/d.sock"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}

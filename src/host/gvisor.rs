//! gVisor's processes on the host. Under runsc a sandbox's main
//! process on the host is the Sentry, whose mount table is gVisor's own,
//! not the workload's. The bind mounts the workload sees (sbx's helper and
//! socket directories, volumes, --rw/--ro) are placed by runsc's gofer, in
//! a mount namespace of its own on the host whose root is the container's
//! root file system, resolving the image's symlinks as the Sentry does.

use std::path::Path;

/// Where the engine's shim keeps runsc's state of each container (engine
/// 20.10's exec root, its runc-shim's root, its namespace).
pub const STATE_ROOT: &str = "/var/run/docker/runtime-runc/moby";

/// After `docker checkpoint` of a sandbox that was itself restored from a
/// checkpoint, runsc 20221219 leaves its state behind as `paused`: the
/// shim's cleanup hits the transition paused => stopped that runsc refuses
/// (the panic `--leave-running` dies of; `runsc delete --force` panics the
/// same way), and every later start of that container fails with "id
/// already in use" (measured). Once docker reports the container exited
/// and the state's process is gone, its two files are what `runsc delete`
/// would have removed, and sbx removes them; docker's own view (exited)
/// stays true, and nothing else of runsc's is touched. Returns whether
/// there was such a state.
pub fn clear_stale_state(runsc: &Path, cid: &str) -> std::io::Result<bool> {
    if cid.len() != 64 || !cid.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(std::io::Error::other(format!("not a full container id: {cid:?}")));
    }
    let base = Path::new(STATE_ROOT).join(format!("{cid}_sandbox:{cid}"));
    let state = base.with_extension("state");
    if !state.exists() {
        return Ok(false);
    }
    let out = std::process::Command::new(runsc)
        .args(["--root", STATE_ROOT, "state", cid])
        .stdin(std::process::Stdio::null())
        .output()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|_| {
        std::io::Error::other(format!("runsc state of {cid}: {}", String::from_utf8_lossy(&out.stderr).trim()))
    })?;
    let pid = v["pid"].as_i64().unwrap_or(0);
    let alive = pid > 0
        && i32::try_from(pid).is_ok_and(|p| nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None).is_ok());
    if alive || !matches!(v["status"].as_str(), Some("paused" | "stopped")) {
        return Err(std::io::Error::other(format!(
            "runsc still holds container {cid} ({}, process {pid})",
            v["status"].as_str().unwrap_or("?")
        )));
    }
    std::fs::remove_file(&state)?;
    let _ = std::fs::remove_file(base.with_extension("lock"));
    Ok(true)
}

/// The mount tables of container `cid`'s processes on the host that are
/// not in the mount namespace of its main process `main` (the Sentry and
/// its stubs): gVisor's gofer. Host kernel data: nothing in the sandbox
/// can add a host process to the container's cgroup or a mount to a host
/// namespace, and a table read here is what the kernel says of that pid.
/// Processes that end while they are read are skipped.
pub fn gofer_mountinfos(proc: &Path, main: i32, cid: &str) -> std::io::Result<Vec<String>> {
    let own = std::fs::read_to_string(proc.join(main.to_string()).join("mountinfo"))?;
    let sentry_root = root_mount(&own);
    let mut found = Vec::new();
    for entry in std::fs::read_dir(proc)? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if pid == main || !in_container(proc, pid, cid) {
            continue;
        }
        let Ok(info) = std::fs::read_to_string(entry.path().join("mountinfo")) else { continue };
        if root_mount(&info).is_some() && root_mount(&info) != sentry_root {
            found.push(info);
        }
    }
    Ok(found)
}

/// The id of the mount at `/` in a mount table (mount ids are unique on the
/// host, so two tables share it only when they share that root).
fn root_mount(info: &str) -> Option<&str> {
    info.lines().find(|l| l.split(' ').nth(4) == Some("/")).and_then(|l| l.split(' ').next())
}

/// Whether process `pid` is one of container `cid`'s: the kernel's record
/// of its cgroups names the container's full id (`/docker/ID` under cgroup
/// v1, `docker-ID.scope` under systemd and v2). A sandbox cannot forge it:
/// it cannot write cgroupfs (no capabilities, read-only mounts).
pub fn in_container(proc: &Path, pid: i32, cid: &str) -> bool {
    if pid <= 0 || cid.len() != 64 || !cid.bytes().all(|b| b.is_ascii_hexdigit()) {
        return false;
    }
    std::fs::read_to_string(proc.join(pid.to_string()).join("cgroup"))
        .is_ok_and(|cg| cg.lines().any(|l| l.split(['/', '-', '.']).any(|part| part == cid)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_process_outside_the_sentrys_namespace() {
        let proc = std::env::temp_dir().join(format!("sbx-gvisor-{}-{:x}", std::process::id(), rand::random::<u32>()));
        let cid = "ab".repeat(32);
        let put = |pid: i32, cgroup: &str, root: &str| {
            let d = proc.join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cgroup"), cgroup).unwrap();
            std::fs::write(
                d.join("mountinfo"),
                format!("{root} 1 0:1 / / ro - tmpfs x rw\n{root}1 {root} 0:2 / /run/sbx rw - x x rw\n"),
            )
            .unwrap();
        };
        let mine = format!("4:pids:/docker/{cid}\n0::/\n");
        put(10, &mine, "272"); // the Sentry
        put(11, &mine, "272"); // a stub
        put(9, &mine, "226"); // the gofer
        put(12, "4:pids:/docker/other\n", "300"); // someone else's
        std::fs::create_dir_all(proc.join("self")).unwrap();
        let found = gofer_mountinfos(&proc, 10, &cid).unwrap();
        assert_eq!(found.len(), 1);
        assert!(found[0].starts_with("226 "), "{found:?}");
        assert!(gofer_mountinfos(&proc, 10, "short").unwrap().is_empty());
        std::fs::remove_dir_all(proc).unwrap();
    }
}

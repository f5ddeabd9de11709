//! A runc container's init process, read from the kernel's /proc instead
//! of asked of docker: each `docker container inspect` costs 60-70 ms of
//! the CLI here, and create and start ask for the pid on every boot (the
//! mount-placement check reads its mountinfo).

use std::collections::BTreeMap;
use std::path::Path;

use crate::host::gvisor::in_container;

/// The one process of container `cid` (full id) whose parent is not the
/// container's: under runc that is its init, the process docker reports as
/// `State.Pid`. The sandbox cannot forge it: a process it starts has a
/// parent in the container, an orphan is reparented to init inside it, and
/// the kernel's cgroup record and ppid are not its to write. None when it
/// is not one process (none: exited or not on this machine; more: a
/// `docker exec`'s process, whose parent is the shim): the caller asks docker.
pub fn container_init(proc: &Path, cid: &str) -> Option<i32> {
    let mut parents: BTreeMap<i32, i32> = BTreeMap::new();
    for entry in std::fs::read_dir(proc).ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if !in_container(proc, pid, cid) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        // The parent pid: the field after the state.
        parents.insert(pid, crate::host::state::stat_field(&stat, 1)?);
    }
    let mut outside = parents.iter().filter(|(_, ppid)| !parents.contains_key(ppid)).map(|(pid, _)| *pid);
    match (outside.next(), outside.next()) {
        (Some(pid), None) => Some(pid),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn process(proc: &Path, pid: i32, ppid: i32, comm: &str, cgroup: &str) {
        let d = proc.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("stat"), format!("{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 0\n")).unwrap();
        std::fs::write(d.join("cgroup"), cgroup).unwrap();
    }

    #[test]
    fn the_one_process_whose_parent_is_outside_is_init() {
        let proc = std::env::temp_dir().join(format!("sbx-init-pid-{}", rand::random::<u64>()));
        let ours = format!("12:pids:/docker/{CID}\n0::/docker/{CID}\n");
        process(&proc, 900, 1, "containerd-shim", "0::/\n");
        process(&proc, 1000, 900, "fixture", &ours);
        // A child whose name fakes a stat line with another parent.
        process(&proc, 1001, 1000, "x) S 900 1 1", &ours);
        process(&proc, 1002, 1001, "worker", &ours);
        process(&proc, 1500, 900, "other", "0::/docker/ffff\n");
        assert_eq!(container_init(&proc, CID), Some(1000));
        // A `docker exec`'s process, its parent the shim: two candidates, ask docker.
        process(&proc, 1100, 900, "sh", &ours);
        assert_eq!(container_init(&proc, CID), None);
        std::fs::remove_dir_all(&proc).unwrap();
        assert_eq!(container_init(&proc, CID), None, "no /proc");
    }

    #[test]
    fn none_for_a_container_with_no_process() {
        let proc = std::env::temp_dir().join(format!("sbx-init-pid-{}", rand::random::<u64>()));
        process(&proc, 900, 1, "containerd-shim", "0::/\n");
        assert_eq!(container_init(&proc, CID), None);
        std::fs::remove_dir_all(&proc).unwrap();
    }
}

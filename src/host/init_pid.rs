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
///
/// The candidates are the pids the container's own cgroup lists (one read,
/// `cgroups` the host's cgroup mount), where docker's cgroupfs or systemd
/// driver puts it; else every process in `proc` (a scan of the host's
/// processes that was most of sbx's own CPU in a create). Either way each
/// is kept only when its /proc cgroup names the container. A sandbox
/// cannot hide a process from the listing: its cgroup file system is
/// read-only, so it makes no cgroup below its own; a process missed would
/// make its children candidates too, and more than one is None.
pub fn container_init(proc: &Path, cgroups: &Path, cid: &str) -> Option<i32> {
    let pids = match listed(cgroups, cid) {
        Some(pids) => pids,
        None => std::fs::read_dir(proc)
            .ok()?
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
            .collect(),
    };
    let mut parents: BTreeMap<i32, i32> = BTreeMap::new();
    for pid in pids {
        if !in_container(proc, pid, cid) {
            continue;
        }
        let stat = std::fs::read_to_string(proc.join(pid.to_string()).join("stat")).ok()?;
        // The parent pid: the field after the state.
        parents.insert(pid, crate::host::state::stat_field(&stat, 1)?);
    }
    let mut outside = parents.iter().filter(|(_, ppid)| !parents.contains_key(ppid)).map(|(pid, _)| *pid);
    match (outside.next(), outside.next()) {
        (Some(pid), None) => Some(pid),
        _ => None,
    }
}

/// The processes of container `cid`'s cgroup, from the first of docker's
/// layouts that exists: cgroup v1 (its pids controller) or v2, under the
/// cgroupfs driver (`docker/ID`) or systemd's (`system.slice/docker-ID.scope`).
fn listed(cgroups: &Path, cid: &str) -> Option<Vec<i32>> {
    // A full id, or nothing is joined to the path.
    crate::model::names::ContainerId::full(cid)?;
    let scope = format!("system.slice/docker-{cid}.scope");
    let cgroupfs = format!("docker/{cid}");
    let text = [format!("pids/{cgroupfs}"), format!("pids/{scope}"), cgroupfs, scope]
        .iter()
        .find_map(|dir| std::fs::read_to_string(cgroups.join(dir).join("cgroup.procs")).ok())?;
    text.lines().map(|l| l.trim().parse::<i32>().ok()).collect()
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
        assert_eq!(container_init(&proc, &proc.join("no-cgroups"), CID), Some(1000));
        // A `docker exec`'s process, its parent the shim: two candidates, ask docker.
        process(&proc, 1100, 900, "sh", &ours);
        assert_eq!(container_init(&proc, &proc.join("no-cgroups"), CID), None);
        std::fs::remove_dir_all(&proc).unwrap();
        assert_eq!(container_init(&proc, &proc.join("no-cgroups"), CID), None, "no /proc");
    }

    #[test]
    fn none_for_a_container_with_no_process() {
        let proc = std::env::temp_dir().join(format!("sbx-init-pid-{}", rand::random::<u64>()));
        process(&proc, 900, 1, "containerd-shim", "0::/\n");
        assert_eq!(container_init(&proc, &proc.join("no-cgroups"), CID), None);
        std::fs::remove_dir_all(&proc).unwrap();
    }

    /// The container's cgroup lists its processes: only those are read,
    /// and each still must name the container in its own /proc record.
    #[test]
    fn the_cgroup_listing_names_the_candidates() {
        let proc = std::env::temp_dir().join(format!("sbx-init-pid-{}", rand::random::<u64>()));
        let cgroups = proc.join("cg");
        let ours = format!("12:pids:/docker/{CID}\n0::/docker/{CID}\n");
        process(&proc, 900, 1, "containerd-shim", "0::/\n");
        process(&proc, 1000, 900, "fixture", &ours);
        process(&proc, 1001, 1000, "worker", &ours);
        // Named in the listing but not the container's (a listing sbx did
        // not expect): never a candidate.
        process(&proc, 1200, 900, "other", "0::/docker/ffff\n");
        let dir = cgroups.join(format!("pids/docker/{CID}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cgroup.procs"), "1000\n1001\n1200\n").unwrap();
        assert_eq!(container_init(&proc, &cgroups, CID), Some(1000));
        // The listing is what is read: a process it leaves out is not seen.
        process(&proc, 1100, 900, "sh", &ours);
        assert_eq!(container_init(&proc, &cgroups, CID), Some(1000));
        // ...and one the listing names whose parent it does not is a second
        // candidate: ask docker.
        std::fs::write(dir.join("cgroup.procs"), "1000\n1001\n1100\n").unwrap();
        assert_eq!(container_init(&proc, &cgroups, CID), None);
        // systemd's layout under cgroup v2.
        std::fs::remove_dir_all(cgroups.join("pids")).unwrap();
        let dir = cgroups.join(format!("system.slice/docker-{CID}.scope"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cgroup.procs"), "1001\n1000\n").unwrap();
        assert_eq!(container_init(&proc, &cgroups, CID), Some(1000));
        // A listing that is not pids is not used: the scan decides (here
        // two candidates, then one once the exec's process is gone).
        std::fs::write(dir.join("cgroup.procs"), "1000\nx\n").unwrap();
        assert_eq!(container_init(&proc, &cgroups, CID), None);
        std::fs::remove_dir_all(proc.join("1100")).unwrap();
        assert_eq!(container_init(&proc, &cgroups, CID), Some(1000));
        std::fs::remove_dir_all(&proc).unwrap();
    }
}

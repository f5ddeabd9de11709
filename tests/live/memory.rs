//! A sandbox's memory is its own: every tmpfs and /dev/shm is sized inside
//! `--memory` and has a finite inode count, so filling them is refused with
//! ENOSPC while the cgroup (shmem included) stays under the limit and the
//! sandbox keeps working; the kernel file objects it pins are charged to
//! the same cgroup.

use crate::support::*;

const LIMIT_MIB: u64 = 64;

/// The sandbox's memory cgroup file `name` (cgroup v1 under docker's
/// cgroupfs parent, as on this engine; v2 names are mapped).
fn cgroup(sb: &Sandbox, v1: &str) -> String {
    let id = sb.inspect("{{.Id}}");
    let v1_path = format!("/sys/fs/cgroup/memory/docker/{id}/{v1}");
    if let Ok(s) = std::fs::read_to_string(&v1_path) {
        return s;
    }
    let v2 = match v1 {
        "memory.max_usage_in_bytes" => "memory.peak",
        "memory.usage_in_bytes" => "memory.current",
        other => other,
    };
    for p in [format!("/sys/fs/cgroup/system.slice/docker-{id}.scope/{v2}"), format!("/sys/fs/cgroup/docker/{id}/{v2}")]
    {
        if let Ok(s) = std::fs::read_to_string(&p) {
            return s;
        }
    }
    panic!("no memory cgroup file {v1} for {id}")
}

fn stat(sb: &Sandbox, key: &str) -> u64 {
    let s = cgroup(sb, "memory.stat");
    let line = s.lines().find(|l| l.split_whitespace().next() == Some(key)).unwrap_or_else(|| panic!("{key}: {s}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// "wrote N bytes: ERROR" from the fixture's `fill`.
fn filled(sb: &Sandbox, path: &str) -> u64 {
    let out = sb.exec(&["fill", path, "200"]);
    assert_success(&out, &format!("fill {path} (exit 137 is the OOM killer: the tmpfs outgrew --memory)"));
    let line = stdout(&out);
    assert!(line.contains("No space left on device"), "{path} was not refused at its size: {line}");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn filling_every_tmpfs_is_refused_inside_the_memory_limit() {
    let _load = loading_the_engine();
    let w = World::new();
    let sb = w.create(&["--memory", &LIMIT_MIB.to_string()]);
    let limit = LIMIT_MIB << 20;
    let mut total = 0;
    for (path, share_of_32) in [("/tmp/f", 8), ("/state/f", 4), ("/dev/shm/f", 2), ("/run/sbx-bg/f", 1)] {
        let n = filled(&sb, path);
        let size = limit * share_of_32 / 32;
        assert!(n <= size && n + (1 << 20) >= size, "{path}: wrote {n} of a {size}-byte tmpfs");
        total += n;
    }
    // The files stay: the cgroup holds them as shmem, under the limit, and
    // the sandbox still has room to run a process.
    let shmem = stat(&sb, "shmem");
    assert!(shmem >= total - (1 << 20), "shmem {shmem} < the {total} bytes written: not charged to the sandbox?");
    let peak: u64 = cgroup(&sb, "memory.max_usage_in_bytes").trim().parse().unwrap();
    assert!(peak <= limit, "the sandbox held {peak} bytes under a {limit}-byte limit");
    assert_success(&sb.exec(&["status"]), "a process after the fills");
}

/// An empty file costs a tmpfs nothing of its size but about 1 KiB of
/// kernel memory: without an inode bound a flood ends at the OOM killer.
#[test]
fn a_file_flood_is_refused_at_the_inode_bound() {
    let _load = loading_the_engine();
    let w = World::new();
    let sb = w.create(&["--memory", &LIMIT_MIB.to_string()]);
    let out = sb.exec(&["files", "/tmp", "1000000"]);
    assert_success(&out, "the file flood (exit 137 is the OOM killer)");
    let line = stdout(&out);
    assert!(line.contains("No space left on device"), "{line}");
    // One inode per 8 KiB of a 16 MiB /tmp, the root directory one of them.
    let n: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_eq!(n, (LIMIT_MIB << 20) / 4 / 8192 - 1, "{line}");
    assert_success(&sb.exec(&["status"]), "a process after the flood");
}

/// A mapping keeps its file object after the descriptor is closed, so
/// nofile does not bound them; the kernel charges each (with its mapping)
/// to the sandbox's memory cgroup, so --memory does: a 64 MiB sandbox
/// pinned about 160,000 (some 400 bytes each) before the OOM killer ended
/// it. Fails where kernel memory is not accounted (`cgroup.memory=nokmem`).
#[test]
fn pinned_file_objects_are_paid_for_from_the_sandboxs_memory() {
    let _load = loading_the_engine();
    let w = World::new();
    let sb = w.create(&["--memory", &LIMIT_MIB.to_string(), "--pids", "32"]);
    let before = file_nr();
    let mut pin = std::process::Command::new("docker")
        .args(["exec", &sb.id, "/bin/fixture", "pin-files", "/tmp", "12"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // "pinned N" once every pinner was refused (it then holds them all).
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut out = pin.stdout.take().unwrap();
    let reader = {
        let said = said.clone();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(&mut out)).map_while(Result::ok) {
                said.lock().unwrap().push_str(&line);
            }
        })
    };
    let mut peak = before;
    // Minutes, not seconds: twelve pinners share two cores with the rest of the suite.
    let ended = until(std::time::Duration::from_secs(300), || {
        peak = peak.max(file_nr());
        sb.inspect("{{.State.Status}}") != "running"
            || pin.try_wait().unwrap().is_some()
            || said.lock().unwrap().contains("pinned")
    });
    let _ = pin.kill();
    let _ = pin.wait();
    let _ = reader.join();
    assert!(ended.is_some(), "12 processes pinned files for 5 minutes: nothing bounded them");
    let pinned = peak.saturating_sub(before);
    // Other tests open files meanwhile: the bound is loose on purpose.
    let bound = (LIMIT_MIB << 20) / 256;
    assert!(pinned < bound, "{pinned} file objects pinned under {LIMIT_MIB} MiB (bound {bound})");
    assert!(pinned > 10_000, "the pin did not run: {pinned}");
}

/// The host's count of allocated file objects (/proc/sys/fs/file-nr).
fn file_nr() -> u64 {
    let s = std::fs::read_to_string("/proc/sys/fs/file-nr").unwrap();
    s.split_whitespace().next().unwrap().parse().unwrap()
}

/// Limits are ceilings, not reservations, so create takes one past the
/// host's RAM; `ls` (no docker call more than its own) says the sum is more
/// than the host has.
#[test]
fn ls_warns_when_the_limits_add_up_past_the_hosts_ram() {
    let w = World::new();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let over = (kib / 1024 + 64).to_string();
    let sb = w.create(&["--memory", &over]);
    let out = w.sbx(&["ls"]);
    assert_success(&out, "sbx ls");
    assert!(stdout(&out).contains(&sb.id), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("memory_overcommitted") || stderr(&out).contains("more than this host's"),
        "{}",
        stderr(&out)
    );
}

//! Audit's status probe: with a remote engine, this machine's
//! /proc is not the engine's, so the status of a sandbox's main process is
//! read by a short-lived container of sbx's own image that joins the
//! sandbox's pid namespace (`docker run --pid container:ID`, see
//! `remote`) and runs `sbx __audit-probe CONTAINER PID` ([`serve`]).
//!
//! Which process: the one whose cgroup (kernel-written, and a sandbox cannot
//! move itself: its cgroup fs is read-only) names the container's id. Under
//! runc that is pid 1 of the joined namespace; under gVisor the container's
//! host process is the Sentry, which lives in the engine host's own pid
//! namespace (measured with runsc 20221219: `--pid container:` of a runsc
//! container joins the host's, where pid 1 is the host's init), at the pid
//! the engine reports. Pid 1 is tried first: under runc a process of the
//! sandbox may hold the engine's pid number inside its own namespace.
//!
//! The output is a fixed shape of at most [`MAX_OUTPUT`] bytes, and
//! [`parse`] takes nothing else: every field is checked for what the
//! kernel writes there.

use std::io::Read;
use std::path::Path;

use super::ProcStatus;

/// The first line of every answer (a version, so a future probe's output is never misread).
const MAGIC: &str = "sbx-audit-probe 1";
/// More than the probe ever prints.
pub const MAX_OUTPUT: usize = 1024;
/// The probe exits by itself after this, whatever a read waits for
/// (a sandbox can make reading its cmdline wait on its memory map).
const SELF_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);
/// How much of one /proc file the probe reads.
const MAX_PROC_FILE: u64 = 64 * 1024;

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The container's process: its pid in the probe's namespace, and its status.
    Process { pid: u32, status: ProcStatus },
    /// No process of the container is visible (it stopped meanwhile).
    Nothing,
}

/// In the probe's container: print what [`observe`] finds, then exit.
pub fn serve(container: &str, pid: &str) -> crate::error::Result<()> {
    // A tracer would need CAP_SYS_PTRACE from here on, whoever shares the namespace.
    let _ = nix::sys::prctl::set_dumpable(false);
    std::thread::spawn(|| {
        std::thread::sleep(SELF_DEADLINE);
        std::process::exit(3);
    });
    let valid = container.len() == 64 && container.bytes().all(|b| b.is_ascii_hexdigit());
    let pid: u32 = match pid.parse() {
        Ok(p) if valid => p,
        _ => {
            return Err(
                crate::model::invalid::Invalid::new("__audit-probe", container, "not a container id and pid").into()
            )
        }
    };
    let text = render(&observe(Path::new("/proc"), container, pid));
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| crate::error::Error::io("audit probe", e))
}

/// Find the container's process under `proc` (see the module's doc).
pub fn observe(proc: &Path, container: &str, engine_pid: u32) -> Found {
    let mut candidates = vec![1];
    if engine_pid > 1 {
        candidates.push(engine_pid);
    }
    for pid in candidates {
        let dir = proc.join(pid.to_string());
        let Some(cgroup) = read_bounded(&dir.join("cgroup")) else { continue };
        if !cgroup.lines().any(|l| l.contains(container)) {
            continue;
        }
        // The container's process, found: its status or nothing, never a
        // later candidate's (under runc that pid number is one the sandbox
        // can give a process of its choosing).
        return match ProcStatus::read(proc, pid as i64) {
            Some(status) => Found::Process { pid, status },
            None => Found::Nothing,
        };
    }
    Found::Nothing
}

/// A /proc file's first [`MAX_PROC_FILE`] bytes as text. Lossy: a status
/// file's `Name:` is the process's own comm, any bytes it sets
/// (`PR_SET_NAME`), and a strict read would let it hide its status.
pub(super) fn read_bounded(path: &Path) -> Option<String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path).ok()?.take(MAX_PROC_FILE).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The probe's answer, in the one shape [`parse`] takes.
pub fn render(found: &Found) -> String {
    match found {
        Found::Nothing => format!("{MAGIC}\nnone\nend\n"),
        Found::Process { pid, status: s } => {
            let program: String = s
                .program
                .chars()
                .take(64)
                .map(|c| if c.is_ascii_alphanumeric() || "._+-".contains(c) { c } else { '_' })
                .collect();
            format!(
                "{MAGIC}\npid {pid}\nuid {}\ncap_eff {}\ncap_prm {}\ncap_bnd {}\nno_new_privs {}\nseccomp {}\nprogram {program}\nend\n",
                s.uid, s.cap_eff, s.cap_prm, s.cap_bnd, s.no_new_privs, s.seccomp
            )
        }
    }
}

/// Read the probe's answer: exactly [`render`]'s shape, every value what
/// the kernel writes there; anything else is refused with the reason.
pub fn parse(out: &[u8]) -> Result<Found, String> {
    if out.len() > MAX_OUTPUT {
        return Err(format!("{} bytes, more than the probe ever prints", out.len()));
    }
    let text = std::str::from_utf8(out).map_err(|_| "not UTF-8".to_string())?;
    let body = text.strip_suffix('\n').ok_or("not ended by a newline")?;
    let lines: Vec<&str> = body.split('\n').collect();
    if lines.first() != Some(&MAGIC) || lines.last() != Some(&"end") {
        return Err("not the probe's answer".into());
    }
    let fields = &lines[1..lines.len() - 1];
    if fields == ["none"] {
        return Ok(Found::Nothing);
    }
    const KEYS: [&str; 8] = ["pid", "uid", "cap_eff", "cap_prm", "cap_bnd", "no_new_privs", "seccomp", "program"];
    if fields.len() != KEYS.len() {
        return Err(format!("{} fields, not {}", fields.len(), KEYS.len()));
    }
    let mut v = Vec::new();
    for (line, key) in fields.iter().zip(KEYS) {
        let value = line
            .strip_prefix(key)
            .and_then(|r| r.strip_prefix(' '))
            .ok_or_else(|| format!("expected {key}, got {:?}", line.chars().take(40).collect::<String>()))?;
        let digits = |n: usize| !value.is_empty() && value.len() <= n && value.bytes().all(|b| b.is_ascii_digit());
        let ok = match key {
            "pid" | "uid" => digits(10),
            "cap_eff" | "cap_prm" | "cap_bnd" => value.len() == 16 && value.bytes().all(|b| b.is_ascii_hexdigit()),
            // Absent from kernels before 4.10 (NoNewPrivs) and 3.8 (Seccomp): empty.
            "no_new_privs" => matches!(value, "" | "0" | "1"),
            "seccomp" => matches!(value, "" | "0" | "1" | "2"),
            _ => value.len() <= 64 && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b)),
        };
        if !ok {
            return Err(format!(
                "{key} {:?} is not what the kernel writes there",
                value.chars().take(40).collect::<String>()
            ));
        }
        v.push(value.to_string());
    }
    let pid = v[0].parse().map_err(|_| "pid out of range".to_string())?;
    let status = ProcStatus {
        uid: v[1].clone(),
        cap_eff: v[2].clone(),
        cap_prm: v[3].clone(),
        cap_bnd: v[4].clone(),
        no_new_privs: v[5].clone(),
        seccomp: v[6].clone(),
        program: v[7].clone(),
    };
    Ok(Found::Process { pid, status })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CID: &str = "abababababababababababababababababababababababababababababababab";

    fn ok() -> ProcStatus {
        ProcStatus {
            uid: "65534".into(),
            cap_eff: "0000000000000000".into(),
            cap_prm: "0000000000000000".into(),
            cap_bnd: "0000000000000000".into(),
            no_new_privs: "1".into(),
            seccomp: "2".into(),
            program: "agent".into(),
        }
    }

    #[test]
    fn what_the_probe_prints_reads_back_and_nothing_else_does() {
        let found = Found::Process { pid: 1, status: ok() };
        assert_eq!(parse(render(&found).as_bytes()), Ok(found));
        assert_eq!(parse(render(&Found::Nothing).as_bytes()), Ok(Found::Nothing));
        // A program name the probe cannot print as is is made safe, never refused.
        let odd = Found::Process { pid: 7, status: ProcStatus { program: "a b\nuid 0".into(), ..ok() } };
        let Ok(Found::Process { status, .. }) = parse(render(&odd).as_bytes()) else { panic!() };
        assert_eq!(status.program, "a_b_uid_0");
    }

    /// Whatever reaches sbx as the probe's stdout, only the one shape passes.
    #[test]
    fn hostile_answers_are_refused() {
        let good = render(&Found::Process { pid: 1, status: ok() });
        let cases: Vec<(String, &str)> = vec![
            (String::new(), "not ended by a newline"),
            (good.trim_end().to_string(), "not ended by a newline"),
            (good.replace("sbx-audit-probe 1", "sbx-audit-probe 2"), "not the probe's answer"),
            (good.replace("end\n", "end\nextra\n"), "not the probe's answer"),
            // A second uid line, as a forger would add after the real one.
            (good.replace("uid 65534\n", "uid 65534\nuid 0\n"), "fields"),
            (good.replace("uid 65534\n", ""), "fields"),
            (good.replace("uid 65534", "uid  65534"), "uid"),
            (good.replace("uid 65534", "uid 65534 0"), "uid"),
            (good.replace("uid 65534", "uid -1"), "uid"),
            (good.replace("cap_eff 0000000000000000", "cap_eff 0"), "cap_eff"),
            (good.replace("cap_prm 0000000000000000", "cap_prm 000000000000000g"), "cap_prm"),
            (good.replace("no_new_privs 1", "no_new_privs yes"), "no_new_privs"),
            (good.replace("seccomp 2", "seccomp 3"), "seccomp"),
            (good.replace("program agent", "program a/b"), "program"),
            (good.replace("program agent", &format!("program {}", "a".repeat(65))), "program"),
            (good.replace("pid 1", "pid 99999999999"), "pid"),
            (good.replace('\n', "\r\n"), "not the probe's answer"),
            (format!("{good}{good}"), "fields"),
            ("sbx-audit-probe 1\nnone\nuid 0\nend\n".into(), "fields"),
            (format!("{}\n", "x".repeat(MAX_OUTPUT)), "more than the probe ever prints"),
        ];
        for (text, why) in cases {
            let e = parse(text.as_bytes()).expect_err(&text);
            assert!(e.contains(why), "{text:?}: {e}");
        }
        assert_eq!(parse(b"sbx-audit-probe 1\n\xff\nend\n"), Err("not UTF-8".into()));
    }

    fn proc_with(entries: &[(u32, &str, &str)]) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sbx-status-probe-{}-{}", std::process::id(), rand::random::<u32>()));
        for (pid, cgroup, status) in entries {
            let d = dir.join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cgroup"), cgroup).unwrap();
            std::fs::write(d.join("status"), status).unwrap();
            std::fs::write(d.join("cmdline"), b"agent\0--flag\0").unwrap();
        }
        dir
    }

    const STATUS: &str = "Name:\tagent\nUid:\t65534\t65534\t65534\t65534\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n";

    /// runc: pid 1 of the joined namespace is the container's; gVisor: the
    /// host's init is pid 1 and the Sentry is at the engine's pid.
    #[test]
    fn the_process_is_the_one_in_the_container_s_cgroup() {
        let mine = format!("0::/docker/{CID}\n");
        let runc = proc_with(&[(1, &mine, STATUS), (4242, &mine, "Uid:\t0\t0\t0\t0\n")]);
        let Found::Process { pid, status } = observe(&runc, CID, 4242) else { panic!() };
        assert_eq!((pid, status.uid.as_str(), status.program.as_str()), (1, "65534", "agent"));

        let sentry = STATUS.replace("65534", "0");
        let gvisor =
            proc_with(&[(1, "0::/init.scope\n", STATUS), (4242, &format!("4:memory:/docker/{CID}\n0::/\n"), &sentry)]);
        let Found::Process { pid, status } = observe(&gvisor, CID, 4242) else { panic!() };
        assert_eq!((pid, status.uid.as_str()), (4242, "0"));

        // Another container's process is never taken for this one's.
        let other = proc_with(&[(1, &format!("0::/docker/{}\n", "c".repeat(64)), STATUS)]);
        assert_eq!(observe(&other, CID, 1), Found::Nothing);
        assert_eq!(observe(&other, CID, 0), Found::Nothing);
        for d in [runc, gvisor, other] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    /// The sandbox's pid 1 names itself with bytes that are not UTF-8
    /// (`prctl(PR_SET_NAME)`), and a process of its own holds the engine's
    /// pid number in its namespace: pid 1 is still the one read, as it is.
    #[test]
    fn a_process_cannot_hide_behind_its_name_or_send_the_probe_to_another() {
        let mine = format!("0::/docker/{CID}\n");
        let dir = proc_with(&[(1, &mine, STATUS), (4242, &mine, &STATUS.replace("65534", "1000"))]);
        let mut hostile = b"Name:\t\xff\xfeagent\n".to_vec();
        hostile.extend_from_slice(STATUS.replace("65534", "0").split_once('\n').unwrap().1.as_bytes());
        std::fs::write(dir.join("1/status"), &hostile).unwrap();
        let Found::Process { pid, status } = observe(&dir, CID, 4242) else { panic!("pid 1 hidden") };
        assert_eq!((pid, status.uid.as_str()), (1, "0"));
        // Pid 1 is the container's but gone meanwhile: nothing, not pid 4242.
        std::fs::remove_file(dir.join("1/status")).unwrap();
        assert_eq!(observe(&dir, CID, 4242), Found::Nothing);
        std::fs::remove_dir_all(dir).unwrap();
    }
}

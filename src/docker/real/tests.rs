//! The real runner against stand-in CLIs (`sleep`, `yes`, a shell script):
//! deadlines, start watches, output caps and spawn failures, no daemon needed.

use std::time::Duration;

use super::watch::START_GRACE;
use super::*;

use crate::docker::argv::os as argv;

#[test]
fn an_engine_that_never_answers_is_cut_off_at_the_deadline() {
    // A stand-in CLI that hangs like `docker ps` on a deadlocked engine.
    let d = RealDocker::new(Some("sleep".into())).with_deadlines(Deadlines {
        quick: Duration::from_millis(300),
        change: Duration::from_millis(300),
        pull: Duration::from_millis(300),
    });
    let started = std::time::Instant::now();
    match d.run(&argv(&["30"])) {
        Err(DockerError::Timeout { command, after }) => {
            assert_eq!(command, "docker 30");
            assert_eq!(verb(&argv(&["network", "rm", "--", "x"])), "docker network rm");
            assert_eq!(verb(&argv(&["ps", "-a", "--no-trunc"])), "docker ps");
            assert_eq!(after, Duration::from_millis(300));
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10), "returned at the deadline, not when sleep ended");
}

/// A stand-in CLI: `exec [OPTS] -- ID SECS` and `logs [OPTS] -- ID SECS`
/// run SECS (a helper call, 30);
/// `container inspect ... -- ID` answers at once, except for `c-hung`,
/// where it hangs like every call on a deadlocked engine; `wait -- ID`
/// returns after 0.3 s for `c-ends` (its container stops), never for the
/// others (in the test's time). Logs its verbs.
fn stand_in(dir: &std::path::Path) -> RealDocker {
    std::fs::create_dir_all(dir).unwrap();
    let script = format!(
        "#!/bin/sh\necho \"$1\" >> '{log}'\n\
         case \"$1\" in\n\
         exec|logs) while [ \"$1\" != -- ]; do shift; done\n\
           [ \"$3\" = /run/sbx/helper ] && exec sleep 30; exec sleep \"$3\" ;;\n\
         pull) echo '0123456789ab: Pulling fs layer'; exec sleep 30 ;;\n\
         container) [ \"$6\" = c-hung ] && exec sleep 30; echo running ;;\n\
         wait) [ \"$3\" = c-ends ] && {{ sleep 0.3; echo 137; exit 0; }}; exec sleep 30 ;;\n\
         esac\n",
        log = dir.join("calls").display()
    );
    let path = dir.join("docker");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    RealDocker::new(Some(path.into())).with_deadlines(Deadlines {
        quick: Duration::from_millis(300),
        change: Duration::from_millis(300),
        pull: Duration::from_millis(300),
    })
}

#[test]
fn a_pull_is_cut_off_at_its_deadline_and_ended_by_a_stop_at_once() {
    let dir = std::env::temp_dir().join(format!("sbx-pullguard-{}", rand::random::<u64>()));
    let d = stand_in(&dir);
    let started = std::time::Instant::now();
    let mut seen = String::new();
    let r = d.run_stream(&argv(&["pull", "--", "r@sha256:0"]), None, &mut |r| r.read_to_string(&mut seen).map(drop));
    match r {
        Err(DockerError::Timeout { command, after }) => {
            assert_eq!((command.as_str(), after), ("docker pull", Duration::from_millis(300)))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(seen, "0123456789ab: Pulling fs layer\n", "its output streamed until the kill");
    assert!(started.elapsed() < Duration::from_secs(10));
    // Ctrl-C (the stop check) ends it long before its deadline; the caller says why.
    let asked = std::time::Instant::now() + Duration::from_millis(200);
    let d = stand_in(&dir)
        .with_deadlines(Deadlines { pull: Duration::from_secs(60), ..Deadlines::default() })
        .with_stop(std::sync::Arc::new(move || std::time::Instant::now() >= asked));
    let started = std::time::Instant::now();
    let s = d.run_stream(&argv(&["pull", "--", "r@sha256:0"]), None, &mut |r| drain(r)).unwrap();
    assert_eq!(s.status, 137, "killed");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stream_on_a_hung_engine_is_cut_off_at_its_start_deadline() {
    let dir = std::env::temp_dir().join(format!("sbx-startwatch-{}", rand::random::<u64>()));
    let d = stand_in(&dir);
    let started = std::time::Instant::now();
    let hung = |r: Result<(), DockerError>, what: &str| match r {
        Err(DockerError::Timeout { command, after }) => {
            assert_eq!(command, what);
            assert_eq!(after, START_GRACE + Duration::from_millis(300));
        }
        other => panic!("{what}: {other:?}"),
    };
    // Attached (exec), streamed (logs -f, cp), and run whole (helper calls).
    let attach = Attach { stdin: false, capture_stderr: true };
    hung(d.run_attached(&argv(&["exec", "--", "c-hung", "30"]), attach).map(drop), "docker exec");
    hung(d.run_stream(&argv(&["logs", "--", "c-hung", "30"]), None, &mut |r| drain(r)).map(drop), "docker logs");
    hung(d.run(&argv(&["exec", "--", "c-hung", "30"])).map(drop), "docker exec");
    assert!(started.elapsed() < Duration::from_secs(15), "cut off at the start deadline, not after 30 s");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stream_on_a_working_engine_runs_as_long_as_it_likes_and_a_short_one_costs_no_call() {
    let dir = std::env::temp_dir().join(format!("sbx-startwatch-{}", rand::random::<u64>()));
    let d = stand_in(&dir);
    let calls = || std::fs::read_to_string(dir.join("calls")).unwrap_or_default();
    let attach = Attach { stdin: false, capture_stderr: false };
    assert_eq!(d.run_attached(&argv(&["exec", "--", "c-ok", "0"]), attach).unwrap().0, 0);
    assert_eq!(calls(), "exec\n", "no look-up for a call that ended within the grace");
    let started = std::time::Instant::now();
    assert_eq!(d.run_attached(&argv(&["exec", "--", "c-ok", "2"]), attach).unwrap().0, 0);
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert_eq!(
        calls(),
        "exec\nexec\ncontainer\nwait\n",
        "one look-up; the engine answered, the stream went on, its sandbox watched"
    );
    let r = d.run_stream(&argv(&["logs", "--", "c-ok", "2"]), None, &mut |r| drain(r)).unwrap();
    assert_eq!(r.status, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `docker exec` stream whose container stops or goes is cut once
/// `docker wait` says so (plus END_GRACE), in every mode: under gVisor on
/// engine 20.10 the exec itself need not return (connect, exec, transfers hung).
#[test]
fn an_exec_stream_whose_sandbox_ends_is_cut_and_says_so() {
    use super::watch::END_GRACE;
    let dir = std::env::temp_dir().join(format!("sbx-endwatch-{}", rand::random::<u64>()));
    let d = stand_in(&dir);
    let calls = || std::fs::read_to_string(dir.join("calls")).unwrap_or_default();
    let ended = |r: Result<(), DockerError>, what: &str, started: std::time::Instant| {
        match r {
            Err(DockerError::Ended { container }) => assert_eq!(container, "c-ends", "{what}"),
            other => panic!("{what}: {other:?}"),
        }
        let took = started.elapsed();
        assert!(took >= START_GRACE + END_GRACE && took < Duration::from_secs(10), "{what}: {took:?}");
    };
    let attach = Attach { stdin: false, capture_stderr: true };
    let t = std::time::Instant::now();
    ended(d.run_attached(&argv(&["exec", "--", "c-ends", "30"]), attach).map(drop), "attached", t);
    let t = std::time::Instant::now();
    ended(d.run(&argv(&["exec", "--", "c-ends", "30"])).map(drop), "captured", t);
    let t = std::time::Instant::now();
    ended(d.run_stream(&argv(&["exec", "--", "c-ends", "30"]), None, &mut |r| drain(r)).map(drop), "streamed", t);
    let t = std::time::Instant::now();
    let p = d.open_pipe(&argv(&["exec", "--", "c-ends", "30"])).unwrap();
    let (mut out, wait) = (p.stdout, p.wait);
    drain(&mut out).unwrap();
    ended(wait().map(drop), "piped", t);
    assert_eq!(calls(), "exec\ncontainer\nwait\n".repeat(4), "each: its start probed, then its sandbox watched");
    // A stream with an idle deadline (a helper's listing) has its start
    // bounded by that, and is watched all the same.
    std::fs::remove_file(dir.join("calls")).unwrap();
    let listing = argv(&["exec", "--", "c-ends", "/run/sbx/helper", "list", "/", "1", "9"]);
    let d = stand_in(&dir).with_deadlines(Deadlines::default());
    let t = std::time::Instant::now();
    ended(d.run_stream(&listing, None, &mut |r| drain(r)).map(drop), "listing", t);
    assert_eq!(calls(), "exec\nwait\n");
    // `docker logs` ends by itself (not watched); with -f it is watched
    // (under runsc it hung after a destroy).
    std::fs::remove_file(dir.join("calls")).unwrap();
    let d = stand_in(&dir);
    let r = d.run_stream(&argv(&["logs", "--", "c-ends", "2"]), None, &mut |r| drain(r)).unwrap();
    assert_eq!((r.status, calls()), (0, "logs\ncontainer\n".to_string()));
    let t = std::time::Instant::now();
    let attach = Attach { stdin: false, capture_stderr: true };
    ended(d.run_attached(&argv(&["logs", "--follow", "--", "c-ends", "30"]), attach).map(drop), "logs -f", t);
    let _ = std::fs::remove_dir_all(&dir);
}

fn drain(r: &mut dyn Read) -> std::io::Result<()> {
    std::io::copy(r, &mut std::io::sink()).map(drop)
}

#[test]
fn start_probes_name_the_stream_s_container() {
    let p = start_probe(&argv(&["exec", "-i", "-e", "A=--", "--", "sbx-0123", "cat"])).unwrap();
    assert_eq!(p, argv(&["container", "inspect", "--format", "{{.State.Status}}", "--", "sbx-0123"]));
    assert!(start_probe(&argv(&["events"])).is_none());
    let d = RealDocker::new(None);
    let mut child = Command::new("true").spawn().unwrap();
    assert!(
        d.watch_start(&argv(&["ps", "--", "x"]), &child, true, true).is_none(),
        "prompt calls have their own deadline"
    );
    child.wait().unwrap();
}

/// A call whose output never ends (what a sandbox can make `sbx ps`
/// print) is stopped past MAX_OUTPUT, with and without a deadline.
#[test]
fn endless_output_is_cut_off_at_the_cap() {
    for d in [
        RealDocker::new(Some("yes".into())),
        RealDocker::new(Some("yes".into())).with_deadlines(Deadlines {
            quick: Duration::from_secs(60),
            change: Duration::from_secs(60),
            pull: Duration::from_secs(60),
        }),
    ] {
        // `exec x` has no deadline and no container to watch; `exec -- ID`
        // (how `sbx ps` asks the helper) is watched at its start.
        for call in [&["exec", "x"][..], &["exec", "--", "sbx-000000000001", "ps"][..]] {
            match d.run(&argv(call)) {
                Err(DockerError::Parse { reason, .. }) => assert!(reason.contains("more than 64 MiB"), "{reason}"),
                other => panic!("{call:?}: {other:?}"),
            }
        }
    }
    // Short output is whole.
    let out = RealDocker::new(Some("echo".into())).run(&argv(&["hi"])).unwrap();
    assert_eq!(out.stdout, b"hi\n");
}

#[test]
fn a_context_goes_before_every_subcommand() {
    // `--context NAME`: the CLI's global option, ahead of the subcommand.
    let d = RealDocker::new(Some("echo".into())).with_context(Some("far"));
    assert_eq!(d.run(&argv(&["ps", "-q"])).unwrap().stdout, b"--context far ps -q\n");
    let d = RealDocker::new(Some("echo".into())).with_context(None);
    assert_eq!(d.run(&argv(&["ps"])).unwrap().stdout, b"ps\n");
}

#[test]
fn real_docker_reports_spawn_failure() {
    let d = RealDocker::new(Some("/nonexistent/docker".into()));
    match d.run(&[]) {
        Err(DockerError::Spawn { program, .. }) => assert_eq!(program, "/nonexistent/docker"),
        other => panic!("{other:?}"),
    }
}

/// A docker killed by a signal reports 128+N whichever way it ran (the
/// captured-with-input path once said -1).
#[test]
fn a_signal_death_is_128_plus_n_in_every_mode() {
    let d = RealDocker::new(Some("sh".into()));
    let die = argv(&["-c", "cat >/dev/null; kill -9 $$"]);
    assert_eq!(d.run(&die).unwrap().status, 137);
    assert_eq!(d.run_input(&die, b"x").unwrap().status, 137);
    assert_eq!(d.spawn(&die).unwrap().wait().unwrap().status, 137);
    let s = d.run_stream(&die, Some(&mut |w| w.write_all(b"x")), &mut |r| drain(r)).unwrap();
    assert_eq!(s.status, 137);
    let p = d.open_pipe(&die).unwrap();
    drop(p.stdin);
    assert_eq!((p.wait)().unwrap().0, 137);
}

/// `stop` ends a pipe that would never end on its own (`docker events`),
/// its whole process group included, and is harmless once it has exited.
#[test]
fn stop_kills_a_piped_stream_and_its_group() {
    let d = RealDocker::new(Some("sh".into()));
    let p = d.open_pipe(&argv(&["-c", "sleep 600 & echo $!; wait"])).unwrap();
    let mut stdout = p.stdout;
    let mut line = [0u8; 32];
    let n = stdout.read(&mut line).unwrap();
    let grandchild: i32 = String::from_utf8_lossy(&line[..n]).trim().parse().unwrap();
    (p.stop)();
    assert_eq!((p.wait)().unwrap().0, 137);
    (p.stop)();
    let gone = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(grandchild), None).is_err()
            || std::fs::read_to_string(format!("/proc/{grandchild}/stat")).is_ok_and(|s| s.contains(") Z "))
    });
    assert!(gone, "the stream's own children outlived stop");
}

/// A helper's `receive` its sandbox stopped (SIGSTOP) takes no more input
/// and never answers: `cp` in and `restore` hung for ever. It gets an idle
/// deadline on what it takes, so one that keeps taking input, however
/// slowly in all, runs on.
#[test]
fn a_receive_that_takes_nothing_is_cut_off_and_a_slow_one_runs_on() {
    let dir = std::env::temp_dir().join(format!("sbx-receive-{}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("docker");
    std::fs::write(
        &script,
        "#!/bin/sh\ncase \"$*\" in\n\
         *receive\\ /slow*) for i in 1 2 3 4 5 6 7 8; do head -c 65536 >/dev/null; sleep 0.3; done; cat >/dev/null ;;\n\
         *) exec sleep 30 ;;\n\
         esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // Slower in all (2.4 s) than twice the idle deadline: the answer's read
    // is timed from the input's close, not from its start (`Waiting`).
    let limit = Duration::from_secs(1);
    let d = RealDocker::new(Some(script.into())).with_deadlines(Deadlines {
        quick: limit,
        change: limit,
        pull: Duration::from_secs(60),
    });
    let receive = |to: &str| argv(&["exec", "-i", "--", "c", "/run/sbx/helper", "receive", to]);
    let input = vec![7u8; 1 << 20];
    let started = std::time::Instant::now();
    let r = d.run_stream(&receive("/stopped"), Some(&mut |w| w.write_all(&input)), &mut |r| drain(r));
    match r {
        Err(DockerError::Timeout { after, .. }) => assert_eq!(after, limit),
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let started = std::time::Instant::now();
    let s = d
        .run_stream(&receive("/slow"), Some(&mut |w| w.write_all(&input)), &mut |r| drain(r))
        .unwrap_or_else(|e| panic!("the slow receive after {:?}: {e:?}", started.elapsed()));
    assert_eq!(s.status, 0, "{:?}", s.input);
    assert!(started.elapsed() > limit * 2, "slower in all than the idle deadline: {:?}", started.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}

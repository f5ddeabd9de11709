//! Helper calls through the fake docker: what their failures and silences say.

use super::*;
use crate::docker::fake::FakeDocker;
use crate::workbench::transfer::Limits;
use crate::workbench::{backup, cp, kill, logs, CpSide, Target};

/// A stream into a sandbox that goes under it ends in sbx's words
/// (`not_running`), whichever way it ends: cut by the runner's watch
/// (runsc: the exec never returned), or killed (runc: exit 137) with
/// docker then saying the sandbox is gone. One that fails while its
/// sandbox runs keeps its own error or code.
#[test]
fn a_stream_whose_sandbox_went_says_so() {
    use crate::workbench::{exec, ps, wait_port, ExecOpts};
    let id = "sbx-0123456789ab";
    let gone = |f: &FakeDocker| {
        f.push(Output::fail(1, &format!("Error: No such object: {id}")));
    };
    let not_running = |r: Result<()>, what: &str| match r {
        Err(Error::Sandbox(SandboxError::NotRunning { id: got, state })) => {
            assert_eq!((got.as_str(), state.as_str()), (id, crate::error::ENDED), "{what}")
        }
        other => panic!("{what}: {other:?}"),
    };
    let f = FakeDocker::new();
    let t = Target::test(&f, id);
    let o = ExecOpts::default();
    let cmd = ["sleep".to_string()];
    f.push_ended("", id);
    not_running(exec(&t, &o, &cmd).map(drop), "exec cut");
    f.push(Output::fail(137, ""));
    gone(&f);
    not_running(exec(&t, &o, &cmd).map(drop), "exec killed");
    f.push(Output::fail(137, ""));
    f.push(Output::ok("exited 137"));
    not_running(logs(&t, Some("p0000abcd"), true, None).map(drop), "logs -f HANDLE killed");
    f.push_ended("", id);
    assert_eq!(ps::logs(&t, None, true, None).unwrap(), 0, "the sandbox's own output ends with it");
    f.push(Output::fail(137, ""));
    gone(&f);
    not_running(wait_port(&t, 80, std::time::Duration::from_secs(60)).map(drop), "wait-port");
    let to = std::env::temp_dir();
    let src = CpSide::Sandbox { id: t.clone(), path: "/tmp/big".into() };
    f.push(Output::fail(137, ""));
    gone(&f);
    not_running(cp(&src, &CpSide::Host(to), &Limits::default()).map(drop), "cp out");
    f.push(Output::fail(137, ""));
    gone(&f);
    not_running(backup(&t, std::io::sink(), &Limits::default()).map(drop), "backup");
    // A listing killed mid-line: the cut-off line is the sandbox's end too.
    f.push(Output { status: 137, stdout: b"ROOT d\nE f 644 3 1".to_vec(), stderr: vec![] });
    gone(&f);
    let opts = crate::workbench::ListOpts { max_depth: 1, limit: 10 };
    not_running(crate::workbench::list(&t, "/tmp", opts, &mut |_| Ok(())).map(drop), "files");
    assert_eq!(f.remaining(), 0);
    // The sandbox runs: the command's own death by signal keeps its code,
    // after docker said `running` each time it was asked.
    f.push(Output::fail(137, ""));
    for _ in 0..STILL_RUNS_ASKS {
        f.push(Output::ok("running 0"));
    }
    assert_eq!(exec(&t, &o, &cmd).unwrap(), 137);
    // A helper's own word is not second-guessed: no look-up.
    f.push(Output::fail(helper_exit::NO_SUCH_PATH, ""));
    assert_eq!(backup(&t, std::io::sink(), &Limits::default()).unwrap_err().kind(), "no_such_path");
    assert_eq!(f.remaining(), 0);
    let helper = |args: &str| format!("exec -- {id} /run/sbx/helper {args}");
    let (sleep, asked) = (format!("exec -- {id} sleep"), format!("container inspect -- {id}"));
    let mut want = vec![sleep.clone(), sleep.clone(), asked.clone(), helper("logs p0000abcd -f -1"), asked.clone()];
    want.push(format!("logs --follow -- {id}"));
    for args in ["wait-port 80 60000", "send /tmp/big", "send /state/workspace", "list /tmp 1 10"] {
        want.extend([helper(args), asked.clone()]);
    }
    want.push(sleep);
    want.extend(std::iter::repeat_n(asked, STILL_RUNS_ASKS));
    want.push(helper("send /state/workspace"));
    assert_eq!(f.brief(), want, "a look-up only after a failure that may be the sandbox's end");
}

/// A helper call cut off at its deadline is the helper's silence (a
/// process in the sandbox can SIGSTOP it at will), never "the Docker
/// engine did not answer" with a hint to restart dockerd: for the
/// one-shot verbs and the streams alike.
#[test]
fn a_helper_that_stops_answering_is_named_never_the_engine() {
    use crate::workbench::{exec_detached, ps, restore, ExecOpts};
    let f = FakeDocker::new();
    let id = "sbx-0123456789ab";
    let t = Target::test(&f, id);
    let secs = std::time::Duration::from_secs(3);
    let silent = |r: Result<()>, doing: &str| match r {
        Err(e @ Error::Explained(Explained::HelperTimeout { .. })) => {
            assert_eq!(e.kind(), "helper_timeout");
            let msg = e.to_string();
            assert_eq!(
                msg,
                format!("sbx's helper in sandbox {id} did not answer for 3s while {doing}; sbx stopped waiting")
            );
            assert!(!msg.contains("engine") && !e.hint().unwrap().contains("dockerd"), "{msg}");
        }
        other => panic!("{doing}: {other:?}"),
    };
    f.push_timeout(secs);
    silent(ps(&t).map(drop), "listing background processes");
    f.push_timeout(secs);
    silent(crate::workbench::wait_port(&t, 80, secs).map(drop), "waiting for port 80");
    f.push_timeout(secs);
    silent(kill(&t, "p0000abcd", 15), "signalling p0000abcd");
    f.push_timeout(secs);
    let cmd = ["srv".to_string()];
    silent(
        exec_detached(&t, &ExecOpts::default(), "p0000abcd", &cmd).map(drop),
        "starting background process p0000abcd",
    );
    f.push_timeout(secs);
    silent(backup(&t, std::io::sink(), &Limits::default()).map(drop), "reading /state/workspace");
    f.push_timeout(secs);
    let src = CpSide::Sandbox { id: t.clone(), path: "/tmp/x".into() };
    silent(cp(&src, &CpSide::Host(std::env::temp_dir()), &Limits::default()).map(drop), "reading /tmp/x");
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_size(0);
    tar.append_data(&mut h, "d", std::io::empty()).unwrap();
    let tar = tar.into_inner().unwrap();
    f.push_timeout(secs);
    silent(restore(&t, tar.as_slice(), &Limits::default()), "writing /state/workspace");
    assert_eq!(f.remaining(), 0);
    let helper = |args: &str| format!("exec -- {id} /run/sbx/helper {args}");
    let mut want: Vec<String> = ["ps", "wait-port 80 3000", "kill p0000abcd 15", "bg p0000abcd -- srv"]
        .into_iter()
        .chain(["send /state/workspace", "send /tmp/x"])
        .map(helper)
        .collect();
    want.push(format!("exec -i -- {id} /run/sbx/helper receive /state/workspace --replace"));
    assert_eq!(f.brief(), want, "a silence is never followed by a look-up");
}

/// A refusal inside an io::Error is a transfer error; a failed system
/// call stays one. Both say the context and the same text.
#[test]
fn transfer_failures_tell_refusals_from_io() {
    use crate::error::HostError;
    use crate::workbench::transfer::wire::refused;
    let e = transfer_failure("copying x".into(), refused(std::io::ErrorKind::InvalidData, "refusing entry \"..\""));
    assert!(matches!(&e, Error::Transfer(TransferError::Refused { reason, .. }) if reason == "refusing entry \"..\""));
    assert_eq!(e.to_string(), "copying x: refusing entry \"..\"");
    let e = transfer_failure("copying x".into(), std::io::Error::from_raw_os_error(28));
    assert!(matches!(&e, Error::Host(HostError::Io { source, .. }) if source.raw_os_error() == Some(28)), "{e}");
    assert_eq!(e.to_string(), "copying x: No space left on device (os error 28)");
}

/// The helper's exit codes become sbx's words; its
/// text (the sandbox's) and docker's argv never make the message.
#[test]
fn helper_failures_are_said_in_sbx_words() {
    let f = FakeDocker::new();
    let id = "sbx-0123456789ab";
    let t = Target::test(&f, id);
    f.push(Output::fail(helper_exit::EXITED, ""));
    let e = kill(&t, "p0000abcd", 15).unwrap_err();
    assert_eq!(e.to_string(), "background process p0000abcd in sandbox sbx-0123456789ab has already exited");
    assert_eq!(e.kind(), "process_exited");
    f.push(Output::fail(helper_exit::NO_PROCESS, ""));
    let e = kill(&t, "p0000abcd", 15).unwrap_err();
    assert_eq!(e.kind(), "no_such_process");
    assert!(e.hint().unwrap().contains("sbx ps sbx-0123456789ab"));
    f.push(Output::fail(helper_exit::NO_PROCESS, ""));
    assert_eq!(logs(&t, Some("p00000000"), false, None).unwrap_err().kind(), "no_such_process");
    f.push(Output::fail(helper_exit::READ_ONLY, ""));
    let e = cp(
        &CpSide::Host("/dev/null".into()),
        &CpSide::Sandbox { id: t.clone(), path: "/etc/a.txt".into() },
        &Limits::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), "read_only");
    assert!(e.to_string().contains("/etc/a.txt") && e.to_string().contains("read-only"), "{e}");
    assert!(e.hint().unwrap().contains("/tmp"), "{:?}", e.hint());
    f.push(Output::fail(helper_exit::NO_SUCH_PATH, ""));
    let e = backup(&t, std::io::sink(), &Limits::default()).unwrap_err();
    assert_eq!(e.to_string(), "sandbox sbx-0123456789ab has no /state/workspace");
    // Docker's own answer for an exited sandbox.
    f.push(Output::fail(1, "Error response from daemon: Container 0123abcd is not running"));
    let e = kill(&t, "p0000abcd", 15).unwrap_err();
    assert_eq!((e.kind(), e.to_string().contains("Error response")), ("not_running", false), "{e}");
    // Anything else: what sbx was doing, the sandbox's words labelled and made printable.
    f.push(Output::fail(1, "sbx-helper: weird \x1b[2Jthing"));
    let e = kill(&t, "p0000abcd", 15).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("signalling p0000abcd") && msg.contains("the sandbox said: weird"), "{msg}");
    assert!(!msg.contains("docker exec") && !msg.contains('\x1b'), "{msg}");
    let helper = |args: &str| format!("exec -- {id} /run/sbx/helper {args}");
    let kill = helper("kill p0000abcd 15");
    let mut want = vec![kill.clone(), kill.clone(), helper("logs p00000000 -1")];
    want.push(format!("exec -i -- {id} /run/sbx/helper receive /etc/a.txt"));
    want.extend([helper("send /state/workspace"), kill.clone(), kill]);
    assert_eq!(f.brief(), want);
}

//! A create that fails or is interrupted part-way: what it reports and what the rollback removes.

use super::*;
use crate::error::{ImageError, SandboxError};

#[test]
fn failed_run_is_torn_down() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::fail(125, "docker: Error response from daemon: OCI runtime create failed"));
    rig.removed();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(err, Error::Docker(DockerError::Status { status: 125, .. })), "{err:?}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "rm"]);
    assert_eq!(rig.fake.calls()[2], ["rm", "-f", "-v", "--", ID]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn failed_attach_is_torn_down() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok(&(net_line("sbx-a", true, true) + &net_line("sbx-b", true, true))));
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.fake.push(Output::fail(1, "Error response from daemon: network sbx-b not found"));
    rig.removed();
    let err = rig.driver().create(&spec(routes(&["a:a:1", "b:b:2"]))).unwrap_err();
    assert!(matches!(err, Error::Docker(DockerError::Status { .. })));
    assert_eq!(rig.fake.verbs(), ["image inspect", "network inspect", "create", "network connect", "rm"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn death_at_boot_reports_logs_and_cleans_up() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.fake.push(Output::ok("0 exited 3\n"));
    rig.fake.push(Output { status: 0, stdout: b"starting\n".to_vec(), stderr: b"panic: no config\n".to_vec() });
    rig.removed();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    match &err {
        Error::Sandbox(SandboxError::DiedAtBoot { code, logs, .. }) => {
            assert_eq!(*code, 3);
            assert!(logs.contains("starting") && logs.contains("panic: no config"));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("panic: no config"));
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "logs", "rm"]);
    assert_eq!(
        rig.fake.calls()[2],
        ["container", "inspect", "--format", "{{.State.Pid}} {{.State.Status}} {{.State.ExitCode}}", "--", ID]
    );
    assert_eq!(rig.fake.calls()[3], ["logs", "--tail", "20", "--", ID]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn socket_timeout_reports_logs_and_cleans_up() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.running();
    rig.fake.push(Output::ok(""));
    rig.removed();
    let s = spec(CreateRequest { socket_wait: Some("60ms".into()), ..Default::default() });
    let err = rig.driver().create(&s).unwrap_err();
    assert!(
        matches!(err, Error::Sandbox(SandboxError::SocketTimeout { ref waited, .. }) if waited == "60ms"),
        "{err:?}"
    );
    assert!(err.to_string().contains("logged nothing"));
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "logs", "rm"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn socket_wait_zero_does_not_wait() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.running();
    let s = spec(CreateRequest { socket_wait: Some("0".into()), ..Default::default() });
    rig.driver().create(&s).unwrap();
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect"]);
}

#[test]
fn hostile_socket_fails_the_create() {
    let rig = Rig::new();
    rig.image("");
    let dir = rig.sock_dir();
    rig.fake.push_with(Output::ok("x\n"), move |_| {
        std::os::unix::fs::symlink("/var/run/docker.sock", dir.join("sandbox.sock")).unwrap();
    });
    rig.running();
    rig.removed();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(
        matches!(err, Error::Socket(SocketError::Hostile { ref reason, .. }) if reason.contains("symlink")),
        "{err:?}"
    );
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "rm"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn interrupt_during_wait_tears_down_and_exits_128_plus_signal() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("x\n"));
    rig.running();
    rig.removed();
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    // Signals arrive on the 5th check (while waiting for the socket).
    let driver = rig.driver().with_interrupts(Arc::new(move || (p.fetch_add(1, Ordering::SeqCst) >= 4).then_some(2)));
    let err = driver.create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(err, Error::Interrupted { signal: 2 }));
    assert_eq!(err.exit_code(), 130);
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "rm"]);
    assert!(!rig.sock_dir().exists());
}

#[test]
fn interrupt_before_anything_exists_makes_nothing() {
    let rig = Rig::new();
    let driver = rig.driver().with_interrupts(Arc::new(|| Some(15)));
    let err = driver.create(&spec(CreateRequest::default())).unwrap_err();
    assert_eq!(err.exit_code(), 143);
    assert!(rig.fake.calls().is_empty());
    assert!(!rig.sock_dir().exists());
}

/// `/run/sbx -> /tmp/sbx` in the image: the kernel shows the mount under
/// /tmp in the main process's mount table (the driver's /proc is made).
fn redirect_run_sbx(rig: &Rig) {
    let proc = rig.root.with_extension("proc");
    std::fs::write(proc.join("4242/mountinfo"), MOUNTINFO.replace(" /run/sbx ro,", " /tmp/sbx ro,")).unwrap();
}

#[test]
fn an_image_that_redirects_a_mount_is_refused_and_removed() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.running();
    // The failure is confirmed on the same, still running process.
    rig.running();
    rig.removed();
    let driver = rig.driver();
    redirect_run_sbx(&rig);
    let err = driver.create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(&err, Error::Image(ImageError::Redirected { path, .. }) if path == "/run/sbx"), "{err:?}");
    assert_eq!(err.exit_code(), 1);
    assert!(err.to_string().contains(&format!("image {IMG} redirects /run/sbx")), "{err}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "container inspect", "rm"]);
    assert!(!rig.sock_dir().exists());
    assert!(rig.state().record(ID).is_none());
}

/// Relayed, the first probe runs while the mounts are read: its "ready"
/// (which the image's own helper at a redirected /run/sbx could give)
/// never outweighs the check.
#[test]
fn a_relayed_probe_that_answers_does_not_outweigh_a_redirected_mount() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.fake.push(Output::ok(""));
    rig.running();
    rig.running();
    rig.removed();
    let driver = rig.driver();
    redirect_run_sbx(&rig);
    let s = spec(CreateRequest { channel: crate::host::channel::Choice::Exec, ..Default::default() });
    let err = driver.create(&s).unwrap_err();
    assert!(matches!(&err, Error::Image(ImageError::Redirected { path, .. }) if path == "/run/sbx"), "{err:?}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "exec", "container inspect", "container inspect", "rm"]);
    assert!(rig.state().record(ID).is_none());
}

#[test]
fn a_sandbox_that_exits_while_its_mounts_are_read_is_a_boot_crash() {
    // The pid was running at the look-up and gone at the read of its
    // mountinfo (a race the live boot-crash test hit): not a redirected image.
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.fake.push(Output::ok("4343 running 0\n"));
    rig.fake.push(Output::ok("0 exited 3\n"));
    rig.fake.push(Output::ok("crashing on purpose\n"));
    rig.removed();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err();
    assert!(matches!(&err, Error::Sandbox(SandboxError::DiedAtBoot { code: 3, .. })), "{err:?}");
    assert!(err.to_string().contains("crashing on purpose"), "{err}");
    let verbs = ["image inspect", "run", "container inspect", "container inspect", "logs", "rm"];
    assert_eq!(rig.fake.verbs(), verbs);
    assert_eq!(rig.fake.calls()[4], ["logs", "--tail", "20", "--", ID]);
    assert_eq!(rig.fake.calls()[5], ["rm", "-f", "-v", "--", ID], "the crashed sandbox is removed");
}

/// A hostile image's boot output is quoted in sbx's own error: its escape
/// sequences (OSC 52 sets the operator's clipboard, CSI rewrites the
/// screen, `\r` hides a line) must reach the terminal inert, and a huge
/// line must not become a huge message.
#[test]
fn boot_logs_quoted_in_an_error_are_inert_and_bounded() {
    let rig = Rig::new();
    rig.image("");
    rig.fake.push(Output::ok("deadbeef\n"));
    rig.fake.push(Output::ok("0 exited 3\n"));
    let mut out = b"\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07ok\r\x1b[2Kall fine\n\xc2\x9b31m".to_vec();
    out.extend(std::iter::repeat_n(b'A', 1 << 20));
    out.extend(b"\nlast line\n");
    rig.fake.push(Output { status: 0, stdout: out, stderr: vec![] });
    rig.removed();
    let err = rig.driver().create(&spec(CreateRequest::default())).unwrap_err().to_string();
    assert!(!err.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "{:?}", &err[..200.min(err.len())]);
    assert!(err.len() < 20 * 1024, "{} bytes", err.len());
    assert!(err.contains("last line"), "the end of the output is kept");
    assert_eq!(rig.fake.verbs(), ["image inspect", "run", "container inspect", "logs", "rm"]);
    assert_eq!(rig.fake.calls()[3], ["logs", "--tail", "20", "--", ID]);
    assert_eq!(rig.fake.calls()[4], ["rm", "-f", "-v", "--", ID]);
}

//! gVisor on a remote engine: `--runtime runsc` over ssh, where
//! the helper comes from the readable copy of the helper volume
//! (`sbx-helper-KEY-r`: runsc must read a file to exec it) and the channel
//! is relayed through it.

use std::process::{Command, Stdio};

use crate::remote::sbx;
use crate::support::*;

#[test]
fn a_gvisor_sandbox_lives_on_a_remote_engine() {
    let remote = Remote::start();
    let w = World::new();
    let env = remote.env();
    let runtimes = docker_ok(&["info", "--format", "{{json .Runtimes}}"]);
    assert!(runtimes.contains("\"runsc\""), "register runsc first (`sudo .ci/register-runsc runsc`): {runtimes}");
    let label = w.case_label();
    let out = sbx(&w, &["--json", "create", "--runtime", "runsc", "--image", &w.image, "--label", &label], &env);
    assert_success(&out, "create --runtime runsc over ssh");
    let v = json(&out);
    let sb = w.adopt(v["id"].as_str().unwrap());
    assert_eq!(v["channel"].as_str(), Some("exec"), "{v}");
    assert_eq!(sb.inspect("{{.HostConfig.Runtime}}"), "runsc");
    let mounts = sb.inspect("{{range .Mounts}}{{.Name}} {{.Destination}} {{.RW}};{{end}}");
    assert!(mounts.contains("-r /run/sbx false;"), "the readable helper volume, read-only: {mounts}");

    // Several MiB byte-exact, then an interactive exchange, through the relay.
    let data = blob(3 << 20);
    let mut c = Command::new(SBX);
    c.args(w.dir_args()).args(["connect", &sb.id]).stdin(Stdio::piped()).stdout(Stdio::piped());
    c.env_remove("DOCKER_CONTEXT").envs(env.iter().map(|(k, v)| (k, v)));
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feed = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &data).map(|_| data));
    let got = child.wait_with_output().unwrap();
    let data = feed.join().unwrap().unwrap();
    assert!(got.status.success(), "connect over ssh under runsc: {:?}", got.status);
    assert!(got.stdout == data, "connect changed the bytes ({} of {})", got.stdout.len(), data.len());
    let mut connect = Command::new(SBX);
    connect.args(w.dir_args()).args(["connect", &sb.id]);
    connect.envs(env.iter().map(|(k, v)| (k, v)));
    line_by_line(connect, &["one", "two"], |l| l.to_string());

    let out = sbx(&w, &["exec", &sb.id, "--", "/bin/fixture", "status"], &env);
    assert_success(&out, "exec under runsc over ssh");
    assert_success(&sbx(&w, &["destroy", &sb.id], &env), "destroy over ssh");
    assert_eq!(w.containers(), Vec::<String>::new());
    assert_eq!(w.socket_dirs(), Vec::<String>::new());
}

/// A relayed `connect` (the remote path; `--channel exec` here) to a
/// gVisor sandbox destroyed under it ends, rather than waiting on a
/// `docker exec` stream runsc may never close.
#[test]
fn a_relayed_connect_ends_when_its_gvisor_sandbox_is_destroyed() {
    let w = World::new();
    let sb = w.create(&["--runtime", "runsc", "--channel", "exec"]);
    let mut c = Command::new(SBX);
    c.args(w.dir_args()).args(["connect", &sb.id]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, b"hello\n").unwrap();
    let mut first = [0u8; 6];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    assert_eq!(&first, b"hello\n");
    assert_success(&w.sbx(&["destroy", &sb.id]), "destroy under a connect");
    let ended = until(std::time::Duration::from_secs(30), || child.try_wait().unwrap().is_some());
    if ended.is_none() {
        let _ = child.kill();
        panic!("sbx connect still runs 30 s after its sandbox was destroyed");
    }
    drop(stdin);
    let code = child.wait().unwrap().code();
    assert_ne!(code, Some(0), "a connect cut by a destroy reported success");
}

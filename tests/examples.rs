//! The README's example sandbox program, built and used exactly as the README
//! says: `examples/line-echo/pack.sh` makes the image, `sbx create` starts it,
//! and `sbx connect` talks to it line by line (each answer read before the
//! next line is sent, nothing half-closed), as an interactive client would.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;

/// Removes the image the test built, even when the test fails.
struct Image(String);

impl Drop for Image {
    fn drop(&mut self) {
        let _ = docker(&["rmi", "-f", &self.0]);
    }
}

#[test]
fn the_readme_example_builds_runs_and_answers_line_by_line() {
    let w = World::new();
    let pack = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/line-echo/pack.sh");
    let out = Command::new("bash").arg(pack).stdin(Stdio::null()).output().expect("run pack.sh");
    assert_success(&out, "examples/line-echo/pack.sh");
    let image = Image(stdout(&out).trim().to_string());
    assert!(image.0.starts_with("sha256:") && image.0.len() == 71, "pack.sh prints an image id: {:?}", image.0);

    let label = w.case_label();
    let out = w.sbx(&["create", "--image", &image.0, "--label", &label]);
    assert_success(&out, "sbx create --image $(pack.sh)");
    let sb = w.adopt(stdout(&out).trim());

    let mut child = Command::new(SBX)
        .args(w.dir_args())
        .args(["connect", &sb.id])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sbx connect");
    let mut to = child.stdin.take().unwrap();
    // Lines arrive through a channel so a missing answer fails the test after
    // a deadline instead of hanging it.
    let (tx, rx) = mpsc::channel();
    let from = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in from.lines() {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    for word in ["hello", "second line", "third"] {
        writeln!(to, "{word}").and_then(|()| to.flush()).expect("write a line to sbx connect");
        let got = rx.recv_timeout(Duration::from_secs(10));
        match got {
            Ok(Ok(line)) => assert_eq!(line, format!("echo: {word}")),
            other => {
                let _ = child.kill();
                panic!("no answer to {word:?} while the connection stays open: {other:?}");
            }
        }
    }
    drop(to);
    let status = child.wait().expect("wait for sbx connect");
    assert!(status.success(), "sbx connect ends cleanly once stdin closes: {status}");

    assert_success(&w.sbx(&["destroy", &sb.id]), "sbx destroy");
    w.assert_nothing_left();
}

//! The README's example sandbox program, built and used exactly as the README
//! says: `examples/line-echo/pack.sh` makes the image, `sbx create` starts it,
//! and `sbx connect` talks to it line by line (each answer read before the
//! next line is sent, nothing half-closed), as an interactive client would.

use std::process::{Command, Stdio};

use crate::support::*;

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

    let mut connect = Command::new(SBX);
    connect.args(w.dir_args()).args(["connect", &sb.id]);
    line_by_line(connect, &["hello", "second line", "third"], |l| format!("echo: {l}"));

    assert_success(&w.sbx(&["destroy", &sb.id]), "sbx destroy");
    w.assert_nothing_left();
}

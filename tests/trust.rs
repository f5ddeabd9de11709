//! Live tests of issue 9's trust findings: nothing the image or another
//! sandbox controls may become sbx's record or redirect what sbx does.

mod common;

use std::path::PathBuf;

use common::*;

/// An image built `FROM` the fixture with extra Dockerfile lines. It
/// overrides the inherited fixture label (so no test takes it for the
/// fixture) and is removed with `--no-prune` (so the untagged fixture stays).
struct DerivedImage {
    id: String,
    dir: PathBuf,
}

impl DerivedImage {
    fn build(base: &str, lines: &str) -> Self {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("trust-img-"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("Dockerfile"),
            format!("FROM {base}\nLABEL {TEST_LABEL}=1 {TEST_LABEL}.fixture=derived\n{lines}\n"),
        )
        .unwrap();
        let id = docker_ok(&["build", "-q", dir.to_str().unwrap()]);
        let id = id.lines().last().unwrap_or_default().to_string();
        assert!(id.starts_with("sha256:"), "docker build printed {id:?}");
        DerivedImage { id, dir }
    }
}

impl Drop for DerivedImage {
    fn drop(&mut self) {
        let _ = docker(&["rmi", "--no-prune", &self.id]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Issue 9 finding 5: `LABEL sbx.private=...` made `revoke` detach the
/// operator's service and delete its network; `LABEL sbx.volume=...`
/// blocked another session's `--persist`. Such an image is refused, and
/// nothing on the engine changes.
#[test]
fn an_image_with_sbx_labels_is_refused_and_nothing_changes() {
    let w = World::new();
    let img = DerivedImage::build(
        &w.image,
        "LABEL sbx.private=\"{\\\"sbx-rtsvc\\\":\\\"rtsvc\\\"}\"\nLABEL sbx.volume=sbx-state-victim",
    );
    let labels = docker_ok(&["image", "inspect", "--format", "{{json .Config.Labels}}", &img.id]);
    assert!(labels.contains("sbx.private") && labels.contains("sbx.volume"), "{labels}");
    let label = w.case_label();
    let session = format!("{}-s", w.case);
    for extra in [&[][..], &["--session", &session, "--persist"][..]] {
        let mut args = vec!["create", "--image", &img.id, "--label", &label];
        args.extend_from_slice(extra);
        let out = w.sbx(&args);
        assert_exit(&out, 1, "create from an image carrying sbx labels");
        let err = stderr(&out);
        assert!(err.contains("\"sbx.private\"") && err.contains("rebuild the image without"), "{err}");
    }
    w.assert_nothing_left();
    // Other tests share the engine: look for what this create could have made.
    assert_eq!(docker_ok(&["network", "ls", "-q", "--filter", "label=sbx.service=rtsvc"]), "", "no network made");
    assert!(!docker(&["volume", "inspect", &format!("sbx-state-{session}")]).status.success(), "no volume made");
}

/// Issue 9 finding 5: a container that merely carries `sbx.volume` (any
/// label is anyone's to set) does not hold a session's volume.
#[test]
fn a_label_alone_does_not_block_a_persistent_session() {
    let w = World::new();
    let session = format!("{}-s", w.case);
    let squatter = unique("sbx-squat-");
    docker_ok(&[
        "run",
        "-d",
        "--name",
        &squatter,
        "--label",
        TEST_LABEL,
        "--label",
        &w.case_label(),
        "--label",
        &format!("sbx.volume=sbx-state-{session}"),
        "--network",
        "none",
        &w.image,
        "sleep",
    ]);
    let out = w.try_create(&["--session", &session, "--persist"]);
    let _ = docker(&["rm", "-f", &squatter]);
    assert_success(&out, "create --persist next to a container that only carries the label");
    let sb = w.adopt(stdout(&out).trim());
    drop(sb);
}

use super::*;
use crate::docker::fake::FakeDocker;
use crate::docker::Output;

const ENGINE: &str = "\"ABCD:EFGH:IJKL\"\n";

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("sbx-self-image-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("sbx"), b"not really sbx").unwrap();
        Dir(d)
    }
    fn exe(&self) -> PathBuf {
        self.0.join("sbx")
    }
    fn place(&self) -> Place<'_> {
        Place { dir: &self.0, endpoint: "unix:///var/run/docker.sock" }
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn id(c: &str) -> String {
    format!("sha256:{}", c.repeat(64))
}

#[test]
fn the_imported_id_is_recorded_and_then_run_with_no_docker_call() {
    let d = Dir::new("record");
    let fake = FakeDocker::new();
    fake.push(Output::ok(ENGINE)).push(Output::ok(&format!("{}\n", id("a"))));
    assert_eq!(ensure(&fake, &d.exe(), d.place()).unwrap(), id("a"));
    assert_eq!(fake.verbs(), ["info", "import"]);
    assert_eq!(fake.calls()[0], ["info", "--format", "{{json .ID}}"]);
    assert_eq!(fake.remaining(), 0);
    // Again: the record alone, not a single docker call (create's cost).
    let fake = FakeDocker::new();
    assert_eq!(ensure(&fake, &d.exe(), d.place()).unwrap(), id("a"));
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
    // Another endpoint of the same engine: asked which engine, nothing imported.
    let fake = FakeDocker::new();
    fake.push(Output::ok(ENGINE));
    let ssh = Place { endpoint: "ssh://me@box", ..d.place() };
    assert_eq!(ensure(&fake, &d.exe(), ssh).unwrap(), id("a"));
    assert_eq!(fake.verbs(), ["info"]);
}

/// An image of anyone's may carry sbx's old label and any `Created`; sbx
/// never asks the engine which image is its own.
#[test]
fn no_image_is_ever_found_by_a_label_or_a_tag() {
    let d = Dir::new("nolabel");
    let fake = FakeDocker::new();
    fake.push(Output::ok(ENGINE)).push(Output::ok(&format!("{}\n", id("a"))));
    ensure(&fake, &d.exe(), d.place()).unwrap();
    for c in fake.calls() {
        assert!(!c.iter().any(|a| a.contains("label") || a == "images" || a.contains("reference")), "{c:?}");
    }
    // The import sets only the entrypoint: no label of sbx's on its own image.
    assert_eq!(fake.calls()[1], ["import", "--change", "ENTRYPOINT [\"/sbx\", \"__probe\"]", "-"]);
}

#[test]
fn a_new_build_removes_only_the_images_this_data_dir_recorded() {
    let d = Dir::new("builds");
    let fake = FakeDocker::new();
    fake.push(Output::ok(ENGINE)).push(Output::ok(&format!("{}\n", id("a"))));
    ensure(&fake, &d.exe(), d.place()).unwrap();
    std::fs::write(d.exe(), b"another build of sbx, longer").unwrap();
    let fake = FakeDocker::new();
    fake.push(Output::ok(ENGINE)).push(Output::ok(&format!("{}\n", id("b"))));
    fake.push(Output::ok("Deleted: x\n"));
    assert_eq!(ensure(&fake, &d.exe(), d.place()).unwrap(), id("b"));
    assert_eq!(fake.calls()[2], ["rmi", "--", &id("a")]);
    let r = Records::read(&d.0);
    assert_eq!(r.engines["ABCD:EFGH:IJKL"].iter().map(|i| i.id.clone()).collect::<Vec<_>>(), [id("b")]);
}

#[test]
fn an_image_in_use_stays_recorded_and_is_tried_again_later() {
    let d = Dir::new("inuse");
    let fake = FakeDocker::new();
    fake.push(Output::ok(ENGINE)).push(Output::ok(&format!("{}\n", id("a"))));
    ensure(&fake, &d.exe(), d.place()).unwrap();
    std::fs::write(d.exe(), b"build two").unwrap();
    let fake = FakeDocker::new();
    fake.push(Output::ok(ENGINE)).push(Output::ok(&format!("{}\n", id("b"))));
    let busy = format!(
        "Error response from daemon: conflict: unable to delete {} (cannot be forced) - image is being used by running container 0123456789ab\n",
        &"a".repeat(12)
    );
    fake.push(Output::fail(1, &busy));
    ensure(&fake, &d.exe(), d.place()).unwrap();
    let kept: Vec<String> = Records::read(&d.0).engines["ABCD:EFGH:IJKL"].iter().map(|i| i.id.clone()).collect();
    assert_eq!(kept, [id("a"), id("b")]);
    // Gone by the next build: docker's "No such image" drops it from the record.
    std::fs::write(d.exe(), b"build three, yet longer").unwrap();
    let fake = FakeDocker::new();
    fake.push(Output::ok(ENGINE)).push(Output::ok(&format!("{}\n", id("c"))));
    fake.push(Output::fail(1, &format!("Error: No such image: {}\n", id("a"))));
    ensure(&fake, &d.exe(), d.place()).unwrap();
    assert_eq!(fake.calls()[2], ["rmi", "--", &id("a"), &id("b")]);
    let kept: Vec<String> = Records::read(&d.0).engines["ABCD:EFGH:IJKL"].iter().map(|i| i.id.clone()).collect();
    assert_eq!(kept, [id("c")]);
}

#[test]
fn a_recorded_image_docker_says_is_gone_is_imported_again_once() {
    let d = Dir::new("gone");
    let fake = FakeDocker::new();
    fake.push(Output::ok(ENGINE)).push(Output::ok(&format!("{}\n", id("a"))));
    let first = ensure(&fake, &d.exe(), d.place()).unwrap();
    let fake = FakeDocker::new();
    fake.push(Output::ok(ENGINE)).push(Output::ok(&format!("{}\n", id("b"))));
    let gone: Result<String> = Err(crate::docker::DockerError::Status {
        command: "docker run".into(),
        status: 125,
        stderr: format!("docker: Error response from daemon: No such image: {first}\n"),
    }
    .into());
    let mut ran = Vec::new();
    let r = again_if_gone(gone, &fake, &d.exe(), d.place(), &first, |i| {
        ran.push(i.to_string());
        Ok(i.to_string())
    });
    assert_eq!(r.unwrap(), id("b"));
    assert_eq!(ran, [id("b")]);
    assert_eq!(fake.verbs(), ["info", "import"]);
    // And the next create runs the new one with no docker call.
    let fake = FakeDocker::new();
    assert_eq!(ensure(&fake, &d.exe(), d.place()).unwrap(), id("b"));
}

#[test]
fn an_import_answer_that_is_no_image_id_is_refused() {
    let d = Dir::new("badid");
    let fake = FakeDocker::new();
    fake.push(Output::ok(ENGINE)).push(Output::ok("sha256:zz\n"));
    let e = ensure(&fake, &d.exe(), d.place()).unwrap_err();
    assert!(e.to_string().contains("sha256:ID"), "{e}");
    assert!(!d.0.join(RECORD).exists() || Records::read(&d.0).engines.values().all(|v| v.is_empty()));
    assert_eq!(fake.verbs(), ["info", "import"]);
    assert_eq!(fake.calls()[1], ["import", "--change", "ENTRYPOINT [\"/sbx\", \"__probe\"]", "-"]);
}

#[test]
fn ldd_output_parses() {
    let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f8f)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f8f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f8f)\n";
    assert_eq!(
        parse_ldd(text),
        vec![
            PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
            PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
            PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
        ]
    );
    assert!(parse_ldd("\tnot a dynamic executable\n").is_empty());
}

#[test]
fn image_tar_is_deterministic() {
    let exe = std::env::current_exe().unwrap();
    let (a, b) = (image_tar(&exe).unwrap(), image_tar(&exe).unwrap());
    assert_eq!(a, b);
    let mut names = Vec::new();
    for e in tar::Archive::new(a.as_slice()).entries().unwrap() {
        names.push(e.unwrap().path().unwrap().display().to_string());
    }
    assert!(names.contains(&"sbx".to_string()) && names.contains(&"tmp".to_string()), "{names:?}");
}

#[test]
fn a_recorded_id_that_is_no_image_id_is_never_run() {
    let d = Dir::new("forged");
    record_for_test(d.place(), &d.exe(), "E:N:G", "--privileged");
    let fake = FakeDocker::new();
    fake.push(Output::ok(ENGINE)).push(Output::ok(&format!("{}\n", id("a"))));
    assert_eq!(ensure(&fake, &d.exe(), d.place()).unwrap(), id("a"));
    assert_eq!(fake.verbs(), ["info", "import"]);
}

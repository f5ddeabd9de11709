//! sbx's own image (the egress gate, doctor's and audit's probes) is the
//! one its own `docker import` returned, never one found by a label: an
//! impostor `docker load`ed with the label older builds looked for (the
//! very hash they computed, reproducible offline) and a `Created` of 2099
//! never becomes a gate, is never removed as "another build", and cannot
//! be a sandbox's image either.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::support::egress::create;
use crate::support::internet::{Internet, PYPI};
use crate::support::*;

/// What older builds labelled their image with and looked it up by: the
/// first 8 bytes of the sha256 of the reproducible tar, in hex.
fn old_label_hash() -> String {
    let tar = sbx::host::self_image::image_tar(Path::new(SBX)).unwrap();
    Sha256::digest(&tar).iter().take(8).map(|x| format!("{x:02x}")).collect()
}

/// `docker load` of a hand-made image: the fixture binary at /sbx, the
/// config labelled `sbx-probe.hash=HASH`, created 2099, started as sbx's
/// probe would be.
fn impostor(dir: &Path) -> Image {
    let layer = {
        let mut b = tar::Builder::new(Vec::new());
        let data = std::fs::read(fixture_binary()).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o755);
        h.set_size(data.len() as u64);
        b.append_data(&mut h, "sbx", data.as_slice()).unwrap();
        b.into_inner().unwrap()
    };
    let diff: String = Sha256::digest(&layer).iter().map(|x| format!("{x:02x}")).collect();
    let config = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "created": "2099-01-01T00:00:00Z",
        "config": {
            "Labels": {"sbx-probe.hash": old_label_hash(), TEST_LABEL: "1"},
            "Entrypoint": ["/sbx", "__probe"],
        },
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{diff}")]},
    });
    let manifest = serde_json::json!([{"Config": "config.json", "RepoTags": null, "Layers": ["layer.tar"]}]);
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in [
        ("config.json", serde_json::to_vec(&config).unwrap()),
        ("manifest.json", serde_json::to_vec(&manifest).unwrap()),
        ("layer.tar", layer),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        b.append_data(&mut h, name, data.as_slice()).unwrap();
    }
    let path = dir.join("impostor.tar");
    std::fs::write(&path, b.into_inner().unwrap()).unwrap();
    let out = docker_ok(&["load", "-i", path.to_str().unwrap()]);
    let id = out.rsplit("Loaded image ID: ").next().unwrap().trim().to_string();
    assert!(id.starts_with("sha256:"), "docker load printed {out:?}");
    Image(id)
}

/// The ids this data dir's imports recorded (`self-image.json`).
fn recorded(w: &World) -> Vec<String> {
    let text = std::fs::read_to_string(w.state_dir.join("self-image.json")).expect("sbx recorded its image");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["engines"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|e| e.as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn an_image_labelled_as_sbx_s_own_never_runs_as_its_egress_gate() {
    let _engine = loading_the_engine();
    let w = World::new();
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("impostor-"));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = impostor(&dir);
    let inet = Internet::start();

    let sb = create(&w, &inet.create_args(&[PYPI]));
    let gate = sbx::model::gate::container(&sb.id);
    let ran = docker_ok(&["inspect", "-f", "{{.Image}}", &gate]);
    assert_ne!(ran, fake.0, "the impostor became the egress gate");
    assert_eq!(recorded(&w), std::slice::from_ref(&ran), "the gate runs what sbx's own import returned");
    // And the image run has sbx's config, not one an attacker wrote.
    let cfg = docker_ok(&["image", "inspect", "-f", "{{json .Config.Labels}} {{json .Config.Entrypoint}}", &ran]);
    assert_eq!(cfg, "null [\"/sbx\",\"__probe\"]");

    // A second create takes the recorded id, still not the impostor.
    let again = create(&w, &inet.create_args(&[PYPI]));
    let ran2 = docker_ok(&["inspect", "-f", "{{.Image}}", &sbx::model::gate::container(&again.id)]);
    assert_eq!(ran2, ran);
    drop(again);
    drop(sb);

    // sbx never removed the impostor as "another build" (it removes only
    // what it recorded) ...
    assert!(docker(&["image", "inspect", &fake.0]).status.success(), "sbx removed an image it did not make");
    // ... and refuses it as a sandbox's image: its label is a key sbx reads.
    let out = w.sbx(&["create", "--image", &fake.0]);
    assert_exit(&out, 1, "create from an image labelled sbx-probe.*");
    assert!(stderr(&out).contains("sbx-probe.hash"), "{}", stderr(&out));
    w.assert_nothing_left();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_session_may_pass_for_doctor_s_probe() {
    let w = World::new();
    for s in ["sbx-doctor", "SBX-Doctor"] {
        let out = w.sbx(&["create", "--image", &w.image, "--session", s]);
        assert_exit(&out, 2, "create --session sbx-doctor");
        assert!(stderr(&out).contains("doctor"), "{}", stderr(&out));
    }
    w.assert_nothing_left();
}

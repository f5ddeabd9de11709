//! `--persist` on a remote engine through the fake: the session
//! volume an overlay over a backing volume, both labelled with this data
//! dir's owner token, made and filled with exact argv and no path of this
//! machine; a volume of either name that is not sbx's never used, filled
//! or removed; `volumes rm`, `destroy --purge` and `volumes` on both.

use super::remote::{plain_run, remote, spec, starts_remotely, volume_name as helper_volume};
use super::*;

const M: &str = "/e/volumes/sbx-data-s/_data";

fn opts() -> String {
    format!("lowerdir={M}/lower,upperdir={M}/upper,workdir={M}/work,nosuid,nodev")
}

/// `state_volumes_inspect` rows of sbx's two volumes for session `s`.
pub(super) fn backing_row(rig: &Rig) -> String {
    let labels = serde_json::json!({"sbx.state-of": "s", "sbx.owner": rig.token("sbx-data-s")});
    format!("[\"sbx-data-s\",{labels},null,{M:?}]\n")
}

pub(super) fn overlay_row(rig: &Rig) -> String {
    let labels = serde_json::json!({"sbx.session": "s", "sbx.owner": rig.token("sbx-state-s")});
    let o = serde_json::json!({"type": "overlay", "device": "overlay", "o": opts()});
    format!("[\"sbx-state-s\",{labels},{o},\"/e/volumes/sbx-state-s/_data\"]\n")
}

pub(super) fn no_such(name: &str) -> Output {
    Output::fail(1, &format!("Error: No such volume: {name}"))
}

/// The helper volume already verified: one labels inspect.
pub(super) fn helper_ready(rig: &Rig) {
    std::fs::create_dir_all(rig.state.join("helper")).unwrap();
    std::fs::write(rig.state.join("helper/remote-verified"), format!("ssh://me@far {}\n", helper_volume())).unwrap();
    rig.fake.push(Output::ok(&format!("{{\"sbx.helper\":\"{}\"}}\n", crate::host::helper::key())));
}

pub(super) fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// (path, uid, gid, mode) of each entry of a fill.
fn entries(tar: &[u8]) -> Vec<(String, u64, u64, u32)> {
    let mut a = tar::Archive::new(tar);
    a.entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let h = e.header();
            let p = e.path().unwrap().display().to_string();
            (p.trim_end_matches('/').to_string(), h.uid().unwrap(), h.gid().unwrap(), h.mode().unwrap())
        })
        .collect()
}

#[test]
fn a_first_remote_persist_makes_a_nosuid_overlay_over_a_backing_volume_naming_no_local_path() {
    let rig = Rig::new();
    rig.image("1000:1000");
    helper_ready(&rig);
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output { status: 1, stdout: Vec::new(), stderr: b"Error: No such volume: sbx-state-s\n".to_vec() });
    rig.fake.push(Output::ok("sbx-data-s\n"));
    rig.fake.push(Output::ok(&backing_row(&rig)));
    rig.fake.push(Output::ok("f111e4\n"));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok("sbx-state-s\n"));
    rig.fake.push(Output::ok(&overlay_row(&rig)));
    starts_remotely(&rig, plain_run());
    let made = remote(&rig).create(&spec(&["--session", "s", "--persist", "--persist-size", "unbounded"])).unwrap();
    assert!(
        made.warnings.iter().any(|w| w.contains("--persist-size unbounded") && w.contains("sbx audit")),
        "{:?}",
        made.warnings
    );
    let calls = rig.fake.calls();
    let fmt = "[{{json .Name}},{{json .Labels}},{{json .Options}},{{json .Mountpoint}}]";
    let a_owner = format!("sbx.owner={}", rig.token("sbx-data-s"));
    let b_owner = format!("sbx.owner={}", rig.token("sbx-state-s"));
    let want: Vec<Vec<String>> = vec![
        strs(&["ps", "--filter", "volume=sbx-state-s", "--filter", "status=running"]),
        strs(&["volume", "inspect", "--format", fmt, "--", "sbx-state-s", "sbx-data-s"]),
        strs(&[
            "volume",
            "create",
            "--driver",
            "local",
            "--label",
            "sbx.state-of=s",
            "--label",
            &a_owner,
            "--",
            "sbx-data-s",
        ]),
        strs(&["volume", "inspect", "--format", fmt, "--", "sbx-data-s"]),
        // The filler: named, labelled and owned as gc's `filler` expects.
        {
            let f = &calls[6];
            let (name, value) = (&f[2], f[6].strip_prefix("sbx.helper.filler=").unwrap_or_default());
            let owner = format!(
                "sbx.owner={}",
                crate::sandbox::shared::fillers::token(&rig.state().key().unwrap(), name, value)
            );
            let mut want = strs(&["create", "--name", name, "--network", "none", "--label"]);
            want.extend([f[6].clone(), "--label".into(), owner]);
            let mount = format!("type=volume,src=sbx-data-s,dst=/{name},volume-nocopy");
            want.extend(strs(&["--mount", &mount, "--pull", "never", "--cpus", "0.5", "--memory", "32m"]));
            want.extend(strs(&["--memory-swap", "32m", "--pids-limit", "16", "--no-healthcheck"]));
            want.extend(strs(&["--", IMG, &format!("/{name}/none")]));
            assert!(name.starts_with("sbx-fill-"), "{f:?}");
            assert_eq!(value.split(' ').nth(2), Some(std::process::id().to_string().as_str()), "made by this process");
            want
        },
        strs(&["cp", "-a", "-", &format!("f111e4:/{}", calls[6][2])]),
        strs(&["rm", "-f", "-v", "--", "f111e4"]),
        strs(&[
            "volume",
            "create",
            "--driver",
            "local",
            "--opt",
            "type=overlay",
            "--opt",
            "device=overlay",
            "--opt",
            &format!("o={}", opts()),
            "--label",
            "sbx.session=s",
            "--label",
            &b_owner,
            "--",
            "sbx-state-s",
        ]),
        strs(&["volume", "inspect", "--format", fmt, "--", "sbx-state-s"]),
    ];
    assert_eq!(calls[2][..5], want[0][..], "{:?}", calls[2]);
    assert_eq!(calls[3..11], want[1..], "{calls:#?}");
    let run = &calls[11];
    assert!(run.contains(&"type=volume,src=sbx-state-s,dst=/state,volume-nocopy".to_string()), "{run:?}");
    assert!(run.contains(&"sbx.persist-size=unbounded".to_string()), "the record audit fails: {run:?}");
    let fill = rig.fake.inputs();
    assert_eq!(fill.len(), 1);
    assert_eq!(fill[0].0, 7, "the fill is the `cp -a`");
    assert_eq!(
        entries(&fill[0].1),
        [("upper".into(), UID.into(), UID.into(), 0o700), ("work".into(), 0, 0, 0o700), ("lower".into(), 0, 0, 0o755)]
    );
    let here = [rig.root.display().to_string(), rig.state.display().to_string()];
    for a in calls.iter().flatten().filter(|a| !a.starts_with("seccomp=")) {
        assert!(!here.iter().any(|h| a.contains(h.as_str())), "{a} names a path of this machine");
    }
    assert!(rig.state.join("volumes/.remote/s.lock").exists(), "the session's lock is in the data dir");
    assert!(!rig.state.join("volumes/s").exists(), "no local directory for a remote session");
}

#[test]
fn a_second_remote_persist_reuses_both_volumes_and_gives_the_root_to_its_user() {
    let rig = Rig::new();
    rig.image("");
    helper_ready(&rig);
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&format!("{}{}", overlay_row(&rig), backing_row(&rig))));
    rig.fake.push(Output::ok("f111e4\n"));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    starts_remotely(&rig, plain_run());
    remote(&rig)
        .create(&spec(&["--session", "s", "--persist", "--persist-size", "unbounded", "--user", "1234:1235"]))
        .unwrap();
    let verbs = rig.fake.verbs();
    assert_eq!(
        verbs,
        ["image inspect", "volume", "ps", "volume", "create", "cp", "rm", "create", "cp", "start", "exec"]
    );
    assert_eq!(entries(&rig.fake.inputs()[0].1)[0], ("upper".into(), 1234, 1235, 0o700));
}

#[test]
fn a_remote_persist_in_use_or_of_a_volume_not_sbx_s_is_refused_untouched() {
    // In use by a running sandbox: nothing else asked.
    let rig = Rig::new();
    rig.image("");
    helper_ready(&rig);
    rig.fake.push(Output::ok("[\"sbx-000000000001\",\"sbx-state-s\"]\n"));
    let e = remote(&rig).create(&spec(&["--session", "s", "--persist", "--persist-size", "unbounded"])).unwrap_err();
    assert!(matches!(&e, Error::Session(crate::error::SessionError::VolumeInUse { .. })), "{e}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "volume", "ps"]);

    // Someone's volume of either name, or ours with options that are not the overlay.
    type Rows = fn(&Rig) -> String;
    let cases: [(&str, Rows, &str); 5] = [
        ("a session volume without labels", |_| "[\"sbx-state-s\",null,null,\"/x\"]\n".into(), "no sbx.owner label"),
        (
            "a backing volume of another key",
            |_| "[\"sbx-data-s\",{\"sbx.state-of\":\"s\",\"sbx.owner\":\"00\"},null,\"/x\"]\n".into(),
            "no sbx.owner label",
        ),
        (
            "a backing volume of another session",
            |r| backing_row(r).replace("\"sbx.state-of\":\"s\"", "\"sbx.state-of\":\"t\""),
            "sbx.state-of label is not s",
        ),
        (
            "a local engine's session volume",
            |r| {
                let labels = serde_json::json!({"sbx.session": "s", "sbx.owner": r.token("sbx-state-s")});
                format!("[\"sbx-state-s\",{labels},{{\"type\":\"none\",\"o\":\"bind\",\"device\":\"/d\"}},\"/x\"]\n")
            },
            "not an overlay",
        ),
        (
            "an overlay without nosuid",
            |r| overlay_row(r).replace("nosuid,nodev", "nodev") + &backing_row(r),
            "not a nosuid,nodev overlay",
        ),
    ];
    for (what, rows, why) in cases {
        let rig = Rig::new();
        rig.image("");
        helper_ready(&rig);
        rig.fake.push(Output::ok(""));
        rig.fake.push(Output::ok(&rows(&rig)));
        let e =
            remote(&rig).create(&spec(&["--session", "s", "--persist", "--persist-size", "unbounded"])).unwrap_err();
        assert!(matches!(&e, Error::Session(crate::error::SessionError::ForeignVolume { .. })), "{what}: {e}");
        assert!(e.to_string().contains(why), "{what}: {e}");
        let calls = rig.fake.calls();
        assert!(
            !calls.iter().any(|c| c[..2] == ["volume", "create"] || c[..2] == ["volume", "rm"]),
            "{what}: {calls:?}"
        );
        assert_eq!(rig.fake.verbs(), ["image inspect", "volume", "ps", "volume"], "{what}: neither made nor filled");
    }

    // Made by someone else between sbx's inspect and its create (docker
    // answers `volume create` of an existing name with success): not filled.
    let rig = Rig::new();
    rig.image("");
    helper_ready(&rig);
    rig.fake.push(Output::ok(""));
    rig.fake.push(no_such("sbx-state-s"));
    rig.fake.push(Output::ok("sbx-data-s\n"));
    rig.fake.push(Output::ok("[\"sbx-data-s\",{\"mine\":\"1\"},null,\"/x\"]\n"));
    let e = remote(&rig).create(&spec(&["--session", "s", "--persist", "--persist-size", "unbounded"])).unwrap_err();
    assert!(matches!(&e, Error::Session(crate::error::SessionError::ForeignVolume { .. })), "{e}");
    assert_eq!(rig.fake.verbs(), ["image inspect", "volume", "ps", "volume", "volume", "volume"]);
}

fn remote_line(rig: &Rig) -> String {
    let labels = serde_json::json!({
        "sbx.managed": "1",
        "sbx.id": ID,
        "sbx.socket": "/run/sandbox/sandbox.sock",
        "sbx.user": "65534:65534",
        "sbx.volume": "sbx-state-s",
        "sbx.session": "s",
    });
    rig.container_line(ID, labels, &[])
}

#[test]
fn volumes_rm_and_destroy_purge_remove_both_volumes_only_when_sbx_s_and_unused() {
    let rig = Rig::new();
    let d = remote(&rig);
    // In use.
    rig.fake.push(Output::ok("[\"sbx-000000000001\",\"sbx-state-s\"]\n"));
    let e = d.remove_volume("s").unwrap_err();
    assert!(matches!(&e, Error::Session(crate::error::SessionError::VolumeInUse { .. })), "{e}");
    // One of them not sbx's: neither removed.
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&format!("{}[\"sbx-data-s\",null,null,\"/x\"]\n", overlay_row(&rig))));
    let e = d.remove_volume("s").unwrap_err();
    assert!(matches!(&e, Error::Session(crate::error::SessionError::ForeignVolume { .. })), "{e}");
    assert!(e.to_string().contains("sbx-data-s"), "{e}");
    // Neither there.
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output { status: 1, stdout: Vec::new(), stderr: b"Error: No such volume: sbx-state-s\n".to_vec() });
    let e = d.remove_volume("s").unwrap_err();
    assert!(matches!(&e, Error::Sandbox(SandboxError::NotFound { .. })), "{e}");
    assert!(!rig.fake.verbs().is_empty() && !rig.fake.calls().iter().any(|c| c[..2] == ["volume", "rm"]));
    // Both sbx's: the overlay first.
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(&format!("{}{}", overlay_row(&rig), backing_row(&rig))));
    rig.fake.push(Output::ok("sbx-state-s\n"));
    rig.fake.push(Output::ok("sbx-data-s\n"));
    let before = rig.fake.calls().len();
    // The session's uid, held since its first create, is freed with its files.
    use crate::host::uids::{Holder, Place, Table};
    let table = Table::at(rig.root.with_extension("uids"));
    let endpoint = d.engine().unwrap().endpoint.clone();
    let place = Place { engine: &endpoint, data: &rig.state };
    table.claim(&place, Holder::Session("s".into()), 0, &|_| false).unwrap();
    table.claim(&place, Holder::Session("t".into()), 0, &|_| false).unwrap();
    assert_eq!(d.remove_volume("s").unwrap(), "sbx-state-s");
    assert_eq!(rig.uids_held(), [(crate::model::ids::SBX_UID_BASE + 1, Holder::Session("t".into()))]);
    let calls = rig.fake.calls().split_off(before + 2);
    assert_eq!(calls, [strs(&["volume", "rm", "--", "sbx-state-s"]), strs(&["volume", "rm", "--", "sbx-data-s"])]);
    assert!(!rig.state.join("volumes/.remote/s.lock").exists(), "the lock file goes with the volumes");

    // destroy --purge: the sandbox, then its session's volumes; a backing
    // volume left alone by a killed create goes too.
    let rig = Rig::new();
    rig.fake.push(Output::ok(&remote_line(&rig)));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output {
        status: 1,
        stdout: backing_row(&rig).into_bytes(),
        stderr: b"Error: No such volume".to_vec(),
    });
    rig.fake.push(Output::ok("sbx-data-s\n"));
    let done = remote(&rig).destroy_purging(&[ID.to_string()], true).unwrap();
    assert_eq!(done.removed, [ID]);
    assert_eq!(rig.fake.verbs(), ["container inspect", "rm", "ps", "volume", "volume"]);
    assert_eq!(rig.fake.calls()[4], strs(&["volume", "rm", "--", "sbx-data-s"]));
    // Nothing left of it: a purge is content.
    let rig = Rig::new();
    rig.fake.push(Output::ok(&remote_line(&rig)));
    rig.fake.push(Output::ok(""));
    rig.fake.push(Output::ok(""));
    rig.fake.push(no_such("sbx-state-s"));
    remote(&rig).destroy_purging(&[ID.to_string()], true).unwrap();
    assert_eq!(rig.fake.verbs(), ["container inspect", "rm", "ps", "volume"]);
}

#[test]
fn volumes_on_a_remote_engine_lists_sbx_s_sessions_and_orphaned_backing_volumes() {
    let rig = Rig::new();
    let row = |name: &str, session: &str, owner: &str, of: &str| format!("[{name:?},{session:?},{owner:?},{of:?}]\n");
    let mut ls = String::new();
    ls += &row("sbx-state-s", "s", &rig.token("sbx-state-s"), "");
    ls += &row("sbx-data-s", "", &rig.token("sbx-data-s"), "s");
    ls += &row("sbx-data-gone", "", &rig.token("sbx-data-gone"), "gone");
    ls += &row("sbx-state-other", "other", "not-our-token", "");
    ls += &row("sbx-data-t", "", &rig.token("sbx-data-t"), "u");
    rig.fake.push(Output::ok(&ls));
    rig.fake.push(Output::ok("[\"sbx-000000000001\",\"sbx-state-s\"]\n"));
    let list = remote(&rig).volumes().unwrap();
    let got: Vec<(&str, &str, &str, usize)> =
        list.iter().map(|v| (v.name.as_str(), v.session.as_str(), v.path.as_str(), v.in_use_by.len())).collect();
    assert_eq!(
        got,
        [
            ("sbx-state-s", "s", "volume sbx-data-s on the engine", 1),
            ("sbx-data-gone", "gone", "volume sbx-data-gone on the engine", 0)
        ]
    );
    assert_eq!(rig.fake.calls()[0][..2], strs(&["volume", "ls"])[..]);
}

/// A remote engine's disk is not this machine's to bound: `--persist`
/// without `--persist-size unbounded` (or with a size) exits 2 before any
/// docker call.
#[test]
fn a_remote_persist_without_an_explicit_unbounded_is_refused_before_any_docker_call() {
    let rig = Rig::new();
    for args in [&["--session", "s", "--persist"][..], &["--session", "s", "--persist", "--persist-size", "1GiB"]] {
        match remote(&rig).create(&spec(args)) {
            Err(Error::Invalid(i)) => {
                assert_eq!(i.what, "--persist-size");
                assert!(i.reason.contains("the engine is remote"), "{i}");
                assert!(i.hint.as_deref().unwrap_or_default().contains("--persist-size unbounded"), "{i:?}");
            }
            other => panic!("{args:?}: {other:?}"),
        }
    }
    assert!(rig.fake.calls().is_empty(), "{:?}", rig.fake.calls());
}

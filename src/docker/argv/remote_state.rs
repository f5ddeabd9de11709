//! A persistent session's /state on a remote engine: no directory
//! of this machine can back it, so two volumes there do. The backing volume
//! `sbx-data-KEY` is a plain local-driver volume holding `upper/`, `work/`
//! and `lower/`, made by `docker cp` into a never-started container; the
//! session volume `sbx-state-KEY` is an overlay of those directories with
//! `nosuid,nodev`. An overlay is a real mount, so the engine's local driver
//! applies those flags on every mount (a bind ignores them, see
//! `host::persist::NosuidBind`), and its root is `upper/`'s owner and mode.

use std::ffi::OsString;

use super::os;
use crate::model::record;

/// The label that marks a backing volume; its value is the session.
pub const STATE_OF: &str = "sbx.state-of";

/// The backing volume of session `session`'s remote /state. Its prefix is
/// not `sbx-state-`, so it is never another session's volume name.
pub fn backing_name(session: &str) -> String {
    format!("sbx-data-{session}")
}

/// `docker volume inspect` of `names`, one JSON array per line:
/// `[name, labels, options, mountpoint]`. Exit 1 when any is missing
/// (the others are still printed).
pub fn state_volumes_inspect(names: &[&str]) -> Vec<OsString> {
    let mut v = os(&[
        "volume",
        "inspect",
        "--format",
        "[{{json .Name}},{{json .Labels}},{{json .Options}},{{json .Mountpoint}}]",
        "--",
    ]);
    v.extend(names.iter().map(OsString::from));
    v
}

/// The backing volume, labelled with its session and ownership token.
pub fn backing_create(name: &str, session: &str, owner: &str) -> Vec<OsString> {
    os(&[
        "volume",
        "create",
        "--driver",
        "local",
        "--label",
        &format!("{STATE_OF}={session}"),
        "--label",
        &format!("{}={owner}", record::OWNER),
        "--",
        name,
    ])
}

/// The overlay options of the session volume over the backing volume's
/// directories at `mountpoint` (a path on the engine's machine, as the
/// engine reported it).
pub fn overlay_options(mountpoint: &str) -> String {
    format!("lowerdir={mountpoint}/lower,upperdir={mountpoint}/upper,workdir={mountpoint}/work,nosuid,nodev")
}

/// The session volume: an overlay over the backing volume at `mountpoint`,
/// labelled as a local session volume is (`volume_create`).
pub fn overlay_create(name: &str, mountpoint: &str, session: &str, owner: &str) -> Vec<OsString> {
    let o = format!("o={}", overlay_options(mountpoint));
    super::volume::session_volume_create(name, &["type=overlay", "device=overlay", &o], session, owner)
}

/// A container of `image`, never started, that mounts the backing volume
/// at [`super::remote::FillerId::dir`] for `docker cp`: a [`super::remote::filler`] (named and
/// labelled so gc reaps it when sbx is killed mid-fill).
pub fn backing_filler(image: &str, volume: &str, id: &super::remote::FillerId) -> Vec<OsString> {
    super::remote::filler(image, volume, id, "none")
}

/// `docker cp -a - CONTAINER:DIR`: a tar on stdin, extracted there with
/// the tar's owners (`-a`), which is how the sandbox user gets `upper/`.
pub fn copy_in_archive(container: &str, dir: &str) -> Vec<OsString> {
    os(&["cp", "-a", "-", &format!("{container}:{dir}")])
}

/// sbx's remote /state volumes, one JSON array per line: `[name, session
/// label, owner token, backing label]` (a session volume has the session
/// label, a backing volume the backing one).
pub fn state_volumes() -> Vec<OsString> {
    os(&[
        "volume",
        "ls",
        "--filter",
        &format!("label={}", record::OWNER),
        "--format",
        &format!(
            "[{{{{json .Name}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{STATE_OF}\")}}}}]",
            record::SESSION,
            record::OWNER
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::super::strs;
    use super::*;

    #[test]
    fn remote_state_builders() {
        assert_eq!(backing_name("s1"), "sbx-data-s1");
        assert_eq!(
            strs(state_volumes_inspect(&["sbx-state-s1", "sbx-data-s1"])),
            [
                "volume",
                "inspect",
                "--format",
                "[{{json .Name}},{{json .Labels}},{{json .Options}},{{json .Mountpoint}}]",
                "--",
                "sbx-state-s1",
                "sbx-data-s1"
            ]
        );
        assert_eq!(
            strs(backing_create("sbx-data-s1", "s1", "0f")),
            [
                "volume",
                "create",
                "--driver",
                "local",
                "--label",
                "sbx.state-of=s1",
                "--label",
                "sbx.owner=0f",
                "--",
                "sbx-data-s1"
            ]
        );
        assert_eq!(
            strs(overlay_create("sbx-state-s1", "/e/volumes/sbx-data-s1/_data", "s1", "0e")),
            [
                "volume",
                "create",
                "--driver",
                "local",
                "--opt",
                "type=overlay",
                "--opt",
                "device=overlay",
                "--opt",
                "o=lowerdir=/e/volumes/sbx-data-s1/_data/lower,upperdir=/e/volumes/sbx-data-s1/_data/upper,workdir=/e/volumes/sbx-data-s1/_data/work,nosuid,nodev",
                "--label",
                "sbx.session=s1",
                "--label",
                "sbx.owner=0e",
                "--",
                "sbx-state-s1"
            ]
        );
        let id =
            super::super::remote::FillerId { name: "sbx-fill-1".into(), value: "1 b 2 3".into(), owner: "t".into() };
        let filler = strs(backing_filler("sha256:abc", "sbx-data-s1", &id));
        assert_eq!(filler[..3], ["create", "--name", "sbx-fill-1"]);
        assert!(filler.windows(2).any(|w| w == ["--label", "sbx.helper.filler=1 b 2 3"]), "{filler:?}");
        assert!(filler.windows(2).any(|w| w == ["--label", "sbx.owner=t"]), "{filler:?}");
        assert!(
            filler.contains(&"type=volume,src=sbx-data-s1,dst=/sbx-fill-1,volume-nocopy".to_string()),
            "{filler:?}"
        );
        assert_eq!(&filler[filler.len() - 3..], ["--", "sha256:abc", "/sbx-fill-1/none"]);
        assert_eq!(strs(copy_in_archive("f1", &id.dir())), ["cp", "-a", "-", "f1:/sbx-fill-1"]);
        assert_eq!(
            strs(state_volumes()),
            [
                "volume",
                "ls",
                "--filter",
                "label=sbx.owner",
                "--format",
                r#"[{{json .Name}},{{json (.Label "sbx.session")}},{{json (.Label "sbx.owner")}},{{json (.Label "sbx.state-of")}}]"#
            ]
        );
    }
}

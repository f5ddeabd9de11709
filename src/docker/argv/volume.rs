//! A session's named volume: look it up, create it as a bind of the
//! session's directory, find who mounts it, list and remove them.

use std::ffi::OsString;
use std::path::Path;

use super::os;
use crate::model::record;

/// `docker volume inspect NAME`: exit 0 when it exists.
pub fn volume_inspect(name: &str) -> Vec<OsString> {
    os(&["volume", "inspect", "--format", "{{.Name}}", "--", name])
}

/// A session's named volume that is a bind of `dir` (the local driver's
/// bind options), labelled with its session and ownership token.
pub fn volume_create(name: &str, dir: &Path, session: &str, owner: &str) -> Vec<OsString> {
    session_volume_create(name, &["type=none", "o=bind", &format!("device={}", dir.display())], session, owner)
}

/// `docker volume create` of a session's volume with the local driver's
/// `opts`, labelled with its session and ownership token (a local bind
/// here, a remote overlay in `remote_state`).
pub fn session_volume_create(name: &str, opts: &[&str], session: &str, owner: &str) -> Vec<OsString> {
    let mut a = os(&["volume", "create", "--driver", "local"]);
    for o in opts {
        a.extend(os(&["--opt", o]));
    }
    let (session, owner) = (format!("{}={session}", record::SESSION), format!("{}={owner}", record::OWNER));
    a.extend(os(&["--label", &session, "--label", &owner, "--", name]));
    a
}

/// Running containers that have a volume mounted, one JSON array per line:
/// `[names, sbx.volume label]`. One volume by what is really mounted (a
/// label is anyone's to set: an image's label once blocked a session with
/// `LABEL sbx.volume=...`), all of sbx's by volume label.
pub fn volume_users(volume: Option<&str>) -> Vec<OsString> {
    let filter = match volume {
        Some(v) => format!("volume={v}"),
        None => format!("label={}", record::VOLUME),
    };
    os(&[
        "ps",
        "--filter",
        &filter,
        "--filter",
        "status=running",
        "--format",
        &format!("[{{{{json .Names}}}},{{{{json (.Label \"{}\")}}}}]", record::VOLUME),
    ])
}

/// sbx's session volumes, one JSON array per line: `[name, session, owner token]`.
pub fn session_volumes() -> Vec<OsString> {
    os(&[
        "volume",
        "ls",
        "--filter",
        &format!("label={}", record::SESSION),
        "--format",
        &format!(
            "[{{{{json .Name}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{}\")}}}}]",
            record::SESSION,
            record::OWNER
        ),
    ])
}

pub fn volume_remove(name: &str) -> Vec<OsString> {
    os(&["volume", "rm", "--", name])
}

#[cfg(test)]
mod tests {
    use super::super::strs;
    use super::*;

    #[test]
    fn volume_builders() {
        let dir = Path::new("/var/lib/sbx/volumes/s1");
        assert_eq!(
            strs(volume_inspect("sbx-state-s1")),
            ["volume", "inspect", "--format", "{{.Name}}", "--", "sbx-state-s1"]
        );
        assert_eq!(
            strs(volume_create("sbx-state-s1", dir, "s1", "0f")),
            [
                "volume",
                "create",
                "--driver",
                "local",
                "--opt",
                "type=none",
                "--opt",
                "o=bind",
                "--opt",
                "device=/var/lib/sbx/volumes/s1",
                "--label",
                "sbx.session=s1",
                "--label",
                "sbx.owner=0f",
                "--",
                "sbx-state-s1"
            ]
        );
        assert_eq!(
            strs(volume_users(Some("sbx-state-s1"))),
            [
                "ps",
                "--filter",
                "volume=sbx-state-s1",
                "--filter",
                "status=running",
                "--format",
                r#"[{{json .Names}},{{json (.Label "sbx.volume")}}]"#
            ]
        );
        assert_eq!(strs(volume_users(None))[2], "label=sbx.volume");
        assert_eq!(
            strs(session_volumes()),
            [
                "volume",
                "ls",
                "--filter",
                "label=sbx.session",
                "--format",
                r#"[{{json .Name}},{{json (.Label "sbx.session")}},{{json (.Label "sbx.owner")}}]"#
            ]
        );
        assert_eq!(strs(volume_remove("sbx-state-s1")), ["volume", "rm", "--", "sbx-state-s1"]);
    }
}

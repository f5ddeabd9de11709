//! What sbx runs against a remote engine: sbx's helper delivered
//! in a named volume there (nothing bind-mounted from this machine), and the
//! image's layout under /run read from a created-not-started sandbox.

use std::ffi::OsString;

use super::os;

/// The label that marks a helper volume; its value is the helper's content key.
pub const HELPER_LABEL: &str = "sbx.helper";
/// `docker volume inspect`: the helper volume's labels as JSON (exit 1 when missing).
pub fn helper_volume_labels(name: &str) -> Vec<OsString> {
    os(&["volume", "inspect", "--format", "{{json .Labels}}", "--", name])
}

/// `docker volume create`: the helper volume, labelled with its key.
/// Idempotent (docker answers an existing name with its name).
pub fn helper_volume_create(name: &str, key: &str) -> Vec<OsString> {
    os(&["volume", "create", "--driver", "local", "--label", &format!("{HELPER_LABEL}={key}"), "--", name])
}

/// The label that marks a filler; its value says when and by whom it was
/// made (see `sandbox::shared::fillers`), `sbx.owner` covers it.
pub const FILLER_LABEL: &str = "sbx.helper.filler";

/// A filler's name (`sbx-fill-HEX`), its [`FILLER_LABEL`] value and its
/// owner token (see `sandbox::shared::fillers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FillerId {
    pub name: String,
    pub value: String,
    pub owner: String,
}

impl FillerId {
    /// Where the filler mounts its volume: `/NAME`, a path of the random
    /// name in the root. The image is the sandbox's (hostile) and cannot
    /// know it, so nothing of its layout is there: no symlink moving the
    /// mount, no `VOLUME` beneath it that the fill would go into instead
    /// (one at `/v/upper` took the session's upper/ away from it).
    pub fn dir(&self) -> String {
        format!("/{}", self.name)
    }
}

/// A container of `image`, named `id.name`, never started (its command,
/// `leaf` under the mount, is never run), that mounts `volume` at
/// [`FillerId::dir`] so `docker cp`
/// can fill and read it. `volume-nocopy`: the image is the sandbox's
/// (hostile), and without it docker copies whatever the image has at that
/// path into the fresh volume. Labelled so gc finds it if sbx is killed
/// mid-fill (`sandbox::ops::gc::filler`).
pub fn filler(image: &str, volume: &str, id: &FillerId, leaf: &str) -> Vec<OsString> {
    let dir = id.dir();
    let mut a = os(&[
        "create",
        "--name",
        &id.name,
        "--network",
        "none",
        "--label",
        &format!("{FILLER_LABEL}={}", id.value),
        "--label",
        &format!("{}={}", crate::model::record::OWNER, id.owner),
        "--mount",
        &format!("type=volume,src={volume},dst={dir},volume-nocopy"),
        "--pull",
        "never",
    ]);
    // Never started, but limited as every container sbx makes, and given
    // no healthcheck of the (hostile) image's.
    a.extend(super::probe::LIMITS.args());
    a.extend(os(&["--", image, &format!("{dir}/{leaf}")]));
    a
}

/// The helper volume's [`filler`]: every sandbox on the engine mounts that
/// volume, so nothing of the image may reach it.
pub fn helper_filler(image: &str, volume: &str, id: &FillerId) -> Vec<OsString> {
    filler(image, volume, id, "helper")
}

/// `docker ps -a` of the fillers: `[name, sbx.helper.filler, sbx.owner, created]`
/// per line, `created` being docker's `.CreatedAt` (see `parse::docker_time`).
pub fn fillers() -> Vec<OsString> {
    let format = format!(
        "[{{{{json .Names}}}},{{{{json (.Label \"{FILLER_LABEL}\")}}}},{{{{json (.Label \"{}\")}}}},{{{{json .CreatedAt}}}}]",
        crate::model::record::OWNER
    );
    os(&["ps", "-a", "--no-trunc", "--filter", &format!("label={FILLER_LABEL}"), "--format", &format])
}

/// `docker cp - CONTAINER:DIR`: a tar on stdin, extracted there.
pub fn copy_in(container: &str, dir: &str) -> Vec<OsString> {
    os(&["cp", "-", &format!("{container}:{dir}")])
}

/// `docker cp CONTAINER:PATH -`: PATH as a tar on stdout (a symlink as
/// itself; an absent path fails).
pub fn copy_out(container: &str, path: &str) -> Vec<OsString> {
    os(&["cp", &format!("{container}:{path}"), "-"])
}

/// `docker rm -f -v CONTAINER`: `-v` because the filler's image is the
/// sandbox's (hostile), and each `VOLUME` it declares gave the filler an
/// anonymous volume at `docker create`, filled with the image's files
/// there; without `-v` every fill would leave those on the engine, nameless
/// to gc. Named volumes (the one filled) are never removed by `-v`.
pub fn remove_filler(container: &str) -> Vec<OsString> {
    os(&["rm", "-f", "-v", "--", container])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filler's image is the sandbox's own: nothing of it may be copied
    /// into the shared helper volume.
    #[test]
    fn the_filler_mounts_the_helper_volume_without_copying_the_image_in() {
        let id = FillerId { name: "sbx-fill-1".into(), value: "1 b 2 3".into(), owner: "tok".into() };
        let argv: Vec<String> =
            helper_filler("sha256:abc", "sbx-helper-k", &id).iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(argv.contains(&"type=volume,src=sbx-helper-k,dst=/sbx-fill-1,volume-nocopy".to_string()), "{argv:?}");
        assert_eq!(&argv[argv.len() - 3..], ["--", "sha256:abc", "/sbx-fill-1/helper"]);
        assert!(argv.windows(2).any(|w| w == ["--label", "sbx.helper.filler=1 b 2 3"]), "{argv:?}");
        assert!(argv.windows(2).any(|w| w == ["--label", "sbx.owner=tok"]), "{argv:?}");
        assert!(argv.windows(2).any(|w| w == ["--name", "sbx-fill-1"]), "{argv:?}");
        for (k, v) in [("--cpus", "0.5"), ("--memory", "32m"), ("--memory-swap", "32m"), ("--pids-limit", "16")] {
            assert!(argv.windows(2).any(|w| w == [k, v]), "{k} {v} in {argv:?}");
        }
        assert!(argv.contains(&"--no-healthcheck".to_string()), "{argv:?}");
        // The image's VOLUMEs gave it anonymous volumes: they go with it.
        let rm: Vec<String> = remove_filler("f1").iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(rm, ["rm", "-f", "-v", "--", "f1"]);
        let ps: Vec<String> = fillers().iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(
            ps.last().unwrap(),
            r#"[{{json .Names}},{{json (.Label "sbx.helper.filler")}},{{json (.Label "sbx.owner")}},{{json .CreatedAt}}]"#
        );
    }
}

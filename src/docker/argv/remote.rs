//! What sbx runs against a remote engine (issue 16): sbx's helper delivered
//! in a named volume there (nothing bind-mounted from this machine), and the
//! image's layout under /run read from a created-not-started sandbox.

use std::ffi::OsString;

use super::os;

/// The label that marks a helper volume; its value is the helper's content key.
pub const HELPER_LABEL: &str = "sbx.helper";
/// Where a filler container mounts the helper volume.
pub const FILL_DIR: &str = "/v";

/// `docker volume inspect`: the helper volume's labels as JSON (exit 1 when missing).
pub fn helper_volume_labels(name: &str) -> Vec<OsString> {
    os(&["volume", "inspect", "--format", "{{json .Labels}}", "--", name])
}

/// `docker volume create`: the helper volume, labelled with its key.
/// Idempotent (docker answers an existing name with its name).
pub fn helper_volume_create(name: &str, key: &str) -> Vec<OsString> {
    os(&["volume", "create", "--driver", "local", "--label", &format!("{HELPER_LABEL}={key}"), "--", name])
}

/// A container of `image`, never started (its command is never run), that
/// mounts the helper volume at [`FILL_DIR`] so `docker cp` can fill and read it.
/// `volume-nocopy`: the image is the sandbox's (hostile), and without it
/// docker copies whatever the image has at that path into the fresh,
/// shared volume, which every sandbox on the engine then mounts.
pub fn helper_filler(image: &str, volume: &str) -> Vec<OsString> {
    os(&[
        "create",
        "--network",
        "none",
        "--label",
        &format!("{HELPER_LABEL}.filler=1"),
        "--mount",
        &format!("type=volume,src={volume},dst={FILL_DIR},volume-nocopy"),
        "--pull",
        "never",
        "--",
        image,
        "/v/helper",
    ])
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

/// `docker rm -f CONTAINER`.
pub fn remove_filler(container: &str) -> Vec<OsString> {
    os(&["rm", "-f", "--", container])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filler's image is the sandbox's own: nothing of it may be copied
    /// into the shared helper volume.
    #[test]
    fn the_filler_mounts_the_helper_volume_without_copying_the_image_in() {
        let argv: Vec<String> =
            helper_filler("sha256:abc", "sbx-helper-k").iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(argv.contains(&"type=volume,src=sbx-helper-k,dst=/v,volume-nocopy".to_string()), "{argv:?}");
        assert_eq!(&argv[argv.len() - 3..], ["--", "sha256:abc", "/v/helper"]);
    }
}

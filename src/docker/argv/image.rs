//! Images and the engine itself: an image's USER and labels, the engine's
//! version and OS, and doctor's probe images (import, find, remove).

use std::ffi::OsString;

use super::{os, with_tail};
use crate::docker::parse;

/// The image's USER and its labels in one call (see `parse::image_config`).
pub fn image_user(image: &str) -> Vec<OsString> {
    os(&["image", "inspect", "--format", parse::IMAGE_FORMAT, "--", image])
}

/// An image's own labels (what every container of it inherits), for `audit`.
pub fn image_labels(image: &str) -> Vec<OsString> {
    os(&["image", "inspect", "--format", "{{json .Config.Labels}}", "--", image])
}

/// `docker pull` of a `repo@sha256:D` reference: exactly that content.
pub fn pull(image: &str) -> Vec<OsString> {
    os(&["pull", "--", image])
}

/// The `repo@sha256:D` names the engine knows an image by (see `parse::repo_digests`).
pub fn repo_digests(image: &str) -> Vec<OsString> {
    os(&["image", "inspect", "--format", "{{json .RepoDigests}}", "--", image])
}

/// `true` when the engine runs with experimental features (checkpoints).
pub fn experimental() -> Vec<OsString> {
    os(&["version", "--format", "{{json .Server.Experimental}}"])
}

pub fn version() -> Vec<OsString> {
    os(&["version", "--format", "{{json .}}"])
}

/// A docker context's engine endpoint (no engine call: the CLI reads its
/// own store). `name` is checked by `model::engine::valid_context_name`.
pub fn context_host(name: &str) -> Vec<OsString> {
    os(&["context", "inspect", "--format", "{{json .Endpoints.docker.Host}}", "--", name])
}

/// The CLI's current context, when its config file cannot be read by sbx.
pub fn context_show() -> Vec<OsString> {
    os(&["context", "show"])
}

/// The cheapest call that needs the engine's container store: doctor's hang check.
pub fn ps_quiet() -> Vec<OsString> {
    os(&["ps", "-q", "--last", "1"])
}

/// The runtimes the engine has, with their paths and arguments (see `parse::runtimes`).
pub fn runtimes() -> Vec<OsString> {
    os(&["info", "--format", "{{json .Runtimes}}"])
}

/// The engine's clock (see `parse::engine_time`): what docker's own times
/// (a container's `Created`) are measured against.
pub fn engine_time() -> Vec<OsString> {
    os(&["info", "--format", "{{json .SystemTime}}"])
}

pub fn info_os() -> Vec<OsString> {
    os(&["info", "--format", "{{json .OperatingSystem}}"])
}

/// The engine's own ID (see `parse::engine_id`): what sbx's record of its
/// own image is kept under.
pub fn engine_id() -> Vec<OsString> {
    os(&["info", "--format", "{{json .ID}}"])
}

/// `docker import` of sbx's own image from a tar on stdin. No label: the
/// id it prints is what sbx runs (see `host::self_image`).
pub fn import() -> Vec<OsString> {
    os(&["import", "--change", "ENTRYPOINT [\"/sbx\", \"__probe\"]", "-"])
}

/// `docker rmi -- ID...`: sbx drops its own images of other builds
/// (an image still in use is refused by docker and stays).
pub fn remove_images<S: AsRef<str>>(ids: &[S]) -> Vec<OsString> {
    with_tail(&["rmi", "--"], ids)
}

/// The engine's security options (`["name=apparmor", "name=seccomp,profile=default", ...]`).
pub fn security_options() -> Vec<OsString> {
    os(&["info", "--format", "{{json .SecurityOptions}}"])
}

#[cfg(test)]
mod tests {
    use super::super::strs;
    use super::*;

    #[test]
    fn image_builders() {
        assert_eq!(strs(remove_images(&["sha256:a", "sha256:b"])), ["rmi", "--", "sha256:a", "sha256:b"]);
        assert_eq!(strs(pull("r/x@sha256:0")), ["pull", "--", "r/x@sha256:0"]);
        assert_eq!(
            strs(repo_digests("r/x@sha256:0")),
            ["image", "inspect", "--format", "{{json .RepoDigests}}", "--", "r/x@sha256:0"]
        );
    }
}

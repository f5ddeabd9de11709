//! Images: one sbx will not run, cannot find, or could not pull (with
//! their `--json` kind and hint; each exits 1 but a refused config or USER, 2).

use crate::docker::parse::PullFailure;

/// The registry part of `repo@sha256:D` (docker.io when it names none).
fn registry(image: &str) -> &str {
    let repo = image.split('@').next().unwrap_or(image);
    match repo.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => first,
        _ => "docker.io",
    }
}

/// An image sbx will not run, or cannot find.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("image {image} is not on this engine")]
    Missing { image: String },
    /// The image moved a mount sbx made (a symlink in the
    /// image makes runc mount elsewhere, where the sandbox can replace it).
    #[error("image {image} redirects {path} (a symlink in the image?): {found}; sbx refuses it")]
    Redirected { image: String, path: String, found: String },
    #[error("image {image} carries the label {label:?}, a key sbx reads; a sandbox would inherit it as part of sbx's record")]
    HasSbxLabel { image: String, label: String },
    /// A VOLUME or WORKDIR sbx will not mount or make (see `create::image`).
    #[error("image {image} declares {reason}; sbx refuses it")]
    ConfigRefused { image: String, reason: String },
    /// A USER in sbx's own uid range (`model::ids`): it would be a neighbour's.
    #[error("image {image} declares USER {user:?}, an id in sbx's own range ({range}), where every id is one sandbox's; sbx refuses it")]
    UserInSbxRange { image: String, user: String, range: String },
    /// `docker pull` of a pinned image failed; `reason` is docker's first line.
    #[error("could not pull image {image}: {}", pull_why(*why, reason))]
    PullFailed { image: String, why: PullFailure, reason: String },
    #[error("pulling image {image} took longer than {}; stopped", humantime::format_duration(*after))]
    PullTimedOut { image: String, after: std::time::Duration },
    /// The pull succeeded but the engine does not list the image under the
    /// digest asked for: sbx runs nothing it cannot name by content.
    #[error("after pulling {image} the engine does not list it under that digest (it has: {})", if found.is_empty() { "none".to_string() } else { found.join(", ") })]
    PullUnverified { image: String, found: Vec<String> },
}

/// Docker's reason, quoted, after what it means.
fn pull_why(why: PullFailure, reason: &str) -> String {
    let what = match why {
        PullFailure::NotFound => "the registry has no such manifest",
        PullFailure::Denied => "the registry refused access",
        PullFailure::Unreachable => "the registry could not be reached",
        PullFailure::Other => "docker failed",
    };
    format!("{what} (docker: {reason:?})")
}

impl ImageError {
    pub fn kind(&self) -> &'static str {
        match self {
            ImageError::Missing { .. } => "image_missing",
            ImageError::Redirected { .. } => "image_redirects",
            ImageError::HasSbxLabel { .. } => "image_has_sbx_label",
            ImageError::ConfigRefused { .. } => "image_config_refused",
            ImageError::UserInSbxRange { .. } => "image_user_in_sbx_range",
            ImageError::PullFailed { .. } => "pull_failed",
            ImageError::PullTimedOut { .. } => "pull_timeout",
            ImageError::PullUnverified { .. } => "pull_unverified",
        }
    }

    pub fn hint(&self) -> Option<String> {
        Some(match self {
            // An image id names content on one engine only: it cannot be pulled.
            ImageError::Missing { image } if image.starts_with("sha256:") => {
                "an image id names an image on one engine only: build or load it here (`docker load -i IMAGE.tar`, `docker import`), then pass the id that engine reports".into()
            }
            ImageError::Missing { image } => format!("pull it (`docker pull {image}`) or load it (`docker load`), then retry; without --pull never (or SBX_PULL=never) sbx pulls it itself"),
            ImageError::Redirected { .. } => {
                "use an image whose /run is a plain directory (no symlinks at /run, /run/sbx or /run/sandbox, and no VOLUME or --rw/--ro path that is a symlink to /run); nothing was left behind".into()
            }
            ImageError::HasSbxLabel { label, .. } => format!(
                "rebuild the image without the {label:?} label (keys `sbx`, `sbx.*` and `sbx-probe.*`, in any case, are sbx's own), then pass its new digest"
            ),
            ImageError::ConfigRefused { .. } => "rebuild the image without that VOLUME or WORKDIR (or move it to a plain absolute path outside /proc, /sys, /dev and sbx's own mounts), then pass its new digest; nothing was created".into(),
            ImageError::UserInSbxRange { .. } => "rebuild the image with a USER outside that range (sbx gives the sandbox a uid of its own anyway), or pass --user UID[:GID] outside it; nothing was created".into(),
            ImageError::PullFailed { image, why, .. } => match why {
                PullFailure::NotFound => format!("check the repository and digest (`docker manifest inspect {image}`, or the digest `docker push` printed); nothing was created"),
                PullFailure::Denied => format!("log in to the registry (`docker login {}`) or check the repository name, then retry; nothing was created", registry(image)),
                PullFailure::Unreachable => format!("check that the registry {} is up and reachable from the Docker engine (an http registry must be allowed in daemon.json's insecure-registries), or load the image another way (`docker load`); nothing was created", registry(image)),
                PullFailure::Other => format!("run `docker pull {image}` to see docker's whole answer; nothing was created"),
            },
            ImageError::PullTimedOut { image, .. } => format!("the registry or the engine stopped answering, or the image is large: retry, raise SBX_PULL_TIMEOUT (e.g. 30m), or pull it first (`docker pull {image}`); nothing was created"),
            ImageError::PullUnverified { image, .. } => format!("remove what was pulled (`docker rmi {image}`) and report the engine's version; nothing was created"),
        })
    }
}

//! Digest-pinned image references. A tag can be moved to other content after
//! it was reviewed, so sbx only runs images named by content.

use crate::model::invalid::Invalid;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef(String);

impl ImageRef {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        let bad = |reason: &str| {
            Invalid::new("image", s, reason).hint(
                "pin the image by content: `repo[:tag]@sha256:<64 hex>` or an image id `sha256:<64 hex>` (`docker images --digests` or `docker image inspect --format '{{.Id}}' IMAGE` show them); a mutable tag makes signing and rollback unverifiable",
            )
        };
        if s.starts_with('-') {
            return Err(bad("it starts with '-' and would be read as an option"));
        }
        let (repo, digest) = match s.rsplit_once('@') {
            Some((repo, digest)) => {
                if repo.is_empty() {
                    return Err(bad("the repository before '@' is empty"));
                }
                (Some(repo), digest)
            }
            None => (None, s),
        };
        let Some(hex) = digest.strip_prefix("sha256:") else {
            return Err(bad("it is not pinned to a sha256 digest"));
        };
        if !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(bad("the digest must be 64 lowercase hex digits"));
        }
        if hex.len() != 64 {
            return Err(bad(&format!("the digest has {} hex digits, not 64 (short ids are ambiguous)", hex.len())));
        }
        if let Some(repo) = repo {
            let ok = repo.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-/:".contains(&b))
                && repo.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric());
            if !ok {
                return Err(bad("the repository name has characters docker does not allow"));
            }
        }
        Ok(ImageRef(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `repo@sha256:D`: a registry can serve exactly this content. An image
    /// id (`sha256:` alone) names an image on one engine only.
    pub fn pullable(&self) -> bool {
        self.0.contains('@')
    }
}

/// `--pull`: whether create pulls a pinned image the engine does not have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PullPolicy {
    /// Pull `repo@sha256:D` by its digest when the engine lacks it (content-addressed:
    /// the registry cannot hand over anything else).
    #[default]
    Missing,
    /// Never pull: a missing image fails the create.
    Never,
}

impl PullPolicy {
    /// `SBX_PULL`, create's `--pull` default.
    pub fn from_env(value: &str) -> Result<Self, Invalid> {
        match value.trim() {
            "missing" => Ok(PullPolicy::Missing),
            "never" => Ok(PullPolicy::Never),
            _ => Err(Invalid::new("SBX_PULL", value, "it must be `missing` or `never`")
                .hint("unset it, or set SBX_PULL=never to fail instead of pulling a missing image")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn accepts_pinned_forms() {
        for ok in [
            format!("sha256:{HEX}"),
            format!("repo@sha256:{HEX}"),
            format!("registry.example:5000/team/repo:1.2@sha256:{HEX}"),
        ] {
            assert_eq!(ImageRef::parse(&ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn only_repository_digests_are_pullable() {
        assert!(ImageRef::parse(&format!("127.0.0.1:5000/team/x@sha256:{HEX}")).unwrap().pullable());
        assert!(!ImageRef::parse(&format!("sha256:{HEX}")).unwrap().pullable());
        assert_eq!(PullPolicy::from_env("never").unwrap(), PullPolicy::Never);
        assert_eq!(PullPolicy::from_env("missing").unwrap(), PullPolicy::Missing);
        assert!(PullPolicy::from_env("always").unwrap_err().reason.contains("`missing` or `never`"));
    }

    #[test]
    fn refuses_unpinned_forms_with_reason() {
        let cases = [
            ("repo:latest", "not pinned"),
            ("repo", "not pinned"),
            ("sha256:0123abcd", "short ids"),
            (&format!("sha256:{}", HEX.to_uppercase()), "lowercase"),
            (&format!("-repo@sha256:{HEX}"), "option"),
            (&format!("@sha256:{HEX}"), "empty"),
            (&format!("Repo;rm@sha256:{HEX}"), "characters"),
            (&format!("sha256:{HEX}\n"), "lowercase"),
        ];
        for (input, why) in cases {
            let err = ImageRef::parse(input).unwrap_err();
            assert!(err.reason.contains(why), "{input:?}: {}", err.reason);
            assert!(err.hint.as_deref().unwrap().contains("mutable tag"));
        }
    }
}

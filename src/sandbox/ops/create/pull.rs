//! Create's pull: an image pinned as `repo@sha256:D` that the engine lacks
//! is pulled by exactly that digest (`--pull missing`, the default), before
//! anything of the sandbox exists. Content-addressed, so the registry
//! cannot hand over anything else; sbx still checks the engine lists the
//! image under that digest before it goes on.

use std::io::{BufRead, BufReader, Read};

use crate::docker::parse::{self, PullProgress};
use crate::docker::{argv, explain, render};
use crate::error::{DockerError, Error, ImageError, Result};
use crate::sandbox::Driver;
use crate::spec::ImageRef;

/// Longest line of docker pull's output sbx reads as one (its lines are short).
const MAX_LINE: u64 = 4096;

impl Driver {
    /// Pull `image` (a `repo@sha256:D`), showing progress on a terminal;
    /// docker's output never reaches sbx's stdout. Bounded by the pull
    /// deadline, ended by Ctrl-C (the runner kills it; this says why).
    pub(super) fn pull(&self, image: &ImageRef) -> Result<()> {
        let img = image.as_str();
        debug_assert!(image.pullable(), "an image id is never pulled");
        self.check_interrupt()?;
        let mut bar = crate::output::progress();
        bar.update(&format!("pulling {img}"));
        let mut seen = PullProgress::default();
        let mut read = |r: &mut dyn Read| -> std::io::Result<()> {
            let mut r = BufReader::new(r);
            let mut line = Vec::new();
            loop {
                line.clear();
                if (&mut r).take(MAX_LINE).read_until(b'\n', &mut line)? == 0 {
                    return Ok(());
                }
                if seen.line(&String::from_utf8_lossy(&line)) {
                    let (done, all) = seen.counts();
                    // Counts first: a long reference is what gets cut.
                    bar.update(&format!("{done}/{all} layers, pulling {img}"));
                }
            }
        };
        let args = argv::pull(img);
        let done = self.docker.run_stream(&args, None, &mut read);
        drop(bar);
        // Ctrl-C killed the pull: say that, not how the pull ended.
        self.check_interrupt()?;
        let done = match done {
            Ok(d) => d,
            Err(DockerError::Timeout { after, .. }) => {
                return Err(Error::Image(ImageError::PullTimedOut { image: img.to_string(), after }))
            }
            Err(e) => return Err(e.into()),
        };
        if done.status != 0 {
            let stderr = done.stderr_str();
            tracing::debug!(command = %render(&args), status = done.status, %stderr, "pull failed");
            if explain::daemon_down(&stderr) {
                return Err(
                    crate::docker::status_error(&args, &crate::docker::Output::fail(done.status, &stderr)).into()
                );
            }
            return Err(Error::Image(ImageError::PullFailed {
                image: img.to_string(),
                why: parse::pull_failure(&stderr),
                reason: reason(&stderr),
            }));
        }
        self.check_pulled(img)
    }

    /// The engine lists `img` under the digest asked for.
    fn check_pulled(&self, img: &str) -> Result<()> {
        let out = crate::docker::run_ok(&*self.docker, &argv::repo_digests(img))?;
        let found = parse::repo_digests(&out.stdout_str());
        if found.iter().any(|have| same_content(img, have)) {
            return Ok(());
        }
        Err(Error::Image(ImageError::PullUnverified { image: img.to_string(), found }))
    }
}

/// Docker's first line, without its prefix, cut short (it is quoted in sbx's error).
fn reason(stderr: &str) -> String {
    let line = explain::first_line(stderr);
    let line = line.trim_start_matches("Error response from daemon: ");
    if line.chars().count() > 300 {
        line.chars().take(299).chain(std::iter::once('…')).collect()
    } else {
        line.to_string()
    }
}

/// `want` (`registry/repo[:tag]@sha256:D`, as given) and `have` (a RepoDigests
/// entry, `repo@sha256:D` in docker's short form) name the same content in
/// the same repository.
pub(super) fn same_content(want: &str, have: &str) -> bool {
    let split = |r: &str| r.rsplit_once('@').map(|(repo, digest)| (short_repo(repo), digest.to_string()));
    matches!((split(want), split(have)), (Some(w), Some(h)) if w == h)
}

/// A repository without its tag and in docker's short form for Docker Hub
/// (`docker.io/library/x:1` is `x`).
fn short_repo(repo: &str) -> String {
    // A tag follows the last '/' (a ':' before it is the registry's port).
    let repo = match repo.rsplit_once('/') {
        Some((head, last)) => format!("{head}/{}", last.split(':').next().unwrap_or(last)),
        None => repo.split(':').next().unwrap_or(repo).to_string(),
    };
    let repo = repo.strip_prefix("docker.io/").unwrap_or(&repo);
    repo.strip_prefix("library/").unwrap_or(repo).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pulled_digest_is_matched_in_docker_short_form() {
        let d = "sha256:bb3c058da4cf23ef87ef0f2e0710d7bf59f4d72d576f9820499145b69000f568";
        let other = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
        let at = |r: &str, d: &str| format!("{r}@{d}");
        assert!(same_content(&at("127.0.0.1:5917/sbxprobe/x", d), &at("127.0.0.1:5917/sbxprobe/x", d)));
        assert!(same_content(&at("127.0.0.1:5917/sbxprobe/x:t1", d), &at("127.0.0.1:5917/sbxprobe/x", d)));
        assert!(same_content(&at("docker.io/library/alpine:3", d), &at("alpine", d)));
        assert!(!same_content(&at("127.0.0.1:5917/sbxprobe/x", d), &at("127.0.0.1:5917/sbxprobe/x", other)));
        assert!(!same_content(&at("127.0.0.1:5917/sbxprobe/x", d), &at("127.0.0.1:5917/sbxprobe/y", d)));
        assert_eq!(short_repo("127.0.0.1:5917/a/b"), "127.0.0.1:5917/a/b");
        assert_eq!(reason("Error response from daemon: manifest unknown\nmore"), "manifest unknown");
    }
}

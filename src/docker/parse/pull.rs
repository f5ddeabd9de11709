//! `docker pull`: its progress (the line-per-change output it prints when
//! its stdout is not a terminal), why it failed, and `RepoDigests`.

use std::collections::BTreeMap;

/// What a pull has done so far, from the lines it printed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullProgress {
    /// Each layer's last status ("Pulling fs layer", "Download complete", ...).
    layers: BTreeMap<String, String>,
}

impl PullProgress {
    /// Take one line of docker pull's output; true when it changed anything.
    /// `<12 hex>: <status>` is a layer; other lines (`...: Pulling from x`,
    /// `Digest:`, `Status:`, the reference) say nothing per layer.
    pub fn line(&mut self, line: &str) -> bool {
        let Some((id, status)) = line.trim().split_once(": ") else { return false };
        if id.len() != 12 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return false;
        }
        let status = status.trim().to_string();
        self.layers.insert(id.to_string(), status.clone()) != Some(status)
    }

    /// (layers done, layers seen): done is `Pull complete` or `Already exists`.
    pub fn counts(&self) -> (usize, usize) {
        let done = self.layers.values().filter(|s| *s == "Pull complete" || *s == "Already exists").count();
        (done, self.layers.len())
    }
}

/// Why a pull failed, as far as docker's message says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullFailure {
    /// The registry has no manifest of that digest (or no such repository).
    NotFound,
    /// The registry wants credentials, or refused the ones it got.
    Denied,
    /// The registry could not be reached (refused, no such host, timed out, TLS).
    Unreachable,
    /// Anything else: docker's words are quoted.
    Other,
}

/// Classify `docker pull`'s stderr (samples in the tests, from engine 20.10).
pub fn pull_failure(stderr: &str) -> PullFailure {
    let s = stderr.to_ascii_lowercase();
    if s.contains("manifest unknown") || s.contains("not found") || s.contains("name unknown") {
        PullFailure::NotFound
    } else if s.contains("no basic auth credentials")
        || s.contains("unauthorized")
        || s.contains("denied")
        || s.contains("authentication required")
    {
        PullFailure::Denied
    } else if s.contains("connection refused")
        || s.contains("no such host")
        || s.contains("i/o timeout")
        || s.contains("deadline exceeded")
        || s.contains("network is unreachable")
        || s.contains("server gave http response to https client")
        || s.contains("x509:")
        || s.contains("tls:")
    {
        PullFailure::Unreachable
    } else {
        PullFailure::Other
    }
}

/// `docker image inspect --format '{{json .RepoDigests}}'`: `["repo@sha256:..",..]` or `null`.
pub fn repo_digests(stdout: &str) -> Vec<String> {
    serde_json::from_str::<Option<Vec<String>>>(stdout.trim()).ok().flatten().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:bb3c058da4cf23ef87ef0f2e0710d7bf59f4d72d576f9820499145b69000f568";

    /// `docker pull -- 127.0.0.1:5917/sbxprobe/x@D` with stdout a pipe (engine 20.10, CLI 28.2).
    fn pulled() -> String {
        format!(
            "127.0.0.1:5917/sbxprobe/x@{D}: Pulling from sbxprobe/x\n\
             126baed972e6: Pulling fs layer\n\
             126baed972e6: Download complete\n\
             126baed972e6: Pull complete\n\
             Digest: {D}\n\
             Status: Downloaded newer image for 127.0.0.1:5917/sbxprobe/x@{D}\n\
             127.0.0.1:5917/sbxprobe/x@{D}\n"
        )
    }

    #[test]
    fn progress_counts_layers_from_captured_output() {
        let mut p = PullProgress::default();
        let changed: Vec<bool> = pulled().lines().map(|l| p.line(l)).collect();
        assert_eq!(changed, [false, true, true, true, false, false, false]);
        assert_eq!(p.counts(), (1, 1));
        let mut p = PullProgress::default();
        p.line("a1b2c3d4e5f6: Already exists");
        p.line("0123456789ab: Waiting");
        assert_eq!(p.counts(), (1, 2));
        assert!(!p.line("0123456789ab: Waiting"), "the same status again changes nothing");
    }

    #[test]
    fn failures_from_captured_stderr() {
        let cases = [
            // A digest the registry does not have.
            (format!("Error response from daemon: manifest for 127.0.0.1:5917/sbxprobe/x@{D} not found: manifest unknown: manifest unknown"), PullFailure::NotFound),
            // A registry with htpasswd auth, no `docker login`.
            (format!("Error response from daemon: Get \"http://127.0.0.1:5919/v2/sbxprobe/x/manifests/{D}\": no basic auth credentials"), PullFailure::Denied),
            ("Error response from daemon: pull access denied for team/x, repository does not exist or may require 'docker login': denied: requested access to the resource is denied".to_string(), PullFailure::Denied),
            // Nothing listening on the port.
            ("Error response from daemon: Get \"http://127.0.0.1:5918/v2/\": dial tcp 127.0.0.1:5918: connect: connection refused".to_string(), PullFailure::Unreachable),
            ("Error response from daemon: Get \"https://registry.invalid/v2/\": dial tcp: lookup registry.invalid on 10.255.255.53:53: no such host".to_string(), PullFailure::Unreachable),
            // A registry that accepts the connection and never answers.
            ("Error response from daemon: Get \"http://127.0.0.1:5920/v2/\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)".to_string(), PullFailure::Unreachable),
            ("Error response from daemon: something new".to_string(), PullFailure::Other),
        ];
        for (stderr, want) in cases {
            assert_eq!(pull_failure(&stderr), want, "{stderr}");
        }
    }

    #[test]
    fn repo_digests_from_captured_output() {
        let out = format!("[\"127.0.0.1:5917/sbxprobe/x@{D}\"]\n");
        assert_eq!(repo_digests(&out), [format!("127.0.0.1:5917/sbxprobe/x@{D}")]);
        assert!(repo_digests("[]\n").is_empty() && repo_digests("null\n").is_empty() && repo_digests("x").is_empty());
    }
}

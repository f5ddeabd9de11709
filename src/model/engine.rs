//! Where the Docker engine is: on this machine, behind a unix
//! socket sbx's bind mounts and host paths refer to, or remote, where a path
//! of this machine means nothing (or, worse, another machine's file). Pure:
//! `host::engine` gathers the inputs (DOCKER_HOST, the docker context) and
//! resolves them to an [`Engine`].

use serde::Serialize;

/// Local or remote, as sbx must treat it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Location {
    Local,
    Remote,
}

/// Where the engine is and how sbx learned it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Engine {
    pub location: Location,
    /// The endpoint URL with any credentials stripped (fit to print).
    pub endpoint: String,
    /// The docker context it came from, when one was named (`--context`,
    /// `SBX_CONTEXT`, `DOCKER_CONTEXT` or the CLI's current context).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The default engine: no DOCKER_HOST and no context, the socket at
    /// [`DEFAULT_ENDPOINT`] (what `state::engine_key` may key a cache by).
    #[serde(skip)]
    pub default: bool,
}

/// The docker CLI's endpoint when nothing else is configured.
pub const DEFAULT_ENDPOINT: &str = "unix:///var/run/docker.sock";

impl Engine {
    /// The default local engine, resolved without a docker call.
    pub fn default_local() -> Self {
        Engine { location: Location::Local, endpoint: DEFAULT_ENDPOINT.into(), context: None, default: true }
    }

    /// The engine at `url` (DOCKER_HOST or a context's docker endpoint).
    pub fn at(url: &str, context: Option<String>) -> Self {
        Engine { location: location_of(url), endpoint: strip_credentials(url), context, default: false }
    }

    pub fn is_remote(&self) -> bool {
        self.location == Location::Remote
    }
}

/// A unix socket (or an inherited descriptor, `fd://`) is on this machine;
/// everything else (`ssh://`, `tcp://`, `http(s)://`, a named pipe) is
/// treated as remote: sbx cannot tell whether an engine reached over a
/// network shares this machine's filesystem, so it assumes it does not.
pub fn location_of(url: &str) -> Location {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("unix") | Some("fd") => Location::Local,
        // A bare path is how some tools write a unix socket.
        None if url.starts_with('/') => Location::Local,
        _ => Location::Remote,
    }
}

/// `url` without a `user:password@` (an `ssh://user@host` keeps its user:
/// that is no secret, and says whose account sbx logs into) and without a
/// query (`?` may carry tokens).
pub fn strip_credentials(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{user}@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_string(),
    };
    format!("{scheme}://{authority}{path}")
}

/// Docker's own rule for a context name (`^[a-zA-Z0-9][a-zA-Z0-9_.+-]+$`),
/// checked before the name reaches an argv, so it can never be an option.
pub fn valid_context_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.+-".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_sockets_are_local_and_everything_networked_is_remote() {
        for url in ["unix:///var/run/docker.sock", "UNIX:///run/user/1000/docker.sock", "fd://", "/var/run/docker.sock"]
        {
            assert_eq!(location_of(url), Location::Local, "{url}");
        }
        for url in
            ["ssh://root@127.0.0.1:2222", "tcp://10.0.0.2:2376", "https://h:2376", "npipe:////./pipe/x", "h:2375"]
        {
            assert_eq!(location_of(url), Location::Remote, "{url}");
        }
    }

    #[test]
    fn credentials_are_stripped_but_the_user_is_kept() {
        assert_eq!(strip_credentials("ssh://root@127.0.0.1:2222"), "ssh://root@127.0.0.1:2222");
        assert_eq!(strip_credentials("ssh://me:s3cret@host:22/path"), "ssh://me@host:22/path");
        assert_eq!(strip_credentials("tcp://u:p@10.0.0.2:2376?token=abc"), "tcp://u@10.0.0.2:2376");
        assert_eq!(strip_credentials("unix:///var/run/docker.sock"), "unix:///var/run/docker.sock");
        assert_eq!(strip_credentials("tcp://h:2375#frag"), "tcp://h:2375");
    }

    #[test]
    fn context_names_follow_docker_s_rule() {
        for ok in ["default", "remote-1", "a.b_c+d", "x1"] {
            assert!(valid_context_name(ok), "{ok}");
        }
        for bad in ["", "a", "-rm", "--host=x", "a b", "a/b", "_x", "é1"] {
            assert!(!valid_context_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_default_engine_is_local_and_marked_default() {
        let e = Engine::default_local();
        assert!(!e.is_remote() && e.default);
        let e = Engine::at("ssh://u:pw@h", Some("far".into()));
        assert!(e.is_remote() && !e.default);
        assert_eq!(e.endpoint, "ssh://u@h");
    }
}

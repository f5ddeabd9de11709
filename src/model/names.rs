//! The names sbx acts on, each checked once where it enters: a
//! [`SandboxId`] (what the user gives and sbx prints), the [`ContainerId`]
//! docker knows that sandbox by (what every docker call names, so a
//! container later given the same name is never touched), a [`PoolName`].
//! clap parses the first and the last (`FromStr`), so a command is handed
//! them checked; a `ContainerId` comes only from an inspect or a record.

use std::fmt;
use std::str::FromStr;

use super::invalid::Invalid;

/// A sandbox id: a container name sbx generates, `sbx-` and 12 lowercase
/// hex digits. It also names the socket directory, so nothing else may pass.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct SandboxId(String);

impl SandboxId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for SandboxId {
    type Err = Invalid;

    fn from_str(s: &str) -> Result<Self, Invalid> {
        let ok = s
            .strip_prefix("sbx-")
            .is_some_and(|h| h.len() == 12 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        if ok {
            Ok(SandboxId(s.to_string()))
        } else {
            Err(Invalid::new("sandbox id", s, "sandbox ids look like sbx-0123456789ab")
                .hint("`sbx ls` lists the sandboxes on this engine"))
        }
    }
}

/// The full container id (64 hex digits) docker gave a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct ContainerId(String);

impl ContainerId {
    /// `s` when it is a full container id, never a name another container could take.
    pub fn full(s: &str) -> Option<Self> {
        (s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())).then(|| ContainerId(s.to_string()))
    }

    /// What a caller already proved names the sandbox's container (tests,
    /// and a channel that found it).
    pub fn known(s: impl Into<String>) -> Self {
        ContainerId(s.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A pool name: what a session key may be, at most 40 characters (they
/// end up in file names and a label).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct PoolName(String);

impl PoolName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for PoolName {
    type Err = Invalid;

    fn from_str(name: &str) -> Result<Self, Invalid> {
        let ok = !name.is_empty()
            && name.len() <= 40
            && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if ok {
            Ok(PoolName(name.to_string()))
        } else {
            Err(Invalid::new(
                "pool name",
                name,
                "it must be 1-40 of A-Z, a-z, 0-9, '.', '_', '-', starting with a letter or digit",
            ))
        }
    }
}

macro_rules! as_text {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl std::ops::Deref for $t {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }
        impl AsRef<str> for $t {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
        impl AsRef<std::ffi::OsStr> for $t {
            fn as_ref(&self) -> &std::ffi::OsStr {
                self.0.as_ref()
            }
        }
        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.0
            }
        }
    )*};
}

as_text!(SandboxId, ContainerId, PoolName);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_once_and_say_why_not() {
        let id: SandboxId = "sbx-0123456789ab".parse().unwrap();
        assert_eq!((id.as_str(), id.to_string()), ("sbx-0123456789ab", "sbx-0123456789ab".to_string()));
        let e = "sbx-0123456789AB".parse::<SandboxId>().unwrap_err();
        assert_eq!(e.to_string(), "invalid sandbox id \"sbx-0123456789AB\": sandbox ids look like sbx-0123456789ab");
        assert_eq!(e.hint.as_deref(), Some("`sbx ls` lists the sandboxes on this engine"));
        assert!(ContainerId::full(&"ab".repeat(32)).is_some());
        assert!(ContainerId::full("sbx-0123456789ab").is_none());
        assert!("p.1_-x".parse::<PoolName>().is_ok());
        for bad in ["", "-p", "a/b", &"a".repeat(41)] {
            assert_eq!(bad.parse::<PoolName>().unwrap_err().what, "pool name", "{bad:?}");
        }
    }
}

//! Which channel a sandbox was made with, as its `sbx.channel` label says
//! (how sbx reaches it is `host::channel`).

use serde::Serialize;

/// The channel a sandbox was made with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    #[default]
    Direct,
    Exec,
}

impl Kind {
    /// The `sbx.channel` label's value; Direct writes no label (sandboxes
    /// from before the label are direct).
    pub fn label(self) -> Option<&'static str> {
        match self {
            Kind::Direct => None,
            Kind::Exec => Some("exec"),
        }
    }

    pub fn from_label(value: Option<&str>) -> Kind {
        match value {
            Some("exec") => Kind::Exec,
            _ => Kind::Direct,
        }
    }
}

/// What `--channel` asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Choice {
    /// Direct when sbx runs as root, else relayed.
    #[default]
    Auto,
    /// Connect to the socket on the host.
    Direct,
    /// Relay through `docker exec` and the helper.
    Exec,
}

impl Choice {
    /// The sandbox user (a uid of its own) binds the socket
    /// with its umask, so only root can be sure to connect to it from the
    /// host. Anyone else gets the relayed channel, which also keeps what the
    /// sandbox writes to /run/sandbox off the host.
    pub fn resolve(self, euid: u32) -> Kind {
        match self {
            Choice::Direct => Kind::Direct,
            Choice::Exec => Kind::Exec,
            Choice::Auto if euid == 0 => Kind::Direct,
            Choice::Auto => Kind::Exec,
        }
    }
}

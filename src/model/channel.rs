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

//! The rows sbx lists session volumes and their users as (see `rows`).

/// A running container using a session volume (`argv::volume_users`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct VolumeUser {
    pub container: String,
    pub volume: String,
}

/// A session volume (`argv::session_volumes`), with the owner token on its label.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct SessionVolume {
    pub name: String,
    pub session: String,
    pub owner: String,
}

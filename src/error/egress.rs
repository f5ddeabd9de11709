//! The egress gate's failures on the host side: a sandbox
//! without a gate, an egress network that is not there, a policy file sbx
//! cannot read back.

/// What went wrong with a sandbox's egress gate.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error("sandbox {id} has no egress gate")]
    NoGate { id: String },
    #[error("the egress gate of sandbox {id} was revoked (`sbx revoke {id} egress`); its egress stays cut")]
    Revoked { id: String },
    #[error("egress network {network} does not exist")]
    NetworkMissing { network: String },
    #[error("the egress policy of sandbox {id} cannot be used: {reason}")]
    Policy { id: String, reason: String },
    /// A remote engine's gate did not take the new policy.
    #[error("the egress gate of sandbox {id} did not receive the new policy ({reason}); it keeps enforcing the previous one")]
    Publish { id: String, reason: String },
    /// The gate did not take its vault (secrets and certificates).
    #[error("the egress gate of sandbox {id} did not take its secrets: {reason}")]
    Vault { id: String, reason: String },
    /// A remote engine's host addresses (the gate refuses them) could not be learned.
    #[error("sbx could not learn the addresses of the engine's host ({endpoint}), which its egress gate must refuse: {reason}")]
    HostAddrs { endpoint: String, reason: String },
}

impl EgressError {
    pub fn kind(&self) -> &'static str {
        match self {
            EgressError::NoGate { .. } => "no_egress",
            EgressError::Revoked { .. } => "egress_revoked",
            EgressError::NetworkMissing { .. } => "egress_network_missing",
            EgressError::Policy { .. } => "egress_policy",
            EgressError::Publish { .. } => "egress_publish",
            EgressError::Vault { .. } => "egress_vault",
            EgressError::HostAddrs { .. } => "egress_host_addrs",
        }
    }

    pub fn hint(&self) -> Option<String> {
        Some(match self {
            EgressError::NoGate { .. } => {
                "a gate is made at create only: create a new sandbox with --allow HOST[:PORT] (or --egress observe)".into()
            }
            EgressError::Revoked { .. } => "create a new sandbox with --allow to have egress again".into(),
            EgressError::NetworkMissing { network } => format!(
                "create it (`docker network create {network}`: a bridge that reaches out, not --internal), or leave out --egress-network to use sbx's own"
            ),
            EgressError::Policy { id, .. } => format!("`sbx revoke {id} egress` cuts its egress; `sbx destroy {id}` removes it"),
            EgressError::Publish { id, .. } => {
                format!("retry; `sbx egress {id}` shows the policy the gate has, `sbx revoke {id} egress` cuts egress at once")
            }
            EgressError::Vault { id, .. } => format!(
                "`sbx logs {id}` and `docker logs {}` may say why; `sbx stop {id}` then `sbx start {id}` pushes them again",
                crate::model::gate::container(id)
            ),
            EgressError::HostAddrs { .. } => "sbx runs its own image there once with `--network host` (`/sbx __host-addrs`): check that the engine allows a host-network container, then retry".into(),
        })
    }
}

//! `sbx secret set`: a running sandbox's secret rotated. The new value is
//! read, kept, and pushed into its gate's memory, which swaps the whole
//! vault at once; the sandbox keeps its placeholder and sees no change.

use crate::error::Result;
use crate::model::invalid::Invalid;
use crate::sandbox::Driver;
use crate::spec::egress::{Policy, SecretSource};

/// What `secret set` changed (no value, no placeholder).
#[derive(Debug, Clone, serde::Serialize)]
pub struct SecretSet {
    pub id: String,
    pub name: String,
    pub host: String,
    pub port: u16,
}

impl Driver {
    /// Secret `name` of sandbox `id` gets the value read from `source`
    /// now. Exit 2 for a NAME the sandbox has not or a SOURCE that cannot
    /// be read, before anything changes.
    pub fn set_secret(&self, id: &str, name: &str, source: &SecretSource) -> Result<SecretSet> {
        let gate = self.gate_of(id)?;
        let data = &self.state()?.state.dir;
        let known = crate::host::secrets::load(data, id)?
            .and_then(|k| k.secrets.into_iter().find(|s| s.name == name))
            .ok_or_else(|| {
                Invalid::new("NAME", name, format!("sandbox {id} has no secret of that name"))
                    .hint(format!("`sbx inspect {id}` lists its secrets"))
            })?;
        let value = source.read("SOURCE", name)?;
        let kept = crate::host::secrets::set_value(data, id, name, value)?;
        self.push_vault(id, &gate, &kept)?;
        Ok(SecretSet { id: id.to_string(), name: name.to_string(), host: known.host, port: known.port })
    }
}

impl Driver {
    /// After `sbx deny`: the secrets of hosts `policy` terminates no more
    /// leave the kept copy and the gate's memory (pushed without them).
    /// Returns their names.
    pub fn secrets_follow(&self, id: &str, policy: &Policy) -> Result<Vec<String>> {
        let data = &self.state()?.state.dir;
        let Some(mut kept) = crate::host::secrets::load(data, id)? else { return Ok(Vec::new()) };
        let terminated = |host: &str, port: u16| policy.terminate.iter().any(|t| t.host == host && t.port == port);
        let gone: Vec<String> =
            kept.secrets.iter().filter(|s| !terminated(&s.host, s.port)).map(|s| s.name.clone()).collect();
        if gone.is_empty() {
            return Ok(gone);
        }
        kept.secrets.retain(|s| terminated(&s.host, s.port));
        crate::host::secrets::save(data, id, &kept)?;
        self.push_vault(id, &self.gate_of(id)?, &kept)?;
        Ok(gone)
    }
}

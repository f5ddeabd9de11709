//! `sbx inspect ID`: the sandbox's record as JSON.

use crate::error::{Error, Result};
use crate::spec::parse_id;
use crate::{Dirs, Env};

pub fn exec(id: &str, env: &Env, dirs: &Dirs) -> Result<()> {
    let id = parse_id(id)?;
    let rec = crate::real_driver(env, dirs).inspect(&id)?;
    let text = serde_json::to_string_pretty(&rec).map_err(|e| Error::io("encoding JSON", e.into()))?;
    super::out(&format!("{text}\n"))
}

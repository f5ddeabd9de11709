//! `sbx cp SRC DST`: files and directories between host and sandbox.

use crate::error::Result;
use crate::workbench;
use crate::{Dirs, Env};

pub fn exec(src: &str, dst: &str, env: &Env, dirs: &Dirs) -> Result<()> {
    let (s, d) = (workbench::parse_cp_side(src)?, workbench::parse_cp_side(dst)?);
    workbench::cp(crate::real_driver(env, dirs).docker(), &s, &d)
}

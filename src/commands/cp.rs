//! `sbx cp SRC DST`: files and directories between host and sandbox.

use crate::error::Result;
use crate::transfer::{parse_max_bytes, Limits};
use crate::workbench;
use crate::{Dirs, Env};

pub fn exec(src: &str, dst: &str, max_bytes: &str, env: &Env, dirs: &Dirs) -> Result<()> {
    let (s, d) = (workbench::parse_cp_side(src)?, workbench::parse_cp_side(dst)?);
    let limits = Limits { max_bytes: parse_max_bytes(max_bytes)?, ..Limits::default() };
    workbench::cp(crate::real_driver(env, dirs).docker(), &s, &d, &limits)
}

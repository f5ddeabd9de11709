//! `sbx man DIR`: one roff page per command (sbx.1, sbx-create.1,
//! sbx-pool-create.1, ...), generated from the clap definition by
//! clap_mangen. Prints each file it wrote.

use std::path::{Path, PathBuf};

use super::Context;
use crate::error::{Error, HostError, Result};

pub fn exec(dir: &Path, ctx: &Context) -> Result<()> {
    let unwritable = |source| Error::from(HostError::ManDir { dir: dir.to_path_buf(), source });
    std::fs::create_dir_all(dir).map_err(unwritable)?;
    let mut cmd = crate::cli::public_command().disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    write_pages(&cmd, dir, &mut written)?;
    if ctx.json() {
        return ctx.out.json_line(&serde_json::json!({ "written": written }));
    }
    let list: String = written.iter().map(|p| format!("{}\n", p.display())).collect();
    ctx.out.data(&list)
}

/// The page of `cmd` and of each visible subcommand under it, depth first.
fn write_pages(cmd: &clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    let path = dir.join(man.get_filename());
    let mut page = Vec::new();
    man.render(&mut page).map_err(|e| Error::io("rendering a man page", e))?;
    std::fs::write(&path, page).map_err(|source| HostError::ManDir { dir: dir.to_path_buf(), source })?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}

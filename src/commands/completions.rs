//! `sbx completions bash|zsh|fish`: a completion script on stdout, from the
//! same clap definition the parser uses, so it cannot fall behind.

use super::Context;
use crate::cli::Shell;
use crate::error::Result;

pub fn exec(shell: Shell, ctx: &Context) -> Result<()> {
    let mut cmd = crate::cli::public_command();
    let mut script = Vec::new();
    match shell {
        Shell::Bash => clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "sbx", &mut script),
        Shell::Zsh => clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, "sbx", &mut script),
        Shell::Fish => clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, "sbx", &mut script),
    }
    ctx.out.data(&String::from_utf8_lossy(&script))
}

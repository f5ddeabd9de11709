//! A hint for the most common slip clap only calls "unexpected argument":
//! a command given to `exec` or `create` without `--` before it.

use std::ffi::OsString;

use crate::error::Invalid;

/// `sbx exec ID id` (no `--`): clap only says "unexpected argument"; say
/// where the command goes (help texts).
pub fn missing_dashes(args: &[OsString]) -> Option<Invalid> {
    let words: Vec<String> = args.iter().skip(1).map(|a| a.to_string_lossy().into_owned()).collect();
    if words.iter().any(|w| w == "--") {
        return None;
    }
    let at = words.iter().position(|w| w == "exec" || w == "create")?;
    let sub = words[at].as_str();
    // Options of exec that take a value; their values are not the command.
    let valued = ["-e", "--env", "-w", "--workdir", "-u", "--user"];
    let mut rest = Vec::new();
    let mut skip = false;
    for w in &words[at + 1..] {
        if skip {
            skip = false;
        } else if sub == "exec" && valued.contains(&w.as_str()) {
            skip = true;
        } else if !w.starts_with('-') {
            rest.push(w.clone());
        }
    }
    let hint = if sub == "exec" && rest.len() >= 2 {
        format!("put `--` before the command: sbx exec {} -- {}", rest[0], rest[1..].join(" "))
    } else if sub == "exec" {
        "put `--` before the command: sbx exec ID -- CMD [ARGS...]".to_string()
    } else {
        "put `--` before the sandbox's command: sbx create --image IMAGE -- CMD [ARGS...]".to_string()
    };
    let extra = if sub == "exec" { rest.get(1..).map(|r| r.join(" ")).unwrap_or_default() } else { rest.join(" ") };
    Some(Invalid::new("arguments", extra, format!("`sbx {sub}` takes its command after `--`")).hint(hint))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::docker::argv::os as args;

    #[test]
    fn a_command_without_dashes_gets_a_hint() {
        let inv = missing_dashes(&args(&["sbx", "exec", "-e", "A=1", "sbx-0123456789ab", "id", "-u"])).unwrap();
        assert_eq!(inv.hint.as_deref(), Some("put `--` before the command: sbx exec sbx-0123456789ab -- id"));
        assert!(missing_dashes(&args(&["sbx", "exec", "x", "--", "id"])).is_none());
        assert!(missing_dashes(&args(&["sbx", "ls", "x"])).is_none());
        let inv = missing_dashes(&args(&["sbx", "create", "--image", "i", "srv"])).unwrap();
        assert!(inv.hint.unwrap().contains("-- CMD"));
    }
}

//! `--seccomp-profile`: a profile file the operator chose instead of sbx's.

use std::path::PathBuf;

use crate::model::invalid::Invalid;

/// A profile the operator chose instead of sbx's (`--seccomp-profile`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomProfile {
    pub path: PathBuf,
    /// `defaultAction` allows (or only logs): a filter in name only.
    pub allows_by_default: bool,
}

impl CustomProfile {
    /// What `create` says on stderr, every time: never unconfined silently.
    pub fn warning(&self) -> String {
        let mut w = format!(
            "using the seccomp profile {} instead of sbx's own; `sbx audit` reports the sandbox as not on sbx's profile",
            self.path.display()
        );
        if self.allows_by_default {
            w.push_str("; it allows every syscall it does not list, so the sandbox is close to unconfined");
        }
        w
    }
}

/// An existing JSON file with a `defaultAction`. `unconfined` (and the
/// engine's `builtin` default) are refused: a sandbox without sbx's filter
/// must be spelled out in a profile of its own, and is then reported.
pub fn check_custom(path: &str) -> std::result::Result<CustomProfile, Invalid> {
    let bad = |why: &str| {
        Invalid::new("--seccomp-profile", path, why)
            .hint("give a seccomp profile file in Docker's format, or leave it out for sbx's own profile")
    };
    if matches!(path, "unconfined" | "builtin" | "default" | "") {
        return Err(bad("sbx does not run sandboxes without its seccomp filter or with the engine's default"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(&format!("cannot read it: {e}")))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(&format!("not JSON: {e}")))?;
    let action = v["defaultAction"].as_str().ok_or_else(|| bad("it has no defaultAction"))?;
    let path = std::fs::canonicalize(path).map_err(|e| bad(&format!("cannot resolve it: {e}")))?;
    Ok(CustomProfile { path, allows_by_default: matches!(action, "SCMP_ACT_ALLOW" | "SCMP_ACT_LOG") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_profiles_are_checked() {
        assert!(check_custom("unconfined").is_err());
        assert!(check_custom("/nonexistent/profile.json").is_err());
        let dir = std::env::temp_dir().join(format!("sbx-seccomp-custom-{:x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("allow.json");
        std::fs::write(&p, r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[]}"#).unwrap();
        let custom = check_custom(p.to_str().unwrap()).unwrap();
        assert_eq!(custom.path, p.canonicalize().unwrap());
        assert!(custom.warning().contains("close to unconfined"));
        std::fs::write(&p, "[]").unwrap();
        assert!(check_custom(p.to_str().unwrap()).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

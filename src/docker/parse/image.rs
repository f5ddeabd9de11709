//! `docker image inspect`: an image's USER and whether it carries a label in
//! sbx's namespace.

use std::collections::BTreeMap;

/// `docker image inspect --format '{{json .Config.User}}'` prints `"1000:1000"`.
pub fn image_user(stdout: &str) -> String {
    serde_json::from_str::<String>(stdout.trim()).unwrap_or_default()
}

/// The format for `docker image inspect`: `["1000:1000",{"label":"value"}]`
/// (labels `null` when the image has none).
pub const IMAGE_FORMAT: &str = "[{{json .Config.User}},{{json .Config.Labels}}]";

/// What sbx reads from an image: its USER, and the first label in sbx's
/// namespace, if any (issue 9 finding 5: containers inherit image labels,
/// so an image must never supply one of sbx's).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImageConfig {
    /// [`ImageConfig::VERSION`] when cached: an answer cached by a build
    /// that judged less is asked for again.
    #[serde(default)]
    pub version: u32,
    pub user: String,
    pub sbx_label: Option<String>,
}

impl ImageConfig {
    /// Raised whenever what is judged from an image's config changes.
    pub const VERSION: u32 = 2;
}

/// Parse a line printed with `IMAGE_FORMAT`; `None` when it is not one.
pub fn image_config(stdout: &str) -> Option<ImageConfig> {
    let (user, labels): (Option<String>, Option<BTreeMap<String, String>>) =
        serde_json::from_str(stdout.trim()).ok()?;
    let sbx_label = labels.unwrap_or_default().into_keys().find(|k| crate::model::record::is_reserved_label(k));
    Some(ImageConfig { version: ImageConfig::VERSION, user: user.unwrap_or_default(), sbx_label })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_user_and_config_from_captured_output() {
        assert_eq!(image_user("\"1000:1000\"\n"), "1000:1000");
        assert_eq!(image_user("\"\"\n"), "");
        let c = image_config("[\"1000\",null]\n").unwrap();
        assert_eq!((c.user.as_str(), c.sbx_label), ("1000", None));
        let c = image_config(r#"["",{"a":"1","sbx.private":"{\"n\":\"svc\"}"}]"#).unwrap();
        assert_eq!(c.sbx_label.as_deref(), Some("sbx.private"));
        assert_eq!(image_config(r#"[null,{"SBX.Volume":"x"}]"#).unwrap().sbx_label.as_deref(), Some("SBX.Volume"));
        assert_eq!(image_config(r#"[null,{"sbx-test.fixture":"x"}]"#).unwrap().sbx_label, None);
        for key in ["sbx-probe.hash", "SBX-Probe.Hash", "sbx"] {
            let c = image_config(&format!("[null,{{{key:?}:\"x\"}}]")).unwrap();
            assert_eq!(c.sbx_label.as_deref(), Some(key));
        }
        assert_eq!(image_config("\"1000\""), None, "not the expected shape");
    }
}

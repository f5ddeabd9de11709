//! `docker image inspect`: an image's USER, whether it carries a label in
//! sbx's namespace, and the config fields that become mounts and the
//! working directory of a container (its VOLUMEs and WORKDIR).

use std::collections::BTreeMap;

/// `docker image inspect --format '{{json .Config.User}}'` prints `"1000:1000"`.
pub fn image_user(stdout: &str) -> String {
    serde_json::from_str::<String>(stdout.trim()).unwrap_or_default()
}

/// The format for `docker image inspect`:
/// `["1000:1000",{"label":"value"},{"/data":{}},"/work"]` (labels and
/// volumes `null` when the image has none).
pub const IMAGE_FORMAT: &str =
    "[{{json .Config.User}},{{json .Config.Labels}},{{json .Config.Volumes}},{{json .Config.WorkingDir}}]";

/// What sbx reads from an image: its USER, and the first label in sbx's
/// namespace, if any (containers inherit image labels,
/// so an image must never supply one of sbx's).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImageConfig {
    /// [`ImageConfig::VERSION`] when cached: an answer cached by a build
    /// that judged less is asked for again.
    #[serde(default)]
    pub version: u32,
    pub user: String,
    pub sbx_label: Option<String>,
    /// The image's `VOLUME` paths as it wrote them (hostile: checked by
    /// `spec::image_volumes` before any reaches an argv). No serde default:
    /// a verdict cached before sbx read them is not used.
    pub volumes: Vec<String>,
    /// The image's `WORKDIR` ("" when it has none).
    pub working_dir: String,
}

impl ImageConfig {
    /// Raised whenever what is judged from an image's config changes.
    pub const VERSION: u32 = 3;
}

/// Parse a line printed with `IMAGE_FORMAT`; `None` when it is not one.
pub fn image_config(stdout: &str) -> Option<ImageConfig> {
    type Fields = (
        Option<String>,
        Option<BTreeMap<String, String>>,
        Option<BTreeMap<String, serde::de::IgnoredAny>>,
        Option<String>,
    );
    let (user, labels, volumes, working_dir): Fields = serde_json::from_str(stdout.trim()).ok()?;
    let sbx_label = labels.unwrap_or_default().into_keys().find(|k| crate::model::record::is_reserved_label(k));
    Some(ImageConfig {
        version: ImageConfig::VERSION,
        user: user.unwrap_or_default(),
        sbx_label,
        volumes: volumes.unwrap_or_default().into_keys().collect(),
        working_dir: working_dir.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_user_and_config_from_captured_output() {
        assert_eq!(image_user("\"1000:1000\"\n"), "1000:1000");
        assert_eq!(image_user("\"\"\n"), "");
        let c = image_config("[\"1000\",null,null,\"\"]\n").unwrap();
        assert_eq!((c.user.as_str(), c.sbx_label, c.volumes.len(), c.working_dir.as_str()), ("1000", None, 0, ""));
        let c = image_config(r#"["",{"a":"1","sbx.private":"{\"n\":\"svc\"}"},null,""]"#).unwrap();
        assert_eq!(c.sbx_label.as_deref(), Some("sbx.private"));
        let label = |s: &str| image_config(s).unwrap().sbx_label;
        assert_eq!(label(r#"[null,{"SBX.Volume":"x"},null,null]"#).as_deref(), Some("SBX.Volume"));
        assert_eq!(label(r#"[null,{"sbx-test.fixture":"x"},null,null]"#), None);
        for key in ["sbx-probe.hash", "SBX-Probe.Hash", "sbx"] {
            assert_eq!(label(&format!("[null,{{{key:?}:\"x\"}},null,null]")).as_deref(), Some(key));
        }
        // As 20.10 prints `docker import --change 'VOLUME /data' --change 'WORKDIR /state/a/b'`,
        // plus a hostile path (kept as written: `create::image` checks it).
        let c = image_config("[\"\",{\"sbx-test\":\"1\"},{\"/data\":{},\"/x/../y\":{}},\"/state/a/b\"]\n").unwrap();
        assert_eq!((c.volumes, c.working_dir.as_str()), (vec!["/data".to_string(), "/x/../y".into()], "/state/a/b"));
        assert_eq!(image_config("\"1000\""), None, "not the expected shape");
        assert_eq!(image_config("[\"1000\",null]"), None, "the older two-field answer");
    }
}

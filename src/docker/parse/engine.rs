//! What the engine says about itself (`docker version`, `docker info`) and
//! the image ids `docker images -q` lists, for doctor.

/// What `docker version --format '{{json .}}'` says (see `argv::version`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EngineVersion {
    /// The engine's version; empty when no server answered (`"Server":null`).
    pub server: String,
    pub api: Option<String>,
    pub client: Option<String>,
    /// The runc version the engine reports among its components.
    pub runc: Option<String>,
}

pub fn engine_version(stdout: &[u8]) -> EngineVersion {
    let v: serde_json::Value = serde_json::from_slice(stdout).unwrap_or_default();
    let s = |v: &serde_json::Value| v.as_str().map(str::to_string);
    EngineVersion {
        server: s(&v["Server"]["Version"]).unwrap_or_default(),
        api: s(&v["Server"]["ApiVersion"]),
        client: s(&v["Client"]["Version"]),
        runc: v["Server"]["Components"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["Name"] == "runc"))
            .and_then(|c| s(&c["Version"])),
    }
}

/// `docker context inspect --format '{{json .Endpoints.docker.Host}}'`
/// (see `argv::context_host`): exactly one JSON string, a URL; anything
/// else is None (a context with no docker endpoint says `null`).
pub fn context_host(stdout: &str) -> Option<String> {
    let host: String = serde_json::from_str(stdout.trim()).ok()?;
    (!host.is_empty() && !host.contains(char::is_control)).then_some(host)
}

/// The `currentContext` of the CLI's `config.json`; None when it names none.
pub fn current_context(config: &[u8]) -> Result<Option<String>, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct Config {
        #[serde(default, rename = "currentContext")]
        current: Option<String>,
    }
    let c: Config = serde_json::from_slice(config)?;
    Ok(c.current.filter(|c| !c.is_empty()))
}

/// `docker info --format '{{json .OperatingSystem}}'` (see `argv::info_os`).
pub fn operating_system(stdout: &str) -> String {
    stdout.trim().trim_matches('"').to_string()
}

/// `docker info --format '{{json .Runtimes}}'` (see `argv::runtimes`): each
/// runtime's path and arguments; None when it is not that JSON object.
pub fn runtimes(stdout: &str) -> Option<crate::model::runtime::Runtimes> {
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        path: String,
        #[serde(default, rename = "runtimeArgs")]
        args: Option<Vec<String>>,
    }
    let map: std::collections::BTreeMap<String, Entry> = serde_json::from_str(stdout.trim()).ok()?;
    Some(
        map.into_iter()
            .map(|(name, e)| {
                let reg = crate::model::runtime::Registered {
                    name: name.clone(),
                    path: e.path,
                    args: e.args.unwrap_or_default(),
                };
                (name, reg)
            })
            .collect(),
    )
}

/// `docker images -q --no-trunc` (see `argv::images_labelled`): the image ids, one a line.
pub fn image_ids(stdout: &str) -> Vec<String> {
    stdout.lines().map(str::trim).filter(|l| l.starts_with("sha256:")).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_context_s_host_is_one_json_string() {
        // Captured from CLI 28.2.2 (`docker context create x --docker host=ssh://root@127.0.0.1:2222`).
        assert_eq!(
            super::context_host("\"ssh://root@127.0.0.1:2222\"\n").as_deref(),
            Some("ssh://root@127.0.0.1:2222")
        );
        for bad in ["null\n", "", "[\"a\"]", "\"a\" \"b\"", "\"\"", "\"a\\nb\""] {
            assert_eq!(super::context_host(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_config_s_current_context() {
        assert_eq!(super::current_context(br#"{"auths":{},"currentContext":"far"}"#).unwrap().as_deref(), Some("far"));
        assert_eq!(super::current_context(br#"{"auths":{}}"#).unwrap(), None);
        assert!(super::current_context(b"not json").is_err());
    }

    use super::*;

    /// Captured from engine 20.10.24 with CLI 28.2.2.
    const VERSION: &str = r#"{"Client":{"Version":"28.2.2","ApiVersion":"1.41","DefaultAPIVersion":"1.50","GitCommit":"e6534b4","GoVersion":"go1.24.3","Os":"linux","Arch":"amd64","BuildTime":"Fri May 30 12:07:14 2025","Context":"default"},"Server":{"Platform":{"Name":""},"Components":[{"Name":"Engine","Version":"20.10.24+dfsg1","Details":{"ApiVersion":"1.41","Arch":"amd64","BuildTime":"Thu May  7 21:09:36 2026","Experimental":"false","GitCommit":"5d6db84","GoVersion":"go1.19.8","KernelVersion":"6.18.44-fc-v857","MinAPIVersion":"1.12","Os":"linux"}},{"Name":"containerd","Version":"1.6.20~ds1","Details":{"GitCommit":"1.6.20~ds1-1+deb12u3"}},{"Name":"runc","Version":"1.1.5+ds1","Details":{"GitCommit":"1.1.5+ds1-1+deb12u1"}},{"Name":"docker-init","Version":"0.19.0","Details":{"GitCommit":""}}],"Version":"20.10.24+dfsg1","ApiVersion":"1.41","MinAPIVersion":"1.12","GitCommit":"5d6db84","GoVersion":"go1.19.8","Os":"linux","Arch":"amd64","KernelVersion":"6.18.44-fc-v857","BuildTime":"2026-05-07T21:09:36.000000000+00:00"}}"#;
    /// The same CLI with no daemon behind DOCKER_HOST (exit status 1).
    const VERSION_NO_DAEMON: &str = r#"{"Client":{"Version":"28.2.2","ApiVersion":"1.50","DefaultAPIVersion":"1.50","GitCommit":"e6534b4","GoVersion":"go1.24.3","Os":"linux","Arch":"amd64","BuildTime":"Fri May 30 12:07:14 2025","Context":"default"},"Server":null}"#;

    #[test]
    fn engine_version_from_captured_output() {
        let v = engine_version(VERSION.as_bytes());
        assert_eq!(v.server, "20.10.24+dfsg1");
        assert_eq!((v.api.as_deref(), v.client.as_deref()), (Some("1.41"), Some("28.2.2")));
        assert_eq!(v.runc.as_deref(), Some("1.1.5+ds1"));
        let down = engine_version(VERSION_NO_DAEMON.as_bytes());
        assert_eq!(down, EngineVersion { client: Some("28.2.2".into()), ..Default::default() });
        assert_eq!(engine_version(b""), EngineVersion::default());
    }

    /// Captured from engine 20.10.24 with runsc registered by `.ci/register-runsc`.
    const RUNTIMES: &str = r#"{"runc":{"path":"runc"},"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=host","--host-uds=create"]}}"#;

    #[test]
    fn runtimes_from_captured_output() {
        let r = runtimes(&format!("{RUNTIMES}\n")).unwrap();
        assert_eq!(r.keys().collect::<Vec<_>>(), ["runc", "runsc"]);
        assert_eq!(r["runc"].path, "runc");
        assert!(r["runc"].args.is_empty());
        assert_eq!(r["runsc"].args, crate::model::runtime::RUNSC_ARGS);
        assert_eq!(r["runsc"].family(), crate::model::runtime::Family::Gvisor);
        assert!(runtimes("").is_none() && runtimes("null").is_none() && runtimes("[1]").is_none());
    }

    #[test]
    fn info_and_image_ids_from_captured_output() {
        assert_eq!(operating_system("\"Debian GNU/Linux 12 (bookworm)\"\n"), "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(operating_system(""), "");
        let a = format!("sha256:{}", "a".repeat(64));
        let b = format!("sha256:{}", "b".repeat(64));
        assert_eq!(image_ids(&format!("{a}\n{b}\n")), [a.clone(), b]);
        assert_eq!(image_ids(""), Vec::<String>::new());
        assert_eq!(image_ids("WARNING: something\n"), Vec::<String>::new());
    }
}

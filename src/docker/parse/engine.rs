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

/// What `docker import` prints: the new image's id, `sha256:` and 64 hex
/// digits; None for anything else.
pub fn imported_id(stdout: &str) -> Option<String> {
    let id = stdout.trim();
    let hex = id.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))).then(|| id.to_string())
}

/// `docker info --format '{{json .ID}}'`: the engine's ID (20.10: twelve
/// colon-separated groups; later engines: a UUID). None unless it is a
/// short string of letters, digits, ':' and '-' (it names a record key).
pub fn engine_id(stdout: &str) -> Option<String> {
    let id: String = serde_json::from_str(stdout.trim()).ok()?;
    let ok =
        !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b':' || b == b'-');
    ok.then_some(id)
}

/// A time as docker prints it, with its offset: `docker ps`'s
/// `.CreatedAt` (`2026-11-30 19:15:26 +0530 IST`, in the CLI's zone) or
/// an RFC 3339 time of the engine's (`2026-11-30T13:45:26.906049911Z`,
/// `...+01:00`). None for anything else.
pub fn docker_time(s: &str) -> Option<std::time::SystemTime> {
    let s = s.trim().trim_matches('"');
    let at = humantime::parse_rfc3339_weak(s.get(..19)?).ok()?;
    let rest = &s[19..];
    let rest = rest.strip_prefix('.').map_or(rest, |r| r.trim_start_matches(|c: char| c.is_ascii_digit()));
    let rest = rest.trim_start_matches(' ');
    if rest == "Z" || rest.starts_with("Z ") {
        return Some(at);
    }
    let (ahead, rest) = match (rest.strip_prefix('+'), rest.strip_prefix('-')) {
        (Some(r), _) => (true, r),
        (_, Some(r)) => (false, r),
        _ => return None,
    };
    let digits: String = rest.chars().take_while(|c| *c != ' ').filter(|c| *c != ':').collect();
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = digits[..2].parse::<u64>().ok()? * 3600 + digits[2..].parse::<u64>().ok()? * 60;
    let off = std::time::Duration::from_secs(secs);
    // Local = UTC + offset.
    if ahead {
        at.checked_sub(off)
    } else {
        at.checked_add(off)
    }
}

/// `docker info --format '{{json .SystemTime}}'` (see `argv::engine_time`):
/// the engine's clock.
pub fn engine_time(stdout: &str) -> Option<std::time::SystemTime> {
    let s: String = serde_json::from_str(stdout.trim()).ok()?;
    docker_time(&s)
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
    fn engine_and_imported_ids_from_captured_output() {
        let id = "WDZ6:6QS5:LLWP:Z2RN:VJ3J:SRJA:XG4K:XW3H:UOQ4:D5FV:BUSX:TPNU";
        assert_eq!(engine_id(&format!("\"{id}\"\n")).as_deref(), Some(id));
        assert_eq!(engine_id("\"\"\n"), None);
        assert_eq!(engine_id("\"../x\"\n"), None);
        let img = format!("sha256:{}", "0a".repeat(32));
        assert_eq!(imported_id(&format!("{img}\n")), Some(img));
        assert_eq!(imported_id("sha256:0a\n"), None);
        assert_eq!(imported_id(&format!("sha256:{}\n", "G".repeat(64))), None);
    }

    #[test]
    fn info_and_image_ids_from_captured_output() {
        assert_eq!(operating_system("\"Debian GNU/Linux 12 (bookworm)\"\n"), "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(operating_system(""), "");
    }

    #[test]
    fn docker_times_with_their_offsets() {
        // Captured from CLI 28.2.2 under TZ=UTC, Asia/Kolkata, America/New_York
        // (one container), and engine 20.10.24's `.SystemTime` and `.Created`.
        let at = humantime::parse_rfc3339("2026-11-30T13:45:26Z").unwrap();
        for s in [
            "2026-11-30 13:45:26 +0000 UTC",
            "\"2026-11-30 19:15:26 +0530 IST\"",
            "2026-11-30 08:45:26 -0500 EST",
            "2026-11-30T13:45:26.906049911Z",
            "2026-11-30T14:45:26.5+01:00",
            "2026-11-30T13:45:26Z",
        ] {
            assert_eq!(docker_time(s), Some(at), "{s}");
        }
        assert_eq!(engine_time("\"2026-11-30T13:45:26.073803691Z\"\n"), Some(at));
        for bad in [
            "",
            "2026-11-30 13:45:26",
            "2026-11-30 13:45:26 UTC",
            "2026-11-30 13:45:26 +05",
            "yesterday",
            "2026-11-30 13:45:26 *0000",
        ] {
            assert_eq!(docker_time(bad), None, "{bad:?}");
        }
        assert_eq!(engine_time("null"), None);
    }
}

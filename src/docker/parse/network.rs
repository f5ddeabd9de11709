//! `docker network inspect` as sbx reads it to judge a route's boundary,
//! and the private route networks sbx lists.

use std::collections::BTreeMap;

/// What sbx needs to know about one network to judge a route's boundary.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetInfo {
    pub internal: bool,
    pub driver: String,
    /// `com.docker.network.bridge.inhibit_ipv4=true`: the bridge has no host
    /// address, so the host cannot be reached through it.
    pub inhibit_ipv4: bool,
    /// The sandbox id, for a private route network sbx made.
    pub private_for: Option<String>,
}

/// The format for `docker network inspect`: one JSON array per network.
pub const NETWORK_FORMAT: &str =
    "[{{json .Name}},{{json .Internal}},{{json .Driver}},{{json .Options}},{{json .Labels}}]";

/// `docker network inspect --format NETWORK_FORMAT` prints one line per
/// network it found; the missing ones are named on stderr as `network NAME
/// not found` (20.10) or `No such network: NAME`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetworkReport {
    pub nets: BTreeMap<String, NetInfo>,
    pub missing: Vec<String>,
}

pub fn networks(asked: &[String], stdout: &str, stderr: &str) -> NetworkReport {
    type Line = (String, bool, String, Option<BTreeMap<String, String>>, Option<BTreeMap<String, String>>);
    let mut nets = BTreeMap::new();
    for line in stdout.lines() {
        let Ok((name, internal, driver, options, labels)) = serde_json::from_str::<Line>(line.trim()) else { continue };
        let options = options.unwrap_or_default();
        let labels = labels.unwrap_or_default();
        let info = NetInfo {
            internal,
            inhibit_ipv4: options.get("com.docker.network.bridge.inhibit_ipv4").map(String::as_str) == Some("true"),
            driver,
            private_for: labels.get(crate::model::record::PRIVATE_FOR).cloned(),
        };
        nets.insert(name, info);
    }
    let missing = asked
        .iter()
        .filter(|n| !nets.contains_key(*n))
        .filter(|n| {
            stderr.contains(&format!("network {n} not found")) || stderr.contains(&format!("No such network: {n}"))
        })
        .cloned()
        .collect();
    NetworkReport { nets, missing }
}

/// A private route network (`argv::private_networks`), with the sandbox it
/// serves, its service container and the owner token on its label.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct PrivateNetwork {
    pub name: String,
    pub sandbox: String,
    pub service: String,
    pub owner: String,
}

/// An egress gate container (`argv::gates`): its sandbox and the owner
/// token on its label.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Gate {
    pub name: String,
    pub sandbox: String,
    pub owner: String,
    pub container: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_report_from_captured_output() {
        let asked: Vec<String> = ["sbx-exp1", "sbx-exp2", "sbx-missing"].map(String::from).to_vec();
        // Captured from engine 20.10.24 with CLI 28.2.2 (exit status 1).
        let stdout = concat!(
            r#"["sbx-exp1",true,"bridge",{"com.docker.network.bridge.inhibit_ipv4":"true"},{"sbx.private-for":"sbx-0123456789ab"}]"#,
            "\n",
            r#"["sbx-exp2",false,"bridge",{},{}]"#,
            "\n",
        );
        let stderr = "Error response from daemon: network sbx-missing not found\n";
        let r = networks(&asked, stdout, stderr);
        let one = &r.nets["sbx-exp1"];
        assert!(one.internal && one.inhibit_ipv4 && one.driver == "bridge");
        assert_eq!(one.private_for.as_deref(), Some("sbx-0123456789ab"));
        let two = &r.nets["sbx-exp2"];
        assert!(!two.internal && !two.inhibit_ipv4 && two.private_for.is_none());
        assert_eq!(r.missing, vec!["sbx-missing"]);
        let r = networks(&asked[..1], r#"["sbx-exp1",true,"bridge",null,null]"#, "");
        assert!(r.nets["sbx-exp1"].internal);
        let r = networks(&asked[2..], "", "Error: No such network: sbx-missing");
        assert_eq!(r.missing, vec!["sbx-missing"]);
    }
}

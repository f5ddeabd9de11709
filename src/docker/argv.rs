//! Pure builders for every docker argv sbx runs. No I/O here: each function
//! maps typed, validated input to the exact argument vector, so the vectors
//! are tested on their own. Values a user controls come after `--` wherever
//! the subcommand allows it, so none can be read as an option.

use std::ffi::OsString;

use crate::model::record;

mod run;

pub use crate::model::paths::{SANDBOX_SOCKET, SANDBOX_SOCKET_DIR};
pub use run::{container, RunPlan};
/// Lines of the sandbox's log quoted when it dies or never binds.
pub const LOG_TAIL: &str = "20";

/// `["a", "b"]` as an argv.
pub fn os<S: AsRef<str>>(v: &[S]) -> Vec<OsString> {
    v.iter().map(|s| OsString::from(s.as_ref())).collect()
}

/// `head` then `tail`, e.g. a fixed subcommand and the ids it acts on.
pub fn with_tail<S: AsRef<str>>(head: &[&str], tail: &[S]) -> Vec<OsString> {
    let mut v = os(head);
    v.extend(tail.iter().map(|s| OsString::from(s.as_ref())));
    v
}

/// The image's USER and its labels in one call (see `parse::image_config`).
pub fn image_user(image: &str) -> Vec<OsString> {
    os(&["image", "inspect", "--format", super::parse::IMAGE_FORMAT, "--", image])
}

/// An image's own labels (what every container of it inherits), for `audit`.
pub fn image_labels(image: &str) -> Vec<OsString> {
    os(&["image", "inspect", "--format", "{{json .Config.Labels}}", "--", image])
}

pub fn network_inspect<S: AsRef<str>>(networks: &[S]) -> Vec<OsString> {
    with_tail(&["network", "inspect", "--format", super::parse::NETWORK_FORMAT, "--"], networks)
}

pub fn network_connect(network: &str, id: &str) -> Vec<OsString> {
    os(&["network", "connect", "--", network, id])
}

/// `--alias`: the service answers to the route's host name on the private network.
pub fn network_connect_alias(network: &str, container: &str, alias: &str) -> Vec<OsString> {
    os(&["network", "connect", "--alias", alias, "--", network, container])
}

/// A private route network: internal, and no IPv4 address on the host's
/// bridge, so neither the outside nor the host can be reached through it.
pub fn private_network(name: &str, id: &str, service: &str, owner: &str) -> Vec<OsString> {
    os(&[
        "network",
        "create",
        "--internal",
        "--opt",
        "com.docker.network.bridge.inhibit_ipv4=true",
        "--label",
        &format!("{}={id}", record::PRIVATE_FOR),
        "--label",
        &format!("{}={service}", record::SERVICE),
        "--label",
        &format!("{}={owner}", record::OWNER),
        "--",
        name,
    ])
}

pub fn network_remove<S: AsRef<str>>(networks: &[S]) -> Vec<OsString> {
    with_tail(&["network", "rm", "--"], networks)
}

/// sbx's private route networks: `[name, sandbox id, service, owner token]` per line.
pub fn private_networks() -> Vec<OsString> {
    let format = format!(
        "[{{{{json .Name}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{}\")}}}}]",
        record::PRIVATE_FOR,
        record::SERVICE,
        record::OWNER
    );
    vec![
        "network".into(),
        "ls".into(),
        "--filter".into(),
        format!("label={}", record::PRIVATE_FOR).into(),
        "--format".into(),
        format.into(),
    ]
}

pub fn network_disconnect(network: &str, id: &str) -> Vec<OsString> {
    os(&["network", "disconnect", "--force", "--", network, id])
}

pub fn start(id: &str) -> Vec<OsString> {
    os(&["start", "--", id])
}

/// `STATUS EXITCODE`, e.g. `running 0` or `exited 3`.
pub fn state(id: &str) -> Vec<OsString> {
    os(&["container", "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", "--", id])
}

/// `PID STATUS EXITCODE` of the main process, e.g. `4242 running 0` or
/// `0 exited 3`: where create reads the sandbox's mount table.
pub fn running_pid(id: &str) -> Vec<OsString> {
    os(&["container", "inspect", "--format", "{{.State.Pid}} {{.State.Status}} {{.State.ExitCode}}", "--", id])
}

pub fn logs_tail(id: &str) -> Vec<OsString> {
    os(&["logs", "--tail", LOG_TAIL, "--", id])
}

/// `-v` removes anonymous volumes the image declared, so nothing outlives it.
pub fn remove<S: AsRef<str>>(ids: &[S]) -> Vec<OsString> {
    with_tail(&["rm", "-f", "-v", "--"], ids)
}

pub fn inspect<S: AsRef<str>>(ids: &[S]) -> Vec<OsString> {
    with_tail(&["container", "inspect", "--format", "{{json .}}", "--"], ids)
}

pub fn version() -> Vec<OsString> {
    os(&["version", "--format", "{{json .}}"])
}

/// The cheapest call that needs the engine's container store: doctor's hang check.
pub fn ps_quiet() -> Vec<OsString> {
    os(&["ps", "-q", "--last", "1"])
}

pub fn info_os() -> Vec<OsString> {
    os(&["info", "--format", "{{json .OperatingSystem}}"])
}

pub fn images_labelled(label: &str) -> Vec<OsString> {
    os(&["images", "-q", "--no-trunc", "--filter", &format!("label={label}")])
}

/// `docker import` of a tar on stdin; `label` marks it so it is found again.
pub fn import(label: &str) -> Vec<OsString> {
    os(&["import", "--change", "ENTRYPOINT [\"/sbx\", \"__probe\"]", "--change", &format!("LABEL {label}"), "-"])
}

pub fn list() -> Vec<OsString> {
    let filter = format!("label={}=1", record::MANAGED);
    vec![
        "ps".into(),
        "-a".into(),
        "--no-trunc".into(),
        "--filter".into(),
        filter.into(),
        "--format".into(),
        super::parse::ps_template().into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: Vec<OsString>) -> Vec<String> {
        v.into_iter().map(|s| s.into_string().unwrap()).collect()
    }

    #[test]
    fn small_builders() {
        assert_eq!(
            strs(network_inspect(&["sbx-a", "sbx-b"])),
            ["network", "inspect", "--format", super::super::parse::NETWORK_FORMAT, "--", "sbx-a", "sbx-b"]
        );
        assert_eq!(
            strs(network_disconnect("sbx-a", "sbx-1")),
            ["network", "disconnect", "--force", "--", "sbx-a", "sbx-1"]
        );
        assert_eq!(strs(remove(&["a", "b"])), ["rm", "-f", "-v", "--", "a", "b"]);
        assert_eq!(strs(list())[..5], ["ps", "-a", "--no-trunc", "--filter", "label=sbx.managed=1"]);
    }
}

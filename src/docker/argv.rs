//! Pure builders for every docker argv sbx runs. No I/O here: each function
//! maps typed, validated input to the exact argument vector, so the vectors
//! are tested on their own. Values a user controls come after `--` wherever
//! the subcommand allows it, so none can be read as an option.

use std::ffi::OsString;
use std::path::Path;

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

/// `docker rmi -- ID...`: doctor drops probe images of other sbx builds
/// (an image still in use is refused by docker and stays).
pub fn remove_images<S: AsRef<str>>(ids: &[S]) -> Vec<OsString> {
    with_tail(&["rmi", "--"], ids)
}

/// `docker volume inspect NAME`: exit 0 when it exists.
pub fn volume_inspect(name: &str) -> Vec<OsString> {
    os(&["volume", "inspect", "--format", "{{.Name}}", "--", name])
}

/// A session's named volume that is a bind of `dir` (the local driver's
/// bind options), labelled with its session and ownership token.
pub fn volume_create(name: &str, dir: &Path, session: &str, owner: &str) -> Vec<OsString> {
    os(&[
        "volume",
        "create",
        "--driver",
        "local",
        "--opt",
        "type=none",
        "--opt",
        "o=bind",
        "--opt",
        &format!("device={}", dir.display()),
        "--label",
        &format!("{}={session}", record::SESSION),
        "--label",
        &format!("{}={owner}", record::OWNER),
        "--",
        name,
    ])
}

/// Running containers that have a volume mounted, one JSON array per line:
/// `[names, sbx.volume label]`. One volume by what is really mounted (a
/// label is anyone's to set: issue 9 finding 5 blocked a session with
/// `LABEL sbx.volume=...`), all of sbx's by volume label.
pub fn volume_users(volume: Option<&str>) -> Vec<OsString> {
    let filter = match volume {
        Some(v) => format!("volume={v}"),
        None => format!("label={}", record::VOLUME),
    };
    os(&[
        "ps",
        "--filter",
        &filter,
        "--filter",
        "status=running",
        "--format",
        &format!("[{{{{json .Names}}}},{{{{json (.Label \"{}\")}}}}]", record::VOLUME),
    ])
}

/// sbx's session volumes, one JSON array per line: `[name, session, owner token]`.
pub fn session_volumes() -> Vec<OsString> {
    os(&[
        "volume",
        "ls",
        "--filter",
        &format!("label={}", record::SESSION),
        "--format",
        &format!(
            "[{{{{json .Name}}}},{{{{json (.Label \"{}\")}}}},{{{{json (.Label \"{}\")}}}}]",
            record::SESSION,
            record::OWNER
        ),
    ])
}

pub fn volume_remove(name: &str) -> Vec<OsString> {
    os(&["volume", "rm", "--", name])
}

/// `docker exec -i -- CID HELPER connect /run/sandbox/sandbox.sock MILLIS`:
/// the relayed channel (`helper` is the in-sandbox helper's path).
pub fn helper_connect(container: &str, helper: &str, timeout: std::time::Duration) -> Vec<OsString> {
    let ms = timeout.as_millis().max(1).to_string();
    os(&["exec", "-i", "--", container, helper, "connect", SANDBOX_SOCKET, &ms])
}

/// `docker exec -- CID HELPER probe-socket /run/sandbox/sandbox.sock MILLIS`.
pub fn helper_probe_socket(container: &str, helper: &str, wait: std::time::Duration) -> Vec<OsString> {
    let ms = wait.as_millis().to_string();
    os(&["exec", "--", container, helper, "probe-socket", SANDBOX_SOCKET, &ms])
}

/// How `docker exec` runs a command: attached stdin and terminal, extra
/// environment, working directory and user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOpts {
    pub interactive: bool,
    pub tty: bool,
    pub env: Vec<(String, String)>,
    pub workdir: Option<String>,
    pub user: Option<String>,
}

/// `docker exec [-i] [-t] [-e K=V]... [-w DIR] [-u USER] -- ID CMD...`:
/// the command's argv passes through untouched, after `--`.
pub fn exec(id: &str, o: &ExecOpts, cmd: &[String]) -> Vec<OsString> {
    let mut a = os(&["exec"]);
    if o.interactive {
        a.push("-i".into());
    }
    if o.tty {
        a.push("-t".into());
    }
    for (k, v) in &o.env {
        a.push("-e".into());
        a.push(format!("{k}={v}").into());
    }
    if let Some(w) = &o.workdir {
        a.push("-w".into());
        a.push(w.into());
    }
    if let Some(u) = &o.user {
        a.push("-u".into());
        a.push(u.into());
    }
    a.push("--".into());
    a.push(id.into());
    a.extend(cmd.iter().map(OsString::from));
    a
}

/// `docker logs [--follow] [--tail N] -- ID`: the sandbox's own output.
pub fn logs(id: &str, follow: bool, tail: Option<&str>) -> Vec<OsString> {
    let mut a = os(&["logs"]);
    if follow {
        a.push("--follow".into());
    }
    if let Some(t) = tail {
        a.push("--tail".into());
        a.push(t.into());
    }
    a.push("--".into());
    a.push(id.into());
    a
}

/// `docker stats --no-stream --format '{{json .}}' -- IDS`: one JSON object
/// per sandbox (see `parse::stats`).
pub fn stats<S: AsRef<str>>(ids: &[S]) -> Vec<OsString> {
    with_tail(&["stats", "--no-stream", "--format", "{{json .}}", "--"], ids)
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

    #[test]
    fn volume_builders() {
        let dir = Path::new("/var/lib/sbx/volumes/s1");
        assert_eq!(
            strs(volume_inspect("sbx-state-s1")),
            ["volume", "inspect", "--format", "{{.Name}}", "--", "sbx-state-s1"]
        );
        assert_eq!(
            strs(volume_create("sbx-state-s1", dir, "s1", "0f")),
            [
                "volume",
                "create",
                "--driver",
                "local",
                "--opt",
                "type=none",
                "--opt",
                "o=bind",
                "--opt",
                "device=/var/lib/sbx/volumes/s1",
                "--label",
                "sbx.session=s1",
                "--label",
                "sbx.owner=0f",
                "--",
                "sbx-state-s1"
            ]
        );
        assert_eq!(
            strs(volume_users(Some("sbx-state-s1"))),
            [
                "ps",
                "--filter",
                "volume=sbx-state-s1",
                "--filter",
                "status=running",
                "--format",
                r#"[{{json .Names}},{{json (.Label "sbx.volume")}}]"#
            ]
        );
        assert_eq!(strs(volume_users(None))[2], "label=sbx.volume");
        assert_eq!(
            strs(session_volumes()),
            [
                "volume",
                "ls",
                "--filter",
                "label=sbx.session",
                "--format",
                r#"[{{json .Name}},{{json (.Label "sbx.session")}},{{json (.Label "sbx.owner")}}]"#
            ]
        );
        assert_eq!(strs(volume_remove("sbx-state-s1")), ["volume", "rm", "--", "sbx-state-s1"]);
        assert_eq!(strs(remove_images(&["sha256:a", "sha256:b"])), ["rmi", "--", "sha256:a", "sha256:b"]);
    }

    #[test]
    fn helper_builders() {
        let t = std::time::Duration::from_millis(1500);
        assert_eq!(
            strs(helper_connect("c0ffee", "/run/sbx/helper", t)),
            ["exec", "-i", "--", "c0ffee", "/run/sbx/helper", "connect", "/run/sandbox/sandbox.sock", "1500"]
        );
        assert_eq!(strs(helper_connect("c", "/h", std::time::Duration::ZERO))[7], "1");
        assert_eq!(
            strs(helper_probe_socket("c0ffee", "/run/sbx/helper", t)),
            ["exec", "--", "c0ffee", "/run/sbx/helper", "probe-socket", "/run/sandbox/sandbox.sock", "1500"]
        );
    }

    #[test]
    fn exec_argv_passes_the_command_through_after_dashes() {
        let o = ExecOpts {
            interactive: true,
            tty: true,
            env: vec![("A".into(), "1 2".into())],
            workdir: Some("/tmp".into()),
            user: Some("1000:1000".into()),
        };
        let cmd: Vec<String> = ["sh", "-c", "echo $A; rm -rf /"].map(String::from).to_vec();
        assert_eq!(
            strs(exec("sbx-0123456789ab", &o, &cmd)),
            [
                "exec",
                "-i",
                "-t",
                "-e",
                "A=1 2",
                "-w",
                "/tmp",
                "-u",
                "1000:1000",
                "--",
                "sbx-0123456789ab",
                "sh",
                "-c",
                "echo $A; rm -rf /"
            ]
        );
    }

    #[test]
    fn logs_and_stats() {
        assert_eq!(strs(logs("sbx-1", false, None)), ["logs", "--", "sbx-1"]);
        assert_eq!(strs(logs("sbx-1", true, Some("5"))), ["logs", "--follow", "--tail", "5", "--", "sbx-1"]);
        assert_eq!(strs(stats(&["a", "b"])), ["stats", "--no-stream", "--format", "{{json .}}", "--", "a", "b"]);
    }
}

//! What docker's error messages mean: which failures are "already gone" or
//! "someone else is removing it" (done, not failed) and which are real.

pub fn no_such_image(stderr: &str) -> bool {
    stderr.contains("No such image") || stderr.contains("no such image")
}

pub fn no_such_container(stderr: &str) -> bool {
    stderr.contains("No such container") || stderr.contains("No such object")
}

/// The CLI's own trailer after a daemon error (CLI 28 prints `exit status 1`).
pub fn is_trailer(line: &str) -> bool {
    let l = line.trim();
    l.is_empty() || l.starts_with("exit status ")
}

pub fn no_such_network(line: &str) -> bool {
    line.contains("No such network") || (line.contains("network ") && line.contains(" not found"))
}

/// Another client is already removing this container (engine 20.10:
/// "removal of container NAME is already in progress").
pub fn removal_in_progress(line: &str, id: &str) -> bool {
    line.contains("is already in progress") && line.contains(&format!("container {id} "))
}

/// Container names docker says are missing, e.g. from `docker container
/// inspect a b` when only `a` exists.
pub fn missing_containers(asked: &[String], stderr: &str) -> Vec<String> {
    asked
        .iter()
        .filter(|id| stderr.lines().any(|l| no_such_container(l) && l.trim_end().ends_with(id.as_str())))
        .cloned()
        .collect()
}

/// `docker network rm` stderr with an error other than "already gone".
pub fn network_rm_failed(stderr: &str) -> bool {
    stderr.lines().any(|l| !is_trailer(l) && !no_such_network(l))
}

/// After a failed `docker rm -f` of `ids`: the ids another client is
/// already removing, or None when a line is a real failure ("no such
/// container" is done, not a failure).
pub fn removal_races(stderr: &str, ids: &[String]) -> Option<Vec<String>> {
    let mut racing = Vec::new();
    for line in stderr.lines().filter(|l| !is_trailer(l)) {
        if no_such_container(line) {
            continue;
        }
        racing.push(ids.iter().find(|id| removal_in_progress(line, id))?.clone());
    }
    Some(racing)
}

pub fn no_such_volume(stderr: &str) -> bool {
    stderr.contains("No such volume") || stderr.contains("no such volume")
}

/// `docker network disconnect` of a container already off the network.
pub fn not_connected(stderr: &str) -> bool {
    stderr.contains("is not connected")
}

/// `docker run`/`create` of an image that is not there (it is never pulled).
pub fn image_missing_at_run(stderr: &str) -> bool {
    stderr.contains("Unable to find image") || no_such_image(stderr)
}

/// Whether a failed `docker rmi` kept image `id`: its stderr names it (in
/// full or by its 12-digit short id, as 20.10's "conflict: unable to
/// delete ... image is being used" does) other than as "No such image".
/// One it does not name was removed.
pub fn rmi_kept(stderr: &str, id: &str) -> bool {
    let short = id.strip_prefix("sha256:").unwrap_or(id).get(..12).unwrap_or(id);
    stderr.lines().any(|l| l.contains(short) && !no_such_image(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_failed_rmi_kept() {
        let (a, b) = (format!("sha256:{}", "a".repeat(64)), format!("sha256:{}", "b".repeat(64)));
        let stderr = format!(
            "Error response from daemon: conflict: unable to delete {} (cannot be forced) - image is being used by running container 0123456789ab\nError response from daemon: No such image: {b}\n",
            &"a".repeat(12)
        );
        assert!(rmi_kept(&stderr, &a));
        assert!(!rmi_kept(&stderr, &b));
        assert!(!rmi_kept("", &a));
    }

    #[test]
    fn image_and_container_errors() {
        assert!(no_such_image("Error response from daemon: no such image: sha256:00: No such image: sha256:00"));
        let asked = vec!["sbx-000000000001".to_string(), "sbx-000000000002".to_string()];
        let stderr = "Error: No such container: sbx-000000000002\n";
        assert_eq!(missing_containers(&asked, stderr), vec!["sbx-000000000002"]);
        assert!(no_such_network("Error response from daemon: network sbx-0123456789ab-inference not found"));
        assert!(is_trailer("exit status 1") && is_trailer("  ") && !is_trailer("Error: x"));
        let racing = "Error response from daemon: removal of container sbx-000000000001 is already in progress";
        assert!(removal_in_progress(racing, "sbx-000000000001"));
        assert!(!removal_in_progress(racing, "sbx-000000000002"));
    }

    #[test]
    fn removal_and_network_errors() {
        let ids = vec!["sbx-000000000001".to_string(), "sbx-000000000002".to_string()];
        let racing = "Error response from daemon: removal of container sbx-000000000002 is already in progress\n\
                      Error: No such container: sbx-000000000001\nexit status 1\n";
        assert_eq!(removal_races(racing, &ids), Some(vec!["sbx-000000000002".to_string()]));
        assert_eq!(removal_races("Error response from daemon: cannot remove\n", &ids), None);
        assert!(!network_rm_failed("Error response from daemon: network sbx-x not found\nexit status 1\n"));
        assert!(network_rm_failed("Error response from daemon: error while removing network: has active endpoints\n"));
        assert!(no_such_volume("Error response from daemon: get sbx-vol-k: no such volume"));
        assert!(not_connected("Error response from daemon: container abc is not connected to network sbx-proxy"));
        assert!(image_missing_at_run("Unable to find image 'sha256:00' locally"));
    }
}

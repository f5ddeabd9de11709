//! The rules audit judges from a sandbox's `docker inspect` alone: its
//! logs, healthcheck, volumes and networks.

use super::strs;

/// json-file or local (the drivers whose files docker itself rotates) with
/// max-size and max-file set; `local` caps by default, json-file does not.
pub(super) fn log_capped(lc: &serde_json::Value) -> (bool, String) {
    let driver = lc["Type"].as_str().unwrap_or_default();
    let opt = |k: &str| lc["Config"][k].as_str().unwrap_or_default().to_string();
    let ok = match driver {
        "json-file" => !opt("max-size").is_empty() && opt("max-size") != "-1" && !opt("max-file").is_empty(),
        "local" => opt("max-size") != "-1",
        _ => false,
    };
    (ok, format!("driver {driver:?}, max-size {:?}, max-file {:?}", opt("max-size"), opt("max-file")))
}

/// A healthcheck runs in dockerd, containerd and runc, outside the
/// container's --cpus: one with a 1 ms interval (from the image's
/// HEALTHCHECK) cost 113% of a host CPU for an idle sandbox.
pub(super) fn no_healthcheck(h: &serde_json::Value) -> (bool, String) {
    let test = strs(&h["Test"]);
    let ok = h.is_null() || test.is_empty() || test[0] == "NONE";
    (ok, format!("Healthcheck {}", if h.is_null() { "none".into() } else { format!("{test:?}") }))
}

/// Volumes are host disk without bound: each image VOLUME got an anonymous
/// one under the engine's data root (701 MiB written to `VOLUME /data` by a
/// read-only sandbox). Only sbx's own are fine: the session's at /state
/// (`sbx.volume`) and, on a remote engine, the read-only helper at /run/sbx.
pub(super) fn no_anonymous_volume(c: &serde_json::Value) -> (bool, String) {
    let session = c["Config"]["Labels"][crate::model::record::VOLUME].as_str().filter(|s| !s.is_empty());
    let others: Vec<String> = c["Mounts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|m| m["Type"] == "volume")
                .filter_map(|m| {
                    let (name, dst) = (m["Name"].as_str().unwrap_or_default(), m["Destination"].as_str());
                    let own = (Some(name) == session && dst == Some("/state"))
                        || (name.starts_with("sbx-helper-")
                            && dst == Some(crate::model::paths::HELPER_DIR)
                            && m["RW"] == false);
                    (!own).then(|| format!("{name}:{}", dst.unwrap_or_default()))
                })
                .collect()
        })
        .unwrap_or_default();
    (others.is_empty(), format!("volumes not sbx's: {others:?}"))
}

/// Every network the container is on must be one of its declared routes
/// (`sbx.routes`, written by sbx at create); `none` only when it has none.
/// Finding 3: someone may attach a sandbox to more, by hand.
pub(super) fn only_route_networks(c: &serde_json::Value) -> (bool, String) {
    let declared: Vec<String> = c["Config"]["Labels"][crate::model::record::ROUTES]
        .as_str()
        .and_then(|r| serde_json::from_str::<std::collections::BTreeMap<String, String>>(r).ok())
        .map(|m| m.into_values().collect())
        .unwrap_or_default();
    let on: Vec<String> =
        c["NetworkSettings"]["Networks"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    let extra: Vec<&String> =
        on.iter().filter(|n| !(declared.contains(n) || declared.is_empty() && *n == "none")).collect();
    (extra.is_empty(), format!("on {on:?}; declared routes {declared:?}; not declared: {extra:?}"))
}

/// A private route network holds the sandbox and its forwarder, nothing
/// else (the service is on the forwarder's upstream network only).
pub(super) fn only_forwarders(id: &str, forwarded: &[(String, Vec<String>)]) -> (bool, String) {
    let mut extra = Vec::new();
    for (net, members) in forwarded {
        let fwd = crate::model::forward::container(net);
        extra.extend(members.iter().filter(|m| **m != id && **m != fwd).map(|m| format!("{m} on {net}")));
    }
    let nets: Vec<&String> = forwarded.iter().map(|(n, _)| n).collect();
    (extra.is_empty(), format!("{nets:?} hold the sandbox and its forwarder; others: {extra:?}"))
}

/// A persistent /state is host disk: bounded only when sbx made it a file
/// system of the session's own (`sbx.persist-size` in bytes). `unbounded`
/// (`--persist-size unbounded`) and a session volume with no bound recorded
/// (an older sbx's) fail. A sandbox without a session volume passes.
pub(super) fn persist_bounded(c: &serde_json::Value) -> (bool, String) {
    let labels = &c["Config"]["Labels"];
    let Some(volume) = labels[crate::model::record::VOLUME].as_str().filter(|s| !s.is_empty()) else {
        return (true, "no persistent /state".into());
    };
    match labels[crate::model::record::PERSIST_SIZE].as_str() {
        Some(n) if n.parse::<u64>().is_ok() => {
            (true, format!("{volume}: at most {n} bytes (a file system of its own)"))
        }
        Some(v) => (false, format!("{volume}: {v}: writes to /state can fill the host's disk")),
        None => (
            false,
            format!("{volume}: no bound recorded (made by an older sbx): writes to /state can fill the host's disk"),
        ),
    }
}

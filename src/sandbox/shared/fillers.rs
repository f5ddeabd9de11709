//! A filler's name, label and owner token: the never-started container a
//! remote create fills a volume through (the helper volume and a
//! `--persist` session's backing volume, `remote_state`). What gc does with
//! the ones left behind is `ops::gc::filler`.

use std::time::SystemTime;

use crate::docker::argv::remote::FillerId;
use crate::host::state::{owner_token, ProcId};

/// What identifies this machine's current boot (pids mean nothing across
/// machines or reboots).
pub(in crate::sandbox) fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// `sbx.helper.filler`'s value for a filler made now by this process.
pub fn label_value(now: SystemTime) -> String {
    let secs = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
    let me = ProcId::current().unwrap_or(ProcId { pid: 0, start: 0 });
    format!("{secs} {} {} {}", boot_id(), me.pid, me.start)
}

/// The owner token of filler `name` carrying `value`.
pub fn token(key: &[u8], name: &str, value: &str) -> String {
    owner_token(key, &format!("helper-filler {name} {value}"))
}

/// A fresh filler's name, label value and owner token under `key`.
pub fn new_id(key: &[u8]) -> FillerId {
    let name = format!("sbx-fill-{:016x}", rand::random::<u64>());
    let value = label_value(SystemTime::now());
    let owner = token(key, &name, &value);
    FillerId { name, value, owner }
}

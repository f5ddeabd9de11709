//! The Docker host's own addresses, which the egress gate refuses unless a
//! rule names one exactly (`spec::egress::Policy::check_addr`): traffic from
//! the egress bridge to any of them enters the host's INPUT chain, past any
//! cloud firewall, and reaches services bound to 0.0.0.0 and other
//! containers' published ports. The gate runs in a namespace of its own and
//! cannot see them, so sbx gathers them where the engine runs and writes them
//! into the gate's policy.
//!
//! A local engine: this machine's interfaces ([`interfaces`], no docker
//! call), every bridge's gateway and docker0 included. A remote engine: sbx's
//! own image run once with `--network host` as `/sbx __host-addrs`
//! ([`print`]), its answer ([`parse`]) cached per endpoint in
//! `<data dir>/engine-addrs.json` for [`TTL`]: a create within that time
//! makes no extra docker call, and an engine's addresses (a new bridge, a
//! new lease) are learned again after it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// How long a remote engine's addresses are used before they are asked again.
pub const TTL: Duration = Duration::from_secs(10 * 60);
/// At most this many addresses are read from a remote engine's answer (a
/// host with every bridge of Docker's default pools has a few dozen).
pub const MAX_ADDRS: usize = 4096;
/// The cache file is small; a larger one is not sbx's and is ignored.
const MAX_CACHE: u64 = 1 << 20;
const CACHE: &str = "engine-addrs.json";

/// Every address of this machine's interfaces but the loopback ranges
/// (which, for the gate, are the gate itself), IPv6 link-local ones
/// included, in the order the kernel lists them, each once. Other
/// addresses on `lo` count: an anycast or service address put there is the
/// host's own all the same (skipping the whole interface let a gate reach
/// one through a CIDR rule).
pub fn interfaces() -> std::io::Result<Vec<IpAddr>> {
    let mut found = Vec::new();
    for ifa in nix::ifaddrs::getifaddrs().map_err(std::io::Error::from)? {
        let Some(addr) = ifa.address else { continue };
        let ip = if let Some(v4) = addr.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = addr.as_sockaddr_in6() {
            IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        if is_host_address(ip) && !found.contains(&ip) {
            found.push(ip);
        }
    }
    Ok(found)
}

/// Whether `ip`, found on any interface (`lo` included), is one the gate
/// must treat as the host's: all but 127.0.0.0/8 and ::1.
fn is_host_address(ip: IpAddr) -> bool {
    !ip.is_loopback()
}

/// `sbx __host-addrs`: this machine's addresses, one a line (what a remote
/// engine's `docker run --network host` of sbx's image prints).
pub fn print() -> std::io::Result<()> {
    let mut text = String::new();
    for ip in interfaces()? {
        text.push_str(&format!("{ip}\n"));
    }
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// What `sbx __host-addrs` printed: one address a line, nothing else, at
/// least one and at most [`MAX_ADDRS`]. Anything else is refused (the
/// gate would otherwise start without knowing the host).
pub fn parse(text: &str) -> Result<Vec<IpAddr>, String> {
    let mut addrs = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if addrs.len() == MAX_ADDRS {
            return Err(format!("it printed more than {MAX_ADDRS} addresses"));
        }
        let ip = line.parse::<IpAddr>().map_err(|_| {
            let shown: String = line.chars().take(60).collect();
            format!("it printed {shown:?}, which is not an address")
        })?;
        addrs.push(ip);
    }
    if addrs.is_empty() {
        return Err("it printed no address".into());
    }
    Ok(addrs)
}

/// One engine's addresses and when they were learned (seconds since the epoch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    at: u64,
    addrs: Vec<IpAddr>,
}

fn cache_path(data: &Path) -> PathBuf {
    data.join(CACHE)
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn read_all(data: &Path) -> BTreeMap<String, Entry> {
    let mut text = String::new();
    let read = std::fs::File::open(cache_path(data)).and_then(|f| f.take(MAX_CACHE).read_to_string(&mut text));
    match read {
        Ok(_) => serde_json::from_str(&text).unwrap_or_default(),
        Err(_) => BTreeMap::new(),
    }
}

/// The addresses of the engine at `endpoint` learned less than [`TTL`]
/// before `now` (never ones dated after it: a clock set back expires them).
pub fn cached(data: &Path, endpoint: &str, now: SystemTime) -> Option<Vec<IpAddr>> {
    let e = read_all(data).remove(endpoint)?;
    let age = secs(now).checked_sub(e.at)?;
    (age < TTL.as_secs() && !e.addrs.is_empty()).then_some(e.addrs)
}

/// Remember `addrs` for `endpoint` as learned at `now`. Best effort (the
/// next create asks again): written to a file of this process's, then
/// renamed over the cache, so a reader sees one whole file.
pub fn remember(data: &Path, endpoint: &str, addrs: &[IpAddr], now: SystemTime) {
    let mut all = read_all(data);
    all.insert(endpoint.to_string(), Entry { at: secs(now), addrs: addrs.to_vec() });
    let Ok(text) = serde_json::to_string_pretty(&all) else { return };
    let path = cache_path(data);
    let tmp = data.join(format!(".{CACHE}.{}", std::process::id()));
    if std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path)).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_has_addresses_and_loopback_is_not_one() {
        let found = interfaces().unwrap();
        assert!(found.iter().all(|ip| !ip.is_loopback()), "{found:?}");
    }

    #[test]
    fn the_remote_answer_is_addresses_only() {
        let ips = parse("192.0.2.2\nfd00::2\n\nfe80::fc:ff:fe00:1\n").unwrap();
        assert_eq!(ips, ["192.0.2.2", "fd00::2", "fe80::fc:ff:fe00:1"].map(|s| s.parse::<IpAddr>().unwrap()));
        assert_eq!(parse("").unwrap_err(), "it printed no address");
        assert!(parse("192.0.2.2\nOCI runtime error\n").unwrap_err().contains("\"OCI runtime error\""));
        let many = "10.0.0.1\n".repeat(MAX_ADDRS + 1);
        assert!(parse(&many).unwrap_err().contains("more than"));
    }

    #[test]
    fn the_cache_is_per_endpoint_and_expires() {
        let data = std::env::temp_dir().join(format!("sbx-host-addrs-{}", std::process::id()));
        std::fs::create_dir_all(&data).unwrap();
        let now = SystemTime::now();
        let a: Vec<IpAddr> = vec!["192.0.2.2".parse().unwrap()];
        let b: Vec<IpAddr> = vec!["198.51.100.7".parse().unwrap()];
        assert_eq!(cached(&data, "ssh://me@far", now), None);
        remember(&data, "ssh://me@far", &a, now);
        remember(&data, "tcp://other:2376", &b, now);
        assert_eq!(cached(&data, "ssh://me@far", now + Duration::from_secs(60)), Some(a.clone()));
        assert_eq!(cached(&data, "tcp://other:2376", now), Some(b));
        assert_eq!(cached(&data, "ssh://me@far", now + TTL), None, "expired");
        assert_eq!(cached(&data, "ssh://me@far", now - Duration::from_secs(5)), None, "from the future");
        std::fs::write(data.join(CACHE), "not json").unwrap();
        assert_eq!(cached(&data, "ssh://me@far", now), None);
        std::fs::remove_dir_all(&data).unwrap();
    }
}

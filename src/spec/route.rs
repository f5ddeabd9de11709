//! Routes: `KIND:TARGET`, where TARGET is `host[:port]` or a URL. Each route
//! puts the sandbox on the user-defined network `sbx-<host>`, where the
//! destination service must sit too.

use crate::model::invalid::Invalid;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub kind: String,
    pub target: String,
    pub host: String,
    pub port: Option<u16>,
}

impl Route {
    pub fn network(&self) -> String {
        network_for(&self.host)
    }

    /// The port the route names: its own, else its URL scheme's (http 80,
    /// https 443); None for a bare host, whose target is the whole host.
    pub fn port_or_default(&self) -> Option<u16> {
        self.port.or_else(|| match self.target.split_once("://")?.0.to_ascii_lowercase().as_str() {
            "http" | "ws" => Some(80),
            "https" | "wss" => Some(443),
            _ => None,
        })
    }

    pub fn parse(s: &str) -> Result<Self, Invalid> {
        let bad = |reason: String| {
            Invalid::new("route", s, reason)
                .hint("write routes as KIND:HOST:PORT or KIND:scheme://HOST[:PORT]/path, e.g. inference:proxy:8080")
        };
        let (kind, target) = s.split_once(':').ok_or_else(|| bad("it has no ':' between KIND and TARGET".into()))?;
        validate_kind(kind).map_err(|r| bad(r.to_string()))?;
        if target.is_empty() {
            return Err(bad("the TARGET is empty".into()));
        }
        let authority = match target.split_once("://") {
            Some((scheme, rest)) => {
                if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b)) {
                    return Err(bad(format!("the URL scheme {scheme:?} is not valid")));
                }
                rest.split(['/', '?', '#']).next().unwrap_or_default()
            }
            None => target,
        };
        if authority.contains('@') {
            return Err(bad(
                "credentials in the target would be stored in container labels; pass them another way".into()
            ));
        }
        if authority.starts_with('[') {
            return Err(loopback_or_literal(s, authority.trim_start_matches('[').split(']').next().unwrap_or("")));
        }
        let (host, port) = match authority.split_once(':') {
            Some((h, p)) => {
                let port: u16 = p
                    .parse()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| bad(format!("the port {p:?} is not a number from 1 to 65535")))?;
                (h, Some(port))
            }
            None => (authority, None),
        };
        if host.is_empty() {
            return Err(bad("the host is empty".into()));
        }
        if is_loopback(host) {
            return Err(loopback_or_literal(s, host));
        }
        let dns_ok = host.len() <= 200
            && host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            && host.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && !host.contains("..");
        if !dns_ok {
            return Err(bad(format!(
                "the host {host:?} must be a DNS name: letters, digits, '-' and '.', starting with a letter or digit"
            )));
        }
        Ok(Route { kind: kind.to_string(), target: target.to_string(), host: host.to_ascii_lowercase(), port })
    }
}

pub fn network_for(host: &str) -> String {
    format!("sbx-{host}")
}

/// The route kind of a sandbox's egress gate (`sbx revoke ID egress`).
pub const EGRESS_KIND: &str = "egress";

/// Route kinds name routes on the command line, in labels and in JSON.
pub fn validate_kind(kind: &str) -> Result<(), &'static str> {
    if kind.is_empty() {
        return Err("the KIND is empty");
    }
    if kind == "all" {
        return Err("the KIND `all` is reserved (`sbx revoke ID all` destroys the sandbox)");
    }
    if kind == EGRESS_KIND {
        return Err("the KIND `egress` is reserved (the egress gate: `--allow`, `sbx revoke ID egress`)");
    }
    let ok = kind.len() <= 32
        && kind.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && kind.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !ok {
        return Err("the KIND must be 1-32 of a-z, 0-9, '-', '_', starting with a letter");
    }
    Ok(())
}

fn loopback_or_literal(route: &str, host: &str) -> Invalid {
    Invalid::new("route", route, format!("{host:?} is loopback (or an address literal): inside a sandbox, loopback is the sandbox itself, not the host"))
        .hint("run the service in a container on the route network (`docker network create --internal sbx-NAME`, `docker network connect sbx-NAME SERVICE`) and route to it by name: KIND:NAME:PORT")
}

/// Loopback and "any" in every spelling the resolver accepts: names, dotted
/// quads, and the inet_aton shorthands (`127.1`, `0x7f.1`, `2130706433`).
pub fn is_loopback(host: &str) -> bool {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    if h == "localhost" || h.ends_with(".localhost") || h == "ip6-localhost" || h == "ip6-loopback" {
        return true;
    }
    match inet_aton(&h) {
        Some(addr) => addr >> 24 == 127 || addr == 0,
        None => false,
    }
}

/// The classic BSD parser: 1-4 parts, each decimal, octal (leading 0) or hex (0x).
fn inet_aton(s: &str) -> Option<u32> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut nums = Vec::with_capacity(parts.len());
    for p in &parts {
        let v = if let Some(hex) = p.strip_prefix("0x") {
            if hex.is_empty() {
                0
            } else {
                u64::from_str_radix(hex, 16).ok()?
            }
        } else if p.len() > 1 && p.starts_with('0') {
            u64::from_str_radix(&p[1..], 8).ok()?
        } else {
            p.parse::<u64>().ok()?
        };
        nums.push(v);
    }
    let (last, head) = nums.split_last()?;
    if head.iter().any(|v| *v > 255) {
        return None;
    }
    let rest_bits = 8 * (4 - head.len() as u32);
    if rest_bits < 32 && *last >= 1u64 << rest_bits || *last > u32::MAX as u64 {
        return None;
    }
    let mut addr: u64 = 0;
    for (i, v) in head.iter().enumerate() {
        addr |= v << (24 - 8 * i as u32);
    }
    Some((addr | last) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_host_port_and_urls() {
        let r = Route::parse("inference:proxy:8080").unwrap();
        assert_eq!((r.kind.as_str(), r.host.as_str(), r.port), ("inference", "proxy", Some(8080)));
        assert_eq!(r.network(), "sbx-proxy");
        let r = Route::parse("tools:http://toolhost:9000/v1").unwrap();
        assert_eq!((r.host.as_str(), r.port, r.target.as_str()), ("toolhost", Some(9000), "http://toolhost:9000/v1"));
        let r = Route::parse("docs:https://docs.internal/x?y").unwrap();
        assert_eq!((r.host.as_str(), r.port), ("docs.internal", None));
    }

    #[test]
    fn refuses_every_loopback_spelling() {
        for host in [
            "localhost",
            "LOCALHOST",
            "localhost.",
            "a.localhost",
            "127.0.0.1",
            "127.1",
            "0x7f.1",
            "2130706433",
            "0177.0.0.1",
            "0.0.0.0",
            "0",
            "127.255.255.254",
            "ip6-localhost",
        ] {
            let err = Route::parse(&format!("k:{host}:80")).unwrap_err();
            assert!(err.reason.contains("loopback"), "{host}: {}", err.reason);
            assert!(err.hint.unwrap().contains("route network"));
        }
        for lit in ["k:[::1]:80", "k:http://[::1]:80/", "k:[::]:80"] {
            assert!(Route::parse(lit).unwrap_err().reason.contains("loopback"), "{lit}");
        }
    }

    #[test]
    fn allows_non_loopback_addresses_and_names() {
        assert!(!is_loopback("10.0.0.1"));
        assert!(!is_loopback("128.0.0.1"));
        assert!(!is_loopback("localhostx"));
        assert!(!is_loopback("1.2.3.4.5"));
    }

    #[test]
    fn refuses_bad_shapes() {
        let cases = [
            ("inference", "no ':'"),
            (":proxy:80", "KIND is empty"),
            ("k:", "TARGET is empty"),
            ("k::80", "host is empty"),
            ("k:proxy:", "port"),
            ("k:proxy:0", "port"),
            ("k:proxy:70000", "port"),
            ("k:proxy:80x", "port"),
            ("k:pro$xy:80", "DNS name"),
            ("k:pro xy:80", "DNS name"),
            ("k:-proxy:80", "DNS name"),
            ("k:a..b:80", "DNS name"),
            ("k:proxy;rm -rf /:80", "DNS name"),
            ("K:proxy:80", "KIND must"),
            ("all:proxy:80", "reserved"),
            ("k:http://user:pw@proxy:80", "credentials"),
            ("k:ht tp://proxy:80", "scheme"),
        ];
        for (input, why) in cases {
            let err = Route::parse(input).unwrap_err();
            assert!(err.reason.contains(why), "{input:?}: {}", err.reason);
        }
    }
}

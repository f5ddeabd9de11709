//! `create`'s egress flags into an `EgressSpec`, checked before any docker
//! call (exit 2).

use std::net::IpAddr;

use super::{AllowRule, EgressSpec, Mode, Policy};
use crate::model::invalid::Invalid;

/// sbx's own host-wide egress network, made on first use.
pub const DEFAULT_NETWORK: &str = "sbx-egress-net";

impl EgressSpec {
    /// `--allow` (each parsed), `--egress`, `--egress-dns`, `--egress-network`
    /// and `--allow-unsafe-cidr`. None when there is no `--allow` and no
    /// `--egress observe`: the sandbox gets no gate (and so no outside at
    /// all). A flag that only means something with a gate is refused
    /// without one, so it is never silently ignored.
    pub fn from_flags(
        allow: &[String],
        mode: Option<Mode>,
        dns: Option<&str>,
        network: Option<&str>,
        allow_unsafe: bool,
    ) -> Result<Option<EgressSpec>, Invalid> {
        let rules = allow.iter().map(|a| AllowRule::parse(a, allow_unsafe)).collect::<Result<Vec<_>, _>>()?;
        let mode = mode.unwrap_or_default();
        if rules.is_empty() && mode != Mode::Observe {
            let lone = [
                (dns.is_some(), "--egress-dns", dns.unwrap_or_default()),
                (network.is_some(), "--egress-network", network.unwrap_or_default()),
                (allow_unsafe, "--allow-unsafe-cidr", ""),
            ];
            if let Some((_, flag, value)) = lone.into_iter().find(|(given, ..)| *given) {
                return Err(Invalid::new(
                    flag,
                    value,
                    "it needs a gate, and there is none without --allow or --egress observe",
                )
                .hint(
                    "add --allow HOST[:PORT] for each host the sandbox may reach, or --egress observe to learn them",
                ));
            }
            return Ok(None);
        }
        let mut policy = Policy { mode, ..Policy::default() };
        policy.allow(&rules);
        Ok(Some(EgressSpec {
            policy,
            dns: dns.map(parse_dns).transpose()?,
            network: network.map(parse_network).transpose()?,
        }))
    }
}

/// The resolver the gate asks: an address (port 53), never loopback (the
/// gate's own, where no resolver runs) or unspecified/multicast.
fn parse_dns(s: &str) -> Result<IpAddr, Invalid> {
    let bare = s.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(s);
    let ip: IpAddr = bare.parse().map_err(|_| {
        Invalid::new("--egress-dns", s, "it is not an IP address (a name would need a resolver to find the resolver)")
            .hint("e.g. --egress-dns 10.0.0.53; the resolver must answer on port 53")
    })?;
    let ip = super::addr::canonical(ip);
    if ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() {
        return Err(Invalid::new(
            "--egress-dns",
            s,
            "loopback, unspecified or multicast: inside the gate, no resolver listens there",
        )
        .hint("name a resolver the gate can reach on the egress network, e.g. --egress-dns 10.0.0.53"));
    }
    Ok(ip)
}

/// The operator's egress network: a plain Docker network name, and none
/// the sandbox itself sits on (a route network `sbx-*`, a sandbox's own
/// `*-egress`) or that would give the gate the host's stack (`host`).
fn parse_network(s: &str) -> Result<String, Invalid> {
    let bad = |reason: &str| {
        Invalid::new("--egress-network", s, reason).hint(format!(
            "name a bridge network that no sandbox is on (`docker network create NAME`), or leave the flag out for sbx's own {DEFAULT_NETWORK}"
        ))
    };
    let shape = !s.is_empty()
        && s.len() <= 128
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if !shape {
        return Err(bad("a Docker network name is letters, digits, '_', '.', '-', starting with a letter or digit"));
    }
    if s == "host" || s == "none" {
        return Err(bad("the gate needs a network of its own: `host` shares the host's stack, `none` has no network"));
    }
    if s != DEFAULT_NETWORK && (s.starts_with("sbx-") || s.ends_with("-egress")) {
        return Err(bad("sbx-* and *-egress are sbx's route and per-sandbox networks: a sandbox sits on them, and must never sit on its egress network"));
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn policy(rules: &[&str]) -> Policy {
        let mut p = Policy::default();
        p.allow(&rules.iter().map(|r| AllowRule::parse(r, false).unwrap()).collect::<Vec<_>>());
        p
    }

    #[test]
    fn from_flags_builds_a_spec_only_when_asked() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(EgressSpec::from_flags(&[], None, None, None, false).unwrap(), None);
        assert_eq!(EgressSpec::from_flags(&[], Some(Mode::Enforce), None, None, false).unwrap(), None);
        let e = EgressSpec::from_flags(&[], Some(Mode::Observe), None, None, false).unwrap().unwrap();
        assert_eq!((e.policy.mode, e.policy.rules.len(), e.dns, e.network), (Mode::Observe, 0, None, None));
        let e = EgressSpec::from_flags(
            &s(&["pypi.org", "Pypi.org:443", "172.18.0.0/16"]),
            None,
            Some("172.18.0.53"),
            Some("my-egress-net"),
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(e.policy, policy(&["pypi.org", "172.18.0.0/16"]));
        assert_eq!((e.dns, e.network.as_deref()), (Some(ip("172.18.0.53")), Some("my-egress-net")));
        let with_unsafe = EgressSpec::from_flags(&s(&["127.0.0.0/8:80"]), None, None, None, true).unwrap().unwrap();
        assert_eq!(with_unsafe.policy.rules, [AllowRule::Cidr { addr: ip("127.0.0.0"), prefix: 8, port: 80 }]);
        let e = EgressSpec::from_flags(&s(&["x.example"]), None, None, Some(DEFAULT_NETWORK), false).unwrap().unwrap();
        assert_eq!(e.network.as_deref(), Some("sbx-egress-net"));
    }

    #[test]
    fn from_flags_refuses_bad_values_and_lone_gate_flags() {
        let one = |a: &str| vec![a.to_string()];
        let err = |allow: &[String], dns: Option<&str>, net: Option<&str>, unsafe_: bool| {
            EgressSpec::from_flags(allow, None, dns, net, unsafe_).unwrap_err()
        };
        let e = err(&one("127.0.0.1"), None, None, false);
        assert_eq!((e.what, e.value.as_str()), ("--allow", "127.0.0.1"));
        for (dns, net, unsafe_, what) in [
            (Some("10.0.0.53"), None, false, "--egress-dns"),
            (None, Some("mynet"), false, "--egress-network"),
            (None, None, true, "--allow-unsafe-cidr"),
        ] {
            let e = err(&[], dns, net, unsafe_);
            assert_eq!(e.what, what);
            assert!(e.reason.contains("needs a gate") && e.hint.unwrap().contains("--allow"));
        }
        for (dns, why) in [
            ("dns.example", "not an IP address"),
            ("10.0.0.53:5353", "not an IP address"),
            ("127.0.0.1", "loopback"),
            ("::1", "loopback"),
            ("[::ffff:127.0.0.53]", "loopback"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.251", "multicast"),
        ] {
            let e = err(&one("x.example"), Some(dns), None, false);
            assert!(e.what == "--egress-dns" && e.reason.contains(why), "{dns}: {}", e.reason);
            assert!(e.hint.is_some());
        }
        assert_eq!(
            EgressSpec::from_flags(&one("x.example"), None, Some("[fd00::53]"), None, false).unwrap().unwrap().dns,
            Some(ip("fd00::53"))
        );
        for (net, why) in [
            ("", "Docker network name"),
            ("-net", "Docker network name"),
            ("container:abc", "Docker network name"),
            ("a b", "Docker network name"),
            ("host", "host's stack"),
            ("none", "no network"),
            ("sbx-proxy", "route"),
            ("0123456789abcdef-egress", "per-sandbox"),
        ] {
            let e = err(&one("x.example"), None, Some(net), false);
            assert!(e.what == "--egress-network" && e.reason.contains(why), "{net}: {}", e.reason);
            assert!(e.hint.unwrap().contains("docker network create"));
        }
    }
}

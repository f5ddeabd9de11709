//! `create`'s egress flags into an `EgressSpec`, checked before any docker
//! call (exit 2).

use std::net::IpAddr;

use std::path::PathBuf;

use super::{AllowRule, EgressSpec, Mode, Policy, RequestRule, SecretSpec, Terminated};
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
        let mut rules = Vec::with_capacity(allow.len());
        let mut requests = Vec::new();
        for a in allow {
            if a.trim().contains(char::is_whitespace) {
                let (host, rule) = parse_request_rule(a, allow_unsafe)?;
                rules.push(host.clone());
                requests.push((host, rule));
            } else {
                rules.push(AllowRule::parse(a, allow_unsafe)?);
            }
        }
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
        for (host, rule) in requests {
            if let AllowRule::Host { name, port } = host {
                let t = terminated(&mut policy, &name, port);
                if !t.rules.contains(&rule) {
                    t.rules.push(rule);
                }
            }
        }
        Ok(Some(EgressSpec {
            policy,
            dns: dns.map(parse_dns).transpose()?,
            network: network.map(parse_network).transpose()?,
            secrets: Vec::new(),
            secret_prefix: None,
            extra_ca: None,
        }))
    }
}

impl EgressSpec {
    /// `--secret`s (already parsed, `parse_secrets`), `--secret-prefix` and
    /// `--egress-ca` on a spec whose allowlist holds each secret's host (the
    /// caller added `HOST:PORT` to `--allow`): each secret's name joins its
    /// host's `terminate` entry.
    pub fn add_secrets(
        &mut self,
        secrets: Vec<SecretSpec>,
        prefix: Option<&str>,
        ca: Option<&str>,
    ) -> Result<(), Invalid> {
        if let Some(p) = prefix {
            check_prefix(p)?;
            if secrets.is_empty() {
                return Err(Invalid::new(
                    "--secret-prefix",
                    p,
                    "it starts the placeholders of --secret, and there is none",
                )
                .hint("add --secret NAME@HOST=env:VAR, or leave --secret-prefix out"));
            }
        }
        for s in &secrets {
            let t = terminated(&mut self.policy, &s.host, s.port);
            t.secrets.push(s.name.clone());
        }
        if let Some(ca) = ca {
            if self.policy.terminate.is_empty() {
                return Err(Invalid::new(
                    "--egress-ca",
                    ca,
                    "the gate only verifies an upstream itself for a host it terminates (a --secret's, or one with a request rule)",
                )
                .hint("add --secret or --allow 'HOST METHOD PATH', or leave --egress-ca out"));
            }
            self.extra_ca = Some(check_ca(ca)?);
        }
        self.secrets = secrets;
        self.secret_prefix = prefix.map(str::to_string);
        Ok(())
    }
}

/// Each `--secret`, parsed; a NAME given twice is refused (one variable
/// holds one placeholder).
pub fn parse_secrets(values: &[String]) -> Result<Vec<SecretSpec>, Invalid> {
    let mut out: Vec<SecretSpec> = Vec::with_capacity(values.len());
    for v in values {
        let s = SecretSpec::parse(v)?;
        if out.iter().any(|o| o.name == s.name) {
            return Err(Invalid::new("--secret", s.name.clone(), "this NAME is given twice")
                .hint("give each secret a NAME of its own"));
        }
        out.push(s);
    }
    Ok(out)
}

/// The `terminate` entry of HOST:PORT, made if there is none (sorted).
fn terminated<'a>(policy: &'a mut Policy, host: &str, port: u16) -> &'a mut Terminated {
    let key = |t: &Terminated| (t.host.clone(), t.port);
    let want = (host.to_string(), port);
    let at = match policy.terminate.binary_search_by_key(&want, key) {
        Ok(i) => i,
        Err(i) => {
            let t = Terminated { host: host.to_string(), port, rules: Vec::new(), secrets: Vec::new() };
            policy.terminate.insert(i, t);
            i
        }
    };
    &mut policy.terminate[at]
}

/// `HOST[:PORT] METHOD[,METHOD...] PATH`: one name (the gate terminates
/// TLS for it, and a certificate names one host) and its request rule.
fn parse_request_rule(s: &str, allow_unsafe: bool) -> Result<(AllowRule, RequestRule), Invalid> {
    let hint = "write --allow 'HOST[:PORT] METHOD[,METHOD...] PATH', e.g. --allow 'github.com GET,POST /org/repo.git/'";
    let parts: Vec<&str> = s.split_whitespace().collect();
    let [host, methods, path] = parts[..] else {
        return Err(Invalid::new("--allow", s, "a rule with spaces is HOST, METHODS and PATH, three parts").hint(hint));
    };
    let rule = AllowRule::parse(host, allow_unsafe)?;
    if !matches!(rule, AllowRule::Host { .. }) {
        return Err(Invalid::new(
            "--allow",
            s,
            "a request rule names one DNS name: the gate terminates TLS for it with a certificate for that name",
        )
        .hint(hint));
    }
    if rule.port() == 80 {
        return Err(Invalid::new(
            "--allow",
            s,
            "port 80 is plain HTTP: the gate checks requests only inside TLS it terminates",
        )
        .hint(hint));
    }
    let req = RequestRule::parse(methods, path).map_err(|e| Invalid { value: s.to_string(), ..e })?;
    Ok((rule, req))
}

/// Short and token-safe: it starts a value clients put in a header.
fn check_prefix(p: &str) -> Result<(), Invalid> {
    let ok = !p.is_empty() && p.len() <= 16 && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !ok {
        return Err(Invalid::new("--secret-prefix", p, "a prefix is 1 to 16 of A-Z, a-z, 0-9, '-', '_', '.'")
            .hint("e.g. --secret-prefix sk-"));
    }
    Ok(())
}

/// `--egress-ca FILE`: a file that holds at least one PEM certificate, and
/// nothing else that parses as PEM but is not one (a key given by mistake).
pub fn check_ca(path: &str) -> Result<PathBuf, Invalid> {
    let bad = |reason: String| {
        Invalid::new("--egress-ca", path, reason)
            .hint("name a PEM file of CA certificates (-----BEGIN CERTIFICATE-----)")
    };
    let text = std::fs::read(path).map_err(|e| bad(format!("it cannot be read: {e}")))?;
    if text.len() > 1 << 20 {
        return Err(bad("it is larger than 1 MiB".into()));
    }
    let certs = pem_certificates(&text).map_err(bad)?;
    if certs == 0 {
        return Err(bad("it holds no PEM certificate".into()));
    }
    std::path::absolute(path).map_err(|e| bad(format!("it cannot be resolved: {e}")))
}

/// How many CERTIFICATE blocks `pem` holds, or why it is not such a file.
pub fn pem_certificates(pem: &[u8]) -> Result<usize, String> {
    use rustls_pki_types::pem::{PemObject, SectionKind};
    let mut n = 0;
    for item in <(SectionKind, Vec<u8>)>::pem_slice_iter(pem) {
        match item {
            Ok((SectionKind::Certificate, _)) => n += 1,
            Ok((kind, _)) => return Err(format!("it holds a {kind:?} block, not only certificates")),
            Err(e) => return Err(format!("it is not valid PEM: {e:?}")),
        }
    }
    Ok(n)
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

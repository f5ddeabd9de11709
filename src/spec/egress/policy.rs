//! The gate's two decisions (on the requested name, before any DNS lookup;
//! on each address it resolved or was given), live changes by `sbx allow` /
//! `sbx deny`, and the policy file both sides read.

use std::net::IpAddr;

use super::rule::name_problem;
use super::{addr, AllowRule, Mode, Policy, Verdict};

/// The rule an observed name is allowed by (observe mode, no rule matched).
pub const OBSERVE: &str = "observe";
/// The rule `check_addr` gives a public address: the name's rule stands.
pub const PUBLIC: &str = "public address";
/// The largest policy file `from_json` reads (far above any real allowlist).
pub const MAX_POLICY_BYTES: usize = 1 << 20;

impl Policy {
    /// The decision on a requested `host` and `port`, made before anything is
    /// resolved: a name must be a valid DNS name and, in enforce mode, match
    /// a Host or Wildcard rule. An IP literal (`[v6]` too) is allowed only by
    /// a CIDR rule covering it, or by observe mode; its class is then judged
    /// by `check_addr` like any resolved address. Pure: no DNS, no I/O.
    pub fn decide_name(&self, host: &str, port: u16) -> Verdict {
        if port == 0 {
            return deny("port 0 is no port".into());
        }
        let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            let ip = addr::canonical(ip);
            return match self.rules.iter().find(|r| r.allows_addr(ip, port)) {
                Some(r) => allow(r.to_string()),
                None if self.mode == Mode::Observe => allow(OBSERVE.into()),
                None => deny(format!(
                    "{ip} is an address literal: only a CIDR rule allows one (--allow {})",
                    literal_rule(ip, port)
                )),
            };
        }
        if let Some(problem) = name_problem(host) {
            return deny(problem);
        }
        if let Some(r) = self.rules.iter().find(|r| r.allows_name(host, port)) {
            return allow(r.to_string());
        }
        if self.mode == Mode::Observe {
            return allow(OBSERVE.into());
        }
        let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        let other_ports: Vec<String> =
            self.rules.iter().filter(|r| r.allows_name(&name, r.port())).map(|r| r.port().to_string()).collect();
        if other_ports.is_empty() {
            deny(format!("no rule allows {name}"))
        } else {
            deny(format!("no rule allows {name} on port {port} (only on {})", other_ports.join(", ")))
        }
    }

    /// The decision on an address the gate is about to connect to (resolved
    /// from an allowed name, or a literal). A rule naming exactly the address
    /// (`/32`, `/128`) allows it. Else the Docker host's own addresses are
    /// refused (a wider CIDR never covers one: `10.213.7.0/24` holds the
    /// bridge's gateway, the host); then a CIDR rule covering the address
    /// and port allows it, and without one the special-purpose classes
    /// (`addr`) are refused. The IPv4 address an IPv6 form carries (mapped,
    /// NAT64, 6to4, Teredo) is judged the same way. A public address is
    /// allowed with the rule `PUBLIC`.
    pub fn check_addr(&self, ip: IpAddr, port: u16) -> Verdict {
        let ip = addr::canonical(ip);
        if port == 0 {
            return deny("port 0 is no port".into());
        }
        let width = addr::width(ip);
        let exact = |r: &&AllowRule| matches!(r, AllowRule::Cidr { prefix, .. } if *prefix == width);
        if let Some(r) = self.rules.iter().filter(exact).find(|r| r.allows_addr(ip, port)) {
            return allow(r.to_string());
        }
        if self.host_addrs.contains(&ip) {
            return deny(format!(
                "{ip} is the Docker host's own address (reached from the egress bridge, it is the host itself, \
                 past any cloud firewall); only a rule naming exactly it allows it (--allow {})",
                literal_rule(ip, port)
            ));
        }
        let own = match self.rules.iter().find(|r| r.allows_addr(ip, port)) {
            Some(r) => allow(r.to_string()),
            None => match addr::refused_class(ip) {
                Some(class) => {
                    return deny(format!(
                        "{ip} is {class}; only a CIDR rule allows it (--allow {})",
                        literal_rule(ip, port)
                    ))
                }
                None => allow(PUBLIC.into()),
            },
        };
        for (what, inner) in addr::embedded(ip) {
            if let Verdict::Deny { reason } = self.check_addr(IpAddr::V4(inner), port) {
                return deny(format!("{ip} is {what} {inner}: {reason}"));
            }
        }
        own
    }

    /// Adds the rules not already there; the list stays sorted and unique,
    /// so the file and `inspect` do not depend on the order of changes.
    pub fn allow(&mut self, rules: &[AllowRule]) {
        self.rules.extend_from_slice(rules);
        self.rules.sort();
        self.rules.dedup();
    }

    /// Removes exactly these rules (a name under a kept wildcard stays
    /// allowed) and returns the ones that were there. A host's `terminate`
    /// entry goes with its rule: its secrets are put in no more, and its
    /// request rules never outlive the host's.
    pub fn deny(&mut self, rules: &[AllowRule]) -> Vec<AllowRule> {
        let mut removed: Vec<AllowRule> = self.rules.iter().filter(|r| rules.contains(r)).cloned().collect();
        self.rules.retain(|r| !rules.contains(r));
        self.terminate.retain(|t| !rules.contains(&AllowRule::Host { name: t.host.clone(), port: t.port }));
        removed.dedup();
        removed
    }

    /// The policy file's text (pretty: an operator may read it).
    pub fn to_json(&self) -> String {
        // A struct of strings, numbers and addresses always serializes.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Reads a policy file back, refusing any rule that is not in the
    /// canonical form `AllowRule::parse` gives (the gate must not trust a
    /// file it did not check, and the host re-reads what it wrote).
    pub fn from_json(s: &str) -> Result<Policy, String> {
        if s.len() > MAX_POLICY_BYTES {
            return Err(format!("the policy is {} bytes, more than {MAX_POLICY_BYTES}", s.len()));
        }
        let mut policy: Policy =
            serde_json::from_str(s).map_err(|e| format!("the policy is not valid JSON for sbx: {e}"))?;
        for rule in &policy.rules {
            // The unsafe check was made (or overridden) when the rule was added.
            match AllowRule::parse(&rule.to_string(), true) {
                Ok(back) if back == *rule => {}
                Ok(back) => return Err(format!("the rule {rule} is not canonical (it reads as {back})")),
                Err(e) => return Err(format!("the rule {rule} is not valid: {}", e.reason)),
            }
        }
        policy.rules.sort();
        policy.rules.dedup();
        let hosts = std::mem::take(&mut policy.host_addrs);
        policy.set_host_addrs(hosts);
        Ok(policy)
    }

    /// The Docker host's own addresses, as `check_addr` compares them
    /// (mapped IPv6 as IPv4), sorted and unique.
    pub fn set_host_addrs(&mut self, addrs: impl IntoIterator<Item = IpAddr>) {
        let mut addrs: Vec<IpAddr> = addrs.into_iter().map(addr::canonical).collect();
        addrs.sort();
        addrs.dedup();
        self.host_addrs = addrs;
    }
}

fn allow(rule: String) -> Verdict {
    Verdict::Allow { rule }
}

fn deny(reason: String) -> Verdict {
    Verdict::Deny { reason }
}

/// The rule that would allow exactly this address and port.
fn literal_rule(ip: IpAddr, port: u16) -> String {
    format!("{ip}/{}:{port}", addr::width(ip))
}

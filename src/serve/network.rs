//! E2B's network options over sbx's egress gate: `network.allowOut` at
//! create and in `PUT /sandboxes/{id}/network` become `--allow` rules (the
//! same parser, so the same refusals), on top of serve's own `--allow`
//! defaults; `network.denyOut` narrows those defaults where it can be said
//! as rules removed, and is refused where it cannot; `allow_internet_access:
//! true` is observe mode, and only with `sbx serve --allow-internet`.
//!
//! As in E2B, an entry of allowOut wins over denyOut. sbx's gate has an
//! allowlist only (nothing leaves that no rule allows), so denyOut can drop
//! a default rule it covers whole, and nothing else: one that would cut a
//! hole in a default CIDR, or that a default name might resolve into, is
//! refused; in observe mode (every name allowed) any denyOut is refused.

use std::net::IpAddr;
use std::sync::Arc;

use hyper::{Response, StatusCode};
use serde_json::{Map, Value};

use super::http::{self, Body, Refusal};
use super::Shared;
use crate::error::{EgressError, Error};
use crate::spec::egress::{AllowRule, Mode};

/// The most entries of allowOut or denyOut one request may give.
const MAX_ENTRIES: usize = 256;

/// What a create or an update asks of the sandbox's egress, checked for shape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkAsk {
    pub allow_out: Vec<String>,
    pub deny_out: Vec<String>,
    /// `allow_internet_access`, when given.
    pub internet: Option<bool>,
}

impl NetworkAsk {
    /// Whether it asks anything of the egress at all.
    pub fn is_empty(&self) -> bool {
        self.allow_out.is_empty() && self.deny_out.is_empty() && self.internet.is_none()
    }

    /// `allow_internet_access` and `network` of a create body (`NewSandboxV2`),
    /// or of an update body (`SandboxNetworkUpdateConfig`, where they are one object).
    pub fn parse(body: &Map<String, Value>, network: Option<&Value>) -> Result<NetworkAsk, Refusal> {
        let internet = match body.get("allow_internet_access") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => return Err(Refusal::bad("allow_internet_access must be true or false")),
        };
        let empty = Map::new();
        let net = match network {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(o)) => o,
            Some(_) => return Err(Refusal::bad("network must be an object")),
        };
        refuse_unsupported(net)?;
        Ok(NetworkAsk { allow_out: list(net, "allowOut")?, deny_out: list(net, "denyOut")?, internet })
    }
}

/// What of E2B's network options sbx has no counterpart for, refused by name.
fn refuse_unsupported(net: &Map<String, Value>) -> Result<(), Refusal> {
    let given = |k: &str| net.get(k).is_some_and(|v| !v.is_null() && v != &Value::Bool(false));
    if let Some(rules) = net.get("rules").filter(|v| !v.is_null()) {
        let rules = rules.as_object().ok_or_else(|| Refusal::bad("network.rules must be an object"))?;
        for (host, list) in rules {
            let list = list.as_array().ok_or_else(|| Refusal::bad(format!("network.rules.{host} must be a list")))?;
            if list.iter().any(|r| r.get("transform").is_some_and(|t| !t.is_null())) {
                return Err(Refusal::unsupported(
                    "network.rules[...].transform (header values in a request body: sbx's secrets come only from a source on \
                     the host, `sbx create --secret NAME@HOST=env:VAR`, never from an API caller)",
                ));
            }
        }
    }
    if given("egressProxy") {
        return Err(Refusal::unsupported("network.egressProxy (a SOCKS5 proxy behind the egress gate)"));
    }
    if net.get("dnsServers").and_then(Value::as_array).is_some_and(|d| !d.is_empty()) {
        return Err(Refusal::unsupported(
            "network.dnsServers (the gate resolves names itself; `sbx serve --egress-dns IP` picks its resolver)",
        ));
    }
    if given("allowPublicTraffic") || given("maskRequestHost") {
        return Err(Refusal::unsupported("public sandbox URLs (allowPublicTraffic, maskRequestHost)"));
    }
    if net.get("httpsPorts").and_then(Value::as_array).is_some_and(|p| !p.is_empty()) {
        return Err(Refusal::unsupported("public sandbox URLs (httpsPorts)"));
    }
    Ok(())
}

fn list(net: &Map<String, Value>, key: &str) -> Result<Vec<String>, Refusal> {
    let Some(v) = net.get(key).filter(|v| !v.is_null()) else { return Ok(Vec::new()) };
    let a = v.as_array().ok_or_else(|| Refusal::bad(format!("network.{key} must be a list of strings")))?;
    if a.len() > MAX_ENTRIES {
        return Err(Refusal::bad(format!("network.{key} has more than {MAX_ENTRIES} entries")));
    }
    a.iter()
        .map(|e| {
            e.as_str().map(str::to_string).ok_or_else(|| Refusal::bad(format!("network.{key} holds a non-string")))
        })
        .collect()
}

/// The egress a sandbox gets: its rules and mode; no rules in enforce mode is no gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress {
    pub rules: Vec<AllowRule>,
    pub mode: Mode,
}

impl Egress {
    pub fn gated(&self) -> bool {
        !self.rules.is_empty() || self.mode == Mode::Observe
    }
}

/// One denyOut entry: an address or a CIDR block (E2B takes no names there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    net: IpAddr,
    prefix: u8,
}

fn width(ip: IpAddr) -> u8 {
    if ip.is_ipv4() {
        32
    } else {
        128
    }
}

fn bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v) => u32::from(v) as u128,
        IpAddr::V6(v) => u128::from(v),
    }
}

/// Whether `ip` is in `net/prefix` (of the same family).
fn contains(net: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    if net.is_ipv4() != ip.is_ipv4() {
        return false;
    }
    let shift = u32::from(width(net) - prefix);
    let mask = if shift >= 128 { 0 } else { u128::MAX << shift };
    bits(net) & mask == bits(ip) & mask
}

impl Block {
    fn parse(s: &str) -> Result<Block, Refusal> {
        let bad = || {
            Refusal::bad(format!(
                "network.denyOut: {s:?} is not an IP address or a CIDR block (E2B takes no names there), e.g. 10.0.0.0/8"
            ))
        };
        let (addr, prefix) = s.split_once('/').map_or((s, None), |(a, p)| (a, Some(p)));
        let ip: IpAddr = addr.parse().map_err(|_| bad())?;
        let ip = match ip {
            IpAddr::V6(v) => v.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let prefix = match prefix {
            None => width(ip),
            Some(p) if !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()) => {
                p.parse::<u8>().ok().filter(|p| *p <= width(ip)).ok_or_else(bad)?
            }
            Some(_) => return Err(bad()),
        };
        Ok(Block { net: ip, prefix })
    }

    fn all(&self) -> bool {
        self.prefix == 0
    }

    /// What denying this block does to default rule `r`: Some(true) drops
    /// it, Some(false) leaves it, None: only part of it, which rules cannot say.
    fn drops(&self, r: &AllowRule) -> Option<bool> {
        if self.all() {
            return Some(true);
        }
        match r {
            AllowRule::Cidr { addr, prefix, .. } => {
                if *prefix >= self.prefix && contains(self.net, self.prefix, *addr) {
                    Some(true)
                } else if contains(*addr, *prefix, self.net) {
                    None
                } else {
                    Some(false)
                }
            }
            AllowRule::Host { .. } | AllowRule::Wildcard { .. } => None,
        }
    }
}

impl std::fmt::Display for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

/// The egress `ask` gives a sandbox, on top of serve's `defaults` (its
/// `--allow` rules). `allow_unsafe` is serve's `--allow-unsafe-cidr`;
/// `internet_ok` its `--allow-internet`.
pub fn resolve(
    defaults: &[AllowRule],
    allow_unsafe: bool,
    internet_ok: bool,
    ask: &NetworkAsk,
) -> Result<Egress, Refusal> {
    let observe = ask.internet == Some(true);
    if observe && !internet_ok {
        return Err(Refusal(
            StatusCode::FORBIDDEN,
            "allow_internet_access: true is refused: this sbx serve was started without --allow-internet \
             (with it, such a sandbox reaches every name through its egress gate, in observe mode); \
             list the hosts in network.allowOut instead"
                .into(),
        ));
    }
    let allow = ask
        .allow_out
        .iter()
        .map(|a| AllowRule::parse(a, allow_unsafe))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Refusal::bad(format!("network.allowOut: {e}")))?;
    let mut deny = ask.deny_out.iter().map(|d| Block::parse(d)).collect::<Result<Vec<_>, _>>()?;
    if observe && !deny.is_empty() {
        return Err(Refusal::bad(
            "network.denyOut cannot narrow allow_internet_access: true: observe mode lets every name out, \
             and sbx's egress gate has no deny rules; list the hosts in network.allowOut instead",
        ));
    }
    // E2B: allow_internet_access false is denyOut 0.0.0.0/0.
    if ask.internet == Some(false) {
        deny.push(Block { net: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), prefix: 0 });
    }
    let mut rules = Vec::new();
    for r in defaults.iter().filter(|r| !allow.contains(r)) {
        let mut dropped = false;
        for b in &deny {
            match b.drops(r) {
                Some(d) => dropped |= d,
                None => {
                    return Err(Refusal::bad(format!(
                        "network.denyOut {b} cannot be taken out of serve's default --allow {r}: sbx's egress gate \
                         has an allowlist only, no deny rules; deny 0.0.0.0/0 to drop every default, \
                         and list in network.allowOut what the sandbox may reach"
                    )))
                }
            }
        }
        if !dropped {
            rules.push(r.clone());
        }
    }
    rules.extend(allow);
    rules.sort();
    rules.dedup();
    Ok(Egress { rules, mode: if observe { Mode::Observe } else { Mode::Enforce } })
}

/// `PUT /sandboxes/{id}/network`: the sandbox's egress replaced by what the
/// body asks (as E2B's update: what it leaves out is cleared), through
/// `sbx allow`/`deny`'s change of a running gate; 204. Connections no rule
/// allows any more are cut.
pub async fn update(id: &str, body: &[u8], shared: Arc<Shared>) -> Response<Body> {
    let id = id.to_string();
    if crate::spec::parse_id(&id).is_err() || shared.index.get(&id).is_none() {
        return http::error(StatusCode::NOT_FOUND, &format!("sandbox '{id}' not found"));
    }
    let asked = serde_json::from_slice::<Value>(body)
        .map_err(|e| Refusal::bad(format!("the body is not JSON: {e}")))
        .and_then(|v| match v {
            Value::Object(o) => Ok(o),
            _ => Err(Refusal::bad("the body must be a JSON object")),
        })
        .and_then(|o| NetworkAsk::parse(&o, Some(&Value::Object(o.clone()))))
        .and_then(|ask| shared.config.defaults.egress_for(&ask));
    let egress = match asked {
        Ok(e) => e,
        Err(r) => return r.response(),
    };
    let done = shared
        .blocking(move |ops| {
            let changed = ops.driver.change_egress(&id, |p| {
                p.mode = egress.mode;
                p.rules.clear();
                p.allow(&egress.rules);
            });
            match changed {
                Ok(_) => Ok(()),
                // Nothing to let out of a sandbox that has no way out: done.
                Err(Error::Egress(EgressError::NoGate { .. })) if !egress.gated() => Ok(()),
                Err(Error::Egress(e @ (EgressError::NoGate { .. } | EgressError::Revoked { .. }))) => Err(Refusal(
                    StatusCode::CONFLICT,
                    format!(
                        "{e}; sbx cannot add an egress gate to a running sandbox: \
                         create it with network.allowOut (or start sbx serve with --allow defaults)"
                    ),
                )),
                Err(e) => Err(Refusal(super::answer::status_of(&e), e.to_string())),
            }
        })
        .await;
    super::answer::response_of(done, |()| http::empty(StatusCode::NO_CONTENT))
}

#[cfg(test)]
mod tests;

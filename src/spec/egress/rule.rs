//! `--allow` rules: parsing into the canonical `AllowRule`, its display, and
//! the DNS name check the gate applies to every requested host too.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use super::addr;
use super::{AllowRule, DEFAULT_PORT};
use crate::model::invalid::Invalid;

const WHAT: &str = "--allow";
const SHAPES: &str = "write --allow HOST[:PORT], *.DOMAIN[:PORT] or CIDR[:PORT] (PORT defaults to 443), \
                      e.g. --allow pypi.org --allow *.pythonhosted.org --allow example.com:8080 --allow 203.0.113.0/24:443";
const NAME_HINT: &str = "write a DNS name: labels of a-z, 0-9 and '-' separated by '.', e.g. pypi.org:443; \
                         an internationalized name in its punycode form (xn--...)";
/// RFC 1035's limit on a name in text form, without the root's trailing dot.
const MAX_NAME: usize = 253;

impl AllowRule {
    /// One `--allow` value. `allow_unsafe` (`--allow-unsafe-cidr`) lets a
    /// CIDR overlap loopback, link-local (the metadata service), unspecified,
    /// multicast or broadcast space; private ranges need only the CIDR rule.
    pub fn parse(s: &str, allow_unsafe: bool) -> Result<AllowRule, Invalid> {
        let bad = |reason: String, hint: &str| Invalid::new(WHAT, s, reason).hint(hint);
        if s.is_empty() {
            return Err(bad("it is empty".into(), SHAPES));
        }
        if s.starts_with('-') {
            return Err(bad("it starts with '-': a flag is not a host".into(), SHAPES));
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("it contains spaces or control characters".into(), SHAPES));
        }
        if let Some((scheme, _)) = s.split_once("://") {
            return Err(bad(
                format!("it is a URL ({scheme}://...), not a host"),
                "write only the host and port, e.g. --allow pypi.org or --allow example.com:8080",
            ));
        }
        if s.contains('@') {
            return Err(bad("it holds user information ('@'): a rule names a host".into(), SHAPES));
        }
        let (host, prefix, port) = split(s).map_err(|r| bad(r, SHAPES))?;
        let port = match port {
            Some(p) => {
                parse_port(p).ok_or_else(|| bad(format!("the port {p:?} is not a number from 1 to 65535"), SHAPES))?
            }
            None => DEFAULT_PORT,
        };
        let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
        if let Some(prefix) = prefix {
            let ip = literal.unwrap_or(host).parse::<IpAddr>().map_err(|_| {
                bad(
                    format!("{host:?} before '/' is not an IP address (a rule names a host and port, never a path)"),
                    "write a CIDR as ADDRESS/PREFIX, e.g. 203.0.113.0/24:443, or a host alone, e.g. pypi.org",
                )
            })?;
            return cidr(s, ip, prefix, port, allow_unsafe);
        }
        if let Some(inner) = literal {
            let ip = inner.parse::<Ipv6Addr>().map_err(|_| {
                bad(format!("{inner:?} in brackets is not an IPv6 address"), "e.g. --allow [2001:db8::1]:443")
            })?;
            let width = addr::width(IpAddr::V6(ip));
            return cidr(s, IpAddr::V6(ip), &width.to_string(), port, allow_unsafe);
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return cidr(s, ip, &addr::width(ip).to_string(), port, allow_unsafe);
        }
        if let Some(suffix) = host.strip_prefix("*.") {
            let suffix = normalize(suffix).map_err(|r| bad(r, NAME_HINT))?;
            if !suffix.contains('.') {
                return Err(bad(
                    format!("*.{suffix} allows every name under a top-level domain, which is no allowlist"),
                    "name the domain you mean (--allow *.example.com), or run with --egress observe and `sbx egress policy ID` to learn the names",
                ));
            }
            return Ok(AllowRule::Wildcard { suffix, port });
        }
        if host.contains('*') {
            return Err(bad(
                "a wildcard may only be a leading '*.' (and '*' alone would allow everything)".into(),
                "write --allow *.example.com to allow the names under example.com, or --egress observe to allow every name and log",
            ));
        }
        let name = normalize(host).map_err(|r| bad(r, NAME_HINT))?;
        Ok(AllowRule::Host { name, port })
    }

    pub fn port(&self) -> u16 {
        match self {
            AllowRule::Host { port, .. } | AllowRule::Wildcard { port, .. } | AllowRule::Cidr { port, .. } => *port,
        }
    }

    /// Whether this rule allows the DNS name `name` (already checked by
    /// `name_problem`) on `port`, ignoring case and one trailing dot.
    pub fn allows_name(&self, name: &str, port: u16) -> bool {
        let name = name.strip_suffix('.').unwrap_or(name);
        match self {
            AllowRule::Host { name: n, port: p } => *p == port && n.eq_ignore_ascii_case(name),
            AllowRule::Wildcard { suffix, port: p } => {
                // Bytes, not str slices: a name from the sandbox may not be ASCII.
                let (name, suffix) = (name.as_bytes(), suffix.as_bytes());
                *p == port
                    && name.len() > suffix.len() + 1
                    && name[name.len() - suffix.len() - 1] == b'.'
                    && name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
            }
            AllowRule::Cidr { .. } => false,
        }
    }

    /// Whether this is a CIDR rule covering `ip` (mapped IPv6 as IPv4) on `port`.
    pub fn allows_addr(&self, ip: IpAddr, port: u16) -> bool {
        match self {
            AllowRule::Cidr { addr: net, prefix, port: p } => {
                *p == port && addr::contains(*net, *prefix, addr::canonical(ip))
            }
            _ => false,
        }
    }
}

/// Canonical, and parsed back by `AllowRule::parse` to the same rule.
impl fmt::Display for AllowRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowRule::Host { name, port } => write!(f, "{name}:{port}"),
            AllowRule::Wildcard { suffix, port } => write!(f, "*.{suffix}:{port}"),
            AllowRule::Cidr { addr, prefix, port } => write!(f, "{addr}/{prefix}:{port}"),
        }
    }
}

/// HOST, PREFIX (after '/') and PORT. An IPv6 address needs brackets unless
/// it carries a prefix: `2001:db8::1` could end in a port.
fn split(s: &str) -> Result<(&str, Option<&str>, Option<&str>), String> {
    let (host, rest) = if s.starts_with('[') {
        let end = s.find(']').ok_or("'[' without ']'")?;
        s.split_at(end + 1)
    } else if let Some(slash) = s.find('/') {
        s.split_at(slash)
    } else if s.matches(':').count() > 1 {
        return Err(format!(
            "{s:?} looks like an IPv6 address: write it in brackets, [ADDRESS]:PORT, e.g. [2001:db8::1]:443"
        ));
    } else {
        match s.split_once(':') {
            Some((h, p)) => return Ok((h, None, Some(p))),
            None => return Ok((s, None, None)),
        }
    };
    if let Some(r) = rest.strip_prefix('/') {
        return Ok(match r.split_once(':') {
            Some((prefix, port)) => (host, Some(prefix), Some(port)),
            None => (host, Some(r), None),
        });
    }
    if rest.is_empty() {
        return Ok((host, None, None));
    }
    let port = rest.strip_prefix(':').ok_or_else(|| format!("{rest:?} after ']' is not :PORT"))?;
    Ok((host, None, Some(port)))
}

/// 1-65535 in decimal digits only (`u16::from_str` would take "+443").
pub fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    p.parse().ok().filter(|p| *p != 0)
}

fn cidr(s: &str, ip: IpAddr, prefix: &str, port: u16, allow_unsafe: bool) -> Result<AllowRule, Invalid> {
    let width = addr::width(ip);
    let prefix: u8 = Some(prefix)
        .filter(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|p| p.parse().ok())
        .filter(|p| *p <= width)
        .ok_or_else(|| {
            Invalid::new(WHAT, s, format!("the prefix {prefix:?} is not a number from 0 to {width}"))
                .hint("e.g. --allow 203.0.113.0/24:443")
        })?;
    let network = addr::network(ip, prefix);
    if network != ip {
        return Err(Invalid::new(WHAT, s, format!("{ip} is not the network address of a /{prefix}")).hint(format!(
            "write --allow {network}/{prefix}:{port} (that network), or {ip}/{width}:{port} (that address alone)"
        )));
    }
    // A mapped network is the IPv4 network the kernel connects to.
    let (ip, prefix) = match ip {
        IpAddr::V6(v) if prefix >= 96 => v.to_ipv4_mapped().map_or((ip, prefix), |v4| (IpAddr::V4(v4), prefix - 96)),
        _ => (ip, prefix),
    };
    if !allow_unsafe {
        if let Some(class) = addr::unsafe_overlap(ip, prefix) {
            return Err(Invalid::new(
                WHAT,
                s,
                format!("{ip}/{prefix} covers {class}: the gate would reach itself, the host or the metadata service"),
            )
            .hint("name a narrower network, or pass --allow-unsafe-cidr if you really mean it"));
        }
    }
    Ok(AllowRule::Cidr { addr: ip, prefix, port })
}

/// `name` lower-cased without its trailing dot, or why it is no DNS name.
pub fn normalize(name: &str) -> Result<String, String> {
    match name_problem(name) {
        Some(reason) => Err(reason),
        None => Ok(name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()),
    }
}

/// Why `name` is not a host name the gate would look up, or None. ASCII
/// letters, digits and '-' only (LDH: punycode for IDNs), labels of 1-63,
/// at most 253 bytes, one optional trailing dot, a last label starting with
/// a letter (no top-level domain is numeric, so `127.1` or `0x7f000001`,
/// which resolvers read as addresses, are not names), and not localhost.
/// Allocates only for the reason.
pub fn name_problem(name: &str) -> Option<String> {
    let q = || format!("{:?}", shown(name));
    let n = name.strip_suffix('.').unwrap_or(name);
    if n.is_empty() {
        return Some("the host is empty".into());
    }
    if !n.is_ascii() {
        return Some(format!("{} is not ASCII: write an internationalized name in its punycode form (xn--...)", q()));
    }
    if n.len() > MAX_NAME {
        return Some(format!("the name is {} bytes long; DNS allows at most {MAX_NAME}", n.len()));
    }
    for label in n.split('.') {
        let ok = (1..=63).contains(&label.len())
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Some(format!(
                "{} is not a DNS name: each label must be 1-63 of a-z, 0-9 and '-', not starting or ending with '-'",
                q()
            ));
        }
    }
    let last = n.rsplit('.').next().unwrap_or(n);
    if !last.as_bytes()[0].is_ascii_alphabetic() {
        return Some(format!("{} reads as an address, not a name (its last label does not start with a letter)", q()));
    }
    let lower_last = last.eq_ignore_ascii_case("localhost");
    if lower_last || n.eq_ignore_ascii_case("ip6-localhost") || n.eq_ignore_ascii_case("ip6-loopback") {
        return Some(format!("{} is loopback: for the gate, that is the gate itself", q()));
    }
    None
}

/// At most 80 characters of a name for a message: the gate judges names a
/// sandbox sends, and a reason must stay a short log line.
fn shown(name: &str) -> String {
    match name.char_indices().nth(80) {
        Some((i, _)) => format!("{}...", &name[..i]),
        None => name.to_string(),
    }
}

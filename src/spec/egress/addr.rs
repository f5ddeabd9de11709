//! Address classes the gate refuses unless a `CIDR:PORT` rule names them,
//! the IPv4 addresses inside IPv6 forms that carry one, and the prefix
//! arithmetic behind CIDR rules. An allowed name may resolve to anything
//! (DNS rebinding), so the address is judged on its own.
//!
//! The classes are IANA's IPv4 and IPv6 special-purpose address registries
//! (every block not globally reachable), multicast, and cloud host endpoints
//! that sit on public addresses. The Docker host's own addresses are not
//! here: they are the host's facts, judged in `policy` (a `/32` or `/128`
//! rule alone reaches one).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A range of addresses the gate refuses by default. `unsafe_cidr`: a CIDR
/// rule that overlaps it needs `--allow-unsafe-cidr` (it reaches the gate
/// itself, the host or the metadata service, or is not unicast); private
/// and special-purpose ranges do not, since a CIDR rule is exactly how an
/// operator allows them.
struct Class {
    net: IpAddr,
    prefix: u8,
    what: &'static str,
    unsafe_cidr: bool,
}

const fn v4(o: [u8; 4], prefix: u8, what: &'static str, unsafe_cidr: bool) -> Class {
    Class { net: IpAddr::V4(Ipv4Addr::new(o[0], o[1], o[2], o[3])), prefix, what, unsafe_cidr }
}

const fn v6(s: [u16; 4], prefix: u8, what: &'static str, unsafe_cidr: bool) -> Class {
    Class { net: IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0)), prefix, what, unsafe_cidr }
}

/// Most specific first where ranges nest (`::1` inside `::/96`, Teredo
/// inside 2001::/23: see [`TEREDO`]).
const CLASSES: &[Class] = &[
    v4([0, 0, 0, 0], 8, "unspecified (0.0.0.0/8 reaches the gate itself)", true),
    v4([127, 0, 0, 0], 8, "loopback (127.0.0.0/8)", true),
    v4([169, 254, 0, 0], 16, "link-local (169.254.0.0/16, the cloud metadata service)", true),
    // Azure's host endpoint (DHCP, DNS, health probes, the wire server) on
    // a public address: the host's own agent, never the internet.
    v4([168, 63, 129, 16], 32, "a cloud host endpoint (168.63.129.16, Azure's wire server)", true),
    v4([10, 0, 0, 0], 8, "private (10.0.0.0/8)", false),
    v4([172, 16, 0, 0], 12, "private (172.16.0.0/12, Docker's bridge networks)", false),
    v4([192, 168, 0, 0], 16, "private (192.168.0.0/16)", false),
    v4([100, 64, 0, 0], 10, "shared CGNAT space (100.64.0.0/10)", false),
    v4([192, 0, 0, 0], 24, "IETF protocol assignments (192.0.0.0/24)", false),
    v4([192, 0, 2, 0], 24, "documentation (192.0.2.0/24, TEST-NET-1)", false),
    v4([198, 51, 100, 0], 24, "documentation (198.51.100.0/24, TEST-NET-2)", false),
    v4([203, 0, 113, 0], 24, "documentation (203.0.113.0/24, TEST-NET-3)", false),
    v4([198, 18, 0, 0], 15, "benchmarking (198.18.0.0/15)", false),
    v4([192, 88, 99, 0], 24, "the deprecated 6to4 relay anycast (192.88.99.0/24)", false),
    v4([224, 0, 0, 0], 4, "multicast (224.0.0.0/4)", true),
    v4([255, 255, 255, 255], 32, "limited broadcast (255.255.255.255)", true),
    v4([240, 0, 0, 0], 4, "reserved (240.0.0.0/4)", true),
    Class { net: IpAddr::V6(Ipv6Addr::UNSPECIFIED), prefix: 128, what: "unspecified (::)", unsafe_cidr: true },
    Class { net: IpAddr::V6(Ipv6Addr::LOCALHOST), prefix: 128, what: "loopback (::1)", unsafe_cidr: true },
    // Never met by check_addr (mapped addresses are judged as IPv4), but a
    // v6 CIDR covering it would cover mapped loopback.
    Class {
        net: IpAddr::V6(Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0)),
        prefix: 96,
        what: "IPv4-mapped (::ffff:0:0/96)",
        unsafe_cidr: true,
    },
    v6([0, 0, 0, 0], 96, "IPv4-compatible (::/96, deprecated)", true),
    v6([0x64, 0xff9b, 1, 0], 48, "local-use IPv4/IPv6 translation (64:ff9b:1::/48)", false),
    v6([0x100, 0, 0, 0], 64, "discard-only (100::/64)", false),
    v6([0x100, 0, 0, 1], 64, "the dummy prefix (100:0:0:1::/64)", false),
    v6([0x2001, 0xdb8, 0, 0], 32, "documentation (2001:db8::/32)", false),
    // Its few anycast services (PCP, TURN, AMT, AS112) are refused too:
    // stricter than the registry, and nothing a sandbox needs.
    v6([0x2001, 0, 0, 0], 23, "IETF protocol assignments (2001::/23)", false),
    v6([0x3fff, 0, 0, 0], 20, "documentation (3fff::/20)", false),
    v6([0x5f00, 0, 0, 0], 16, "segment routing SIDs (5f00::/16)", false),
    v6([0xfe80, 0, 0, 0], 10, "link-local (fe80::/10)", true),
    v6([0xfec0, 0, 0, 0], 10, "site-local (fec0::/10, deprecated)", false),
    v6([0xfc00, 0, 0, 0], 7, "unique local, private (fc00::/7)", false),
    v6([0xff00, 0, 0, 0], 8, "multicast (ff00::/8)", true),
];

/// The NAT64 well-known prefix (its low 32 bits are the IPv4 address the
/// translator connects to) and the local-use one (RFC 8215), read in the
/// same /96 form.
const NAT64: Ipv6Addr = Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0);
const NAT64_LOCAL: Ipv6Addr = Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0);
/// 6to4 (RFC 3056): bits 16..48 are the IPv4 address a relay sends to.
const SIX_TO_FOUR: Ipv6Addr = Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0);
/// Teredo (RFC 4380): bits 32..64 are the server's IPv4 address, the last
/// 32 bits the client's, inverted. Judged by those, not as 2001::/23.
const TEREDO: Ipv6Addr = Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0);

/// `::ffff:a.b.c.d` is `a.b.c.d`: the kernel connects to the IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v) => v.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Why the gate refuses `ip` itself when no CIDR rule covers it, or None
/// for a globally reachable unicast address. The IPv4 addresses an IPv6
/// address carries are judged on their own ([`embedded`]).
pub fn refused_class(ip: IpAddr) -> Option<&'static str> {
    let ip = canonical(ip);
    if contains(IpAddr::V6(TEREDO), 32, ip) {
        return None;
    }
    CLASSES.iter().find(|c| contains(c.net, c.prefix, ip)).map(|c| c.what)
}

/// The IPv4 addresses traffic to `ip` is delivered to (by a NAT64
/// translator, a 6to4 relay or a Teredo server and client), each with what
/// it is: the gate judges each as if it were the address asked for, since a
/// v6 form of loopback or of the host is still loopback or the host.
pub fn embedded(ip: IpAddr) -> Vec<(&'static str, Ipv4Addr)> {
    let IpAddr::V6(v) = canonical(ip) else { return Vec::new() };
    let n = u128::from(v);
    let at = |shift: u32| Ipv4Addr::from((n >> shift) as u32);
    if contains(IpAddr::V6(NAT64), 96, ip) || contains(IpAddr::V6(NAT64_LOCAL), 48, ip) {
        vec![("NAT64 of", at(0))]
    } else if contains(IpAddr::V6(SIX_TO_FOUR), 16, ip) {
        vec![("6to4 of", at(80))]
    } else if contains(IpAddr::V6(TEREDO), 32, ip) {
        vec![("Teredo via server", at(64)), ("Teredo to client", Ipv4Addr::from(!(n as u32)))]
    } else {
        Vec::new()
    }
}

/// The first class a CIDR rule may name only with `--allow-unsafe-cidr`
/// that overlaps `net/prefix`.
pub fn unsafe_overlap(net: IpAddr, prefix: u8) -> Option<&'static str> {
    CLASSES.iter().filter(|c| c.unsafe_cidr).find(|c| overlaps(net, prefix, c.net, c.prefix)).map(|c| c.what)
}

/// Address bits as a number, and the family's width.
fn bits(ip: IpAddr) -> (u128, u8) {
    match ip {
        IpAddr::V4(v) => (u32::from(v) as u128, 32),
        IpAddr::V6(v) => (u128::from(v), 128),
    }
}

/// The bits below a prefix (host bits) as a mask.
fn host_mask(width: u8, prefix: u8) -> u128 {
    let host = u32::from(width.saturating_sub(prefix));
    1u128.checked_shl(host).map_or(u128::MAX, |v| v - 1)
}

/// Whether `ip` is in `net/prefix` (same family only).
pub fn contains(net: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    let ((n, w), (a, wa)) = (bits(net), bits(ip));
    w == wa && (n ^ a) & !host_mask(w, prefix) == 0
}

/// Two networks overlap when the wider one holds the narrower's address.
fn overlaps(a: IpAddr, pa: u8, b: IpAddr, pb: u8) -> bool {
    if pa <= pb {
        contains(a, pa, b)
    } else {
        contains(b, pb, a)
    }
}

/// The width of `ip`'s family (32 or 128), the largest prefix.
pub fn width(ip: IpAddr) -> u8 {
    bits(ip).1
}

/// `ip` with its host bits below `prefix` cleared: the network address.
pub fn network(ip: IpAddr, prefix: u8) -> IpAddr {
    let (a, w) = bits(ip);
    let n = a & !host_mask(w, prefix);
    match ip {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(n as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(n)),
    }
}

//! Address classes the gate refuses unless a `CIDR:PORT` rule names them,
//! and the prefix arithmetic behind CIDR rules. An allowed name may resolve
//! to anything (DNS rebinding), so the address is judged on its own.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A range of addresses the gate refuses by default. `unsafe_cidr`: a CIDR
/// rule that overlaps it needs `--allow-unsafe-cidr` (it reaches the gate
/// itself, the host or the metadata service, or is not unicast); private
/// ranges do not, since a CIDR rule is exactly how an operator allows them.
struct Class {
    net: IpAddr,
    prefix: u8,
    what: &'static str,
    unsafe_cidr: bool,
}

const fn v4(a: u8, b: u8, prefix: u8, what: &'static str, unsafe_cidr: bool) -> Class {
    Class { net: IpAddr::V4(Ipv4Addr::new(a, b, 0, 0)), prefix, what, unsafe_cidr }
}

const fn v6(first: u16, second: u16, prefix: u8, what: &'static str, unsafe_cidr: bool) -> Class {
    Class { net: IpAddr::V6(Ipv6Addr::new(first, second, 0, 0, 0, 0, 0, 0)), prefix, what, unsafe_cidr }
}

/// Most specific first where ranges nest (`::1` inside `::/96`).
const CLASSES: &[Class] = &[
    v4(0, 0, 8, "unspecified (0.0.0.0/8 reaches the gate itself)", true),
    v4(127, 0, 8, "loopback (127.0.0.0/8)", true),
    v4(169, 254, 16, "link-local (169.254.0.0/16, the cloud metadata service)", true),
    v4(10, 0, 8, "private (10.0.0.0/8)", false),
    v4(172, 16, 12, "private (172.16.0.0/12, Docker's bridge networks)", false),
    v4(192, 168, 16, "private (192.168.0.0/16)", false),
    v4(100, 64, 10, "shared CGNAT space (100.64.0.0/10)", false),
    v4(224, 0, 4, "multicast (224.0.0.0/4)", true),
    v4(240, 0, 4, "reserved or broadcast (240.0.0.0/4)", true),
    Class { net: IpAddr::V6(Ipv6Addr::UNSPECIFIED), prefix: 128, what: "unspecified (::)", unsafe_cidr: true },
    Class { net: IpAddr::V6(Ipv6Addr::LOCALHOST), prefix: 128, what: "loopback (::1)", unsafe_cidr: true },
    v6(0, 0, 96, "IPv4-compatible (::/96, deprecated)", true),
    // Never met by check_addr (mapped addresses are judged as IPv4), but a
    // v6 CIDR covering it would cover mapped loopback.
    Class {
        net: IpAddr::V6(Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0)),
        prefix: 96,
        what: "IPv4-mapped (::ffff:0:0/96)",
        unsafe_cidr: true,
    },
    v6(0xfe80, 0, 10, "link-local (fe80::/10)", true),
    v6(0xfec0, 0, 10, "site-local (fec0::/10, deprecated)", false),
    v6(0xfc00, 0, 7, "unique local, private (fc00::/7)", false),
    v6(0xff00, 0, 8, "multicast (ff00::/8)", true),
];

/// The NAT64 well-known prefix: its low 32 bits are an IPv4 address the
/// translator connects to, so that address's class applies.
const NAT64: Ipv6Addr = Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0);

/// `::ffff:a.b.c.d` is `a.b.c.d`: the kernel connects to the IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v) => v.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Why the gate refuses `ip` when no CIDR rule covers it, or None for a
/// public unicast address.
pub fn refused_class(ip: IpAddr) -> Option<String> {
    let ip = canonical(ip);
    if let Some(c) = CLASSES.iter().find(|c| contains(c.net, c.prefix, ip)) {
        return Some(c.what.to_string());
    }
    if let IpAddr::V6(v) = ip {
        if contains(IpAddr::V6(NAT64), 96, ip) {
            let [.., a, b, c, d] = v.octets();
            let inner = Ipv4Addr::new(a, b, c, d);
            return refused_class(IpAddr::V4(inner)).map(|w| format!("NAT64 of {inner}, {w}"));
        }
    }
    None
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

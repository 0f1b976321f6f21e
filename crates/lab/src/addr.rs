//! IPv4 prefixes as the topology file writes them (`"100.64.0.0/30"`, `"192.0.2.2/24"`),
//! and the address ranges the lab may use (RFC 5737 documentation ranges and RFC 6598
//! shared address space): nothing else ever gets an address in the lab.
//!
//! The lab is dual stack without a line of topology: every IPv4 address `a.b.c.d` it
//! gives (interface, loopback, host, vantage point) has the IPv6 address
//! `2001:db8:64::a.b.c.d` ([`to_v6`]: the IPv4 address in the last 32 bits of
//! [`LAB6_PREFIX`], a /96 of the documentation prefix 2001:db8::/32), and an IPv4
//! prefix of length `n` the IPv6 prefix of length `96 + n` around it.

use core::fmt;
use core::net::Ipv4Addr;
use core::str::FromStr;

/// An IPv4 prefix: network address and length. The network address has no host bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    net: u32,
    len: u8,
}

/// An address with the length of the prefix it sits in (`"192.0.2.2/24"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddrLen {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Prefix {
    /// Builds a prefix; fails when `len > 32` or `net` has host bits set.
    pub fn new(net: Ipv4Addr, len: u8) -> Option<Prefix> {
        if len > 32 {
            return None;
        }
        let n = u32::from(net);
        (n & !mask(len) == 0).then_some(Prefix { net: n, len })
    }
    /// The prefix of length `len` that contains `addr`.
    pub fn containing(addr: Ipv4Addr, len: u8) -> Prefix {
        let len = len.min(32);
        Prefix {
            net: u32::from(addr) & mask(len),
            len,
        }
    }
    pub fn network(self) -> Ipv4Addr {
        Ipv4Addr::from(self.net)
    }
    #[allow(clippy::len_without_is_empty)] // a prefix length, not a container size
    pub fn len(self) -> u8 {
        self.len
    }
    /// The first address of the prefix as an integer.
    pub fn first(self) -> u32 {
        self.net
    }
    /// The last address of the prefix as an integer.
    pub fn last(self) -> u32 {
        self.net | !mask(self.len)
    }
    pub fn contains(self, addr: Ipv4Addr) -> bool {
        u32::from(addr) & mask(self.len) == self.net
    }
    pub fn overlaps(self, other: Prefix) -> bool {
        self.first() <= other.last() && other.first() <= self.last()
    }
    /// Whether `self` lies entirely inside `outer`.
    pub fn within(self, outer: Prefix) -> bool {
        outer.first() <= self.first() && self.last() <= outer.last()
    }
    /// The `i`-th address of the prefix (None past its end).
    pub fn nth(self, i: u32) -> Option<Ipv4Addr> {
        let a = self.net.checked_add(i)?;
        (a <= self.last()).then(|| Ipv4Addr::from(a))
    }
}

/// A mask of `len` leading one bits.
pub(crate) fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len.min(32)))
    }
}

/// The ranges lab addresses must come from: 192.0.2.0/24, 198.51.100.0/24,
/// 203.0.113.0/24 (RFC 5737) and 100.64.0.0/10 (RFC 6598).
pub const LAB_RANGES: [Prefix; 4] = [
    Prefix {
        net: 0xc000_0200,
        len: 24,
    },
    Prefix {
        net: 0xc633_6400,
        len: 24,
    },
    Prefix {
        net: 0xcb00_7100,
        len: 24,
    },
    Prefix {
        net: 0x6440_0000,
        len: 10,
    },
];

/// Whether a prefix lies inside one of [`LAB_RANGES`].
pub fn in_lab_ranges(p: Prefix) -> bool {
    LAB_RANGES.iter().any(|r| p.within(*r))
}

/// The lab-twin rule (`2001:db8:64::a.b.c.d` for `a.b.c.d`, see the module doc) is
/// `vtnt-policy`'s, which the unikernel links too: one rule, one place.
pub use vtnt_policy::{lab_twin as to_v6, lab_twin_v4 as from_v6, LAB6_PREFIX};

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network(), self.len)
    }
}

impl fmt::Display for AddrLen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl AddrLen {
    pub fn prefix(self) -> Prefix {
        Prefix::containing(self.addr, self.len)
    }
}

/// Why a prefix string did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadPrefix(pub String);

impl fmt::Display for BadPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` is not an IPv4 prefix (a.b.c.d/len)", self.0)
    }
}

fn split(s: &str) -> Result<(Ipv4Addr, u8), BadPrefix> {
    let bad = || BadPrefix(s.to_string());
    let (a, l) = s.split_once('/').ok_or_else(bad)?;
    let addr = Ipv4Addr::from_str(a.trim()).map_err(|_| bad())?;
    let len: u8 = l.trim().parse().map_err(|_| bad())?;
    if len > 32 {
        return Err(bad());
    }
    Ok((addr, len))
}

impl FromStr for Prefix {
    type Err = BadPrefix;
    /// Parses `"a.b.c.d/len"`; host bits must be zero.
    fn from_str(s: &str) -> Result<Prefix, BadPrefix> {
        let (addr, len) = split(s)?;
        Prefix::new(addr, len).ok_or_else(|| BadPrefix(format!("{s} (host bits set)")))
    }
}

impl FromStr for AddrLen {
    type Err = BadPrefix;
    /// Parses `"a.b.c.d/len"` where the address may have host bits.
    fn from_str(s: &str) -> Result<AddrLen, BadPrefix> {
        let (addr, len) = split(s)?;
        Ok(AddrLen { addr, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_contain() {
        let p: Prefix = "100.64.1.0/30".parse().unwrap();
        assert!(p.contains(Ipv4Addr::new(100, 64, 1, 3)));
        assert!(!p.contains(Ipv4Addr::new(100, 64, 1, 4)));
        assert_eq!(p.nth(2), Some(Ipv4Addr::new(100, 64, 1, 2)));
        assert_eq!(p.nth(4), None);
        assert!("100.64.1.1/30".parse::<Prefix>().is_err());
        assert!("100.64.1.1/33".parse::<AddrLen>().is_err());
        assert!(in_lab_ranges(p));
        assert!(!in_lab_ranges("10.0.0.0/30".parse().unwrap()));
        assert!(!in_lab_ranges("100.0.0.0/8".parse().unwrap()));
        let a: AddrLen = "192.0.2.2/24".parse().unwrap();
        assert_eq!(a.prefix().to_string(), "192.0.2.0/24");
        assert_eq!(mask(0), 0);
        assert_eq!(mask(32), u32::MAX);
    }

    #[test]
    fn ipv6_addresses_mirror_the_ipv4_ones() {
        let a = Ipv4Addr::new(192, 0, 2, 1);
        assert_eq!(to_v6(a).to_string(), "2001:db8:64::c000:201");
        assert_eq!(from_v6(to_v6(a)), Some(a));
        assert_eq!(from_v6("2001:db8:65::c000:201".parse().unwrap()), None);
        assert_eq!(from_v6("::ffff:192.0.2.1".parse().unwrap()), None);
    }
}

//! The policy for IPv6 destinations (crate feature `ipv6`; without it every IPv6
//! destination is [`crate::Refusal::Ipv6`], as in the unikernel, which probes IPv4 only).
//!
//! The same rules as IPv4's, over IPv6's ranges: the documentation prefix 2001:db8::/32
//! (RFC 3849) and unique local addresses fc00::/7 (RFC 4193, what tests and labs give
//! their namespaces) are the lab's ([`LAB_NETS6`]), probed without consent where a lab is
//! really reachable ([`crate::LabAccess`]: routes other than a default route lead there);
//! `::1` always; everything else is public and needs [`crate::Policy::allow_public`] and
//! at most [`crate::MAX_PPS_PUBLIC`]. What is not a unicast destination ([`Special6`]) is
//! refused whatever else is allowed. The exclusion list holds IPv4 prefixes only.

use core::fmt;
use core::net::Ipv6Addr;

use crate::{LabAccess, Policy, MAX_PPS_PUBLIC};

/// An IPv6 prefix `addr/len` with the host bits clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix6 {
    addr: Ipv6Addr,
    len: u8,
}

fn mask(len: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
}

impl Prefix6 {
    /// `addr/len` with the host bits of `addr` cleared; `None` when `len > 128`.
    pub fn new(addr: Ipv6Addr, len: u8) -> Option<Prefix6> {
        (len <= 128).then(|| Prefix6 {
            addr: Ipv6Addr::from(u128::from(addr) & mask(len)),
            len,
        })
    }

    /// For constants: `addr` must have no host bits set and `len <= 128`.
    pub const fn new_unchecked(addr: Ipv6Addr, len: u8) -> Prefix6 {
        Prefix6 { addr, len }
    }

    /// The prefix length in bits.
    pub fn bits(&self) -> u8 {
        self.len
    }

    /// Whether `a` is in this prefix.
    pub fn contains(&self, a: Ipv6Addr) -> bool {
        u128::from(a) & mask(self.len) == u128::from(self.addr)
    }

    /// Whether the two prefixes share an address (one holds the other).
    pub fn overlaps(&self, other: &Prefix6) -> bool {
        self.contains(other.addr) || other.contains(self.addr)
    }
}

impl fmt::Display for Prefix6 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// The lab's IPv6 ranges: the documentation prefix and unique local addresses.
pub const LAB_NETS6: [Prefix6; 2] = [
    Prefix6::new_unchecked(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32),
    Prefix6::new_unchecked(Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7),
];

/// Whether `a` lies in one of the [`LAB_NETS6`].
pub fn is_lab6(a: Ipv6Addr) -> bool {
    LAB_NETS6.iter().any(|n| n.contains(a))
}

/// What an IPv6 address that is not a unicast destination is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special6 {
    /// `::`.
    Unspecified,
    /// ff00::/8.
    Multicast,
    /// fe80::/10: needs an interface to mean anything, and no route leads there.
    LinkLocal,
    /// ::ffff:0:0/96, an IPv4 address written as IPv6: probe the IPv4 address.
    V4Mapped,
}

impl fmt::Display for Special6 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Special6::Unspecified => "the unspecified address",
            Special6::Multicast => "a multicast address (ff00::/8)",
            Special6::LinkLocal => "link-local (fe80::/10), which no route leads to",
            Special6::V4Mapped => "IPv4-mapped (::ffff:0:0/96): give the IPv4 address itself",
        })
    }
}

/// What `a` is when it is not a unicast destination.
pub fn special6(a: Ipv6Addr) -> Option<Special6> {
    if a.is_unspecified() {
        Some(Special6::Unspecified)
    } else if a.is_multicast() {
        Some(Special6::Multicast)
    } else if a.is_unicast_link_local() {
        Some(Special6::LinkLocal)
    } else if a.to_ipv4_mapped().is_some() {
        Some(Special6::V4Mapped)
    } else {
        None
    }
}

/// Why an IPv6 destination is refused ([`crate::Refusal::V6`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why6 {
    NotUnicast(Special6),
    /// Outside `::1` and the lab's ranges, without consent.
    Public,
    /// Public, at a rate above [`MAX_PPS_PUBLIC`].
    PublicRate(u32),
    /// In a lab range that no route leads to a lab from here.
    LabNotRouted,
    /// A source address that is not the prober's own ([`check_source6`]).
    Spoofed,
}

/// Writes the refusal of `a` for `why`.
pub(crate) fn explain(f: &mut fmt::Formatter<'_>, a: Ipv6Addr, why: Why6) -> fmt::Result {
    match why {
        Why6::NotUnicast(what) => write!(f, "{a} is {what}: only unicast addresses are probed"),
        Why6::Public => write!(
            f,
            "{a} is outside ::1 and the lab's IPv6 ranges (2001:db8::/32, fc00::/7); pass --allow-public to probe it"
        ),
        Why6::PublicRate(pps) => write!(
            f,
            "{a} is public: public targets are probed at {MAX_PPS_PUBLIC} pps at most, not {pps}"
        ),
        Why6::LabNotRouted => write!(
            f,
            "{a} is a lab address but no lab is reachable here (no route other than a default route leads there)"
        ),
        Why6::Spoofed => write!(
            f,
            "source {a} is not an address of this prober: vTNT does not spoof"
        ),
    }
}

/// [`crate::check_source`] for IPv6: `src` must be one of `own`.
#[cfg(feature = "ipv6")]
pub fn check_source6(src: Ipv6Addr, own: &[Ipv6Addr]) -> Result<(), crate::Refusal> {
    if own.contains(&src) {
        Ok(())
    } else {
        Err(crate::Refusal::V6(src, Why6::Spoofed))
    }
}

impl Policy {
    /// [`Policy::check_target`] of an IPv6 destination.
    pub(crate) fn check_v6(&self, a: Ipv6Addr, pps: u32) -> Result<(), Why6> {
        if let Some(what) = special6(a) {
            return Err(Why6::NotUnicast(what));
        }
        if a.is_loopback() {
            return Ok(());
        }
        if is_lab6(a) {
            return match &self.lab {
                LabAccess::All => Ok(()),
                LabAccess::Routed(routes) if routes.reaches6(a) => Ok(()),
                LabAccess::Routed(_) => Err(Why6::LabNotRouted),
            };
        }
        if !self.allow_public {
            return Err(Why6::Public);
        }
        if pps > MAX_PPS_PUBLIC {
            return Err(Why6::PublicRate(pps));
        }
        Ok(())
    }
}

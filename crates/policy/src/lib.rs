//! What vTNT may probe, decided in one place: every entry point (the CLI, job-spec decoding
//! in the unikernel, the engine's `start`) asks the same [`Policy`].
//!
//! The rules:
//! - **Lab ranges** ([`LAB_NETS`]: RFC 5737's three documentation /24s and RFC 6598's shared
//!   space 100.64.0.0/10) and loopback may be probed without consent, but a lab address only
//!   where a lab is really reachable ([`LabAccess`]): on a real host the driver lists the lab
//!   prefixes that a route other than the default route leads to, and the rest fail closed
//!   (so lab-range probes never follow a default route out of a real interface, and
//!   carrier-grade NAT space is never mistaken for a lab).
//! - **Public addresses** need [`Policy::allow_public`] and a rate of at most
//!   [`MAX_PPS_PUBLIC`] for the whole run.
//! - **Excluded prefixes** ([`PrefixSet`], an operator's opt-out list, as ZMap's blocklist)
//!   are never probed, whatever else is allowed.
//! - **Only unicast IPv4** is probed ([`Special`] says what else an address is: the
//!   unspecified address and the rest of 0.0.0.0/8, multicast, the limited broadcast, class
//!   E, and the network and broadcast addresses of the prober's own links,
//!   [`Policy::links`]); the source of the probes must be one of the prober's own
//!   addresses ([`check_source`]): vTNT never spoofs.
//! - Rates are at most [`MAX_PPS_LAB`].
//! - **IPv6** destinations follow the same rules over IPv6's ranges with the crate's
//!   `ipv6` feature ([`v6`]); without it (the unikernel) they are refused.
//!
//! ```
//! use vtnt_policy::{Policy, Refusal};
//! let p = Policy::default();
//! assert!(p.check_target("203.0.113.9".parse().unwrap(), 100).is_ok());
//! assert!(matches!(p.check_target("8.8.8.8".parse().unwrap(), 100), Err(Refusal::Public(_))));
//! ```
#![no_std]
extern crate alloc;

mod prefix;
#[cfg(feature = "ipv6")]
pub mod v6;

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use prefix::{ParsePrefixError, Prefix, PrefixSet, PrefixSetError};

/// Highest probe rate of a run, lab or not.
pub const MAX_PPS_LAB: u32 = 500_000;
/// Highest probe rate of a run that may probe public addresses.
pub const MAX_PPS_PUBLIC: u32 = 1_000;

/// The lab's ranges: never routed on the Internet, so the emulated network can own them.
pub const LAB_NETS: [Prefix; 4] = [
    Prefix::new_unchecked(Ipv4Addr::new(192, 0, 2, 0), 24),
    Prefix::new_unchecked(Ipv4Addr::new(198, 51, 100, 0), 24),
    Prefix::new_unchecked(Ipv4Addr::new(203, 0, 113, 0), 24),
    Prefix::new_unchecked(Ipv4Addr::new(100, 64, 0, 0), 10),
];

/// The /96 every lab IPv6 address sits in: `2001:db8:64::/96`. The lab is dual stack by
/// one rule (docs/lab.md, "IPv6: the lab is dual stack"): each lab IPv4 address
/// `a.b.c.d` has the twin [`lab_twin`] `2001:db8:64::a.b.c.d`. The emulated lab, its
/// fronts and the unikernel's lab slots all derive addresses by this rule.
pub const LAB6_PREFIX: (Ipv6Addr, u8) = (Ipv6Addr::new(0x2001, 0xdb8, 0x64, 0, 0, 0, 0, 0), 96);

/// The lab's IPv6 twin of its IPv4 address `a`: `2001:db8:64::a.b.c.d`.
pub const fn lab_twin(a: Ipv4Addr) -> Ipv6Addr {
    let [x, y, z, w] = a.octets();
    let [p0, p1, p2, ..] = LAB6_PREFIX.0.segments();
    Ipv6Addr::new(
        p0,
        p1,
        p2,
        0,
        0,
        0,
        (x as u16) << 8 | y as u16,
        (z as u16) << 8 | w as u16,
    )
}

/// The IPv4 address whose lab twin is `a`, if `a` lies in [`LAB6_PREFIX`].
pub fn lab_twin_v4(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let o = a.octets();
    (o[..12] == LAB6_PREFIX.0.octets()[..12]).then(|| Ipv4Addr::new(o[12], o[13], o[14], o[15]))
}

/// Loopback, always safe to probe.
pub const LOOPBACK: Prefix = Prefix::new_unchecked(Ipv4Addr::new(127, 0, 0, 0), 8);

/// Whether `a` lies in one of the [`LAB_NETS`].
pub fn is_lab(a: Ipv4Addr) -> bool {
    LAB_NETS.iter().any(|n| n.contains(a))
}

/// Where lab addresses lead from this prober.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LabAccess {
    /// Every lab range is the lab: the prober sits on the lab's own network (the
    /// in-process lab, the unikernel on the lab front).
    #[default]
    All,
    /// Only what these routes lead into a lab (what the host's routes say); other
    /// lab-range addresses are refused.
    Routed(LabRoutes),
}

/// A longest-prefix-match table saying, per prefix, whether it leads into a lab. An address
/// no entry covers does not.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabRoutes {
    /// Most specific first; among equal prefixes, `false` first (fail closed).
    routes: alloc::vec::Vec<(Prefix, bool)>,
    /// The same for IPv6.
    #[cfg(feature = "ipv6")]
    routes6: alloc::vec::Vec<(v6::Prefix6, bool)>,
}

/// Inserts `(prefix, lab)` into a table kept most specific first, `false` first among
/// equal prefixes.
fn insert_route<P>(
    routes: &mut alloc::vec::Vec<(P, bool)>,
    prefix: P,
    lab: bool,
    bits: fn(&P) -> u8,
) {
    let key = |p: &P, lab: bool| (core::cmp::Reverse(bits(p)), lab);
    let at = routes.partition_point(|(p, l)| key(p, *l) <= key(&prefix, lab));
    routes.insert(at, (prefix, lab));
}

impl LabRoutes {
    pub fn new() -> LabRoutes {
        LabRoutes::default()
    }

    /// Adds a route: `prefix` leads into a lab, or does not.
    pub fn add(&mut self, prefix: Prefix, leads_to_lab: bool) {
        insert_route(&mut self.routes, prefix, leads_to_lab, Prefix::bits);
    }

    /// [`LabRoutes::add`] for IPv6.
    #[cfg(feature = "ipv6")]
    pub fn add6(&mut self, prefix: v6::Prefix6, leads_to_lab: bool) {
        insert_route(&mut self.routes6, prefix, leads_to_lab, v6::Prefix6::bits);
    }

    /// [`LabRoutes::reaches`] for IPv6.
    #[cfg(feature = "ipv6")]
    pub fn reaches6(&self, a: core::net::Ipv6Addr) -> bool {
        self.routes6
            .iter()
            .find(|(p, _)| p.contains(a))
            .is_some_and(|&(_, lab)| lab)
    }

    /// Whether the most specific route to `a` leads into a lab.
    pub fn reaches(&self, a: Ipv4Addr) -> bool {
        self.routes
            .iter()
            .find(|(p, _)| p.contains(a))
            .is_some_and(|&(_, lab)| lab)
    }
}

/// The probing policy of one run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// Public addresses may be probed (the user's explicit consent, `--allow-public`).
    pub allow_public: bool,
    /// Prefixes never to probe.
    pub exclude: PrefixSet,
    /// Which lab addresses really lead into a lab.
    pub lab: LabAccess,
    /// The prefixes of the prober's own links (each interface address with its prefix
    /// length): their network and broadcast addresses are not unicast targets (a /31 or
    /// /32 has neither, RFC 3021). Empty: the prober knows none.
    pub links: alloc::vec::Vec<Prefix>,
}

/// What an address that is not a unicast target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// 0.0.0.0, "this host" (RFC 1122): a source address only.
    Unspecified,
    /// Elsewhere in 0.0.0.0/8, "this network" (RFC 1122): a source address only.
    ThisNetwork,
    /// 224.0.0.0/4.
    Multicast,
    /// 255.255.255.255, the limited broadcast.
    Broadcast,
    /// 240.0.0.0/4 (class E) but the limited broadcast: reserved, never routed.
    Reserved,
    /// The broadcast address (all host bits set) of a prefix of the prober's own links.
    LinkBroadcast(Prefix),
    /// The network address (no host bit set) of a prefix of the prober's own links.
    LinkNetwork(Prefix),
}

impl fmt::Display for Special {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Special::Unspecified => f.write_str("the unspecified address"),
            Special::ThisNetwork => {
                f.write_str("in 0.0.0.0/8 (\"this network\", a source address only)")
            }
            Special::Multicast => f.write_str("a multicast address"),
            Special::Broadcast => f.write_str("the limited broadcast address"),
            Special::Reserved => f.write_str("reserved (240.0.0.0/4, class E)"),
            Special::LinkBroadcast(p) => {
                write!(
                    f,
                    "the broadcast address of {p}, a prefix of this prober's links"
                )
            }
            Special::LinkNetwork(p) => {
                write!(
                    f,
                    "the network address of {p}, a prefix of this prober's links"
                )
            }
        }
    }
}

/// What `a` is when it is not an address probes may go to; `links`: the prober's own
/// link prefixes ([`Policy::links`]).
pub fn special(a: Ipv4Addr, links: &[Prefix]) -> Option<Special> {
    let [first, ..] = a.octets();
    let s = if a.is_unspecified() {
        Special::Unspecified
    } else if first == 0 {
        Special::ThisNetwork
    } else if a.is_multicast() {
        Special::Multicast
    } else if a.is_broadcast() {
        Special::Broadcast
    } else if first >= 240 {
        Special::Reserved
    } else {
        return links.iter().find_map(|&p| {
            let host = u32::MAX.checked_shr(u32::from(p.bits())).unwrap_or(0);
            if p.bits() > 30 || !p.contains(a) {
                None
            } else if u32::from(a) & host == host {
                Some(Special::LinkBroadcast(p))
            } else if u32::from(a) & host == 0 {
                Some(Special::LinkNetwork(p))
            } else {
                None
            }
        });
    };
    Some(s)
}

/// Why a target, rate or source address is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// An IPv6 destination, from a build without the `ipv6` feature (the unikernel's).
    Ipv6,
    /// An IPv6 destination refused, and why.
    #[cfg(feature = "ipv6")]
    V6(core::net::Ipv6Addr, v6::Why6),
    /// Not a unicast address, and what it is instead.
    NotUnicast(Ipv4Addr, Special),
    /// A public address without consent.
    Public(Ipv4Addr),
    /// A public address at a rate above [`MAX_PPS_PUBLIC`].
    PublicRate { addr: Ipv4Addr, pps: u32 },
    /// In an excluded prefix.
    Excluded { addr: Ipv4Addr, prefix: Prefix },
    /// A lab-range address that no route leads to a lab from here.
    LabNotRouted(Ipv4Addr),
    /// A rate outside `1..=`[`MAX_PPS_LAB`].
    Rate(u32),
    /// A source address that is not the prober's own.
    Spoofed(Ipv4Addr),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Ipv6 => f.write_str("IPv6: the unikernel probes IPv4 only"),
            #[cfg(feature = "ipv6")]
            Refusal::V6(a, why) => v6::explain(f, *a, *why),
            Refusal::NotUnicast(a, what) => {
                write!(f, "{a} is {what}: only unicast addresses are probed")
            }
            Refusal::Public(a) => write!(
                f,
                "{a} is outside loopback and the lab's ranges; pass --allow-public to probe it"
            ),
            Refusal::PublicRate { addr, pps } => write!(
                f,
                "{addr} is public: public targets are probed at {MAX_PPS_PUBLIC} pps at most, not {pps}"
            ),
            Refusal::Excluded { addr, prefix } => {
                write!(f, "{addr} is excluded (exclusion list entry {prefix})")
            }
            Refusal::LabNotRouted(a) => write!(
                f,
                "{a} is a lab address but no lab is reachable here (no route other than a default route leads there); run inside the lab (`vtnt lab exec`)"
            ),
            Refusal::Rate(pps) => write!(f, "rate {pps} pps is out of range (1..={MAX_PPS_LAB})"),
            Refusal::Spoofed(a) => write!(
                f,
                "source {a} is not an address of this prober: vTNT does not spoof"
            ),
        }
    }
}

impl core::error::Error for Refusal {}

impl Policy {
    /// Lab and loopback only, no exclusions, every lab range reachable.
    pub fn lab_only() -> Policy {
        Policy::default()
    }

    /// Checks one destination probed in a run of `pps` probes per second.
    pub fn check_target(&self, dst: IpAddr, pps: u32) -> Result<(), Refusal> {
        let a = match dst {
            IpAddr::V4(a) => a,
            #[cfg(feature = "ipv6")]
            IpAddr::V6(a) => return self.check_v6(a, pps).map_err(|why| Refusal::V6(a, why)),
            #[cfg(not(feature = "ipv6"))]
            IpAddr::V6(_) => return Err(Refusal::Ipv6),
        };
        if let Some(what) = special(a, &self.links) {
            return Err(Refusal::NotUnicast(a, what));
        }
        if let Some(prefix) = self.exclude.find(a) {
            return Err(Refusal::Excluded { addr: a, prefix });
        }
        if LOOPBACK.contains(a) {
            return Ok(());
        }
        if is_lab(a) {
            return match &self.lab {
                LabAccess::All => Ok(()),
                LabAccess::Routed(routes) if routes.reaches(a) => Ok(()),
                LabAccess::Routed(_) => Err(Refusal::LabNotRouted(a)),
            };
        }
        if !self.allow_public {
            return Err(Refusal::Public(a));
        }
        if pps > MAX_PPS_PUBLIC {
            return Err(Refusal::PublicRate { addr: a, pps });
        }
        Ok(())
    }
}

/// Checks a run's rate against [`MAX_PPS_LAB`] (public targets have their own ceiling,
/// checked per target by [`Policy::check_target`]).
pub fn check_rate(pps: u32) -> Result<(), Refusal> {
    if (1..=MAX_PPS_LAB).contains(&pps) {
        Ok(())
    } else {
        Err(Refusal::Rate(pps))
    }
}

/// Checks that `src` is one of `own`, the prober's addresses.
pub fn check_source(src: Ipv4Addr, own: &[Ipv4Addr]) -> Result<(), Refusal> {
    if own.contains(&src) {
        Ok(())
    } else {
        Err(Refusal::Spoofed(src))
    }
}

#[cfg(test)]
mod tests;

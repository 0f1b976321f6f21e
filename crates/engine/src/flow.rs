//! Flow identity: which bytes of a probe stay constant for a whole measurement (Paris
//! traceroute), how concurrent measurements get identifiers that never collide, and the
//! seeded random numbers behind both.
//!
//! Every running measurement owns one [`FlowKey`] `(protocol, ident or source port,
//! destination)`. ICMP errors quote exactly these fields of the probe, and replies from
//! the destination carry them back (echo ident, TCP destination port), so a reply finds
//! its measurement with one map lookup, whatever order replies arrive in.
//!
//! Other processes on the host probe too, and raw sockets hand every reply to every
//! one of them: an engine-wide [`instance_tag`], drawn from the seed and carried by every
//! probe (see [`crate::probe`]), tells this engine's replies from theirs even when both
//! picked the same identifier for the same destination.

use alloc::vec;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr};

use vtnt_rng::Rng;
use vtnt_wire::proto;

/// A probe's source or destination: IPv4 only where the engine probes IPv4 only (the
/// unikernel's image has no room for more), either family with `ipv6-probe`.
#[cfg(not(feature = "ipv6-probe"))]
pub type Addr = core::net::Ipv4Addr;
/// A probe's source or destination: either family (`ipv6-probe`).
#[cfg(feature = "ipv6-probe")]
pub type Addr = IpAddr;

/// `a` as an address of either family.
pub(crate) fn ip(a: Addr) -> IpAddr {
    #[cfg(feature = "ipv6-probe")]
    return a;
    #[cfg(not(feature = "ipv6-probe"))]
    IpAddr::V4(a)
}

/// An IPv4 address as a probe address.
pub(crate) fn from_v4(a: Ipv4Addr) -> Addr {
    #[cfg(feature = "ipv6-probe")]
    return IpAddr::V4(a);
    #[cfg(not(feature = "ipv6-probe"))]
    a
}

/// `a` as a probe address, if this build probes its family.
pub(crate) fn probe_addr(a: IpAddr) -> Option<Addr> {
    match a {
        IpAddr::V4(a) => Some(from_v4(a)),
        #[cfg(feature = "ipv6-probe")]
        IpAddr::V6(a) => Some(IpAddr::V6(a)),
        #[cfg(not(feature = "ipv6-probe"))]
        IpAddr::V6(_) => None,
    }
}

/// Looks up the measurement a packet belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct FlowKey {
    /// IP protocol of the probes (ICMP, UDP, TCP).
    pub proto: u8,
    /// ICMP echo ident, or the UDP/TCP source port.
    pub id: u16,
    /// Destination of the probes.
    pub dst: Addr,
}

/// A [`FlowKey`] as the engine's flow map holds it: the destination, and the protocol and
/// id packed into an IPv4 address. A pair of addresses, because the unikernel's image
/// carries a `BTreeMap`'s code once per key and value type (~3 KB each), and TNT's maps
/// use this one (`vtnt_tnt`'s `PairMap`).
pub(crate) type MapKey = (IpAddr, IpAddr);

impl FlowKey {
    pub(crate) fn map_key(self) -> MapKey {
        let packed = u32::from(self.proto) << 16 | u32::from(self.id);
        (
            ip(self.dst),
            IpAddr::V4(core::net::Ipv4Addr::from_bits(packed)),
        )
    }
}

/// The constant fields of every probe of one measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flow {
    pub key: FlowKey,
    /// UDP/TCP destination port; 0 for ICMP.
    pub dport: u16,
    /// Constant ICMP checksum of Paris ICMP traces; 0 otherwise.
    pub icmp_sum: u16,
    /// The engine's [`instance_tag`].
    pub tag: u16,
    /// What varies from probe to probe besides the probe number (see [`crate::probe`]).
    pub vary: Vary,
}

/// How a measurement's probes differ from scamper's defaults, per method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Vary {
    /// TCP probes are ACKs (tcp-ack), not SYNs.
    pub tcp_ack: bool,
    /// A tcp-ack ping's `-A`: the acknowledgment number of every probe (by default the
    /// probe's own, which numbers it).
    pub fixed_ack: Option<u32>,
    /// UDP probe n goes to `dport + n - 1` (udp-dport).
    pub dport_counts: bool,
    /// The ICMP sequence number of probe 1, less one (a ping's `-d`; 0: the sequence
    /// number is the probe number).
    pub seq_offset: u16,
}

impl Flow {
    /// ICMP ident or UDP/TCP source port.
    pub fn sport(&self) -> u16 {
        self.key.id
    }
    pub fn is_icmp(&self) -> bool {
        self.key.proto == proto::ICMP
    }
}

/// A non-zero 16-bit value that is not 0xffff (both have special checksum meanings).
pub(crate) fn checksum(rng: &mut Rng) -> u16 {
    loop {
        let v = rng.next_u64() as u16;
        if v != 0 && v != 0xffff {
            return v;
        }
    }
}

/// The engine-wide tag every probe carries, from the seed. Drawn from its own stream so
/// that the identifiers and checksums a seed gives stay what they were.
pub(crate) fn instance_tag(seed: u64) -> u16 {
    Rng::new(seed ^ 0x7461_6700_7461_6700).next_u64() as u16
}

/// Identifiers handed out by the engine: 0x8000..=0xffff, as scamper keeps its ICMP
/// idents and source ports in the upper half. Walked in a seeded permuted order
/// (`offset + k * stride` mod 2^15 with an odd stride visits every value once) so that
/// two engines with different seeds rarely pick the same ones, and a value just freed is
/// not reused at once (late replies to a finished measurement stay unmatched).
#[derive(Debug, Clone)]
pub(crate) struct IdPool {
    used: Vec<u64>,
    offset: u32,
    stride: u32,
    cursor: u32,
    in_use: usize,
}

/// How many identifiers the pool holds.
pub(crate) const POOL_SIZE: usize = 0x8000;
const POOL_BASE: u16 = 0x8000;

impl IdPool {
    pub fn new(rng: &mut Rng) -> IdPool {
        let mut pool = IdPool {
            used: vec![0; POOL_SIZE / 64],
            offset: 0,
            stride: 1,
            cursor: 0,
            in_use: 0,
        };
        pool.reseed(rng);
        pool
    }

    /// A new walk through the identifiers, drawn from `rng` (the ones in use stay so).
    pub fn reseed(&mut self, rng: &mut Rng) {
        let r = rng.next_u64();
        self.offset = (r as u32) & 0x7fff;
        self.stride = ((r >> 32) as u32 & 0x7fff) | 1;
        self.cursor = 0;
    }

    /// The next free identifier for which `taken` is false, or `None` when none is left.
    pub fn alloc(&mut self, mut taken: impl FnMut(u16) -> bool) -> Option<u16> {
        if self.in_use >= POOL_SIZE {
            return None;
        }
        for _ in 0..POOL_SIZE {
            let i = self
                .offset
                .wrapping_add(self.cursor.wrapping_mul(self.stride))
                & 0x7fff;
            self.cursor = self.cursor.wrapping_add(1);
            let (w, b) = (i as usize / 64, i % 64);
            let v = POOL_BASE | i as u16;
            if self.used[w] & (1 << b) == 0 && !taken(v) {
                self.used[w] |= 1 << b;
                self.in_use += 1;
                return Some(v);
            }
        }
        None
    }

    /// Returns `v` to the pool (ignored when it is not a pool identifier or not in use).
    pub fn free(&mut self, v: u16) {
        if v < POOL_BASE {
            return;
        }
        let i = (v - POOL_BASE) as usize;
        let (w, b) = (i / 64, i % 64);
        if self.used[w] & (1 << b) != 0 {
            self.used[w] &= !(1 << b);
            self.in_use -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeSet;

    #[test]
    fn pool_hands_out_every_id_once_then_refuses() {
        let mut rng = Rng::new(7);
        let mut pool = IdPool::new(&mut rng);
        let mut seen = BTreeSet::new();
        for _ in 0..POOL_SIZE {
            let v = pool.alloc(|_| false).unwrap();
            assert!(v >= 0x8000);
            assert!(seen.insert(v));
        }
        assert_eq!(pool.alloc(|_| false), None);
        pool.free(0x8123);
        assert_eq!(pool.alloc(|_| false), Some(0x8123));
    }

    #[test]
    fn pool_skips_taken_values_and_seeds_differ() {
        let mut a = IdPool::new(&mut Rng::new(1));
        let first = a.alloc(|_| false).unwrap();
        let mut b = IdPool::new(&mut Rng::new(1));
        let second = b.alloc(|v| v == first).unwrap();
        assert_ne!(first, second);
        let mut c = IdPool::new(&mut Rng::new(2));
        assert_ne!(c.alloc(|_| false).unwrap(), first);
    }

    #[test]
    fn checksums_avoid_special_values() {
        let mut rng = Rng::new(0);
        for _ in 0..10_000 {
            let c = checksum(&mut rng);
            assert!(c != 0 && c != 0xffff);
        }
    }
}

//! Byte surgery on packets that [`vtnt_wire::reply::parse`] already accepted: addresses
//! and identities swapped, every checksum that covers them fixed incrementally (RFC 1624,
//! [`vtnt_wire::checksum::update`]) so that no other bit moves.
//!
//! Incremental, not recomputed, on purpose: a Paris ICMP probe's checksum changes by the
//! same amount in every probe of its flow (so it stays constant), and a quoted header
//! whose checksum a router left stale (quoted TTL changed, checksum not) comes back to
//! the instance exactly as stale as it would have been without us.

use core::net::Ipv4Addr;

use vtnt_wire::{checksum, icmpext, proto};

/// The words changed under one checksum: one's-complement sums of old and new.
#[derive(Debug, Clone, Copy, Default)]
struct Change {
    old: u16,
    new: u16,
}

impl Change {
    fn add(&mut self, other: Change) {
        self.old = checksum::add(self.old, other.old);
        self.new = checksum::add(self.new, other.new);
    }
}

fn get16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Writes `new` at `at`; returns the change.
fn set16(b: &mut [u8], at: usize, new: u16) -> Option<Change> {
    let old = get16(b, at)?;
    b.get_mut(at..at + 2)?.copy_from_slice(&new.to_be_bytes());
    Some(Change { old, new })
}

/// Writes the address `new` at `at`; returns the change.
fn set_addr(b: &mut [u8], at: usize, new: Ipv4Addr) -> Option<Change> {
    let field = b.get_mut(at..at + 4)?;
    let old = checksum::sum(field);
    field.copy_from_slice(&new.octets());
    Some(Change {
        old,
        new: checksum::sum(&new.octets()),
    })
}

/// Applies `c` to the checksum at `at`; returns the change this made to that word.
fn fix(b: &mut [u8], at: usize, c: Change) -> Option<Change> {
    let old = get16(b, at)?;
    set16(b, at, checksum::update(old, c.old, c.new))
}

/// The IPv4 header length of the datagram at the start of `b`.
pub(crate) fn ihl(b: &[u8]) -> Option<usize> {
    Some(usize::from(b.first()? & 0x0f) * 4)
}

/// One translation: an address and an identity, each from one value to another.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Swap {
    pub addr: (Ipv4Addr, Ipv4Addr),
    pub id: (u16, u16),
}

/// Where a transport header keeps its checksum.
fn checksum_at(protocol: u8) -> usize {
    match protocol {
        proto::ICMP => 2,
        proto::UDP => 6,
        _ => 16,
    }
}

/// Sets the identity at `id_at` of the ICMP/UDP/TCP header at the start of `seg` to
/// `swap.id.1` and fixes its checksum (when `checksum` says it is there), which for UDP
/// and TCP also covers the pseudo-header address `swap.addr` changes. Returns what
/// changed in `seg`, for an ICMP message that quotes it.
fn transport(
    seg: &mut [u8],
    protocol: u8,
    id_at: usize,
    swap: Swap,
    checksum: bool,
) -> Option<Change> {
    let mut changed = set16(seg, id_at, swap.id.1)?;
    if !checksum {
        return Some(changed);
    }
    let mut covered = changed;
    if protocol != proto::ICMP {
        covered.add(Change {
            old: checksum::sum(&swap.addr.0.octets()),
            new: checksum::sum(&swap.addr.1.octets()),
        });
    }
    let at = checksum_at(protocol);
    if protocol == proto::UDP {
        // 0: the sender computed no checksum; a computed zero is sent as 0xffff.
        match get16(seg, at)? {
            0 => return Some(changed),
            c => {
                let mut v = checksum::update(c, covered.old, covered.new);
                if v == 0 {
                    v = 0xffff;
                }
                changed.add(set16(seg, at, v)?);
            }
        }
    } else {
        changed.add(fix(seg, at, covered)?);
    }
    Some(changed)
}

/// Where the identity sits in a probe's transport header: ICMP ident, UDP/TCP source port.
fn id_at(protocol: u8) -> usize {
    if protocol == proto::ICMP {
        4
    } else {
        0
    }
}

/// A probe leaving: source address `swap.addr`, identity `swap.id`.
pub(crate) fn probe(pkt: &mut [u8], protocol: u8, swap: Swap) -> Option<()> {
    let h = ihl(pkt)?;
    let c = set_addr(pkt, 12, swap.addr.1)?;
    fix(pkt, 10, c)?;
    transport(pkt.get_mut(h..)?, protocol, id_at(protocol), swap, true)?;
    Some(())
}

/// A reply from the destination (echo reply, TCP or UDP segment) coming back: its
/// destination address is `swap.addr`, the identity (echo ident, destination port)
/// `swap.id`.
pub(crate) fn answer(pkt: &mut [u8], protocol: u8, swap: Swap) -> Option<()> {
    let h = ihl(pkt)?;
    let c = set_addr(pkt, 16, swap.addr.1)?;
    fix(pkt, 10, c)?;
    let id_at = if protocol == proto::ICMP { 4 } else { 2 };
    transport(pkt.get_mut(h..)?, protocol, id_at, swap, true)?;
    Some(())
}

/// An ICMP error coming back: its destination and, in the packet it quotes (protocol
/// `quoted`), the source address become `swap.addr.1`, the quoted identity `swap.id.1`, with the
/// quoted IP header checksum and transport checksum (where quoted), and the ICMP checksum
/// over it all. RFC 4884 extensions, behind the quote, are not touched.
pub(crate) fn error(pkt: &mut [u8], quoted: u8, swap: Swap) -> Option<()> {
    let h = ihl(pkt)?;
    let icmp = pkt.get_mut(h..)?;
    // How much of the original datagram the message holds (RFC 4884: its length field,
    // else 128 bytes when extensions follow), and how long that datagram was.
    let quote_len = match *icmp.get(5)? {
        0 if icmpext::find(icmp).is_some() => icmpext::MIN_QUOTE_LEN,
        0 => icmp.len().saturating_sub(icmpext::QUOTE_OFFSET),
        words => usize::from(words) * 4,
    };
    let q = icmpext::QUOTE_OFFSET;
    let original = usize::from(get16(icmp, q + 2)?);
    let qh = ihl(icmp.get(q..)?)?;
    let mut changed = set_addr(icmp, q + 12, swap.addr.1)?;
    let header = changed;
    changed.add(fix(icmp, q + 10, header)?);
    // The transport checksum counts as quoted when the quote and the original datagram
    // reach past it; a zero TCP checksum is taken for padding (a router that quoted 28
    // bytes and padded to 128 for its extensions), at the price of leaving the one
    // probe in 65,536 whose checksum really is zero with the public one.
    let csum_at = qh + checksum_at(quoted);
    let has_checksum = csum_at + 2 <= quote_len.min(original)
        && (quoted != proto::TCP || get16(icmp, q + csum_at)? != 0);
    changed.add(transport(
        icmp.get_mut(q + qh..)?,
        quoted,
        id_at(quoted),
        swap,
        has_checksum,
    )?);
    fix(icmp, 2, changed)?;
    let c = set_addr(pkt, 16, swap.addr.1)?;
    fix(pkt, 10, c)?;
    Some(())
}

//! Byte surgery on packets that [`vtnt_wire::reply::parse`] already accepted: addresses
//! and identities swapped, every checksum that covers them kept right incrementally (RFC
//! 1624, [`vtnt_wire::checksum::update`]) so that no other bit moves.
//!
//! IPv4 and IPv6 alike: IPv6 has no header checksum, but ICMPv6's checksum covers the
//! pseudo-header (as UDP's and TCP's do), so an address change moves it too.
//!
//! An ICMP echo keeps its checksum: the change goes into its first two payload bytes,
//! where a Paris engine pins the checksum, because routers hash that checksum to pick an
//! ECMP path (over IPv6 it covers the source, so a fixed checksum is another flow). The
//! reverse swap gives the bytes back in echo replies and quotes.
//!
//! Incremental, not recomputed, on purpose: a quoted header whose checksum a router left
//! stale (quoted TTL changed, checksum not) comes back to the instance exactly as stale as
//! it would have been without us.

use core::net::IpAddr;

use vtnt_wire::{checksum, icmp6_type, icmpext, ipv6, proto};

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

/// Writes the address `new` (4 or 16 bytes) at `at`; returns the change.
fn set_addr(b: &mut [u8], at: usize, new: IpAddr) -> Option<Change> {
    let octets = match new {
        IpAddr::V4(a) => &a.octets()[..],
        IpAddr::V6(a) => &a.octets()[..],
    };
    let field = b.get_mut(at..at + octets.len())?;
    let old = checksum::sum(field);
    field.copy_from_slice(octets);
    Some(Change {
        old,
        new: checksum::sum(octets),
    })
}

/// The sums of an address's old and new value, for the checksums over a pseudo-header.
fn addr_change(old: IpAddr, new: IpAddr) -> Change {
    let sum = |a: IpAddr| match a {
        IpAddr::V4(a) => checksum::sum(&a.octets()),
        IpAddr::V6(a) => checksum::sum(&a.octets()),
    };
    Change {
        old: sum(old),
        new: sum(new),
    }
}

/// Applies `c` to the checksum at `at`; returns the change this made to that word.
fn fix(b: &mut [u8], at: usize, c: Change) -> Option<Change> {
    let old = get16(b, at)?;
    set16(b, at, checksum::update(old, c.old, c.new))
}

/// Where an IP header (either version) keeps what is rewritten.
#[derive(Debug, Clone, Copy)]
struct Header {
    /// Where the transport header starts.
    len: usize,
    src_at: usize,
    dst_at: usize,
    /// IPv4's header checksum; IPv6 has none.
    checksum_at: Option<usize>,
    v6: bool,
}

/// The header of the datagram at the start of `b`.
fn header(b: &[u8]) -> Option<Header> {
    match b.first()? >> 4 {
        4 => Some(Header {
            len: usize::from(b.first()? & 0x0f) * 4,
            src_at: 12,
            dst_at: 16,
            checksum_at: Some(10),
            v6: false,
        }),
        6 => Some(Header {
            len: ipv6::header(b).ok()?.header_len,
            src_at: 8,
            dst_at: 24,
            checksum_at: None,
            v6: true,
        }),
        _ => None,
    }
}

/// Writes `addr` at `at` of the header `h` and fixes its header checksum, if it has one.
fn set_header_addr(b: &mut [u8], h: Header, at: usize, addr: IpAddr) -> Option<Change> {
    let c = set_addr(b, at, addr)?;
    match h.checksum_at {
        Some(sum_at) => {
            let mut all = c;
            all.add(fix(b, sum_at, c)?);
            Some(all)
        }
        None => Some(c),
    }
}

/// One translation: an address and an identity, each from one value to another.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Swap {
    pub addr: (IpAddr, IpAddr),
    pub id: (u16, u16),
}

/// Where a transport header keeps its checksum.
fn checksum_at(protocol: u8) -> usize {
    match protocol {
        proto::ICMP | proto::ICMPV6 => 2,
        proto::UDP => 6,
        _ => 16,
    }
}

/// How a rewritten transport header keeps its checksum right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// The checksum field takes the change (UDP, TCP, an echo without payload).
    Checksum,
    /// An ICMP or ICMPv6 echo: the checksum stays as its sender set it and payload bytes
    /// 0..2 take the change. Those are the bytes a Paris engine pins the checksum with,
    /// and ECMP routers hash that checksum: over IPv6 it covers the source address, so
    /// fixing it would send the flow down another path than the instance's own probe
    /// from the public address. `quoted: false`: the word lies past an error's quote,
    /// nothing to write.
    Payload { quoted: bool },
    /// The checksum is not in the quote: nothing to fix.
    Absent,
}

/// Where an echo's payload starts: the word that takes the change under [`Keep::Payload`].
const ECHO_PAYLOAD_AT: usize = 8;

/// How an ICMP echo of `len` bytes keeps its checksum.
fn echo_keep(len: usize) -> Keep {
    if len >= ECHO_PAYLOAD_AT + 2 {
        Keep::Payload { quoted: true }
    } else {
        Keep::Checksum
    }
}

/// Sets the identity at `id_at` of the ICMP/UDP/TCP header at the start of `seg` to
/// `swap.id.1` and keeps its checksum right as `keep` says; for UDP, TCP and ICMPv6 the
/// checksum also covers the pseudo-header address `swap.addr` changes. Returns what
/// changed in `seg`, for an ICMP message that quotes it.
///
/// Under [`Keep::Payload`] the payload word becomes `w + old - new`: the reverse swap
/// (an echo reply, a quote) gives `w` back, so the instance sees its own bytes (but for
/// one's complement's two zeros, 0x0000 and 0xffff, which no checksum tells apart).
fn transport(seg: &mut [u8], protocol: u8, id_at: usize, swap: Swap, keep: Keep) -> Option<Change> {
    let mut changed = set16(seg, id_at, swap.id.1)?;
    let mut covered = changed;
    if protocol != proto::ICMP {
        covered.add(addr_change(swap.addr.0, swap.addr.1));
    }
    let at = checksum_at(protocol);
    match keep {
        Keep::Absent | Keep::Payload { quoted: false } => {}
        Keep::Payload { quoted: true } => {
            let w = get16(seg, ECHO_PAYLOAD_AT)?;
            let moved = checksum::add(checksum::add(w, covered.old), !covered.new);
            changed.add(set16(seg, ECHO_PAYLOAD_AT, moved)?);
        }
        // 0: the sender computed no checksum; a computed zero is sent as 0xffff.
        Keep::Checksum if protocol == proto::UDP => match get16(seg, at)? {
            0 => {}
            c => {
                let mut v = checksum::update(c, covered.old, covered.new);
                if v == 0 {
                    v = 0xffff;
                }
                changed.add(set16(seg, at, v)?);
            }
        },
        Keep::Checksum => changed.add(fix(seg, at, covered)?),
    }
    Some(changed)
}

/// How a probe's or answer's transport header of `len` bytes keeps its checksum.
fn keep(protocol: u8, len: usize) -> Keep {
    if is_icmp(protocol) {
        echo_keep(len)
    } else {
        Keep::Checksum
    }
}

fn is_icmp(protocol: u8) -> bool {
    matches!(protocol, proto::ICMP | proto::ICMPV6)
}

/// Where the identity sits in a probe's transport header: ICMP ident, UDP/TCP source port.
fn id_at(protocol: u8) -> usize {
    if is_icmp(protocol) {
        4
    } else {
        0
    }
}

/// A probe leaving: source address `swap.addr`, identity `swap.id`.
pub(crate) fn probe(pkt: &mut [u8], protocol: u8, swap: Swap) -> Option<()> {
    let h = header(pkt)?;
    set_header_addr(pkt, h, h.src_at, swap.addr.1)?;
    let seg = pkt.get_mut(h.len..)?;
    let keep = keep(protocol, seg.len());
    transport(seg, protocol, id_at(protocol), swap, keep)?;
    Some(())
}

/// A reply from the destination (echo reply, TCP or UDP segment) coming back: its
/// destination address is `swap.addr`, the identity (echo ident, destination port)
/// `swap.id`.
pub(crate) fn answer(pkt: &mut [u8], protocol: u8, swap: Swap) -> Option<()> {
    let h = header(pkt)?;
    set_header_addr(pkt, h, h.dst_at, swap.addr.1)?;
    let id_at = if is_icmp(protocol) { 4 } else { 2 };
    let seg = pkt.get_mut(h.len..)?;
    let keep = keep(protocol, seg.len());
    transport(seg, protocol, id_at, swap, keep)?;
    Some(())
}

/// An ICMP or ICMPv6 error coming back: its destination and, in the packet it quotes
/// (protocol `quoted`), the source address become `swap.addr.1`, the quoted identity
/// `swap.id.1`, with the quoted IPv4 header checksum and transport checksum (where
/// quoted), and the ICMP checksum over it all (ICMPv6's also over the destination in its
/// pseudo-header). RFC 4884 extensions, behind the quote, are not touched.
pub(crate) fn error(pkt: &mut [u8], quoted: u8, swap: Swap) -> Option<()> {
    let h = header(pkt)?;
    let family = if h.v6 {
        icmpext::Family::V6
    } else {
        icmpext::Family::V4
    };
    let icmp = pkt.get_mut(h.len..)?;
    // How much of the original datagram the message holds (RFC 4884: its length field,
    // else 128 bytes when extensions follow), and how long that datagram was.
    let has_ext = |icmp: &[u8]| match family {
        icmpext::Family::V4 => icmpext::find(icmp).is_some(),
        icmpext::Family::V6 => icmpext::find_v6(icmp).is_some(),
    };
    // ICMPv6's packet too big has its MTU where the others have the length field, and no
    // extensions.
    let too_big = h.v6 && *icmp.first()? == icmp6_type::PACKET_TOO_BIG;
    let quote_len = match *icmp.get(family.length_at())? {
        _ if too_big => icmp.len().saturating_sub(icmpext::QUOTE_OFFSET),
        0 if has_ext(icmp) => icmpext::MIN_QUOTE_LEN,
        0 => icmp.len().saturating_sub(icmpext::QUOTE_OFFSET),
        words => usize::from(words) * family.word(),
    };
    let q = icmpext::QUOTE_OFFSET;
    let qh = header(icmp.get(q..)?)?;
    let original = if qh.v6 {
        ipv6::HEADER_LEN + usize::from(get16(icmp, q + 4)?)
    } else {
        usize::from(get16(icmp, q + 2)?)
    };
    let mut changed = set_header_addr(icmp.get_mut(q..)?, qh, qh.src_at, swap.addr.1)?;
    // The transport checksum (an echo's payload word) counts as quoted when the quote and
    // the original datagram reach past it; a zero TCP checksum or payload word is taken
    // for padding (a router that quoted 28 bytes and padded to 128 for its extensions),
    // at the price of leaving the one probe in 65,536 whose word really is zero with the
    // public one.
    let held = quote_len.min(original);
    let csum_at = qh.len + checksum_at(quoted);
    let keep = match echo_keep(original.saturating_sub(qh.len)) {
        Keep::Payload { .. } if is_icmp(quoted) => {
            let at = qh.len + ECHO_PAYLOAD_AT;
            Keep::Payload {
                quoted: at + 2 <= held && get16(icmp, q + at)? != 0,
            }
        }
        _ if csum_at + 2 <= held && (quoted != proto::TCP || get16(icmp, q + csum_at)? != 0) => {
            Keep::Checksum
        }
        _ => Keep::Absent,
    };
    changed.add(transport(
        icmp.get_mut(q + qh.len..)?,
        quoted,
        id_at(quoted),
        swap,
        keep,
    )?);
    if h.v6 {
        // the message's own destination, in ICMPv6's pseudo-header
        changed.add(addr_change(swap.addr.0, swap.addr.1));
    }
    fix(icmp, 2, changed)?;
    set_header_addr(pkt, h, h.dst_at, swap.addr.1)?;
    Some(())
}

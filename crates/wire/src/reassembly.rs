//! IPv4 reassembly (RFC 791) for an endpoint that must read whole datagrams, as the
//! unikernel's stream endpoint does for UDP datagrams longer than the link's MTU; the
//! one part of this crate that allocates.
//!
//! smoltcp has a reassembler, but its buffers are fixed arrays inside its `Interface`
//! (a 64 KiB datagram needs 64 KiB of stack per slot) and a slot whose datagram lost a
//! fragment stays taken until its timeout, so a flood with any loss fills every slot and
//! then drops every fragmented datagram. This one keeps fragments on the heap, at most
//! [`Reassembly::new`]'s number of datagrams at once, and evicts the oldest for a new one:
//! fragments of a datagram arrive together, so the oldest incomplete one is the one
//! that lost a fragment.
//!
//! Fragments that overlap (other than an exact repeat) drop their datagram, as Linux
//! does; so does one that would make it longer than 65,535 bytes, or a non-final one
//! whose payload is not a multiple of 8 bytes.

use alloc::vec::Vec;

use crate::checksum;

/// What [`Reassembly::push`] made of a packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Push {
    /// Not a fragment (or not IPv4 at all): the packet as it came is the one to read.
    Whole,
    /// A fragment, kept until its datagram is complete.
    Held,
    /// The last missing fragment: the whole datagram, one IPv4 packet (the first
    /// fragment's header, fragment fields cleared, length and checksum rewritten).
    Done(Vec<u8>),
    /// A fragment that cannot belong to a valid datagram; its datagram is dropped.
    Dropped,
}

/// The datagrams being reassembled, oldest first.
pub struct Reassembly {
    partial: Vec<Partial>,
    max: usize,
    timeout_us: u64,
}

/// Fragments identify their datagram by source, destination, protocol and IP ID.
type Key = ([u8; 4], [u8; 4], u8, u16);

struct Partial {
    key: Key,
    first_us: u64,
    /// The first fragment's IP header, once it came.
    header: Vec<u8>,
    data: Vec<u8>,
    /// The byte ranges received, sorted and merged.
    got: Vec<(usize, usize)>,
    /// The datagram's payload length, once its last fragment came.
    total: Option<usize>,
}

/// The longest IPv4 packet.
const IP_MAX: usize = 65_535;

impl Reassembly {
    /// At most `max` datagrams (at least one) in reassembly at once, each dropped
    /// `timeout_us` microseconds after its first fragment came.
    pub fn new(max: usize, timeout_us: u64) -> Reassembly {
        Reassembly {
            partial: Vec::new(),
            max: max.max(1),
            timeout_us,
        }
    }

    /// Datagrams being reassembled now.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }

    /// Takes one received IPv4 packet at time `now_us`.
    pub fn push(&mut self, packet: &[u8], now_us: u64) -> Push {
        let Some(f) = Fragment::parse(packet) else {
            return Push::Whole;
        };
        let timeout = self.timeout_us;
        self.partial
            .retain(|p| now_us.saturating_sub(p.first_us) <= timeout);
        let at = match self.partial.iter().position(|p| p.key == f.key) {
            Some(i) => i,
            None => {
                if self.partial.len() == self.max {
                    self.partial.remove(0);
                }
                self.partial.push(Partial {
                    key: f.key,
                    first_us: now_us,
                    header: Vec::new(),
                    data: Vec::new(),
                    got: Vec::new(),
                    total: None,
                });
                self.partial.len() - 1
            }
        };
        let p = &mut self.partial[at];
        match p.add(&f) {
            Ok(true) => Push::Done(self.partial.remove(at).assemble()),
            Ok(false) => Push::Held,
            Err(()) => {
                self.partial.remove(at);
                Push::Dropped
            }
        }
    }
}

/// One fragment's fields.
struct Fragment<'a> {
    key: Key,
    header: &'a [u8],
    payload: &'a [u8],
    offset: usize,
    more: bool,
}

impl<'a> Fragment<'a> {
    /// The fragment in `p`, or `None` when `p` is no IPv4 fragment (a whole packet or
    /// not IPv4: left for the reader to take or refuse).
    fn parse(p: &'a [u8]) -> Option<Fragment<'a>> {
        let hlen = usize::from(*p.first()? & 0x0f) * 4;
        if p[0] >> 4 != 4 || hlen < 20 || p.len() < hlen {
            return None;
        }
        let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
        let word = u16::from_be_bytes([p[6], p[7]]);
        let (more, offset) = (word & 0x2000 != 0, usize::from(word & 0x1fff) * 8);
        if (!more && offset == 0) || total < hlen || total > p.len() {
            return None;
        }
        Some(Fragment {
            key: (
                [p[12], p[13], p[14], p[15]],
                [p[16], p[17], p[18], p[19]],
                p[9],
                u16::from_be_bytes([p[4], p[5]]),
            ),
            header: &p[..hlen],
            payload: &p[hlen..total],
            offset,
            more,
        })
    }
}

impl Partial {
    /// Adds a fragment: `Ok(true)` when the datagram is now complete, `Err` when the
    /// fragment cannot belong to a valid one.
    fn add(&mut self, f: &Fragment<'_>) -> Result<bool, ()> {
        let (start, end) = (f.offset, f.offset + f.payload.len());
        // the first fragment's header sets the datagram's; any header bounds it meanwhile
        let hlen = if f.offset == 0 {
            f.header.len()
        } else {
            self.header.len().max(20)
        };
        if end + hlen > IP_MAX || (f.more && !f.payload.len().is_multiple_of(8)) {
            return Err(());
        }
        if !f.more {
            if self.total.is_some_and(|t| t != end) || self.got.iter().any(|r| r.1 > end) {
                return Err(());
            }
            self.total = Some(end);
        } else if self.total.is_some_and(|t| end > t) {
            return Err(());
        }
        if start == end {
            return Ok(self.complete());
        }
        if self.got.contains(&(start, end)) {
            // an exact repeat (a duplicated frame): nothing new
            return Ok(false);
        }
        if self.got.iter().any(|&(a, b)| start < b && a < end) {
            return Err(());
        }
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[start..end].copy_from_slice(f.payload);
        if f.offset == 0 {
            self.header = f.header.to_vec();
        }
        let i = self.got.partition_point(|r| r.0 < start);
        self.got.insert(i, (start, end));
        Ok(self.complete())
    }

    fn complete(&self) -> bool {
        let mut covered = 0;
        for &(a, b) in &self.got {
            if a != covered {
                return false;
            }
            covered = b;
        }
        !self.header.is_empty() && self.total == Some(covered)
    }

    /// The whole datagram as one packet.
    fn assemble(mut self) -> Vec<u8> {
        let mut out = core::mem::take(&mut self.header);
        let len = out.len() + self.data.len();
        out[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        // keep don't-fragment, clear more-fragments and the offset
        out[6] &= 0x40;
        out[7] = 0;
        out[10..12].fill(0);
        let sum = checksum::of(&out);
        out[10..12].copy_from_slice(&sum.to_be_bytes());
        out.extend_from_slice(&self.data);
        out
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use alloc::vec;

    /// A UDP datagram of `len` payload bytes (a counting pattern) from 10.0.0.1 to
    /// 10.0.0.2 with IP ID `id`, cut into fragments of at most `mtu` bytes, as Linux cuts it.
    fn fragments(id: u16, len: usize, mtu: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
        let mut body = vec![0u8; 8 + len];
        body[4..6].copy_from_slice(&((8 + len) as u16).to_be_bytes());
        for (i, b) in body[8..].iter_mut().enumerate() {
            *b = i as u8;
        }
        let header = |total: usize, word: u16| {
            let mut h = vec![
                0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
            ];
            h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
            h[4..6].copy_from_slice(&id.to_be_bytes());
            h[6..8].copy_from_slice(&word.to_be_bytes());
            let sum = checksum::of(&h);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
            h
        };
        let mut whole = header(20 + body.len(), 0);
        whole.extend_from_slice(&body);
        let step = (mtu - 20) / 8 * 8;
        let mut frags = Vec::new();
        let mut off = 0;
        while off < body.len() {
            let end = (off + step).min(body.len());
            let more = end < body.len();
            let mut f = header(
                20 + end - off,
                (off / 8) as u16 | if more { 0x2000 } else { 0 },
            );
            f.extend_from_slice(&body[off..end]);
            frags.push(f);
            off = end;
        }
        (whole, frags)
    }

    fn push_all(r: &mut Reassembly, frags: &[Vec<u8>]) -> Vec<Push> {
        frags.iter().map(|f| r.push(f, 0)).collect()
    }

    #[test]
    fn fragments_in_any_order_make_the_datagram_linux_sent() {
        let (whole, frags) = fragments(7, 3050, 1500);
        assert_eq!(frags.len(), 3);
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
            let mut r = Reassembly::new(4, 1_000_000);
            let mut out = Vec::new();
            for i in order {
                out.push(r.push(&frags[i], 0));
            }
            assert_eq!(&out[..2], &[Push::Held, Push::Held]);
            assert_eq!(out[2], Push::Done(whole.clone()), "{order:?}");
            assert_eq!(r.pending(), 0);
        }
    }

    #[test]
    fn a_whole_packet_or_garbage_passes_untouched() {
        let (whole, _) = fragments(1, 100, 1500);
        let mut r = Reassembly::new(4, 1_000_000);
        assert_eq!(r.push(&whole, 0), Push::Whole);
        for junk in [&[][..], &[0x45][..], &[0x60; 40][..], &whole[..19]] {
            assert_eq!(r.push(junk, 0), Push::Whole);
        }
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn the_oldest_datagram_makes_room_for_a_new_one() {
        let mut r = Reassembly::new(2, 1_000_000);
        // three datagrams each lose their last fragment; the fourth arrives whole
        for id in 1..=3 {
            let (_, frags) = fragments(id, 3050, 1500);
            assert_eq!(push_all(&mut r, &frags[..2]), [Push::Held, Push::Held]);
        }
        assert_eq!(r.pending(), 2);
        let (whole, frags) = fragments(4, 3050, 1500);
        assert_eq!(push_all(&mut r, &frags)[2], Push::Done(whole));
        // datagram 1 was evicted: its last fragment alone cannot complete it
        let (_, frags) = fragments(1, 3050, 1500);
        assert_eq!(r.push(&frags[2], 0), Push::Held);
    }

    #[test]
    fn a_datagram_times_out() {
        let mut r = Reassembly::new(4, 1_000);
        let (_, frags) = fragments(9, 3050, 1500);
        assert_eq!(r.push(&frags[0], 0), Push::Held);
        assert_eq!(r.push(&frags[1], 500), Push::Held);
        assert_eq!(r.push(&frags[2], 1_001), Push::Held, "a new datagram now");
    }

    #[test]
    fn overlaps_oversize_and_odd_lengths_drop_the_datagram() {
        let (_, frags) = fragments(3, 3050, 1500);
        let mut r = Reassembly::new(4, 1_000_000);
        assert_eq!(r.push(&frags[0], 0), Push::Held);
        assert_eq!(
            r.push(&frags[0], 0),
            Push::Held,
            "an exact repeat is ignored"
        );
        let mut overlap = frags[1].clone();
        overlap[7] -= 1; // starts 8 bytes into the first fragment
        assert_eq!(r.push(&overlap, 0), Push::Dropped);
        assert_eq!(r.pending(), 0);

        let mut far = frags[1].clone();
        far[6..8].copy_from_slice(&0x3fffu16.to_be_bytes()); // offset 65,528, more to come
        assert_eq!(r.push(&far, 0), Push::Dropped);

        let mut odd = frags[0].clone();
        odd.pop();
        let len = (odd.len() as u16).to_be_bytes();
        odd[2..4].copy_from_slice(&len);
        assert_eq!(r.push(&odd, 0), Push::Dropped);

        // a last fragment ending before bytes already received
        let mut r = Reassembly::new(4, 1_000_000);
        assert_eq!(r.push(&frags[2], 0), Push::Held);
        let mut short = frags[1].clone();
        short[6] &= !0x20;
        assert_eq!(r.push(&short, 0), Push::Dropped);
    }

    #[test]
    fn the_longest_datagram_is_reassembled() {
        let (whole, frags) = fragments(5, IP_MAX - 28, 1500);
        let mut r = Reassembly::new(1, 1_000_000);
        let out = push_all(&mut r, &frags);
        assert_eq!(out.last(), Some(&Push::Done(whole)));
    }
}

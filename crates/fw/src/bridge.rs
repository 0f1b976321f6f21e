//! The network function as a bump in the wire (a filtering bridge), sans-IO: Ethernet
//! frames that came in on one of two sides go in, the frames to send on either side come
//! out. Every driver of the NF (the Linux process over AF_PACKET, the unikernel over its
//! two NICs) moves frames with this and decides nothing itself.
//!
//! An IPv4 frame is classified at the FORWARD hook with its side in and the other out
//! ([`Firewall::handle_batch`]); an accepted frame goes on by the other side unchanged,
//! Ethernet header and TTL included. ARP passes both ways (the hosts on either side find
//! each other through the NF as through a switch); every other ethertype (IPv6, VLAN
//! tags, ...) is dropped and counted, so nothing crosses unclassified. A REJECT's reply
//! goes back by the side the packet came in by, from the packet's destination MAC to its
//! source. A bridge needs no addresses, routes or ARP of its own.

use alloc::vec;
use alloc::vec::Vec;

use vtnt_record::Instant;

use crate::{Firewall, Hook, IfId, Outcome};

const ETH_HLEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;

/// The most frames one [`Bridge::handle`] call decides.
pub const BRIDGE_BATCH: usize = 64;

/// What a network function counted besides its firewall's own stats: the frames that
/// came in and went on, what the bridge dropped before the firewall saw it, and the sends
/// its driver's links refused. Every driver counts through [`Bridge::forward`] and
/// [`Bridge::oversize`], so every form of the NF reports the same numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BridgeStats {
    /// Frames that came in on each side (those too long for the driver's buffer too).
    pub received: [u64; 2],
    /// Frames sent on by the other side (accepted IPv4 and ARP).
    pub forwarded: u64,
    pub arp: u64,
    /// Frames neither IPv4 nor ARP, dropped.
    pub other: u64,
    /// Frames shorter than an Ethernet header, or longer than the driver's buffer, dropped.
    pub malformed: u64,
    /// Frames the driver's links did not take (a full queue, an interface gone).
    pub send_errors: u64,
}

/// A REJECT's reply frame; the firewall writes the datagram after the Ethernet header.
#[derive(Debug, Clone)]
struct Reply([u8; ETH_HLEN + 576]);

impl AsMut<[u8]> for Reply {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.0[ETH_HLEN..]
    }
}

/// What the bridge does with a frame of a batch.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Arp,
    /// The nth IPv4 datagram of the batch, for the firewall.
    Ipv4(usize),
    /// Dropped and counted already.
    Neither,
}

/// The frames one batch sends: `on` by the other side, `back` by the side they came in.
#[derive(Debug, Default)]
pub struct Sends<'a> {
    pub on: Vec<&'a [u8]>,
    pub back: Vec<&'a [u8]>,
}

/// [`Firewall`] between two sides (0 and 1).
#[derive(Debug)]
pub struct Bridge {
    fw: Firewall,
    ids: [IfId; 2],
    stats: BridgeStats,
    replies: Vec<Reply>,
    outcomes: Vec<Outcome>,
}

impl Bridge {
    /// The bridge of `fw`, whose rules are compiled, between interfaces named `names`
    /// (the names rules' `-i`/`-o` match).
    pub fn new(mut fw: Firewall, names: [&str; 2]) -> Bridge {
        let ids = [
            fw.add_interface(names[0], None),
            fw.add_interface(names[1], None),
        ];
        Bridge {
            fw,
            ids,
            stats: BridgeStats::default(),
            replies: vec![Reply([0; ETH_HLEN + 576]); BRIDGE_BATCH],
            outcomes: vec![Outcome::Drop; BRIDGE_BATCH],
        }
    }

    /// Decides `frames` that came in on `side` (0 or 1) at `now`, as [`Bridge::handle`],
    /// and sends what they give with `send(side, frames)`, which returns how many of them
    /// the link of that side did not take; counts it all ([`Bridge::stats`]).
    pub fn forward(
        &mut self,
        now: Instant,
        side: usize,
        frames: &[&[u8]],
        mut send: impl FnMut(usize, &[&[u8]]) -> usize,
    ) {
        let received = frames.len().min(BRIDGE_BATCH);
        let sends = self.handle(now, side, frames);
        let on = sends.on.len();
        let refused_on = send(1 - side, &sends.on);
        let refused = refused_on + send(side, &sends.back);
        self.stats.received[side] += received as u64;
        self.stats.forwarded += (on - refused_on.min(on)) as u64;
        self.stats.send_errors += refused as u64;
    }

    /// Counts `n` frames that came in on `side` too long for the driver to hold (dropped).
    pub fn oversize(&mut self, side: usize, n: u64) {
        self.stats.received[side] += n;
        self.stats.malformed += n;
    }

    /// Decides `frames` (at most [`BRIDGE_BATCH`]; any more are dropped uncounted by the
    /// caller's contract) that came in on `side` (0 or 1) at `now`: the IPv4 ones together,
    /// so the cache misses of new connections overlap. Counts only what the bridge drops;
    /// a driver calls [`Bridge::forward`], which counts the rest.
    pub fn handle<'a>(&'a mut self, now: Instant, side: usize, frames: &[&'a [u8]]) -> Sends<'a> {
        let frames = &frames[..frames.len().min(BRIDGE_BATCH)];
        let n = frames.len();
        let out = 1 - side;
        let mut kinds = [Kind::Neither; BRIDGE_BATCH];
        let mut datagrams: Vec<&[u8]> = Vec::with_capacity(n);
        for (kind, f) in kinds.iter_mut().zip(frames) {
            if f.len() < ETH_HLEN {
                self.stats.malformed += 1;
                continue;
            }
            match u16::from_be_bytes([f[12], f[13]]) {
                ETHERTYPE_ARP => {
                    self.stats.arp += 1;
                    *kind = Kind::Arp;
                }
                ETHERTYPE_IPV4 => {
                    *kind = Kind::Ipv4(datagrams.len());
                    datagrams.push(&f[ETH_HLEN..]);
                }
                _ => self.stats.other += 1,
            }
        }
        let m = datagrams.len();
        self.fw.handle_batch(
            now,
            Hook::Forward,
            (self.ids[side], self.ids[out]),
            &datagrams,
            &mut self.replies[..m],
            &mut self.outcomes[..m],
        );
        let mut sends = Sends::default();
        for (kind, f) in kinds.iter().zip(frames) {
            match *kind {
                Kind::Arp => sends.on.push(f),
                Kind::Ipv4(j) => match self.outcomes[j] {
                    Outcome::Accept => sends.on.push(f),
                    Outcome::Reject(_) => {
                        // back from the packet's destination MAC to its source
                        let r = &mut self.replies[j].0;
                        r[0..6].copy_from_slice(&f[6..12]);
                        r[6..12].copy_from_slice(&f[0..6]);
                        r[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
                    }
                    Outcome::Drop => {}
                },
                Kind::Neither => {}
            }
        }
        for (kind, _) in kinds.iter().zip(frames) {
            if let Kind::Ipv4(j) = *kind {
                if let Outcome::Reject(len) = self.outcomes[j] {
                    sends.back.push(&self.replies[j].0[..ETH_HLEN + len]);
                }
            }
        }
        sends
    }

    /// When connection tracking next needs [`Bridge::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.fw.poll_timeout()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.fw.handle_timeout(now)
    }

    pub fn stats(&self) -> BridgeStats {
        self.stats
    }

    pub fn firewall(&self) -> &Firewall {
        &self.fw
    }
}

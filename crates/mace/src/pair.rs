//! Pairs the host-side stamps of probes and replies: [`pair`] takes every packet seen
//! crossing the runtime's device (in any order; it sorts them by stamp) and says of
//! each outbound one whether it is a probe, of each inbound one which probe it answers,
//! and of each probe when it left and when its answer came back. A reply is paired only
//! when exactly one probe seen before it could have caused it and that probe is not yet
//! answered; otherwise it is a duplicate (every probe it fits is answered), ambiguous
//! (it fits more than one probe, or one answered and one not) or unmatched.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;
use core::net::IpAddr;

use crate::key::{self, Answer, Key, Probe};

/// Which way a packet crossed the runtime's device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// From the runtime towards the network (a probe).
    Out,
    /// From the network towards the runtime (a reply).
    In,
}

/// One packet seen on the host side: its direction, its kernel stamp (nanoseconds on
/// one clock) and its IP datagram.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    pub dir: Dir,
    pub stamp_ns: u64,
    pub packet: &'a [u8],
}

/// What became of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// An outbound probe: its index in [`Pairing::probes`].
    Probe(usize),
    /// An outbound packet that is no probe (or does not parse).
    NotAProbe,
    /// A reply paired with the probe of this index.
    Paired(usize),
    /// A reply every probe it fits had already been answered by.
    Duplicate,
    /// A reply that fits more than one probe: attributed to none.
    Ambiguous,
    /// A reply that fits no probe seen before it (or an inbound packet that answers
    /// none).
    Unmatched,
}

/// A probe's host-side stamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeStamps {
    pub probe: Probe,
    /// The event it was.
    pub event: usize,
    pub sent_ns: u64,
    /// The stamp of its reply and that reply's event.
    pub reply: Option<(u64, usize)>,
    /// An ambiguous reply fitted it: it may have been answered, by which reply is unknown.
    pub contested: bool,
}

impl ProbeStamps {
    /// Its round trip as the host side saw it.
    pub fn wire_rtt_ns(&self) -> Option<u64> {
        self.reply.map(|(at, _)| at.saturating_sub(self.sent_ns))
    }
}

/// The result of [`pair`]: the probes in the order they left, and every event's fate
/// (indexed as the events were given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pairing {
    pub probes: Vec<ProbeStamps>,
    pub fates: Vec<Fate>,
}

/// Pairs the probes and replies among `events` (see the module's doc).
pub fn pair(events: &[Event]) -> Pairing {
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| (events[i].stamp_ns, events[i].dir == Dir::In));
    let mut out = Pairing {
        probes: Vec::new(),
        fates: vec![Fate::Unmatched; events.len()],
    };
    let mut by_key: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    let mut by_target: BTreeMap<IpAddr, Vec<usize>> = BTreeMap::new();
    for i in order {
        let e = events[i];
        out.fates[i] = match e.dir {
            Dir::Out => match key::probe(e.packet) {
                Some(probe) => {
                    let at = out.probes.len();
                    by_key.entry(probe.key).or_default().push(at);
                    by_target.entry(probe.key.target).or_default().push(at);
                    out.probes.push(ProbeStamps {
                        probe,
                        event: i,
                        sent_ns: e.stamp_ns,
                        reply: None,
                        contested: false,
                    });
                    Fate::Probe(at)
                }
                None => Fate::NotAProbe,
            },
            Dir::In => match key::reply(e.packet) {
                Some(answer) => {
                    let pool = match answer {
                        Answer::Exact(k) => by_key.get(&k),
                        Answer::Tcp { target, .. } | Answer::Udp { target, .. } => {
                            by_target.get(&target)
                        }
                    };
                    let fits: Vec<usize> = pool
                        .into_iter()
                        .flatten()
                        .copied()
                        .filter(|&p| answer.fits(&out.probes[p].probe))
                        .collect();
                    settle(&mut out.probes, &fits, e.stamp_ns, i)
                }
                None => Fate::Unmatched,
            },
        };
    }
    out
}

/// The fate of a reply at `stamp` (event `event`) that fits the probes `fits`.
fn settle(probes: &mut [ProbeStamps], fits: &[usize], stamp: u64, event: usize) -> Fate {
    match fits {
        [] => Fate::Unmatched,
        [p] if probes[*p].reply.is_none() && !probes[*p].contested => {
            probes[*p].reply = Some((stamp, event));
            Fate::Paired(*p)
        }
        _ if fits.iter().all(|&p| probes[p].reply.is_some()) => Fate::Duplicate,
        _ => {
            for &p in fits {
                if probes[p].reply.is_none() {
                    probes[p].contested = true;
                }
            }
            Fate::Ambiguous
        }
    }
}

//! The search itself (the `pmtud` feature): see the parent module.

use vtnt_record::{Hop, Pmtud as Record, PmtudNote, PmtudNoteKind};
use vtnt_wire::{icmp6_type, icmp_type};

use super::{Step, MIN_MTU};

/// IPv4 and UDP headers of a probe: a next-hop MTU below this cannot be probed (an IPv6
/// header is 20 bytes longer).
const HEADERS: u16 = 28;

/// Media MTUs tried when big probes vanish (RFC 1191's table, as NetBSD's traceroute
/// and scamper use it).
const L2: [u16; 26] = [
    68, 296, 508, 512, 544, 552, 576, 1006, 1280, 1454, 1480, 1492, 1500, 1514, 1536, 2002, 2048,
    4352, 4464, 4470, 8166, 9000, 9192, 16110, 17914, 65535,
];
const L2_1454: usize = 9;
const L2_1500: usize = 12;

/// What the PMTUD is doing (a probe remembers the mode it was sent in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Probing with the size the last PTB (or the interface) gave.
    Default,
    /// Searching the size that passes, after silence.
    SilentSize,
    /// Searching the farthest router that answers the silent size when TTL-limited.
    SilentTtl,
    /// Searching the size that passes, after a PTB with a useless next-hop MTU.
    BadPtb,
}

/// The size search between media MTUs (scamper's `pmtud_L2_state`).
#[derive(Debug, Clone, Copy)]
struct SizeSearch {
    idx: usize,
    /// Largest size known to pass (-1: none yet).
    lower: i32,
    /// Smallest size known not to.
    upper: i32,
    /// The size that vanished first.
    vanished: u16,
    /// The size found.
    out: i32,
    /// The reply to the largest size that passed (an index into the hops).
    hop: Option<usize>,
}

/// The TTL search for where the silence starts.
#[derive(Debug, Clone, Copy)]
struct TtlSearch {
    lower: u8,
    upper: u8,
    /// The farthest time exceeded the silent size drew.
    hop: Option<usize>,
}

#[derive(Debug)]
pub(crate) struct Pmtud {
    mode: Mode,
    size: u16,
    ttl: u8,
    size_search: Option<SizeSearch>,
    ttl_search: Option<TtlSearch>,
    /// The last reply to a probe of the default mode (scamper's `last_fragmsg`), or the
    /// one a size search ended on.
    last_ptb: Option<usize>,
    /// The note a search will complete.
    pending: Option<PmtudNote>,
    /// The destination is IPv6: replies carry ICMPv6's numbers, probes 20 more bytes of
    /// header. The search is the same (scamper's, whose state machine has no family).
    v6: bool,
    rec: Record,
}

impl Pmtud {
    pub fn new(if_mtu: u16, v6: bool) -> Pmtud {
        Pmtud {
            v6,
            mode: Mode::Default,
            size: if_mtu,
            ttl: 255,
            size_search: None,
            ttl_search: None,
            last_ptb: None,
            pending: None,
            rec: Record {
                ifmtu: if_mtu,
                ..Record::default()
            },
        }
    }

    /// The next probe: its mode, TTL and IP length.
    pub fn probe(&self) -> (Mode, u8, u16) {
        (self.mode, self.ttl, self.size)
    }

    /// Its replies so far (a driver's transmit time may re-date them).
    pub fn hops_mut(&mut self) -> &mut alloc::vec::Vec<Hop> {
        &mut self.rec.hops
    }

    pub fn into_record(self) -> Record {
        self.rec
    }

    /// A "fragmentation needed" (ICMP) or a packet too big (ICMPv6).
    fn is_ptb(&self, h: &Hop) -> bool {
        if self.v6 {
            h.icmp.map(|i| i.0) == Some(icmp6_type::PACKET_TOO_BIG)
        } else {
            h.icmp == Some((icmp_type::DEST_UNREACH, 4))
        }
    }

    /// A time exceeded, in the destination's family.
    fn is_time_exceeded(&self, h: &Hop) -> bool {
        let t = if self.v6 {
            icmp6_type::TIME_EXCEEDED
        } else {
            icmp_type::TIME_EXCEEDED
        };
        h.icmp.map(|i| i.0) == Some(t)
    }

    /// An answer that ends the search at its probe's size: a time exceeded, a
    /// destination unreachable or an echo reply.
    fn is_answer(&self, h: &Hop) -> bool {
        let Some((t, _)) = h.icmp else {
            return false;
        };
        if self.v6 {
            matches!(
                t,
                icmp6_type::TIME_EXCEEDED | icmp6_type::DEST_UNREACH | icmp6_type::ECHO_REPLY
            )
        } else {
            matches!(
                t,
                icmp_type::TIME_EXCEEDED | icmp_type::DEST_UNREACH | icmp_type::ECHO_REPLY
            )
        }
    }

    fn record(&mut self, hop: Hop) -> usize {
        self.rec.hops.push(hop);
        self.rec.hops.len() - 1
    }

    /// `hop` answers a probe sent in `mode`; `trace` is the trace's own hops.
    pub fn on_reply(&mut self, mode: Mode, hop: Hop, trace: &[Hop]) -> Step {
        let (size, ttl) = (hop.probe_size, hop.probe_ttl);
        match self.mode {
            Mode::Default => {
                if mode != Mode::Default || size != self.size {
                    return Step::Ignore;
                }
                let nhmtu = hop.nhmtu;
                let ptb = self.is_ptb(&hop);
                let answer = self.is_answer(&hop);
                let at = self.record(hop);
                self.last_ptb = Some(at);
                if ptb {
                    let mut note = PmtudNote {
                        kind: PmtudNoteKind::PtbBad,
                        nhmtu: 0,
                        hop: u16::try_from(at).ok(),
                    };
                    if nhmtu == 0 || nhmtu >= size {
                        self.pending = Some(note);
                        self.mode = Mode::BadPtb;
                        self.start_size_search();
                        return Step::Probe;
                    }
                    if nhmtu < HEADERS + if self.v6 { 20 } else { 0 } {
                        self.rec.notes.push(note);
                        return Step::Done;
                    }
                    note.kind = PmtudNoteKind::Ptb;
                    note.nhmtu = nhmtu;
                    self.rec.notes.push(note);
                    self.size = nhmtu;
                    Step::Probe
                } else if answer {
                    self.rec.pmtu = size;
                    Step::Done
                } else {
                    Step::Wait
                }
            }
            Mode::SilentSize => {
                let Some(s) = self.size_search else {
                    return Step::Done;
                };
                if i32::from(size) < s.lower || s.upper <= i32::from(size) {
                    return Step::Ignore;
                }
                let at = self.record(hop);
                let s = self.size_search.as_mut().expect("searching");
                s.hop = Some(at);
                if i32::from(size) + 1 != s.upper {
                    let upper = s.upper;
                    self.next_size(i32::from(size), upper);
                    return Step::Probe;
                }
                s.lower = i32::from(size);
                s.out = i32::from(size);
                self.start_ttl_search(trace)
            }
            Mode::SilentTtl => {
                let out = self.size_search.map_or(-1, |s| s.out);
                if self.is_time_exceeded(&hop) {
                    let at = self.record(hop);
                    let Some(t) = self.ttl_search.as_mut() else {
                        return Step::Done;
                    };
                    t.hop = Some(at);
                    let upper = t.upper;
                    if !self.next_ttl(ttl, upper, trace) {
                        return self.end_size_search();
                    }
                    Step::Probe
                } else if self.is_ptb(&hop) && i32::from(hop.nhmtu) == out {
                    self.size = hop.nhmtu;
                    self.record(hop);
                    self.ttl = 255;
                    self.mode = Mode::Default;
                    self.size_search = None;
                    self.ttl_search = None;
                    Step::Probe
                } else {
                    Step::Ignore
                }
            }
            Mode::BadPtb => {
                let from_ptb_sender = self
                    .last_ptb
                    .is_some_and(|p| self.rec.hops[p].addr == hop.addr);
                let at = self.record(hop);
                let Some(s) = self.size_search.as_mut() else {
                    return Step::Done;
                };
                let (lower, upper) = if from_ptb_sender {
                    (s.lower, i32::from(size))
                } else {
                    s.hop = Some(at);
                    (i32::from(size), s.upper)
                };
                if lower + 1 != upper {
                    self.next_size(lower, upper);
                    return Step::Probe;
                }
                (s.lower, s.out, s.upper) = (lower, lower, upper);
                self.end_size_search()
            }
        }
    }

    /// Every attempt of the current probe went unanswered.
    pub fn on_timeout(&mut self, trace: &[Hop]) -> Step {
        match self.mode {
            Mode::Default => {
                self.pending = Some(PmtudNote {
                    kind: PmtudNoteKind::Silence,
                    nhmtu: 0,
                    hop: None,
                });
                self.start_size_search();
                self.mode = Mode::SilentSize;
                Step::Probe
            }
            Mode::SilentSize => {
                let Some(s) = self.size_search.as_mut() else {
                    return Step::Done;
                };
                // down to the least MTU of all without an answer: no path MTU
                if s.idx == 0 {
                    return Step::Done;
                }
                let size = i32::from(self.size);
                if s.lower + 1 != size {
                    let lower = s.lower;
                    self.next_size(lower, size);
                    return Step::Probe;
                }
                s.out = s.lower;
                self.start_ttl_search(trace)
            }
            Mode::SilentTtl => {
                let lower = self.ttl_search.map_or(0, |t| t.lower);
                if self.next_ttl(lower, self.ttl, trace) {
                    Step::Probe
                } else {
                    self.end_size_search()
                }
            }
            Mode::BadPtb => {
                let Some(s) = self.size_search.as_mut() else {
                    return Step::Done;
                };
                let (lower, upper) = (i32::from(self.size), s.upper);
                s.hop = None;
                if lower + 1 != upper {
                    self.next_size(lower, upper);
                    return Step::Probe;
                }
                (s.lower, s.out) = (lower, lower);
                self.end_size_search()
            }
        }
    }

    /// Starts the size search below the current size, which went unanswered (or drew
    /// a useless PTB): scamper's `pmtud_L2_init`.
    fn start_size_search(&mut self) {
        let size = self.size;
        let idx = if size > 1500 {
            L2_1500
        } else if size > 1454 {
            L2_1454
        } else {
            L2.windows(2)
                .position(|w| size > w[0] && size <= w[1])
                .unwrap_or(0)
        };
        self.size_search = Some(SizeSearch {
            idx,
            lower: -1,
            upper: i32::from(size),
            vanished: size,
            out: -1,
            hop: None,
        });
        self.size = L2[idx];
    }

    /// The next size between `lower` (passed) and `upper` (did not): scamper's
    /// `pmtud_L2_set_probesize`, media MTUs first, then halves.
    fn next_size(&mut self, lower: i32, upper: i32) {
        let Some(s) = self.size_search.as_mut() else {
            return;
        };
        let mtu = |i: usize| i32::from(L2[i.min(L2.len() - 1)]);
        let mut idx = s.idx;
        let size = if lower == 1500 || (lower == mtu(idx) && upper <= mtu(idx + 1)) {
            lower + 1
        } else if lower >= mtu(idx) && mtu(idx + 1) < upper {
            idx += 1;
            mtu(idx)
        } else if idx > 0 && upper == mtu(idx) && lower < mtu(idx - 1) {
            idx -= 1;
            mtu(idx)
        } else {
            (lower + upper) / 2
        };
        (s.idx, s.lower, s.upper) = (idx, lower, upper);
        self.size = u16::try_from(size).unwrap_or(MIN_MTU);
    }

    /// After the size search: the silent size goes out TTL-limited, between the last
    /// PTB's sender and the first node that answered (scamper's `pmtud_TTL_init`).
    fn start_ttl_search(&mut self, trace: &[Hop]) -> Step {
        let Some(s) = self.size_search else {
            return Step::Done;
        };
        self.size = s.vanished;
        let lower = self.last_ptb.map(|p| &self.rec.hops[p]).map_or(0, |h| {
            let q = h.quoted.map_or(0, |q| q.ttl);
            h.probe_ttl.saturating_sub(q)
        });
        let upper = match s.hop.map(|h| &self.rec.hops[h]) {
            None => 0,
            Some(h) => match trace.iter().find(|t| t.addr == h.addr) {
                Some(t) => t.probe_ttl,
                None => {
                    let q = h.quoted.map_or(0, |q| q.ttl);
                    h.probe_ttl.saturating_sub(q).saturating_add(1)
                }
            },
        };
        self.ttl_search = Some(TtlSearch {
            lower,
            upper,
            hop: None,
        });
        if self.next_ttl(lower, upper, trace) {
            self.mode = Mode::SilentTtl;
            Step::Probe
        } else {
            Step::Done
        }
    }

    /// The next TTL strictly between `lower` and `upper`, halving, skipping TTLs the
    /// trace got no answer at; false when none is left (scamper's
    /// `pmtud_TTL_set_probettl`).
    fn next_ttl(&mut self, lower: u8, mut upper: u8, trace: &[Hop]) -> bool {
        let answered = |ttl: u8| trace.iter().any(|h| h.probe_ttl == ttl);
        while u16::from(lower) + 1 < u16::from(upper) {
            let half = ((u16::from(lower) + u16::from(upper)) / 2) as u8;
            let mut cur = half;
            while cur < upper && !answered(cur) {
                cur += 1;
            }
            if cur != upper {
                if let Some(t) = self.ttl_search.as_mut() {
                    (t.lower, t.upper) = (lower, upper);
                }
                self.ttl = cur;
                return true;
            }
            upper = half;
        }
        false
    }

    /// The size search is over: its note is written, and discovery goes on from the
    /// size found unless the largest size that passed drew an answer that ends it
    /// (scamper's `pmtud_L2_search_end`).
    fn end_size_search(&mut self) -> Step {
        let Some(s) = self.size_search.take() else {
            return Step::Done;
        };
        let Ok(out) = u16::try_from(s.out) else {
            return Step::Done;
        };
        let mut note = self.pending.take().unwrap_or(PmtudNote {
            kind: PmtudNoteKind::Silence,
            nhmtu: 0,
            hop: None,
        });
        note.nhmtu = out;
        if let Some(t) = self.ttl_search.take() {
            if let Some(h) = t.hop {
                note.hop = u16::try_from(h).ok();
            } else if t.lower == 0 {
                // not even the first router answered the silent size
                self.rec.outmtu = out;
            }
        }
        self.rec.notes.push(note);
        if let Some(h) = s.hop {
            self.last_ptb = Some(h);
            let hop = &self.rec.hops[h];
            if !self.is_ptb(hop) {
                self.rec.pmtu = hop.probe_size;
                return Step::Done;
            }
        }
        self.size = out;
        self.mode = Mode::Default;
        self.ttl = 255;
        Step::Probe
    }
}

//! One traceroute as a state machine, with scamper's semantics (`scamper_trace_do.c`):
//!
//! - From `first_ttl`, one probe at a time. A reply to a probe at the current TTL ends
//!   that hop and the next TTL is probed at once (after `wait_probe` since the last
//!   probe). A probe unanswered after `wait` is followed by the next attempt; when all
//!   `attempts` are unanswered the hop is unresponsive.
//! - `hop_count` counts the TTLs finished (answered or given up), from `first_ttl - 1`.
//! - Stop reasons, checked on every recorded reply in this order: port unreachable for
//!   UDP/TCP, echo reply for ICMP, a TCP reply, or time exceeded from the destination
//!   itself -> COMPLETED; any other destination unreachable -> UNREACH (stop data = the
//!   code); an address seen again at a non-adjacent TTL, `loops` times -> LOOP. After a
//!   hop is finished without a stop: `max_ttl` reached -> HOPLIMIT; after an unresponsive
//!   hop, the last `gaplimit` TTLs all silent -> GAPLIMIT.
//! - Only the first reply to each probe is recorded. A late reply to an earlier probe is
//!   recorded (and may stop the trace) but does not move the current TTL, unless it
//!   answers the current TTL.
//! - `all_attempts` (`-Q`): an answer to the last attempt sent brings the next attempt,
//!   not the next TTL; after the last attempt (answered or not) every reply at that TTL
//!   is checked for a stop reason, in attempt order.
//! - `ignore_ttl_dst` (`-T`): a time exceeded from the destination is an ordinary hop.
//! - Loops: as scamper's `trace_isloop`, the same address at two adjacent TTLs is not a
//!   loop (invisible UHP MPLS tunnels and zero-TTL forwarding produce exactly that).
//! - `last_ditch` (`-G 2`): at the gap limit, up to `attempts` probes with TTL 255 go
//!   out, one per `wait`; the first reply to one is kept apart (the record's
//!   `lastditch`) and ends the trace, which stops with GAPLIMIT either way. A late reply
//!   to an earlier probe is still recorded then, without ending it (scamper's
//!   `handleicmp_lastditch`).
//! - `confidence` (`-c`): a hop is probed like `-Q`'s (the next attempt once the last one
//!   sent is answered, or after `wait`), but until the count scamper's table gives for
//!   the interfaces seen at it so far ([`confidence`]), not `attempts`; every reply at
//!   the hop is then checked for a stop reason.
//! - `squeries` (`-N`) above 1: scamper's parallel mode ([`parallel`]), which leaves
//!   `-Q`, `-c` and `-G 2` aside as scamper's does.
//! - `pmtud` (`-M`): once the trace stops with COMPLETED or UNREACH, path MTU discovery
//!   (the `pmtud` module) sends its probes through the same attempts and waits; late
//!   replies to the trace's probes are still recorded then, without a stop check.

use alloc::vec::Vec;
use core::net::IpAddr;

use vtnt_record::{Hop, Method, StopReason, Trace};
use vtnt_wire::reply::{Body, Reply};
use vtnt_wire::{icmp6_type, icmp_type};

use crate::flow::Flow;
use crate::pmtud::{self, Pmtud, Step};
use crate::probe::{self, Probe};
use crate::{Instant, TraceOptions};

mod confidence;
mod parallel;

/// What a measurement wants from the engine next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A probe is due now.
    Send,
    /// Call back at this instant (a probe becomes due, or a deadline passes).
    At(Instant),
    /// Finished: collect the record.
    Done,
}

/// How a reply fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Recorded.
    Matched,
    /// Matched a probe that already had its reply; not recorded.
    Duplicate,
    /// Does not answer any probe of this measurement.
    Unmatched,
}

#[derive(Debug, Clone, Copy)]
struct Sent {
    ttl: u8,
    attempt: u8,
    tx: Instant,
    replied: bool,
    /// A TTL-255 probe sent after the gap limit (`last_ditch`).
    lastditch: bool,
    /// A path MTU discovery probe: the mode it was sent in, and its IP length.
    pmtud: Option<(pmtud::Mode, u16)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The next probe may leave at this instant.
    SendAt(Instant),
    /// Waiting for a reply to the last probe until this deadline.
    Wait(Instant),
    Done,
}

#[derive(Debug)]
pub(crate) struct TraceState {
    opts: TraceOptions,
    src: crate::flow::Addr,
    flow: Flow,
    start: Instant,
    probes: Vec<Sent>,
    /// Recorded replies, kept sorted by (probe TTL, attempt).
    hops: Vec<Hop>,
    /// TTL being probed (u16: it may step past 255 when the trace ends).
    ttl: u16,
    /// Probes sent at the current TTL.
    attempt: u8,
    hop_count: u16,
    loopc: u8,
    last_tx: Option<Instant>,
    stop: (StopReason, u8),
    state: State,
    /// The probes' payload ([`probe::payload_bytes`] of `-p`).
    payload: Vec<u8>,
    /// Sending TTL-255 probes after the gap limit (`last_ditch`).
    in_lastditch: bool,
    /// Replies to those.
    lastditch: Vec<Hop>,
    /// `confidence`: the addresses that answered at the current TTL.
    interfaces: Vec<IpAddr>,
    /// `squeries` above 1: the hops in flight.
    window: parallel::Window,
    /// Path MTU discovery, once the trace has stopped (`-M`).
    pmtud: Option<alloc::boxed::Box<Pmtud>>,
    /// Its probes' payload (zeros, as scamper's).
    pmtud_payload: Vec<u8>,
}

impl TraceState {
    /// The constant fields of its probes.
    #[cfg(feature = "ipv6-probe")]
    pub(crate) fn flow(&self) -> &Flow {
        &self.flow
    }

    /// Not inlined into `Engine::activate`: the unikernel's image is 1.8 KiB smaller so.
    #[inline(never)]
    pub fn new(
        now: Instant,
        src: crate::flow::Addr,
        opts: TraceOptions,
        mut flow: Flow,
    ) -> TraceState {
        flow.vary.tcp_ack = opts.method == Method::TcpAck;
        TraceState {
            ttl: opts.first_ttl as u16,
            hop_count: opts.first_ttl as u16 - 1,
            src,
            flow,
            start: now,
            probes: Vec::new(),
            hops: Vec::new(),
            attempt: 0,
            loopc: 0,
            last_tx: None,
            stop: (StopReason::None, 0),
            state: State::SendAt(now),
            payload: probe::payload_bytes(
                crate::measurement::payload_room(opts.method, opts.probe_size, false),
                0,
                &opts.payload,
                false,
            ),
            in_lastditch: false,
            lastditch: Vec::new(),
            interfaces: Vec::new(),
            window: parallel::Window::new(opts.first_ttl),
            pmtud: None,
            pmtud_payload: Vec::new(),
            opts,
        }
    }

    pub fn wake(&self, now: Instant) -> Wake {
        match self.state {
            State::SendAt(t) if t <= now => Wake::Send,
            State::SendAt(t) | State::Wait(t) => Wake::At(t),
            State::Done => Wake::Done,
        }
    }

    /// Writes the next probe into `buf` and starts waiting for its reply.
    pub fn build(&mut self, now: Instant, buf: &mut [u8]) -> Result<usize, vtnt_wire::Error> {
        let number =
            u16::try_from(self.probes.len() + 1).map_err(|_| vtnt_wire::Error::Malformed)?;
        let pmtud = self.pmtud.as_deref().map(Pmtud::probe);
        let (ttl, attempt, size, data) = match pmtud {
            Some((_, ttl, size)) => (ttl, self.attempt + 1, size, &self.pmtud_payload),
            None => {
                let (ttl, attempt) = if self.parallel() {
                    self.window.next_probe(&mut self.ttl, number, now)
                } else {
                    (self.ttl, self.attempt + 1)
                };
                let ttl = u8::try_from(ttl).map_err(|_| vtnt_wire::Error::Malformed)?;
                (ttl, attempt, self.opts.probe_size, &self.payload)
            }
        };
        let p = Probe {
            src: self.src,
            ttl,
            tos: self.opts.tos,
            number,
            size,
            data,
            record_route: false,
        };
        let len = probe::build(buf, &self.flow, &p)?;
        // IPv6 has no fragmenting routers, so no don't-fragment bit to set
        if pmtud.is_some() && !self.opts.dst.is_ipv6() {
            vtnt_wire::build::set_dont_fragment(buf)?;
        }
        self.probes.push(Sent {
            ttl,
            attempt,
            tx: now,
            replied: false,
            lastditch: self.in_lastditch,
            pmtud: pmtud.map(|(mode, _, size)| (mode, size)),
        });
        self.last_tx = Some(now);
        if self.parallel() {
            self.queue(now);
        } else {
            self.attempt = attempt;
            self.state = State::Wait(now + self.opts.wait);
        }
        Ok(len)
    }

    /// Stops the trace (e.g. a probe could not be built).
    pub fn halt(&mut self, reason: StopReason) {
        self.stop_with(reason, 0);
    }

    /// Probe `number` could not be sent (the OS said `errno`): it no longer counts as
    /// sent, and the trace stops with ERROR, the errno as stop data (scamper's
    /// `trace_handleerror`).
    pub fn unsent(&mut self, number: u16, errno: i32) {
        if usize::from(number) == self.probes.len() && !self.probes.is_empty() {
            self.probes.pop();
        }
        self.stop_with(StopReason::Error, u8::try_from(errno).unwrap_or(u8::MAX));
    }

    /// Probe `number` left at `at` (see [`crate::Engine::handle_transmitted`]): it and its
    /// recorded reply are re-dated, unless `at` cannot be its transmit time. Returns
    /// whether it was.
    pub fn transmitted(&mut self, number: u16, at: Instant) -> bool {
        let Some(p) = self.probes.get_mut(usize::from(number).wrapping_sub(1)) else {
            return false;
        };
        let answers = |h: &Hop| (h.probe_ttl, h.probe_id) == (p.ttl, p.attempt);
        let hops = if p.lastditch {
            &mut self.lastditch
        } else if p.pmtud.is_some() {
            match self.pmtud.as_mut() {
                Some(d) => d.hops_mut(),
                None => return false,
            }
        } else {
            &mut self.hops
        };
        let arrivals = hops.iter().filter(|h| answers(h)).map(|h| h.tx + h.rtt);
        if !probe::fits_stamp(p.tx, at, arrivals) {
            return false;
        }
        for h in hops.iter_mut().filter(|h| answers(h)) {
            probe::redate(&mut h.tx, &mut h.rtt, at);
        }
        p.tx = at;
        true
    }

    pub fn on_timer(&mut self, now: Instant) {
        if self.parallel() {
            if self.state != State::Done {
                self.queue(now);
            }
            return;
        }
        let State::Wait(deadline) = self.state else {
            return;
        };
        if deadline > now {
            return;
        }
        if self.attempt < self.hop_probes().unwrap_or(self.attempt) {
            self.send_next(now);
            return;
        }
        if let Some(d) = self.pmtud.as_mut() {
            self.attempt = 0;
            let step = d.on_timeout(&self.hops);
            self.pmtud_step(now, step);
            return;
        }
        if self.in_lastditch {
            // no answer to any of the TTL-255 probes
            self.stop_with(StopReason::GapLimit, 0);
            return;
        }
        // Every attempt at this TTL went unanswered (or, with `all_attempts`, the last).
        let ttl = self.ttl;
        self.hop_count += 1;
        self.ttl += 1;
        self.attempt = 0;
        self.interfaces.clear();
        if self.every_reply_stops() {
            if let Some((reason, data)) = self.stop_reason_at_ttl(ttl) {
                self.stop_with(reason, data);
                return;
            }
        }
        if self.at_hop_limit() {
            self.stop_with(StopReason::HopLimit, 0);
            return;
        }
        if self.gap_reached() {
            if self.opts.last_ditch {
                self.in_lastditch = true;
                self.ttl = 255;
            } else {
                self.stop_with(StopReason::GapLimit, 0);
                return;
            }
        }
        self.send_next(now);
    }

    /// Whether the last `gaplimit` TTLs up to `hop_count` are all finished and silent (a
    /// gap limit of 0 is none, as scamper's).
    fn gap_reached(&self) -> bool {
        let gap = self.opts.gaplimit as u16;
        let probed = self.hop_count + 1 - self.opts.first_ttl as u16;
        if gap == 0 || probed < gap {
            return false;
        }
        let from = (self.hop_count + 1 - gap) as u8;
        !self.hops.iter().any(|h| h.probe_ttl >= from)
    }

    /// Whether hops are probed in scamper's parallel mode (`squeries` above 1).
    fn parallel(&self) -> bool {
        self.opts.squeries > 1
    }

    /// Whether a finished hop is checked for a stop reason in every reply at it (`-Q`,
    /// `-c`), not just the one that ended it.
    fn every_reply_stops(&self) -> bool {
        self.opts.all_attempts || self.opts.confidence != 0
    }

    /// Probes the current hop takes: `attempts`, or with `confidence` the count for the
    /// interfaces seen so far; `None` past the table (the hop ends with its next reply).
    fn hop_probes(&self) -> Option<u8> {
        if self.opts.confidence == 0 {
            return Some(self.opts.attempts);
        }
        confidence::probes(self.opts.confidence, self.interfaces.len())
    }

    pub fn on_reply(&mut self, now: Instant, r: &Reply<'_>) -> Outcome {
        if self.state == State::Done {
            return Outcome::Unmatched;
        }
        let sent = u16::try_from(self.probes.len()).unwrap_or(u16::MAX);
        let tcp_payload = probe::tcp_payload_len(self.opts.probe_size, self.opts.dst);
        let Some(n) = probe::probe_number(&self.flow, r, tcp_payload, sent) else {
            return Outcome::Unmatched;
        };
        if !self.answers_method(r) {
            return Outcome::Unmatched;
        }
        let p = &mut self.probes[n as usize - 1];
        if p.replied {
            return Outcome::Duplicate;
        }
        p.replied = true;
        let p = *p;
        let hop = self.hop(&p, now, r);
        if let Some((mode, _)) = p.pmtud {
            let Some(d) = self.pmtud.as_mut() else {
                return Outcome::Unmatched;
            };
            let step = d.on_reply(mode, hop, &self.hops);
            if step == Step::Ignore {
                return Outcome::Duplicate;
            }
            self.pmtud_step(now, step);
            return Outcome::Matched;
        }
        if p.lastditch {
            self.lastditch.push(hop);
            self.stop_with(StopReason::GapLimit, 0);
            return Outcome::Matched;
        }
        let at = self
            .hops
            .partition_point(|h| (h.probe_ttl, h.probe_id) <= (p.ttl, p.attempt));
        self.hops.insert(at, hop);
        if self.in_lastditch || self.pmtud.is_some() {
            return Outcome::Matched;
        }
        if self.parallel() {
            self.parallel_reply(now, &p, n, at);
            return Outcome::Matched;
        }

        if p.ttl as u16 != self.ttl {
            // A late reply: record it, stop if it says so, keep waiting otherwise.
            if let Some((reason, data)) = self.stop_reason(at) {
                self.stop_with(reason, data);
            }
            return Outcome::Matched;
        }
        if self.opts.all_attempts {
            // scamper's `-Q`: the next attempt once the last one sent is answered; the hop
            // ends, and every reply at it may stop the trace, after the last attempt.
            if p.attempt != self.attempt {
                return Outcome::Matched;
            }
            if self.attempt < self.opts.attempts {
                self.send_next(now);
                return Outcome::Matched;
            }
        } else if self.opts.confidence != 0 {
            // scamper's `-c`: as `-Q`, until the count for the interfaces seen so far
            let addr = self.hops[at].addr;
            if !self.interfaces.contains(&addr) {
                self.interfaces.push(addr);
            }
            if let Some(k) = self.hop_probes() {
                if p.attempt != self.attempt {
                    return Outcome::Matched;
                }
                if self.attempt < k {
                    self.send_next(now);
                    return Outcome::Matched;
                }
            }
        }
        self.hop_count += 1;
        self.ttl += 1;
        self.attempt = 0;
        self.interfaces.clear();
        let stop = if self.every_reply_stops() {
            self.stop_reason_at_ttl(self.ttl - 1)
        } else {
            self.stop_reason(at)
        };
        if let Some((reason, data)) = stop {
            self.stop_with(reason, data);
        } else if self.at_hop_limit() {
            self.stop_with(StopReason::HopLimit, 0);
        } else {
            self.send_next(now);
        }
        Outcome::Matched
    }

    /// The hop `r` makes, answering probe `p` at `now`.
    fn hop(&self, p: &Sent, now: Instant, r: &Reply<'_>) -> Hop {
        let f = probe::reply_fields(r);
        Hop {
            addr: r.src,
            probe_ttl: p.ttl,
            probe_id: p.attempt,
            probe_size: p.pmtud.map_or(self.opts.probe_size, |(_, size)| size),
            tx: p.tx,
            rtt: now.saturating_since(p.tx),
            reply_ttl: r.ttl,
            reply_tos: r.tos,
            reply_ipid: r.ipid,
            reply_size: r.len,
            icmp: f.icmp,
            tcp_flags: f.tcp_flags,
            quoted: f.quoted,
            mpls: f.mpls,
            name: None,
            nhmtu: f.nhmtu,
        }
    }

    /// Echo replies only answer ICMP traces; TCP segments only TCP traces (the flow key
    /// already separates protocols; this guards the quoted-protocol cases).
    fn answers_method(&self, r: &Reply<'_>) -> bool {
        match r.body {
            Body::Echo { .. } => self.opts.method == Method::IcmpParis,
            Body::Tcp { .. } => self.opts.method.is_tcp(),
            _ => true,
        }
    }

    fn at_hop_limit(&self) -> bool {
        self.hop_count >= 255 || self.hop_count >= self.opts.max_ttl as u16
    }

    fn send_next(&mut self, now: Instant) {
        let earliest = self.last_tx.map_or(now, |t| t + self.opts.wait_probe);
        self.state = State::SendAt(earliest.max(now));
    }

    /// Stops the trace; the first stop is its reason. A trace with `pmtud` that stopped
    /// on an answer goes on with path MTU discovery (scamper's `trace_next_mode`).
    fn stop_with(&mut self, reason: StopReason, data: u8) {
        if self.stop.0 == StopReason::None {
            self.stop = (reason, data);
            #[cfg(feature = "pmtud")]
            if self.opts.pmtud && matches!(reason, StopReason::Completed | StopReason::Unreach) {
                let (method, mtu, dst) = (self.opts.method, self.opts.if_mtu, self.opts.dst);
                let d = Pmtud::new(mtu, dst.is_ipv6());
                let room = crate::measurement::payload_room(method, mtu, false);
                let room = room.saturating_sub(usize::from(crate::measurement::ipv6_extra(dst)));
                self.pmtud_payload = alloc::vec![0; room];
                self.pmtud = Some(alloc::boxed::Box::new(d));
                self.attempt = 0;
                let earliest = self.last_tx.map(|t| t + self.opts.wait_probe);
                self.state = State::SendAt(earliest.unwrap_or(self.start));
                return;
            }
        }
        self.state = State::Done;
    }

    /// Acts on what path MTU discovery wants next.
    fn pmtud_step(&mut self, now: Instant, step: Step) {
        match step {
            Step::Ignore | Step::Wait => {}
            Step::Probe => {
                self.attempt = 0;
                self.send_next(now);
            }
            Step::Done => self.state = State::Done,
        }
    }

    /// The first stop reason among the replies to probes at `ttl`, in attempt order.
    fn stop_reason_at_ttl(&mut self, ttl: u16) -> Option<(StopReason, u8)> {
        let from = self.hops.partition_point(|h| u16::from(h.probe_ttl) < ttl);
        let to = self.hops.partition_point(|h| u16::from(h.probe_ttl) <= ttl);
        (from..to).find_map(|at| self.stop_reason(at))
    }

    /// scamper's `trace_stop_reason` for the hop at `at`.
    fn stop_reason(&mut self, at: usize) -> Option<(StopReason, u8)> {
        let hop = &self.hops[at];
        let method = self.opts.method;
        let from_dst = hop.addr == self.opts.dst;
        // ICMP's numbers, or ICMPv6's to an IPv6 destination (folded away without
        // `ipv6-probe`); a packet too big stops nothing
        let (unreach, port, echo_reply, time_exceeded) =
            if cfg!(feature = "ipv6-probe") && self.opts.dst.is_ipv6() {
                (
                    icmp6_type::DEST_UNREACH,
                    4,
                    icmp6_type::ECHO_REPLY,
                    icmp6_type::TIME_EXCEEDED,
                )
            } else {
                (
                    icmp_type::DEST_UNREACH,
                    3,
                    icmp_type::ECHO_REPLY,
                    icmp_type::TIME_EXCEEDED,
                )
            };
        match (hop.icmp, hop.tcp_flags) {
            (Some((t, c)), _) if t == unreach && c == port && method != Method::IcmpParis => {
                Some((StopReason::Completed, 0))
            }
            (Some((t, code)), _) if t == unreach => Some((StopReason::Unreach, code)),
            (Some((t, _)), _) if t == echo_reply => {
                (method == Method::IcmpParis).then_some((StopReason::Completed, 0))
            }
            _ if self.opts.loops != 0 && self.is_loop(at) => Some((StopReason::Loop, 0)),
            (Some((t, _)), _) if t == time_exceeded && from_dst && !self.opts.ignore_ttl_dst => {
                Some((StopReason::Completed, 0))
            }
            (None, Some(_)) if method.is_tcp() => Some((StopReason::Completed, 0)),
            _ => None,
        }
    }

    /// scamper's `trace_isloop`: is the hop at `at` an address already seen at a
    /// non-adjacent TTL, for the `loops`-th time?
    fn is_loop(&mut self, at: usize) -> bool {
        let hop = &self.hops[at];
        let (ttl, addr) = (hop.probe_ttl, hop.addr);
        if ttl <= self.opts.first_ttl {
            return false;
        }
        // Already seen at this TTL (an earlier attempt): checked then.
        if self.hops[..at]
            .iter()
            .any(|h| h.probe_ttl == ttl && h.addr == addr)
        {
            return false;
        }
        let earlier = self
            .hops
            .iter()
            .find(|h| h.probe_ttl != ttl && h.probe_ttl as u16 <= self.hop_count && h.addr == addr);
        let Some(h) = earlier else { return false };
        if h.probe_ttl.abs_diff(ttl) == 1 {
            return false;
        }
        self.loopc = self.loopc.saturating_add(1);
        self.loopc >= self.opts.loops
    }

    pub fn into_record(self) -> Trace {
        Trace {
            src: crate::flow::ip(self.src),
            dst: self.opts.dst,
            method: self.opts.method,
            // The echo ident for ICMP, where scamper keeps it too (warts' sport).
            sport: self.flow.sport(),
            dport: self.flow.dport,
            icmp_sum: self.flow.icmp_sum,
            userid: self.opts.userid,
            start: self.start,
            stop_reason: self.stop.0,
            stop_data: self.stop.1,
            attempts: self.opts.attempts,
            hoplimit: if self.opts.max_ttl == 255 {
                0
            } else {
                self.opts.max_ttl
            },
            firsthop: self.opts.first_ttl,
            gaplimit: self.opts.gaplimit,
            wait: self.opts.wait,
            wait_probe: self.opts.wait_probe,
            tos: self.opts.tos,
            probe_size: self.opts.probe_size,
            probe_count: self.probes.len() as u16,
            hop_count: self.hop_count.min(255) as u8,
            all_attempts: self.opts.all_attempts,
            ignore_ttl_dst: self.opts.ignore_ttl_dst,
            hops: self.hops,
            last_ditch: self.opts.last_ditch,
            lastditch: self.lastditch,
            ptr: false,
            squeries: self.opts.squeries,
            confidence: self.opts.confidence,
            pmtud: self.opts.pmtud,
            pmtud_result: self.pmtud.map(|d| d.into_record()),
        }
    }
}

//! One ping as a state machine: `count` probes `interval` apart (each at least `interval`
//! after the previous one left, so global pacing can only stretch the schedule), every
//! reply recorded in arrival order, duplicates included (as scamper does), and the ping
//! finished `timeout` after its last probe.
//!
//! With `reply_count` (`-o`) the ping ends as soon as that many probes are answered.
//! Probes carry `data` (`-p`, `-B`) behind the two checksum-pinning bytes of `icmp_sum`
//! (`-C`), and a record route option with `record_route` (`-R`); the addresses it
//! brings back are read from an echo reply's header or an ICMP error's quote, where
//! scamper reads them.
//!
//! Replies: ICMP echo replies, port unreachables for UDP probes to a closed port, RST or
//! SYN-ACK for TCP SYNs, RST for TCP ACKs, and any ICMP error quoting a probe (a small `ttl` makes routers
//! answer with time exceeded, recorded like scamper does).

use alloc::vec::Vec;

use vtnt_record::{IpAddr as Addr, Method, Ping, PingReply, ProbeData, StopReason};
use vtnt_wire::reply::{Body, Reply};

use crate::flow::{Flow, Vary};
use crate::probe::{self, Probe};
use crate::trace::{Outcome, Wake};
use crate::{Instant, PingOptions};

#[derive(Debug)]
pub(crate) struct PingState {
    opts: PingOptions,
    src: crate::flow::Addr,
    flow: Flow,
    start: Instant,
    /// Transmit time of each probe sent; index = probe number - 1.
    sent: Vec<Instant>,
    responses: Vec<PingReply>,
    next_send: Instant,
    /// Set once the last probe is out (or the ping was halted).
    end: Option<Instant>,
    /// The probes' payload ([`probe::payload_bytes`] of `data`).
    payload: Vec<u8>,
    /// Probes answered at least once.
    answered: u16,
}

impl PingState {
    /// The constant fields of its probes.
    #[cfg(feature = "ipv6-probe")]
    pub(crate) fn flow(&self) -> &Flow {
        &self.flow
    }

    /// Not inlined, as [`crate::trace::TraceState::new`].
    #[inline(never)]
    pub fn new(
        now: Instant,
        src: crate::flow::Addr,
        opts: PingOptions,
        mut flow: Flow,
    ) -> PingState {
        flow.vary = Vary {
            tcp_ack: opts.method == Method::TcpAck,
            fixed_ack: opts.tcp_ack,
            dport_counts: opts.method == Method::UdpDport,
            seq_offset: match (opts.method, opts.dport) {
                (Method::IcmpParis, Some(d)) => d.wrapping_sub(1),
                _ => 0,
            },
        };
        PingState {
            payload: payload(&opts),
            opts,
            src,
            flow,
            start: now,
            sent: Vec::new(),
            responses: Vec::new(),
            next_send: now,
            end: None,
            answered: 0,
        }
    }

    pub fn wake(&self, now: Instant) -> Wake {
        match self.end {
            Some(end) if end <= now => Wake::Done,
            Some(end) => Wake::At(end),
            None if self.next_send <= now => Wake::Send,
            None => Wake::At(self.next_send),
        }
    }

    pub fn build(&mut self, now: Instant, buf: &mut [u8]) -> Result<usize, vtnt_wire::Error> {
        let number = u16::try_from(self.sent.len() + 1).map_err(|_| vtnt_wire::Error::Malformed)?;
        let p = Probe {
            src: self.src,
            ttl: self.opts.ttl,
            tos: self.opts.tos,
            number,
            size: self.opts.probe_size,
            data: &self.payload,
            record_route: self.opts.record_route,
        };
        let len = probe::build(buf, &self.flow, &p)?;
        self.sent.push(now);
        if number >= self.opts.count {
            self.end = Some(now + self.opts.timeout);
        } else {
            self.next_send = now + self.opts.interval;
        }
        Ok(len)
    }

    /// Ends the ping now (a probe could not be built).
    pub fn halt(&mut self, _reason: StopReason, now: Instant) {
        self.end = Some(now);
    }

    /// Probe `number` could not be sent: it no longer counts as sent and the ping ends
    /// now, as scamper's does on a send error.
    pub fn unsent(&mut self, number: u16, now: Instant) {
        if usize::from(number) == self.sent.len() {
            self.sent.pop();
        }
        self.end = Some(now);
    }

    /// Probe `number` left at `at` (see [`crate::Engine::handle_transmitted`]): it and its
    /// recorded replies are re-dated, unless `at` cannot be its transmit time. Returns
    /// whether they were.
    pub fn transmitted(&mut self, number: u16, at: Instant) -> bool {
        let Some(tx) = self.sent.get_mut(usize::from(number).wrapping_sub(1)) else {
            return false;
        };
        let seq = number - 1;
        let arrivals = self.responses.iter().filter(|r| r.seq == seq);
        if !probe::fits_stamp(*tx, at, arrivals.map(|r| r.tx + r.rtt)) {
            return false;
        }
        for r in self.responses.iter_mut().filter(|r| r.seq == seq) {
            probe::redate(&mut r.tx, &mut r.rtt, at);
        }
        *tx = at;
        true
    }

    pub fn on_reply(&mut self, now: Instant, r: &Reply<'_>) -> Outcome {
        if matches!(self.end, Some(end) if end <= now) {
            return Outcome::Unmatched;
        }
        let sent = u16::try_from(self.sent.len()).unwrap_or(u16::MAX);
        let tcp_payload = probe::tcp_payload_len(self.opts.probe_size, self.opts.dst);
        let Some(n) = probe::probe_number(&self.flow, r, tcp_payload, sent) else {
            return Outcome::Unmatched;
        };
        let fits = match r.body {
            Body::Echo { .. } => self.flow.is_icmp(),
            Body::Tcp { .. } => self.opts.method.is_tcp(),
            _ => true,
        };
        if !fits {
            return Outcome::Unmatched;
        }
        let tx = self.sent[n as usize - 1];
        let f = probe::reply_fields(r);
        let seq = n - 1;
        if !self.responses.iter().any(|p| p.seq == seq) {
            self.answered += 1;
        }
        let rr = match r.body {
            Body::Echo { .. } => r.rr,
            Body::IcmpError { quote, .. } => quote.rr,
            _ => None,
        };
        self.responses.push(PingReply {
            from: r.src,
            seq,
            tx,
            rtt: now.saturating_since(tx),
            reply_size: r.len,
            reply_ttl: r.ttl,
            reply_tos: r.tos,
            reply_proto: f.proto,
            probe_ipid: probe::ip_id(self.flow.tag, n),
            reply_ipid: r.ipid,
            icmp: f.icmp,
            tcp_flags: f.tcp_flags,
            rr: rr.map_or_else(Vec::new, |rr| {
                rr.addrs().iter().map(|&a| Addr::V4(a)).collect()
            }),
        });
        if self.opts.reply_count != 0 && self.answered >= self.opts.reply_count {
            self.end = Some(now);
        }
        Outcome::Matched
    }

    pub fn into_record(self) -> Ping {
        // an ICMP ping's `-d` is its first sequence number, kept where scamper keeps it
        let (sport, dport) = if self.flow.is_icmp() {
            (0, self.opts.dport.unwrap_or(0))
        } else {
            (self.flow.sport(), self.flow.dport)
        };
        // Probe n carries sequence number n (under the tag), and a tcp-ack probe the
        // same acknowledgment number unless `-A` fixed it: the first probe's are reported.
        let first = probe::tcp_seq(self.flow.tag, 1);
        let (tcp_seq, tcp_ack) = match self.opts.method {
            Method::Tcp => (first, 0),
            Method::TcpAck => (first, self.opts.tcp_ack.unwrap_or(first)),
            _ => (0, 0),
        };
        Ping {
            src: crate::flow::ip(self.src),
            dst: self.opts.dst,
            method: self.opts.method,
            sport,
            dport,
            userid: self.opts.userid,
            start: self.start,
            ping_sent: self.sent.len() as u16,
            probe_size: self.opts.probe_size,
            ttl: self.opts.ttl,
            wait: self.opts.interval,
            timeout: self.opts.timeout,
            tcp_seq,
            tcp_ack,
            tos: self.opts.tos,
            icmp_sum: self.opts.icmp_sum,
            reply_count: self.opts.reply_count,
            data: self.opts.data,
            record_route: self.opts.record_route,
            responses: self.responses,
        }
    }
}

/// The payload of a ping's probes: its pattern or payload behind the checksum-pinning
/// bytes of `-C`.
fn payload(o: &PingOptions) -> Vec<u8> {
    let room = crate::measurement::payload_room(o.method, o.probe_size, o.record_route);
    let lead = if o.icmp_sum.is_some() { 2 } else { 0 };
    match &o.data {
        Some(ProbeData::Pattern(b)) => probe::payload_bytes(room, lead, b, true),
        Some(ProbeData::Payload(b)) => probe::payload_bytes(room, lead, b, false),
        None => probe::payload_bytes(room, 0, &[], false),
    }
}

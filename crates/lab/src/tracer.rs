//! A minimal in-process traceroute and ping against a [`Lab`], for the lab's own tests,
//! examples and benchmark. Not the engine: one Paris ICMP probe per TTL, no retries,
//! a virtual clock; it reports exactly what came back, decoded with `vtnt_wire`. Over
//! IPv6 (`ipv6`) it probes with ICMPv6 echo requests to the lab IPv6 addresses of the
//! same destinations and reports the answers' addresses as their IPv4 twins
//! ([`crate::addr::from_v6`]), so IPv4 and IPv6 traces compare hop by hop.

use core::net::{IpAddr, Ipv4Addr};

use vtnt_record::Instant;
use vtnt_wire::build::{icmp_echo, Echo, Ip};
use vtnt_wire::build6::icmp6_echo;
use vtnt_wire::ipv6::Ip6;
use vtnt_wire::reply::{self, Body};
use vtnt_wire::{icmp6_type, icmp_type, reply6};

use crate::addr::{from_v6, to_v6};

use crate::lab::Lab;
use crate::vantage::Port;

/// One answer to one probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// TTL the probe was sent with.
    pub probe_ttl: u8,
    pub from: Ipv4Addr,
    /// IP-TTL (hop limit) of the reply as received.
    pub reply_ttl: u8,
    pub icmp_type: u8,
    pub icmp_code: u8,
    /// Quoted IP-TTL or hop limit (ICMP errors only).
    pub q_ttl: Option<u8>,
    /// RFC 4950 labels: (label, LSE-TTL), top first.
    pub labels: Vec<(u32, u8)>,
    /// Round trip, microseconds.
    pub rtt_us: u64,
}

impl Answer {
    /// Initial TTL guessed from the reply TTL the way `sc_tnt` does
    /// ([`vtnt_record::initial_ttl`]).
    pub fn ittl(&self) -> u8 {
        vtnt_record::initial_ttl(self.reply_ttl)
    }
    /// Return path length: iTTL - reply TTL + 1.
    pub fn return_len(&self) -> i32 {
        i32::from(self.ittl()) - i32::from(self.reply_ttl) + 1
    }
}

/// A probing session on a lab with a virtual clock.
pub struct Tracer<'a> {
    pub lab: &'a mut Lab,
    pub port: Port,
    pub src: Ipv4Addr,
    pub now: Instant,
    /// ICMP checksum kept constant (Paris); change it to take another ECMP path.
    pub flow: u16,
    /// Probe over IPv6 (the lab IPv6 addresses of source and destination).
    pub ipv6: bool,
    seq: u16,
    buf: Vec<u8>,
}

impl<'a> Tracer<'a> {
    /// Probes from the first vantage point.
    pub fn new(lab: &'a mut Lab) -> Tracer<'a> {
        let src = lab
            .vantage_points()
            .first()
            .map_or(Ipv4Addr::UNSPECIFIED, |v| v.addr);
        Tracer {
            lab,
            port: Port(0),
            src,
            now: Instant::ZERO,
            flow: 0x4242,
            ipv6: false,
            seq: 0,
            buf: vec![0; 2048],
        }
    }

    /// Sends one echo request with `ttl` and returns the answer matching it, if any.
    pub fn probe(&mut self, dst: Ipv4Addr, ttl: u8) -> Option<Answer> {
        self.seq = self.seq.wrapping_add(1);
        let mut p = [0u8; 80];
        let echo = |icmp_type| Echo {
            icmp_type,
            ident: 0x7a7a,
            seq: self.seq,
            payload: &[0; 16],
            checksum: Some(self.flow),
        };
        let n = if self.ipv6 {
            let ip = Ip6 {
                src: to_v6(self.src),
                dst: to_v6(dst),
                hop_limit: ttl,
                traffic_class: 0,
                flow_label: 0,
            };
            icmp6_echo(&mut p, &ip, &echo(icmp6_type::ECHO_REQUEST))
        } else {
            let ip = Ip {
                src: self.src,
                dst,
                ttl,
                tos: 0,
                ipid: self.seq,
            };
            icmp_echo(&mut p, &ip, &echo(icmp_type::ECHO_REQUEST))
        }
        .ok()?;
        let sent = self.now;
        self.lab.handle_packet(sent, self.port, &p[..n]);
        let mut found = None;
        while let Some(t) = self.lab.poll_timeout() {
            self.now = self.now.max(t);
            while let Some((_, len)) = self.lab.poll_transmit(self.now, &mut self.buf) {
                if found.is_none() {
                    found = decode(&self.buf[..len], self.seq, ttl, sent, self.now);
                }
            }
        }
        self.now = self.now + core::time::Duration::from_millis(1);
        found
    }

    /// Probes TTL 1, 2, ... until the destination answers or `max_ttl`.
    pub fn trace(&mut self, dst: Ipv4Addr, max_ttl: u8) -> Vec<Option<Answer>> {
        let mut hops = Vec::new();
        for ttl in 1..=max_ttl {
            let a = self.probe(dst, ttl);
            let done = a.as_ref().is_some_and(|a| a.from == dst);
            hops.push(a);
            if done {
                break;
            }
        }
        hops
    }

    /// One echo request with TTL 64.
    pub fn ping(&mut self, dst: Ipv4Addr) -> Option<Answer> {
        self.probe(dst, 64)
    }
}

fn decode(b: &[u8], seq: u16, ttl: u8, sent: Instant, now: Instant) -> Option<Answer> {
    let r = if b.first().is_some_and(|v| v >> 4 == 6) {
        reply6::parse(b).ok()?
    } else {
        reply::parse(b).ok()?
    };
    let from = match r.src {
        IpAddr::V4(a) => a,
        // a lab twin, or the IPv4-mapped address a 6PE core's LSR answers from
        IpAddr::V6(a) => from_v6(a).or_else(|| a.to_ipv4_mapped())?,
    };
    let rtt_us = now.saturating_since(sent).as_micros() as u64;
    let mut a = Answer {
        probe_ttl: ttl,
        from,
        reply_ttl: r.ttl,
        icmp_type: 0,
        icmp_code: 0,
        q_ttl: None,
        labels: Vec::new(),
        rtt_us,
    };
    match r.body {
        Body::Echo {
            icmp_type, seq: s, ..
        } if s == seq => a.icmp_type = icmp_type,
        Body::IcmpError {
            icmp_type,
            code,
            quote,
            ext,
            ..
        } => {
            if !matches!(quote.transport, vtnt_wire::reply::QuotedTransport::Icmp { seq: s, .. } if s == seq)
            {
                return None;
            }
            a.icmp_type = icmp_type;
            a.icmp_code = code;
            a.q_ttl = Some(quote.ttl);
            if let Some(ext) = ext {
                a.labels = ext.mpls_stack().map(|l| (l.label(), l.ttl())).collect();
            }
        }
        _ => return None,
    }
    Some(a)
}

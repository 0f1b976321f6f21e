//! A minimal in-process traceroute and ping against a [`Lab`], for the lab's own tests,
//! examples and benchmark. Not the engine: one Paris ICMP probe per TTL, no retries,
//! a virtual clock; it reports exactly what came back, decoded with `vtnt_wire`.

use core::net::{IpAddr, Ipv4Addr};

use vtnt_record::Instant;
use vtnt_wire::build::{icmp_echo, Echo, Ip};
use vtnt_wire::reply::{self, Body};

use crate::lab::Lab;
use crate::vantage::Port;

/// One answer to one probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// TTL the probe was sent with.
    pub probe_ttl: u8,
    pub from: Ipv4Addr,
    /// IP-TTL of the reply as received.
    pub reply_ttl: u8,
    pub icmp_type: u8,
    pub icmp_code: u8,
    /// Quoted IP-TTL (ICMP errors only).
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
            seq: 0,
            buf: vec![0; 2048],
        }
    }

    /// Sends one echo request with `ttl` and returns the answer matching it, if any.
    pub fn probe(&mut self, dst: Ipv4Addr, ttl: u8) -> Option<Answer> {
        self.seq = self.seq.wrapping_add(1);
        let ip = Ip {
            src: self.src,
            dst,
            ttl,
            tos: 0,
            ipid: self.seq,
        };
        let mut p = [0u8; 64];
        let n = icmp_echo(
            &mut p,
            &ip,
            &Echo {
                icmp_type: 8,
                ident: 0x7a7a,
                seq: self.seq,
                payload: &[0; 16],
                checksum: Some(self.flow),
            },
        )
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
    let r = reply::parse(b).ok()?;
    let IpAddr::V4(from) = r.src else { return None };
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

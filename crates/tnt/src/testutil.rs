//! Hand-made records for unit tests.

use alloc::vec::Vec;
use core::net::IpAddr;

use vtnt_record::{
    Duration, Hop, Instant, Method, MplsLabel, Ping, PingReply, Quoted, StopReason, Trace,
};

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A time-exceeded reply.
pub fn te(ttl: u8, addr: &str, reply_ttl: u8, qttl: u8) -> Hop {
    Hop {
        addr: ip(addr),
        probe_ttl: ttl,
        probe_id: 1,
        probe_size: 44,
        tx: Instant::from_millis(ttl as u64),
        rtt: Duration::from_micros(1000 + ttl as u64),
        reply_ttl,
        reply_tos: 0,
        reply_ipid: 0,
        reply_size: 56,
        icmp: Some((11, 0)),
        tcp_flags: None,
        quoted: Some(Quoted {
            ttl: qttl,
            ip_len: 44,
            tos: 0,
        }),
        mpls: Vec::new(),
        name: None,
        nhmtu: 0,
    }
}

/// A time-exceeded reply with one label of LSE-TTL `lse`.
pub fn lte(ttl: u8, addr: &str, reply_ttl: u8, qttl: u8, lse: u8) -> Hop {
    let mut h = te(ttl, addr, reply_ttl, qttl);
    h.mpls.push(MplsLabel {
        label: 16000 + ttl as u32,
        exp: 0,
        bottom: true,
        ttl: lse,
    });
    h
}

/// An echo reply (the destination).
pub fn echo(ttl: u8, addr: &str, reply_ttl: u8) -> Hop {
    let mut h = te(ttl, addr, reply_ttl, 0);
    h.icmp = Some((0, 0));
    h.quoted = None;
    h
}

pub fn trace(dst: &str, hops: &[Hop]) -> Trace {
    let hop_count = hops.iter().map(|h| h.probe_ttl).max().unwrap_or(0);
    Trace {
        src: ip("192.0.2.1"),
        dst: ip(dst),
        method: Method::IcmpParis,
        sport: 0,
        dport: 0,
        icmp_sum: 0,
        userid: 0,
        start: Instant::ZERO,
        stop_reason: StopReason::Completed,
        stop_data: 0,
        attempts: 3,
        hoplimit: 0,
        firsthop: 1,
        gaplimit: 5,
        wait: Duration::from_secs(1),
        wait_probe: Duration::ZERO,
        tos: 0,
        probe_size: 44,
        probe_count: hop_count as u16,
        hop_count,
        all_attempts: false,
        ignore_ttl_dst: false,
        hops: hops.to_vec(),
        last_ditch: false,
        lastditch: Vec::new(),
        ptr: false,
        squeries: 1,
        confidence: 0,
        pmtud: false,
        pmtud_result: None,
    }
}

pub fn ping(dst: &str, ttls: &[u8]) -> Ping {
    Ping {
        src: ip("192.0.2.1"),
        dst: ip(dst),
        method: Method::IcmpParis,
        sport: 0,
        dport: 0,
        userid: 0,
        start: Instant::ZERO,
        ping_sent: ttls.len().max(1) as u16,
        probe_size: 84,
        ttl: 64,
        wait: Duration::from_secs(1),
        timeout: Duration::from_secs(1),
        tcp_seq: 0,
        tcp_ack: 0,
        tos: 0,
        icmp_sum: None,
        reply_count: 0,
        data: None,
        record_route: false,
        responses: ttls
            .iter()
            .enumerate()
            .map(|(i, &t)| PingReply {
                from: ip(dst),
                seq: i as u16,
                tx: Instant::ZERO,
                rtt: Duration::from_millis(1),
                reply_size: 84,
                reply_ttl: t,
                reply_tos: 0,
                reply_proto: 1,
                probe_ipid: 0,
                reply_ipid: 0,
                icmp: Some((0, 0)),
                tcp_flags: None,
                rr: Vec::new(),
            })
            .collect(),
    }
}
